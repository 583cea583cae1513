//! Running one exec: on a long-lived worker or in a session of its own on
//! the host's master, fed and read until the remote command ends, within
//! the call's bounds and cancellation.

use super::connect::{CONNECT_SLACK, unreachable};
use super::*;
use crate::capability::ssh_exec::transport::keep_tail;

/// The most of a streamed stdin read and written at once.
const STREAM_CHUNK: usize = 256 << 10;

impl LiveSsh {
    /// Feed and read the session `child` opened on `master` for `req` until
    /// the remote command ends; `input` is the stdin written before `req`'s
    /// stream (its own stdin, sealed).
    pub(super) async fn run(
        &self,
        master: &Master,
        mut child: openssh::Child<&openssh::Session>,
        input: &[u8],
        req: ExecRun<'_>,
    ) -> Result<ExecOutput, ExecError> {
        let bounds = &self.grant.bounds;
        let mut child_stdin = child
            .stdin()
            .take()
            .ok_or_else(|| ExecError::Io("no stdin".into()))?;
        let mut child_stdout = child
            .stdout()
            .take()
            .ok_or_else(|| ExecError::Io("no stdout".into()))?;
        let mut child_stderr = child
            .stderr()
            .take()
            .ok_or_else(|| ExecError::Io("no stderr".into()))?;
        let stream = req.stdin_stream;
        let feed = async move {
            // A remote command may exit without reading all of its input; that
            // is its business, so a broken pipe here is not an error.
            let _ = child_stdin.write_all(input).await;
            if let Some(stream) = stream {
                // tokio's `copy` moves 8 KiB at a time: a 100 MiB seed
                // was 12,800 reads and writes through this process.
                let mut stream = tokio::io::BufReader::with_capacity(STREAM_CHUNK, stream);
                let _ = tokio::io::copy_buf(&mut stream, &mut child_stdin).await;
            }
            let _ = child_stdin.shutdown().await;
        };
        let cap = bounds.stdout_cap;
        let on_line = req.on_line;
        let sink = req.output;
        let tail_max = bounds.stderr_tail;
        let read_out = async move {
            // Streamed: passed on as it arrives, only the end kept for the
            // result. Collected: kept whole, under the cap, which applies as
            // bytes arrive whether or not they end a line.
            let mut kept: Vec<u8> = Vec::new();
            let mut line_start = 0;
            let mut buf = vec![0u8; 16 << 10];
            loop {
                let n = child_stdout
                    .read(&mut buf)
                    .await
                    .map_err(|e| ExecError::Io(e.to_string()))?;
                let chunk = &buf[..n];
                if let Some(sink) = sink {
                    // An empty chunk is the stream's end.
                    sink(OutputStream::Stdout, chunk.to_vec()).await;
                    keep_tail(&mut kept, chunk, tail_max);
                } else if kept.len() + n > cap {
                    return Err(ExecError::OutputTooLarge(cap as u64));
                } else {
                    kept.extend_from_slice(chunk);
                    while let Some(i) = kept[line_start..].iter().position(|b| *b == b'\n') {
                        let end = line_start + i;
                        on_line(String::from_utf8_lossy(&kept[line_start..end]).trim_end());
                        line_start = end + 1;
                    }
                }
                if n == 0 {
                    return Ok(kept);
                }
            }
        };
        let read_err = async move {
            let mut tail = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match child_stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        if let Some(sink) = sink {
                            sink(OutputStream::Stderr, Vec::new()).await;
                        }
                        break;
                    }
                    Ok(n) => {
                        if let Some(sink) = sink {
                            sink(OutputStream::Stderr, buf[..n].to_vec()).await;
                        }
                        keep_tail(&mut tail, &buf[..n], tail_max);
                    }
                }
            }
            tail
        };
        let ((), stdout, stderr_tail) = tokio::join!(feed, read_out, read_err);
        let stdout = stdout?;
        // The master's word: 255 is a remote status like any other, and a
        // lost connection an error.
        let exit_status = match child.wait().await {
            Ok(status) => status.code(),
            // The crate turns the shell's 127 (command not found) into an
            // error; it is the remote command's status, and the driver decides
            // what it means (a wrong nodePath).
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => Some(127),
            // The session ended without a status: while the master lives on,
            // the remote command was ended by a signal; a master gone (it
            // unlinks its socket before it exits) lost the connection.
            Err(openssh::Error::RemoteProcessTerminated) if master.is_alive().await => None,
            Err(openssh::Error::RemoteProcessTerminated) => {
                return Err(ExecError::Io(format!(
                    "{}: the ssh connection failed: the master connection is gone",
                    req.alias
                )));
            }
            Err(e) => {
                return Err(ExecError::Io(format!(
                    "{}: the ssh connection failed: {}",
                    req.alias,
                    error_text(&e)
                )));
            }
        };
        Ok(ExecOutput {
            exit_status,
            stdout,
            stderr_tail,
        })
    }
}

/// Whether the master closed the control connection before it answered:
/// the end of the stream where its reply (a hello, or the session's
/// confirmation) belonged.
pub(super) fn dropped_unanswered(e: &openssh::Error) -> bool {
    matches!(e, openssh::Error::SshMux(_))
        && causes(e).any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
        })
}

/// The errors `e` was caused by, nearest first.
pub(super) fn causes(
    e: &openssh::Error,
) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(e), |cause| cause.source())
}

/// An openssh error with its causes, for the caller.
pub(super) fn error_text(e: &openssh::Error) -> String {
    let mut text = e.to_string();
    for cause in causes(e) {
        text.push_str(": ");
        text.push_str(&cause.to_string());
    }
    text
}

impl LiveSsh {
    /// The master for `req`'s alias, within the connect bound and the call's
    /// cancellation.
    pub(super) async fn connected(
        &self,
        alias: &str,
        host: &HostGrant,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Arc<Master>, ExecError> {
        // Connecting is bounded by the installation's connect timeout; the
        // operation bound counts from the moment the command starts, so that
        // the helper's own deadline (below the bound, from its start) always
        // falls first, however long the connection took.
        //
        // A host that refuses or drops connections is tried again after each
        // backoff while the grant's reconnect budget lasts (no new connect
        // starts past it; one in flight then finishes within its own bound).
        // Connecting runs nothing on the host, so every exec may wait for it;
        // a host key or an identity refused is no outage, and fails at once.
        let connect_bound = self.grant.connect_timeout + CONNECT_SLACK;
        let budget = self.grant.bounds.reconnect_budget;
        let started = Instant::now();
        let mut waits = 0u32;
        loop {
            let attempt = tokio::select! {
                r = tokio::time::timeout(connect_bound, self.master(alias, host)) => match r {
                    Ok(attempt) => attempt,
                    Err(_) => Err(NoMaster {
                        error: ExecError::Connect(format!(
                            "{alias}: no connection within {} s", connect_bound.as_secs()
                        )),
                        retry_at: Instant::now(),
                    }),
                },
                () = cancel.cancelled() => return Err(ExecError::Cancelled),
            };
            let NoMaster { error, retry_at } = match attempt {
                Ok(master) => {
                    if waits > 0 {
                        tracing::info!(
                            host = alias,
                            "connected after {waits} wait(s), {:.1} s",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    return Ok(master);
                }
                Err(no) => no,
            };
            if budget.is_zero() || !matches!(error, ExecError::Connect(_)) {
                return Err(error);
            }
            let retry_at = retry_at.max(Instant::now());
            if retry_at.saturating_duration_since(started) >= budget {
                return Err(unreachable(alias, host, budget, started, error));
            }
            waits += 1;
            tracing::info!(
                host = alias,
                "{error}; connecting again in {:.1} s (reconnect budget {} s)",
                retry_at
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64(),
                budget.as_secs()
            );
            tokio::select! {
                () = tokio::time::sleep_until(retry_at.into()) => {}
                () = cancel.cancelled() => return Err(ExecError::Cancelled),
            }
        }
    }

    /// `req` as a session of its own.
    pub(super) async fn one_shot(&self, req: ExecRun<'_>) -> Result<ExecOutput, ExecError> {
        let cancel = req.cancel.clone();
        let bound = req.timeout.min(self.grant.bounds.operation);
        // Nothing of the call on the remote command line: its values travel
        // on stdin ([`seal`]).
        let sealed = seal(&self.grant.policy, req.argv, req.stdin);
        let line = remote_command(&sealed.argv);
        let mut reconnected = false;
        loop {
            let master = self.connected(req.alias, req.host, req.cancel).await?;
            // A place among the master's sessions, for as long as this one
            // runs: past the budget, the exec waits rather than be refused.
            let _session = tokio::select! {
                p = tokio::time::timeout(bound, master.session()) => match p {
                    Ok(permit) => permit,
                    Err(_) => return Err(ExecError::Timeout),
                },
                () = cancel.cancelled() => return Err(ExecError::Cancelled),
            };
            let started = Instant::now();
            let spawn = master.open(
                || {
                    let mut command = master.command(&line);
                    async move { command.spawn().await }
                },
                started + bound,
            );
            let opened = tokio::select! {
                r = tokio::time::timeout(bound, spawn) => match r {
                    Ok(opened) => opened,
                    Err(_) => return Err(ExecError::Timeout),
                },
                () = cancel.cancelled() => return Err(ExecError::Cancelled),
            };
            let child = match opened {
                Ok(child) => child,
                // The master can end between its alive check and this
                // session (its own idle timer, counted from its last
                // session's end, or a dropped connection). The master
                // refused the session, so the remote command did not
                // start: connect anew and open it once more. A master that
                // lives on but closed this control connection without an
                // answer dropped the request before it opened a channel
                // (it answers a channel it opened, and closes a client's
                // connection only on a request it could not take): the
                // command did not start either, and the same master gets
                // it once more.
                Err(e) => {
                    if !reconnected {
                        let alive = master.is_alive().await;
                        if !alive || dropped_unanswered(&e) {
                            tracing::debug!(
                                host = req.alias,
                                alive,
                                "ssh master refused a session ({}); opening it once more",
                                error_text(&e)
                            );
                            if !alive {
                                self.forget(req.alias, &master).await;
                            }
                            reconnected = true;
                            continue;
                        }
                    }
                    // How long it waited and what the master logged say
                    // whether the master, the server or the link was at
                    // fault.
                    let log = master.log_tail();
                    return Err(ExecError::Io(format!(
                        "{}: {} (after {:.1} s{}{})",
                        req.alias,
                        error_text(&e),
                        started.elapsed().as_secs_f64(),
                        if log.is_empty() {
                            ""
                        } else {
                            "; the ssh master logged: "
                        },
                        log
                    )));
                }
            };
            let left = bound.saturating_sub(started.elapsed());
            return tokio::select! {
                // Dropping the run closes its mux session and pipes, and the
                // master closes the channel: the remote side sees its session
                // close.
                r = tokio::time::timeout(left, self.run(&master, child, &sealed.stdin, req)) => r.unwrap_or(Err(ExecError::Timeout)),
                () = cancel.cancelled() => Err(ExecError::Cancelled),
            };
        }
    }
}
