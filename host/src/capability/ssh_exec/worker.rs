//! Long-lived workers: one remote process per target and start vector (for
//! the sandbox, per scope's runtime root), started over a session of its own
//! on the host's master and then sent framed requests on its stdin, instead
//! of a session and a fresh interpreter for every exec.
//!
//! What a worker runs is what a one-shot exec would: the world builds the
//! start vector from the admitted one (the same pinned program) and each
//! request from the admitted arguments, envelope first, and the program
//! checks each request as it checks a one-shot run ([`super::Serve`]).
//!
//! Frames, both ways: a 4-byte big-endian length, that many bytes of JSON,
//! then the data the JSON announces.
//! - hello (worker): `{"serving": 1, "pid": n}`, once, after it started;
//! - request (host): `{"args": [...], "stdin": n}` and n bytes;
//! - answer (worker): `{"status": 0|1, "stdout": n, "stderr": m}` and n + m
//!   bytes.
//!
//! Lifecycle:
//! - started on first use, reused by every later call of this backend (every
//!   `serve` client of one process), one request at a time: requests of one
//!   worker are serialized, different workers run concurrently;
//! - ended (its session closed) when idle longer than the grant's
//!   `idle_worker`, when its master is found gone, and when this backend is
//!   dropped; the remote process exits when its stdin closes, and its watcher
//!   kills it when its session goes, even while it is stopped;
//! - a worker that ends mid-request, answers out of frame, or takes longer
//!   than the request's bound is killed and replaced: the request is sent
//!   once more to a new worker when it changes nothing
//!   ([`super::Serve::idempotent`]), and fails retryable otherwise;
//! - one that cannot start (no hello: the interpreter is missing, or the
//!   program refused to serve) leaves the exec to a one-shot run, which
//!   reports what is wrong as it always did, and no new start is tried for
//!   [`UNAVAILABLE_FOR`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::backend::{ExecError, ExecOutput, Serve};
use super::grant::ExecPolicy;
use super::master::{Master, remote_command};
use super::seal::{Sealed, seal};

/// The largest JSON header of a frame the host reads.
const HEADER_MAX: u32 = 1 << 20;

/// How long a start vector that produced no worker is left to one-shot runs.
const UNAVAILABLE_FOR: Duration = Duration::from_secs(60);

type Key = (String, Vec<String>);

/// One running worker.
struct Worker {
    master: Arc<Master>,
    /// The session; dropping it closes the channel.
    _child: openssh::Child<Arc<openssh::Session>>,
    stdin: openssh::ChildStdin,
    stdout: openssh::ChildStdout,
    /// The end of what it wrote to stderr (a program's own failure).
    stderr: Arc<Mutex<Vec<u8>>>,
    pid: u32,
    last_used: Instant,
}

#[derive(Default)]
struct Slot {
    worker: Option<Worker>,
    /// No start is tried before this: the last one produced no worker.
    unavailable_until: Option<Instant>,
}

/// What a worker's request needs of its exec.
pub(crate) struct Ask<'a> {
    pub alias: &'a str,
    pub stdin: &'a [u8],
    /// The exec's bound (the request's is the smaller of it and the serve's).
    pub timeout: Duration,
    pub on_line: &'a (dyn Fn(&str) + Send + Sync),
    pub cancel: &'a tokio_util::sync::CancellationToken,
}

/// The workers of one backend.
pub(crate) struct Workers {
    slots: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>>,
    /// The grant's policy: how a start vector travels.
    policy: ExecPolicy,
}

/// Why an exchange with a worker failed.
enum Fault {
    /// The worker ended or spoke out of frame.
    Broken(String),
    /// No answer within the request's bound.
    Timeout,
    /// The answer's stdout is over the grant's cap.
    TooLarge(u64),
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

    fn slot(&self, key: Key) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(key).or_default().clone()
    }

    /// Answer `req` by `serve`'s worker, starting it if none serves; `None`
    /// when no worker could start, so the exec is the caller's to run.
    /// `master` connects (or finds) the alias's master, within its bounds.
    pub(crate) async fn call<F, Fut>(
        &self,
        req: &Ask<'_>,
        serve: &Serve,
        cap: usize,
        tail: usize,
        master: F,
    ) -> Option<Result<ExecOutput, ExecError>>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Arc<Master>, ExecError>>,
    {
        let slot = self.slot((req.alias.to_string(), serve.start.clone()));
        let mut slot = tokio::select! {
            s = slot.lock() => s,
            () = req.cancel.cancelled() => return Some(Err(ExecError::Cancelled)),
        };
        let bound = serve.bound.min(req.timeout);
        let mut retried = false;
        loop {
            if let Some(w) = &slot.worker
                && !w.master.is_alive().await
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
                let sealed = seal(&self.policy, &serve.start, &[]);
                let started = tokio::select! {
                    r = tokio::time::timeout(bound, start(master, &sealed)) => r.unwrap_or(Err(WorkerError::Timeout(bound))),
                    () = req.cancel.cancelled() => return Some(Err(ExecError::Cancelled)),
                };
                match started {
                    Ok(w) => {
                        tracing::debug!(host = req.alias, pid = w.pid, "workspace worker started");
                        slot.unavailable_until = None;
                        slot.worker = Some(w);
                    }
                    Err(why) => {
                        tracing::warn!(
                            host = req.alias,
                            "no long-lived worker could start ({why}); running one-shot for {} s",
                            UNAVAILABLE_FOR.as_secs()
                        );
                        slot.unavailable_until = Some(Instant::now() + UNAVAILABLE_FOR);
                        return None;
                    }
                }
            }
            let w = slot.worker.as_mut().expect("a worker serves");
            let exchanged = tokio::select! {
                r = tokio::time::timeout(bound, exchange(w, serve, req.stdin, cap)) => r.unwrap_or(Err(Fault::Timeout)),
                () = req.cancel.cancelled() => {
                    // The request may be half done: only a new worker is
                    // known to be between requests.
                    slot.worker = None;
                    return Some(Err(ExecError::Cancelled));
                }
            };
            match exchanged {
                Ok((status, stdout, mut stderr)) => {
                    w.last_used = Instant::now();
                    for line in String::from_utf8_lossy(&stdout).lines() {
                        (req.on_line)(line);
                    }
                    if stderr.len() > tail {
                        stderr.drain(..stderr.len() - tail);
                    }
                    return Some(Ok(ExecOutput {
                        exit_status: Some(status),
                        stdout,
                        stderr_tail: stderr,
                    }));
                }
                Err(Fault::TooLarge(cap)) => {
                    slot.worker = None;
                    return Some(Err(ExecError::OutputTooLarge(cap)));
                }
                Err(fault) => {
                    let timed_out = matches!(fault, Fault::Timeout);
                    let why = match fault {
                        Fault::Broken(why) => why,
                        _ => format!("no answer within {} ms", bound.as_millis()),
                    };
                    let w = slot.worker.take().expect("a worker serves");
                    let said = tail_text(&w.stderr);
                    tracing::warn!(
                        host = req.alias,
                        pid = w.pid,
                        "workspace worker replaced: {why}{said}"
                    );
                    drop(w);
                    if serve.idempotent && !retried {
                        retried = true;
                        continue;
                    }
                    return Some(Err(if timed_out {
                        ExecError::Timeout
                    } else {
                        ExecError::Io(format!(
                            "{}: the remote worker failed mid-request ({why}{said}); \
                             the operation may or may not have taken effect",
                            req.alias
                        ))
                    }));
                }
            }
        }
    }
}

/// End the workers idle longer than `idle`, until the pool is gone.
async fn reap(slots: Weak<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>>, idle: Duration) {
    loop {
        tokio::time::sleep((idle / 2).max(Duration::from_millis(100))).await;
        let Some(slots) = slots.upgrade() else { return };
        let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|_, slot| {
            // A slot in use is busy, not idle.
            let Ok(mut s) = slot.try_lock() else {
                return true;
            };
            if s.worker
                .as_ref()
                .is_some_and(|w| w.last_used.elapsed() > idle)
            {
                s.worker = None;
            }
            s.worker.is_some() || s.unavailable_until.is_some_and(|t| Instant::now() < t)
        });
    }
}

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

/// Start a worker on `master` with its start vector, `sealed`, and read its
/// hello.
async fn start(master: Arc<Master>, sealed: &Sealed) -> Result<Worker, WorkerError> {
    let mut child = master
        .owned_command(&remote_command(&sealed.argv))
        .spawn()
        .await
        .map_err(WorkerError::Spawn)?;
    let mut stdin = child.stdin().take().ok_or(WorkerError::NoStream("stdin"))?;
    // What the start vector carries beyond the program travels first on stdin.
    stdin
        .write_all(&sealed.stdin)
        .await
        .map_err(WorkerError::Start)?;
    let mut stdout = child
        .stdout()
        .take()
        .ok_or(WorkerError::NoStream("stdout"))?;
    let mut err = child
        .stderr()
        .take()
        .ok_or(WorkerError::NoStream("stderr"))?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let kept = stderr.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut tail = kept.lock().unwrap_or_else(|p| p.into_inner());
            tail.extend_from_slice(&buf[..n]);
            let over = tail.len().saturating_sub(4096);
            tail.drain(..over);
        }
    });
    let hello = match read_header(&mut stdout).await {
        Ok(hello) => hello,
        Err(source) => {
            return Err(WorkerError::Hello {
                source,
                said: tail_text(&stderr),
            });
        }
    };
    let pid = match (
        hello.get("serving").and_then(Value::as_u64),
        hello.get("pid").and_then(Value::as_u64),
    ) {
        (Some(1), Some(pid)) => u32::try_from(pid).map_err(|_| WorkerError::PidOutOfRange)?,
        _ => return Err(WorkerError::NotAHello(hello)),
    };
    Ok(Worker {
        master,
        _child: child,
        stdin,
        stdout,
        stderr,
        pid,
        last_used: Instant::now(),
    })
}

/// Send one request and read its answer: (status, stdout, stderr).
async fn exchange(
    w: &mut Worker,
    serve: &Serve,
    stdin: &[u8],
    cap: usize,
) -> Result<(i32, Vec<u8>, Vec<u8>), Fault> {
    let header = json!({"args": serve.request, "stdin": stdin.len()}).to_string();
    let mut frame = Vec::with_capacity(4 + header.len() + stdin.len());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(stdin);
    let broken = |e: std::io::Error| Fault::Broken(e.to_string());
    w.stdin.write_all(&frame).await.map_err(broken)?;
    w.stdin.flush().await.map_err(broken)?;
    let answer = read_header(&mut w.stdout)
        .await
        .map_err(|e| Fault::Broken(e.to_string()))?;
    let field = |name: &str| answer.get(name).and_then(Value::as_u64);
    let (Some(status @ 0..=1), Some(out), Some(err)) =
        (field("status"), field("stdout"), field("stderr"))
    else {
        return Err(Fault::Broken(format!("not an answer: {answer}")));
    };
    if out > cap as u64 {
        return Err(Fault::TooLarge(cap as u64));
    }
    if err > u64::from(HEADER_MAX) {
        return Err(Fault::Broken(format!(
            "{err} bytes of stderr in one answer"
        )));
    }
    let mut stdout = vec![0u8; out as usize];
    let mut stderr = vec![0u8; err as usize];
    w.stdout.read_exact(&mut stdout).await.map_err(broken)?;
    w.stdout.read_exact(&mut stderr).await.map_err(broken)?;
    Ok((status as i32, stdout, stderr))
}

/// One frame's JSON header.
async fn read_header(stdout: &mut openssh::ChildStdout) -> Result<Value, FrameError> {
    let mut size = [0u8; 4];
    stdout
        .read_exact(&mut size)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => FrameError::Ended,
            _ => FrameError::Read(e),
        })?;
    let size = u32::from_be_bytes(size);
    if size > HEADER_MAX {
        return Err(FrameError::TooLarge(size));
    }
    let mut header = vec![0u8; size as usize];
    stdout
        .read_exact(&mut header)
        .await
        .map_err(FrameError::Read)?;
    match serde_json::from_slice::<Value>(&header) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(FrameError::NotAnObject),
    }
}
