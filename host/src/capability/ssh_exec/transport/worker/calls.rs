//! One request or command on a running worker, with its cancellation,
//! and the reaping of idle workers.

use super::*;
use crate::capability::ssh_exec::transport::keep_tail;

/// One file operation with `stdin`: (status, stdout, stderr).
pub(super) async fn request(
    w: &Arc<Worker>,
    stdin: &[u8],
    timeout: Duration,
    cancel: &CancellationToken,
    serve: &Serve,
    cap: usize,
) -> Result<(i32, Vec<u8>, Vec<u8>), Outcome> {
    let (id, mut events) = w.register();
    let forget = Forget(w, id);
    w.touch();
    w.send(
        ToWorker::Request {
            id,
            args: &serve.request,
            stdin: stdin.len(),
        },
        stdin,
    )
    .await
    .map_err(Outcome::Broken)?;
    let bound = serve.bound.min(timeout);
    let event = tokio::select! {
        e = tokio::time::timeout(bound, events.recv()) => e,
        () = cancel.cancelled() => {
            // Ended in the worker alone; its answer, if any, is dropped.
            let _ = w.send(ToWorker::Cancel { id }, &[]).await;
            return Err(Outcome::Failed(ExecError::Cancelled));
        }
    };
    drop(forget);
    match event {
        Ok(Some(Event::Answer {
            status,
            stdout,
            stderr,
        })) => {
            if stdout.len() > cap {
                return Err(Outcome::Failed(ExecError::OutputTooLarge(cap as u64)));
            }
            w.touch();
            Ok((status, stdout, stderr))
        }
        Ok(Some(Event::Lost(why))) => Err(Outcome::Lost(why)),
        Ok(Some(Event::Broken(why))) => Err(Outcome::Broken(why)),
        Ok(Some(_)) => Err(Outcome::Broken(format!(
            "request {id} got a command's frame"
        ))),
        Ok(None) => Err(Outcome::Broken("it ended".into())),
        Err(_) => {
            // Past its bound: the request alone, or the whole worker?
            if !w.answers_ping().await {
                return Err(Outcome::Hung(format!(
                    "no answer within {} ms, nor to a ping within {} s",
                    bound.as_millis(),
                    PING_BOUND.as_secs()
                )));
            }
            let _ = w.send(ToWorker::Cancel { id }, &[]).await;
            Err(Outcome::Failed(ExecError::Timeout))
        }
    }
}

/// One command: its input sent as it comes, its output passed on (or
/// collected) as it comes, then its exit status. Never sent twice.
pub(super) async fn command(
    w: &Arc<Worker>,
    req: ExecRun<'_>,
    serve: &Serve,
    cap: usize,
    tail_max: usize,
) -> Result<ExecOutput, ExecError> {
    let (id, mut events) = w.register();
    let _forget = Forget(w, id);
    // Dropped before its end (the caller's task aborted: its connection
    // failed), the command is cancelled all the same, or it would run on
    // with nobody to stop it.
    let mut unfinished = CancelUnfinished {
        worker: Some(w.clone()),
        id,
    };
    w.touch();
    let broken = |why: String| {
        ExecError::Io(format!(
            "{}: the remote worker failed mid-command ({why}{}); the command may have run",
            req.alias,
            tail_text(&w.stderr)
        ))
    };
    w.send(
        ToWorker::Command {
            id,
            exec: &serve.request,
            stdin: req.stdin.len(),
        },
        req.stdin,
    )
    .await
    .map_err(broken)?;
    // The caller's input, framed as it comes; its end closes the command's.
    let feed = async {
        if let Some(mut stream) = req.stdin_stream {
            let mut buf = vec![0u8; INPUT_CHUNK];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if w.send(ToWorker::Input { id, n }, &buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let _ = w.send(ToWorker::Close { id }, &[]).await;
        // Nothing more to send: wait here while the output runs.
        std::future::pending::<()>().await;
    };
    let sink = req.output;
    let on_line = req.on_line;
    let collect = async {
        let mut out: Vec<u8> = Vec::new();
        let mut line_start = 0;
        let mut err_tail: Vec<u8> = Vec::new();
        loop {
            match events.recv().await {
                Some(Event::Out(data)) => {
                    if let Some(sink) = sink {
                        keep_tail(&mut out, &data, tail_max);
                        sink(OutputStream::Stdout, data).await;
                        continue;
                    }
                    if out.len() + data.len() > cap {
                        return Err(ExecError::OutputTooLarge(cap as u64));
                    }
                    out.extend_from_slice(&data);
                    while let Some(i) = out[line_start..].iter().position(|b| *b == b'\n') {
                        let end = line_start + i;
                        on_line(String::from_utf8_lossy(&out[line_start..end]).trim_end());
                        line_start = end + 1;
                    }
                }
                Some(Event::Err(data)) => {
                    keep_tail(&mut err_tail, &data, tail_max);
                    if let Some(sink) = sink {
                        sink(OutputStream::Stderr, data).await;
                    }
                }
                Some(Event::Exit(status)) => {
                    if let Some(sink) = sink {
                        sink(OutputStream::Stdout, Vec::new()).await;
                        sink(OutputStream::Stderr, Vec::new()).await;
                    }
                    return Ok(ExecOutput {
                        exit_status: status,
                        stdout: out,
                        stderr_tail: err_tail,
                    });
                }
                Some(Event::Answer { .. } | Event::Lost(_) | Event::Pong) => {
                    return Err(broken(format!("command {id} got another request's frame")));
                }
                Some(Event::Broken(why)) => return Err(broken(why)),
                None => return Err(broken("it ended".into())),
            }
        }
    };
    let result = tokio::select! {
        r = tokio::time::timeout(req.timeout, collect) => r.unwrap_or(Err(ExecError::Timeout)),
        () = feed => unreachable!("the feed waits forever once done"),
        () = req.cancel.cancelled() => Err(ExecError::Cancelled),
    };
    if matches!(
        result,
        Err(ExecError::Timeout | ExecError::Cancelled | ExecError::OutputTooLarge(_))
    ) {
        // As a closed channel: the exec script ends the command's process group.
        let _ = w.send(ToWorker::Cancel { id }, &[]).await;
    }
    unfinished.worker = None;
    w.touch();
    result
}

/// Cancels command `id` on `worker` when dropped while still holding it: a
/// command whose caller went away mid-run.
pub(super) struct CancelUnfinished {
    worker: Option<Arc<Worker>>,
    id: u64,
}

impl Drop for CancelUnfinished {
    fn drop(&mut self) {
        let Some(worker) = self.worker.take() else {
            return;
        };
        let id = self.id;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = worker.send(ToWorker::Cancel { id }, &[]).await;
            });
        }
    }
}

/// End the workers idle longer than `idle`, until the pool is gone.
pub(super) async fn reap(
    slots: Weak<Mutex<HashMap<SlotKey, Arc<tokio::sync::Mutex<Slot>>>>>,
    idle: Duration,
) {
    loop {
        tokio::time::sleep((idle / 2).max(Duration::from_millis(100))).await;
        let Some(slots) = slots.upgrade() else { return };
        let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|_, slot| {
            // A slot being started is busy, not idle.
            let Ok(mut s) = slot.try_lock() else {
                return true;
            };
            if let Some(w) = &s.worker {
                let busy = !w
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty();
                let last = *w.last_used.lock().unwrap_or_else(|p| p.into_inner());
                if w.broken.is_cancelled() || (!busy && last.elapsed() > idle) {
                    s.worker = None;
                }
            }
            s.worker.is_some() || s.unavailable_until.is_some()
        });
    }
}
