//! JSON-RPC 2.0 over newline-delimited JSON: the contract for controllers that
//! do not link Rust (OCC is TypeScript).
//!
//! Requests are the contract methods by their OCC names, with OCC's JSON shapes
//! as named params; they run concurrently. Lifecycle hooks travel the other way:
//! the host sends `hooks/afterNamespacePrepared`, `hooks/beforeWorkloadStart`,
//! `hooks/beforeWorkloadStop` and `hooks/beforeNamespaceDelete` requests to the
//! controller and waits (bounded) for the answer; an error answer refuses the
//! effect, and `-32601` (method not found) means the controller selected no hook
//! for that phase. `$/cancelRequest {"id"}` cancels a running call: its ssh client
//! is killed and the call answers with error code -32800 and `failure:
//! "retryable"`. While a call runs, each progress line of its remote helper is
//! sent as a `$/progress {"id", "host", "message"}` notification.
//!
//! A malformed message gets a JSON-RPC error and the server keeps serving; a
//! message longer than [`MAX_MESSAGE`] is discarded up to its newline and answered
//! with an error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::bindings::occ::compute::types::{AgentBinding, Namespace};
use crate::context::HelperLine;
use crate::contract::{CallOptions, Driver, Method, present};
use crate::error::{CallError, FailureKind};
use crate::hooks::{HookFuture, LifecycleHooks};

/// The largest message accepted, in bytes. A revision with its native
/// configuration is kilobytes; megabytes mean a broken or hostile peer.
pub const MAX_MESSAGE: usize = 4 << 20;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const DRIVER_FAILED: i64 = -32000;
const REQUEST_CANCELLED: i64 = -32800;

/// One connection's shared state.
struct Connection {
    driver: Arc<Driver>,
    out: mpsc::UnboundedSender<String>,
    running: Mutex<HashMap<String, CancellationToken>>,
    pending_hooks: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    next_hook_id: AtomicU64,
}

impl Connection {
    fn send(&self, v: Value) {
        let _ = self.out.send(v.to_string());
    }

    fn error(&self, id: Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = json!({"code": code, "message": message});
        if let Some(d) = data {
            error["data"] = d;
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }

    /// Send a request to the controller and wait for its answer.
    async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        let id = format!("host-{}", self.next_hook_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.pending_hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = rx
            .await
            .unwrap_or_else(|_| Err(json!({"message": "the controller disconnected"})));
        self.pending_hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        answer
    }
}

/// Hooks answered by the controller on the other end of the connection.
struct RpcHooks(Arc<Connection>);

fn binding_json(b: &AgentBinding) -> Value {
    json!({
        "namespace": {"id": b.namespace.id, "name": b.namespace.name},
        "agent": {"id": b.agent_id, "servicePrincipalId": b.service_principal_id},
    })
}

fn namespace_json(n: &Namespace) -> Value {
    json!({"id": n.id, "name": n.name})
}

impl RpcHooks {
    async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        match self.0.request(method, params).await {
            Ok(v) => Ok(v),
            // The controller selected no hook for this phase.
            Err(e) if e.get("code").and_then(Value::as_i64) == Some(METHOD_NOT_FOUND) => {
                Ok(Value::Null)
            }
            Err(e) => Err(format!(
                "{method} refused: {}",
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the controller returned an error")
            )),
        }
    }
}

/// Reads `{"environment": [{"name", "value"}]}`, `{"environment": {NAME: value}}`,
/// or the bare array or object; the driver validates names and values.
fn placeholders(v: &Value) -> Result<Vec<(String, String)>, String> {
    let env = v.get("environment").unwrap_or(v);
    match env {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| match (i.get("name").and_then(Value::as_str), i.get("value").and_then(Value::as_str)) {
                (Some(n), Some(v)) => Ok((n.to_string(), v.to_string())),
                _ => Err(format!("beforeWorkloadStart: each placeholder needs a string name and value, got {i}")),
            })
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(s) => Ok((k.clone(), s.to_string())),
                None => Err(format!("beforeWorkloadStart: placeholder {k} must be a string")),
            })
            .collect(),
        other => Err(format!("beforeWorkloadStart: unexpected answer {other}")),
    }
}

impl LifecycleHooks for RpcHooks {
    fn after_namespace_prepared<'a>(&'a self, namespace: &'a Namespace) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.call(
                "hooks/afterNamespacePrepared",
                json!({"namespace": namespace_json(namespace)}),
            )
            .await
            .map(drop)
        })
    }
    fn before_workload_start<'a>(
        &'a self,
        binding: &'a AgentBinding,
        revision_id: &'a str,
    ) -> HookFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            let v = self
                .call(
                    "hooks/beforeWorkloadStart",
                    json!({"binding": binding_json(binding), "revisionId": revision_id}),
                )
                .await?;
            placeholders(&v)
        })
    }
    fn before_workload_stop<'a>(
        &'a self,
        binding: &'a AgentBinding,
        revision_id: &'a str,
    ) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.call(
                "hooks/beforeWorkloadStop",
                json!({"binding": binding_json(binding), "revisionId": revision_id}),
            )
            .await
            .map(drop)
        })
    }
    fn before_namespace_delete<'a>(&'a self, namespace: &'a Namespace) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.call(
                "hooks/beforeNamespaceDelete",
                json!({"namespace": namespace_json(namespace)}),
            )
            .await
            .map(drop)
        })
    }
}

/// Read one newline-terminated message of at most `max` bytes. `Ok(None)` at
/// EOF; `Ok(Some(Err(n)))` when a message of `n` bytes was too long (and skipped).
async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    let mut line = Vec::new();
    let mut skipped = 0usize;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if line.is_empty() && skipped == 0 {
                return Ok(None);
            }
            break;
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if skipped > 0 || line.len() + chunk.len() > max {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            break;
        }
    }
    Ok(Some(if skipped > 0 { Err(skipped) } else { Ok(line) }))
}

/// Serve one connection until the peer closes it.
pub async fn serve_connection<R, W>(
    driver: Arc<Driver>,
    reader: R,
    mut writer: W,
) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer_task = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            line.push('\n');
            if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    });
    let conn = Arc::new(Connection {
        driver,
        out: tx,
        running: Mutex::new(HashMap::new()),
        pending_hooks: Mutex::new(HashMap::new()),
        next_hook_id: AtomicU64::new(1),
    });
    let mut reader = BufReader::new(reader);
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(message) = read_message(&mut reader, MAX_MESSAGE).await? {
        let bytes = match message {
            Ok(b) if b.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(b) => b,
            Err(size) => {
                conn.error(
                    Value::Null,
                    INVALID_REQUEST,
                    &format!("message of {size} bytes exceeds the {MAX_MESSAGE}-byte limit"),
                    None,
                );
                continue;
            }
        };
        let msg: Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                conn.error(Value::Null, PARSE_ERROR, &format!("parse error: {e}"), None);
                continue;
            }
        };
        handle(&conn, msg, &mut tasks);
    }
    // The controller is gone: nobody can answer hooks or read results.
    for token in conn
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
    {
        token.cancel();
    }
    while tasks.join_next().await.is_some() {}
    drop(conn);
    let _ = writer_task.await;
    Ok(())
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

fn handle(conn: &Arc<Connection>, msg: Value, tasks: &mut tokio::task::JoinSet<()>) {
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !msg.is_object() {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        conn.error(
            id,
            INVALID_REQUEST,
            "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\" missing)",
            None,
        );
        return;
    }
    let id = msg.get("id").cloned();
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        // An answer to one of our hook requests.
        if let Some(id) = id.as_ref().and_then(Value::as_str) {
            let waiter = conn
                .pending_hooks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(id);
            if let Some(waiter) = waiter {
                let answer = match (msg.get("result"), msg.get("error")) {
                    (_, Some(e)) => Err(e.clone()),
                    (Some(r), None) => Ok(r.clone()),
                    (None, None) => Err(json!({"message": "answer has neither result nor error"})),
                };
                let _ = waiter.send(answer);
                return;
            }
        }
        conn.error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "a request needs a method",
            None,
        );
        return;
    };
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    if method == "$/cancelRequest" {
        let running = conn.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(token) = params
            .get("id")
            .and_then(|target| running.get(&id_key(target)))
        {
            token.cancel();
        }
        return;
    }
    let Some(id) = id else {
        // Notifications other than cancellation carry nothing we act on.
        return;
    };
    let Some(m) = Method::from_name(method) else {
        conn.error(
            id,
            METHOD_NOT_FOUND,
            &format!(
                "unknown method {method:?}; one of: {}",
                Method::ALL.map(Method::name).join(", ")
            ),
            None,
        );
        return;
    };
    if !params.is_object() {
        conn.error(
            id,
            INVALID_PARAMS,
            &format!("{method}: params must be an object: {}", m.params_shape()),
            None,
        );
        return;
    }
    let token = CancellationToken::new();
    conn.running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id_key(&id), token.clone());
    let conn = conn.clone();
    tasks.spawn(async move {
        let progress_conn = conn.clone();
        let progress_id = id.clone();
        let options = CallOptions {
            hooks: Arc::new(RpcHooks(conn.clone())),
            cancel: token,
            progress: Arc::new(move |host, line| {
                if let Some(HelperLine::Progress { step, message }) = HelperLine::parse(line) {
                    progress_conn.send(json!({
                        "jsonrpc": "2.0",
                        "method": "$/progress",
                        "params": {"id": progress_id, "host": host, "step": step, "message": message},
                    }));
                }
            }),
        };
        let result = present(m, conn.driver.call_json(m, &params, options).await);
        conn.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id_key(&id));
        match result {
            Ok(v) => conn.send(json!({"jsonrpc": "2.0", "id": id, "result": v})),
            Err(e) => {
                let code = match (e.code.as_str(), e.failure) {
                    ("cancelled", _) => REQUEST_CANCELLED,
                    ("invalid-params", FailureKind::Permanent) => INVALID_PARAMS,
                    _ => DRIVER_FAILED,
                };
                conn.error(id, code, &e.message.clone(), Some(error_data(&e)));
            }
        }
    });
}

fn error_data(e: &CallError) -> Value {
    serde_json::to_value(e).unwrap_or_default()
}

/// Serve JSON-RPC on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(driver: Arc<Driver>) -> std::io::Result<()> {
    serve_connection(driver, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serve JSON-RPC on a Unix socket at `path` (mode 0600), one task per
/// connection, until the process is stopped. An existing socket file is
/// replaced; any other file at `path` is refused.
pub async fn serve_unix(driver: Arc<Driver>, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    // Bind under a temporary name, restrict it, then move it into place: the
    // socket is never reachable with a looser mode.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let listener = tokio::net::UnixListener::bind(&tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, path)?;
    tracing::info!(socket = %path.display(), "serving JSON-RPC");
    loop {
        let (stream, _) = listener.accept().await?;
        let driver = driver.clone();
        tokio::spawn(async move {
            let (r, w) = stream.into_split();
            if let Err(e) = serve_connection(driver, r, w).await {
                tracing::warn!("connection ended: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_messages_are_skipped_to_their_newline() {
        let input = format!("{}\n{{\"a\":1}}\n", "x".repeat(100));
        let mut r = BufReader::with_capacity(16, input.as_bytes());
        assert_eq!(read_message(&mut r, 50).await.unwrap(), Some(Err(100)));
        assert_eq!(
            read_message(&mut r, 50).await.unwrap(),
            Some(Ok(b"{\"a\":1}".to_vec()))
        );
        assert_eq!(read_message(&mut r, 50).await.unwrap(), None);
    }

    #[test]
    fn placeholder_answers_in_either_shape() {
        let want = vec![("IAM_TOKEN".to_string(), "opaque-iam".to_string())];
        assert_eq!(
            placeholders(&json!({"environment": [{"name": "IAM_TOKEN", "value": "opaque-iam"}]}))
                .unwrap(),
            want
        );
        assert_eq!(
            placeholders(&json!({"environment": {"IAM_TOKEN": "opaque-iam"}})).unwrap(),
            want
        );
        assert_eq!(placeholders(&Value::Null).unwrap(), vec![]);
        assert!(
            placeholders(&json!({"environment": {"X": 3}}))
                .unwrap_err()
                .contains("X must be a string")
        );
    }
}
