//! One JSON-RPC connection: requests dispatched to the driver concurrently,
//! hooks sent back to the controller, cancellation, progress.
//!
//! Bounds, because a controller connection is a trust boundary too:
//! - one message is at most [`super::framing::MAX_MESSAGE`] bytes;
//! - the outbound queue holds [`OUTBOUND_QUEUE`] messages: answers wait for
//!   room, progress notifications are dropped when it is full, and each call
//!   may send [`PROGRESS_BURST`] of them at once and [`PROGRESS_PER_SECOND`] a
//!   second after that (a helper reports a dozen steps per operation; more is
//!   a runaway);
//! - a request whose id is already running is refused;
//! - a command's output (`$/output`) waits for room rather than being dropped:
//!   a controller that stops reading slows the remote command down;
//! - what a controller writes to a running command (`$/input`) never makes the
//!   connection wait: it queues, up to [`crate::world::ssh_sandbox_backend::stdin::MAX_QUEUED`]
//!   unread bytes per command, past which the command's stdin is closed;
//! - finished calls are reaped as the connection goes, and a hook request the
//!   host stopped waiting for (timeout, cancellation) is forgotten.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::framing::{Frame, MAX_MESSAGE, MessageCodec};
use super::message::{self, Incoming, code};
use super::service::{Request, Service};
use crate::capability::hooks::{HookAnswer, HookFuture, HookRefusal, HookRequest, LifecycleHooks};
use crate::capability::ssh_exec::{OutputSink, OutputStream};
use crate::error::{CallError, FailureKind};
use crate::world::Progress;
use crate::world::ssh_sandbox_backend::stdin::CommandInput;

/// Messages waiting to be written to the peer.
pub const OUTBOUND_QUEUE: usize = 1024;
/// Progress notifications a call may send at once.
pub(super) const PROGRESS_BURST: f64 = 20.0;
/// Progress notifications a call may send per second after its burst.
pub(super) const PROGRESS_PER_SECOND: f64 = 10.0;

/// A token bucket: [`PROGRESS_BURST`] tokens, refilled at [`PROGRESS_PER_SECOND`].
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            tokens: PROGRESS_BURST,
            at: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * PROGRESS_PER_SECOND;
        self.tokens = (self.tokens + refill).min(PROGRESS_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

type Waiter = oneshot::Sender<Result<Value, Value>>;

/// One connection's shared state.
struct Connection {
    service: Arc<dyn Service>,
    out: mpsc::Sender<String>,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// The open stdin of each running request (`$/input`).
    inputs: Mutex<HashMap<String, CommandInput>>,
    pending: Mutex<HashMap<String, Waiter>>,
    next_request: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The map key of a request id: its JSON text, so `1` and `"1"` differ.
fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Connection {
    /// Queue a message, waiting for room.
    async fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string()).await;
    }

    /// Queue a message if there is room now; drop it otherwise.
    fn offer(&self, message: Value) {
        let _ = self.out.try_send(message.to_string());
    }

    /// Send a request to the controller and wait for its answer. The waiter is
    /// forgotten however this future ends; when it ends unanswered (timed out,
    /// cancelled), the controller is told with `$/cancelRequest`, so that its hook
    /// sees its abort signal.
    async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        struct Forget<'a>(&'a Connection, String, Value);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                if lock(&self.0.pending).remove(&self.1).is_some() {
                    self.0.offer(message::notification(
                        "$/cancelRequest",
                        json!({"id": self.2}),
                    ));
                }
            }
        }
        let id = format!("host-{}", self.next_request.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id_key(&json!(id)), tx);
        let _forget = Forget(self, id_key(&json!(id)), json!(id));
        self.send(message::request(&id, method, params)).await;
        rx.await
            .unwrap_or_else(|_| Err(json!({"message": "the controller disconnected"})))
    }
}

/// Hooks answered by the controller on the other end of the connection.
struct RpcHooks(Arc<Connection>);

impl LifecycleHooks for RpcHooks {
    fn call(&self, request: HookRequest) -> HookFuture<'_> {
        Box::pin(async move {
            let method = format!("hooks/{}", request.hook.name());
            match self.0.request(&method, request.params).await {
                Ok(v) => Ok(HookAnswer::Answered(v)),
                // The controller selected no hook for this phase.
                Err(e) if e.get("code").and_then(Value::as_i64) == Some(code::METHOD_NOT_FOUND) => {
                    Ok(HookAnswer::NotSelected)
                }
                // The controller's error may say the refusal is for good.
                Err(e) => Err(HookRefusal {
                    message: format!(
                        "{} refused: {}",
                        request.hook.name(),
                        e.get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("the controller returned an error")
                    ),
                    failure: match e.pointer("/data/failure").and_then(Value::as_str) {
                        Some("permanent") => FailureKind::Permanent,
                        _ => FailureKind::Retryable,
                    },
                }),
            }
        })
    }
}

/// Serve one connection until the peer closes it.
pub async fn serve_connection<R, W>(
    service: Arc<dyn Service>,
    reader: R,
    mut writer: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<String>(OUTBOUND_QUEUE);
    let writer_task = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            line.push('\n');
            if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    });
    let conn = Arc::new(Connection {
        service,
        out: tx,
        running: Mutex::new(HashMap::new()),
        inputs: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashMap::new()),
        next_request: AtomicU64::new(1),
    });
    let mut frames = FramedRead::new(reader, MessageCodec::default());
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(frame) = frames.next().await {
        while tasks.try_join_next().is_some() {}
        let frame = match frame {
            Ok(frame) => frame,
            // A peer killed outright resets its connection: it is gone as
            // surely as one that closed it, and its calls are cancelled the
            // same way (below), not dropped mid-run.
            Err(e) => {
                tracing::debug!("connection ended: {e}");
                break;
            }
        };
        let line = match frame {
            Frame::Line(line) if line.trim().is_empty() => continue,
            Frame::Line(line) => line,
            Frame::TooLong => {
                conn.send(message::error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    &format!("a message exceeds the {MAX_MESSAGE}-byte limit; it was discarded"),
                    None,
                ))
                .await;
                continue;
            }
            Frame::NotUtf8 => {
                conn.send(message::error(
                    &Value::Null,
                    code::PARSE_ERROR,
                    "parse error: the message is not UTF-8",
                    None,
                ))
                .await;
                continue;
            }
        };
        match Incoming::parse(&line) {
            Ok(message) => handle(&conn, message, &mut tasks).await,
            Err(bad) => {
                conn.send(message::error(&bad.id, bad.code, &bad.message, None))
                    .await
            }
        }
    }
    // The controller is gone: nobody can answer hooks or read results.
    for token in lock(&conn.running).values() {
        token.cancel();
    }
    while tasks.join_next().await.is_some() {}
    drop(conn);
    let _ = writer_task.await;
    Ok(())
}

async fn handle(conn: &Arc<Connection>, message: Incoming, tasks: &mut tokio::task::JoinSet<()>) {
    let (id, method, params) = match message {
        Incoming::Response { id, outcome } => {
            let waiter = lock(&conn.pending).remove(&id_key(&id));
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send(outcome);
                }
                None => tracing::debug!(%id, "an answer to no pending request"),
            }
            return;
        }
        Incoming::Notification { method, params } => {
            if method == "$/cancelRequest"
                && let Some(target) = params.get("id")
            {
                let token = lock(&conn.running).get(&id_key(target)).cloned();
                if let Some(token) = token {
                    token.cancel();
                }
            }
            if method == "$/input"
                && let Some(target) = params.get("id")
            {
                input(conn, target, &params);
            }
            // Other notifications carry nothing the host acts on.
            return;
        }
        Incoming::Request { id, method, params } => (id, method, params),
    };
    if let Err((rpc_code, message)) = conn.service.accept(&method, &params) {
        conn.send(message::error(&id, rpc_code, &message, None))
            .await;
        return;
    }
    let token = CancellationToken::new();
    let stdin = CommandInput::new();
    let duplicate = {
        let mut running = lock(&conn.running);
        let key = id_key(&id);
        let duplicate = running.contains_key(&key);
        if !duplicate {
            running.insert(key.clone(), token.clone());
            lock(&conn.inputs).insert(key, stdin.clone());
        }
        duplicate
    };
    if duplicate {
        conn.send(message::error(
            &id,
            code::INVALID_REQUEST,
            &format!("a request with id {id} is already running; ids must be unique among running requests"),
            None,
        ))
        .await;
        return;
    }
    let conn = conn.clone();
    tasks.spawn(async move {
        let progress_conn = conn.clone();
        let progress_id = id.clone();
        let bucket = Mutex::new(Bucket::new());
        let output_conn = Arc::downgrade(&conn);
        let output_id = id.clone();
        let output: OutputSink = Arc::new(move |stream, chunk| {
            let conn = output_conn.clone();
            let id = output_id.clone();
            Box::pin(async move {
                use base64::Engine;
                // The end of a stream needs no message: the answer follows.
                if chunk.is_empty() {
                    return;
                }
                let Some(conn) = conn.upgrade() else { return };
                let stream = match stream {
                    OutputStream::Stdout => "stdout",
                    OutputStream::Stderr => "stderr",
                };
                let data = base64::engine::general_purpose::STANDARD.encode(chunk);
                conn.send(message::notification("$/output", json!({"id": id, "stream": stream, "data": data})))
                    .await;
            })
        });
        let request = Request {
            id: match &id {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            method,
            params,
            hooks: Arc::new(RpcHooks(conn.clone())),
            cancel: token,
            progress: Arc::new(move |p: &Progress| {
                if !lock(&bucket).take() {
                    return;
                }
                progress_conn.offer(message::notification(
                    "$/progress",
                    json!({"id": progress_id, "host": p.host, "step": p.step, "message": p.message}),
                ));
            }),
            output,
            input: stdin,
        };
        let result = conn.service.call(request).await;
        lock(&conn.running).remove(&id_key(&id));
        lock(&conn.inputs).remove(&id_key(&id));
        match result {
            Ok(v) => conn.send(message::result(&id, v)).await,
            Err(e) => {
                let rpc_code = match (e.code.as_str(), e.failure) {
                    ("cancelled", _) => code::REQUEST_CANCELLED,
                    ("invalid-params", FailureKind::Permanent) => code::INVALID_PARAMS,
                    _ => code::DRIVER_FAILED,
                };
                conn.send(message::error(&id, rpc_code, &e.message, Some(error_data(&e))))
                    .await
            }
        }
    });
}

/// `$/input {id, data?, end?}`: base64 `data` for the running request's
/// command, `end: true` closes its stdin. Input for no running request, or
/// not base64, is dropped: the command sees only what arrived whole.
fn input(conn: &Connection, target: &Value, params: &Value) {
    use base64::Engine;
    let Some(stdin) = lock(&conn.inputs).get(&id_key(target)).cloned() else {
        return;
    };
    if let Some(data) = params.get("data").and_then(Value::as_str) {
        match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(bytes) => {
                if !stdin.write(bytes) {
                    tracing::warn!(id = %target, "a command left its stdin unread past the bound; its stdin is closed");
                }
            }
            Err(_) => tracing::debug!(id = %target, "$/input data is not base64"),
        }
    }
    if params.get("end") == Some(&Value::Bool(true)) {
        stdin.close();
    }
}

fn error_data(e: &CallError) -> Value {
    serde_json::to_value(e).unwrap_or_default()
}
