//! Long-lived workers: one remote process per target and start vector (for
//! the sandbox, per SSH target and workspace root), started over a session of
//! its own on the host's master, serving every scope of that target: file
//! operations and commands alike, each a request with an id of its own on the
//! one session, instead of a session and a fresh interpreter for every exec.
//!
//! What a worker runs is what a one-shot exec would: the world builds the
//! start from the approved programs and each request from the admitted
//! arguments, envelope first, and the program checks each request as it
//! checks a one-shot run ([`super::Serve`]).
//!
//! Frames, both ways: a 4-byte big-endian length, that many bytes of JSON,
//! then the data the JSON announces. The table in `docs/architecture.md`
//! ("The worker's frames") is the protocol, and [`frames`] is tested against
//! it: the host sends [`frames::ToWorker`] and reads [`frames::FromWorker`].
//!
//! Lifecycle:
//! - started on first use, reused by every later call of this backend;
//!   requests of different scopes run side by side in it, and one scope's
//!   requests (the same [`super::Serve::order`]) are kept in order here;
//! - ended (its session closed) when idle longer than the grant's
//!   `idle_worker`, when its master is found gone, and when this backend is
//!   dropped; the remote process exits when its stdin closes (every command
//!   it runs then sees its channel close), and its watcher kills it when its
//!   session goes, even while it is stopped;
//! - a worker that ends, or speaks out of frame, fails every request in
//!   flight and is replaced on the next one: a request that changes nothing
//!   ([`super::Serve::idempotent`]) is sent once more to the new worker,
//!   anything else (a command included) fails retryable and is never sent
//!   twice; a request past its bound is ended in the worker alone; a request
//!   whose own process there ended (`lost`: its scope's process was killed)
//!   is handled the same way, on the same worker;
//! - one that cannot start (no hello: the interpreter is missing, or the
//!   program refused to serve) leaves the exec to a one-shot run, which
//!   reports what is wrong as it always did, and no new start is tried for
//!   [`UNAVAILABLE_FOR`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

use super::master::{Master, remote_command};
use crate::capability::ssh_exec::backend::{ExecError, ExecOutput, ExecRun, OutputStream, Serve};
use crate::capability::ssh_exec::grant::ExecPolicy;
use crate::capability::ssh_exec::seal::{self, Sealed};

mod calls;
mod frames;

use calls::{command, reap, request};
use frames::{ToWorker, start};

/// The largest JSON header of a frame the host reads.
const HEADER_MAX: u32 = 1 << 20;
/// The most data one frame announces (the worker's own bound on a request).
const DATA_MAX: u32 = 64 << 20;

/// How long a start vector that produced no worker is left to one-shot runs.
const UNAVAILABLE_FOR: Duration = Duration::from_secs(60);

/// The most a command's input frame carries.
const INPUT_CHUNK: usize = 64 << 10;

/// A slot: a target's alias and the vector its worker starts from, which
/// holds the workspace script's text. Each backend builds that vector once
/// ([`Serve::start`]), so a key is found by identity, and hashed by the
/// short arguments and the long ones' lengths, not by reading the text
/// again on every request.
#[derive(Clone)]
struct SlotKey {
    alias: String,
    start: Arc<[String]>,
}

impl PartialEq for SlotKey {
    fn eq(&self, other: &SlotKey) -> bool {
        self.alias == other.alias
            && (Arc::ptr_eq(&self.start, &other.start) || self.start == other.start)
    }
}

impl Eq for SlotKey {}

impl std::hash::Hash for SlotKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.alias.hash(state);
        for a in self.start.iter() {
            if a.len() <= 256 {
                a.hash(state);
            } else {
                a.len().hash(state);
            }
        }
    }
}

impl SlotKey {
    fn of(alias: &str, serve: &Serve) -> SlotKey {
        SlotKey {
            alias: alias.to_string(),
            start: serve.start.clone(),
        }
    }
}

/// What a worker said about one request.
enum Event {
    Answer {
        status: i32,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// The request's process on the worker ended with it in hand (killed,
    /// out of memory); the worker serves on, and it may or may not have run.
    Lost(String),
    Out(Vec<u8>),
    Err(Vec<u8>),
    Exit(Option<i32>),
    /// The worker still serves.
    Pong,
    /// The worker ended or spoke out of frame.
    Broken(String),
}

/// How long a master's answer to the alive check stands for its workers.
/// A master that ends closes their channels, and each one's reader sees
/// that at once (`broken`); the check covers the moment between, and was a
/// connection to the master and a round of the mux protocol per request.
const MASTER_SEEN_FOR: Duration = Duration::from_secs(1);

/// How long a worker has to answer a ping after a request ran past its
/// bound: one that does not is hung, not merely busy with that request.
const PING_BOUND: Duration = Duration::from_secs(5);

/// One running worker: its session, the writer of its stdin, and the
/// requests in flight, each waiting for its frames.
pub(crate) struct Worker {
    master: Arc<Master>,
    /// The session; dropping it closes the channel ([`Worker::end`]).
    child: Mutex<Option<openssh::Child<Arc<openssh::Session>>>>,
    /// Its place among the master's sessions, for as long as it lives.
    _permit: OwnedSemaphorePermit,
    stdin: tokio::sync::Mutex<openssh::ChildStdin>,
    pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>>,
    next: AtomicU64,
    /// Set when the reader saw the worker end or speak out of frame.
    broken: CancellationToken,
    /// The end of what it wrote to stderr (a program's own failure).
    stderr: Arc<Mutex<Vec<u8>>>,
    /// One lock per [`Serve::order`]: one scope's requests in order.
    order: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pid: u32,
    /// It runs commands (its start carried the exec script).
    runs_commands: bool,
    last_used: Mutex<Instant>,
    /// When its master last answered the mux protocol's alive check.
    master_seen: Mutex<Instant>,
}

#[derive(Default)]
struct Slot {
    worker: Option<Arc<Worker>>,
    /// No start is tried before this: the last one produced no worker.
    unavailable_until: Option<Instant>,
}

/// The workers of one backend.
pub(crate) struct Workers {
    slots: Arc<Mutex<HashMap<SlotKey, Arc<tokio::sync::Mutex<Slot>>>>>,
    /// The grant's policy: how a start vector travels.
    policy: ExecPolicy,
}

/// Why a frame from a worker could not be read.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    /// Its output ended before a frame began.
    #[error("it ended")]
    Ended,
    /// Its output could not be read (or ended mid-frame).
    #[error("{0}")]
    Read(std::io::Error),
    /// The frame announced a header over [`HEADER_MAX`].
    #[error("a frame header of {0} bytes")]
    TooLarge(u32),
    /// The header is not a JSON object.
    #[error("a frame header that is not a JSON object")]
    NotAnObject,
}

/// Why no worker could start: the exec is left to a one-shot run.
#[derive(Debug, thiserror::Error)]
enum WorkerError {
    /// Its session could not be opened.
    #[error("{0}")]
    Spawn(openssh::Error),
    /// Its session came without one of its standard streams.
    #[error("no {0}")]
    NoStream(&'static str),
    /// Its start could not be written to its stdin.
    #[error("its start could not be sent: {0}")]
    Start(std::io::Error),
    /// Its hello could not be read.
    #[error("{source}{said}")]
    Hello {
        /// Why.
        source: FrameError,
        /// The last line it wrote to stderr, as `; it said: ...` (empty when
        /// it wrote nothing).
        said: String,
    },
    /// Its first frame is not a hello.
    #[error("not a hello: {0}")]
    NotAHello(Value),
    /// Its hello names a pid that is no process id.
    #[error("a pid out of range")]
    PidOutOfRange,
    /// No hello within the bound.
    #[error("no hello within {} ms", .0.as_millis())]
    Timeout(Duration),
}

impl Workers {
    /// An empty pool whose workers end after `idle` without a request.
    /// `policy` is the grant's: how a start vector travels ([`seal`]).
    pub(crate) fn new(idle: Duration, policy: ExecPolicy) -> Workers {
        let workers = Workers {
            slots: Arc::new(Mutex::new(HashMap::new())),
            policy,
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(reap(Arc::downgrade(&workers.slots), idle));
        }
        workers
    }

    fn slot(&self, key: SlotKey) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(key).or_default().clone()
    }

    /// The worker of `serve`'s start on `alias`, started if none serves;
    /// `None` when none could start (or, for a command, when the one that
    /// serves runs no commands), so the exec is the caller's to run.
    pub(crate) async fn worker<F, Fut>(
        &self,
        alias: &str,
        cancel: &CancellationToken,
        timeout: Duration,
        serve: &Serve,
        master: &F,
    ) -> Option<Result<Arc<Worker>, ExecError>>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Arc<Master>, ExecError>>,
    {
        let slot = self.slot(SlotKey::of(alias, serve));
        let mut slot = tokio::select! {
            s = slot.lock() => s,
            () = cancel.cancelled() => return Some(Err(ExecError::Cancelled)),
        };
        if let Some(w) = &slot.worker
            && (w.broken.is_cancelled() || !w.master_alive().await)
        {
            slot.worker = None;
        }
        if slot.worker.is_none() {
            if slot.unavailable_until.is_some_and(|t| Instant::now() < t) {
                return None;
            }
            let master = match master().await {
                Ok(m) => m,
                Err(e) => return Some(Err(e)),
            };
            let bound = serve.bound.min(timeout);
            let mut sealed = seal::seal(&self.policy, &serve.start, &[]);
            sealed.stdin.extend_from_slice(&serve.start_input);
            let started = tokio::select! {
                r = tokio::time::timeout(bound, start(master, &sealed, Instant::now() + bound)) => r.unwrap_or(Err(WorkerError::Timeout(bound))),
                () = cancel.cancelled() => return Some(Err(ExecError::Cancelled)),
            };
            match started {
                Ok(w) => {
                    tracing::debug!(host = alias, pid = w.pid, "workspace worker started");
                    slot.unavailable_until = None;
                    slot.worker = Some(Arc::new(w));
                }
                Err(why) => {
                    tracing::warn!(
                        host = alias,
                        "no long-lived worker could start ({why}); running one-shot for {} s",
                        UNAVAILABLE_FOR.as_secs()
                    );
                    slot.unavailable_until = Some(Instant::now() + UNAVAILABLE_FOR);
                    return None;
                }
            }
        }
        let w = slot.worker.clone().expect("a worker serves");
        if serve.command && !w.runs_commands {
            return None;
        }
        Some(Ok(w))
    }

    /// Forget `w` in its slot (it broke): the next request starts another.
    fn drop_worker(&self, alias: &str, serve: &Serve, w: &Arc<Worker>) {
        let slot = self.slot(SlotKey::of(alias, serve));
        if let Ok(mut slot) = slot.try_lock()
            && slot.worker.as_ref().is_some_and(|s| Arc::ptr_eq(s, w))
        {
            slot.worker = None;
        }
    }

    /// Answer `req` by `first`, a worker [`Workers::worker`] gave for
    /// `serve`: a command, or a file operation, sent once more to a new
    /// worker (when it changes nothing) if this one breaks under it.
    /// `master` connects (or finds) the alias's master, within its bounds.
    pub(crate) async fn call<F, Fut>(
        &self,
        first: Arc<Worker>,
        req: ExecRun<'_>,
        serve: &Serve,
        cap: usize,
        tail: usize,
        master: F,
    ) -> Result<ExecOutput, ExecError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Arc<Master>, ExecError>>,
    {
        if serve.command {
            return command(&first, req, serve, cap, tail).await;
        }
        let mut retried = false;
        let mut next = Some(first);
        loop {
            let w = match next.take() {
                Some(w) => w,
                None => match self
                    .worker(req.alias, req.cancel, req.timeout, serve, &master)
                    .await
                {
                    Some(Ok(w)) => w,
                    Some(Err(e)) => return Err(e),
                    None => {
                        return Err(ExecError::Io(format!(
                            "{}: the remote worker failed mid-request and none could start again",
                            req.alias
                        )));
                    }
                },
            };
            // One scope's requests in order, on this worker.
            let order = serve.order.as_ref().map(|key| {
                w.order
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(key.clone())
                    .or_default()
                    .clone()
            });
            let _in_order = match &order {
                Some(lock) => Some(tokio::select! {
                    g = lock.clone().lock_owned() => g,
                    () = req.cancel.cancelled() => return Err(ExecError::Cancelled),
                }),
                None => None,
            };
            match request(&w, req.stdin, req.timeout, req.cancel, serve, cap).await {
                Ok((status, stdout, mut stderr)) => {
                    for line in String::from_utf8_lossy(&stdout).lines() {
                        (req.on_line)(line);
                    }
                    if stderr.len() > tail {
                        stderr.drain(..stderr.len() - tail);
                    }
                    return Ok(ExecOutput {
                        exit_status: Some(status),
                        stdout,
                        stderr_tail: stderr,
                    });
                }
                Err(Outcome::Failed(e)) => return Err(e),
                Err(failed) => {
                    // What the request's failure leaves: the worker, if it
                    // serves on, and the error if the request is not sent
                    // again. A request that changes nothing is, once.
                    let (serves_on, error) = self.after_failure(failed, &w, req.alias, serve);
                    if serve.idempotent && !retried {
                        retried = true;
                        next = serves_on;
                        continue;
                    }
                    return Err(error);
                }
            }
        }
    }

    /// A request on `w` failed with `failed` (not [`Outcome::Failed`]): it
    /// is logged, a worker that ended or hangs is dropped (and ended), and
    /// the answer is the worker that serves on, if any, and the request's
    /// error.
    fn after_failure(
        &self,
        failed: Outcome,
        w: &Arc<Worker>,
        alias: &str,
        serve: &Serve,
    ) -> (Option<Arc<Worker>>, ExecError) {
        match failed {
            Outcome::Failed(e) => (Some(w.clone()), e),
            Outcome::Lost(why) => {
                // The worker serves on; the scope's next request gets a new
                // process there.
                tracing::warn!(host = alias, pid = w.pid, "workspace request lost: {why}");
                let error = ExecError::Io(format!(
                    "{alias}: {why}; the operation may or may not have taken effect"
                ));
                (Some(w.clone()), error)
            }
            Outcome::Hung(why) => {
                // Ended: its session closes, and its watcher kills it.
                tracing::warn!(
                    host = alias,
                    pid = w.pid,
                    "workspace worker replaced: {why}"
                );
                self.drop_worker(alias, serve, w);
                w.end();
                (None, ExecError::Timeout)
            }
            Outcome::Broken(why) => {
                let said = tail_text(&w.stderr);
                tracing::warn!(
                    host = alias,
                    pid = w.pid,
                    "workspace worker replaced: {why}{said}"
                );
                self.drop_worker(alias, serve, w);
                let error = ExecError::Io(format!(
                    "{alias}: the remote worker failed mid-request ({why}{said}); \
                     the operation may or may not have taken effect"
                ));
                (None, error)
            }
        }
    }
}

/// How a request failed: on its own, or with its whole worker (which ended,
/// or hangs).
enum Outcome {
    Failed(ExecError),
    /// The request's own process on the worker ended; the worker did not.
    Lost(String),
    Broken(String),
    Hung(String),
}

impl Worker {
    /// A new request id, with the channel its frames arrive on.
    fn register(&self) -> (u64, mpsc::UnboundedReceiver<Event>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        (id, rx)
    }

    fn forget(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Send one frame and the `data` it announces.
    async fn send(&self, frame: ToWorker<'_>, data: &[u8]) -> Result<(), String> {
        let mut bytes = seal::frame(frame.header().to_string().as_bytes());
        bytes.extend_from_slice(data);
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(&bytes).await.map_err(|e| e.to_string())?;
        stdin.flush().await.map_err(|e| e.to_string())
    }

    /// Close its session now: the remote process exits with its stdin, and
    /// its watcher kills it even while it is stopped. Requests in flight on
    /// it fail.
    fn end(&self) {
        self.broken.cancel();
        drop(self.child.lock().unwrap_or_else(|p| p.into_inner()).take());
    }

    /// Whether the worker answers a ping within [`PING_BOUND`].
    async fn answers_ping(&self) -> bool {
        let (id, mut events) = self.register();
        let _forget = Forget(self, id);
        if self.send(ToWorker::Ping { id }, &[]).await.is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout(PING_BOUND, events.recv()).await,
            Ok(Some(Event::Pong))
        )
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether its master serves: the alive check, asked again only once
    /// [`MASTER_SEEN_FOR`] has passed since it last answered.
    async fn master_alive(&self) -> bool {
        let seen = *self.master_seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.elapsed() < MASTER_SEEN_FOR {
            return true;
        }
        let alive = self.master.is_alive().await;
        if alive {
            *self.master_seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
        alive
    }
}

/// Forgets a request's channel when dropped.
struct Forget<'a>(&'a Worker, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}

/// The last line a worker wrote to stderr, for an error that says why it
/// failed ("; it said: ..."), or nothing.
fn tail_text(stderr: &Mutex<Vec<u8>>) -> String {
    let tail = stderr.lock().unwrap_or_else(|p| p.into_inner());
    let text = String::from_utf8_lossy(&tail);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; it said: {}", text.lines().last().unwrap_or_default())
    }
}
