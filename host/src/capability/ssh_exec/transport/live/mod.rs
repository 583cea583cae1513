//! Execs on the real hosts: one multiplexed master connection per host, a
//! channel per exec.
//!
//! Connections:
//! - Every master runs the grant's OpenSSH client ([`super::client`]) with
//!   the private client configuration of [`super::config`]; execs speak the
//!   mux protocol to it directly, in this process (`transport::master` says
//!   how), and never connect on their own, so no ssh with other options ever
//!   runs, and an exec runs no process.
//! - A connect runs in a task of its own and always finishes (bounded by the
//!   connect timeout), however soon the exec that wanted it gives up: a loop of
//!   short-timeout execs waits on the one handshake in flight instead of
//!   starting new ones. A failed connect is remembered for the grant's backoff
//!   (a first delay, doubled after each failure in a row, up to a cap): no new
//!   connect starts during it. An exec then waits it out and connects again
//!   while the grant's reconnect budget lasts, and fails with one error naming
//!   the host and the budget past it; with no budget, it fails at once with
//!   the connect's error. Only connecting is tried again, never a command.
//! - Masters persist only while in use: one idle longer than the grant's
//!   `idle_master` is closed, and each master also exits on its own after
//!   twice that idle time (`ControlPersist`), should this process die without
//!   closing it. A master found gone (or ending as an exec opens its session,
//!   so that its command never started) is replaced by a new connect, once
//!   per exec.
//!   A backend dropped (the process ending) closes its masters.
//! - Control sockets live in a per-user directory (0700); each process uses a
//!   subdirectory named after its pid and start time, and at start the
//!   subdirectories of processes that are gone are cleaned, their masters asked
//!   to exit first. Inline credentials of the grant are written there too
//!   (0600), so they exist only while this process serves, and a process killed
//!   without cleaning up has them removed by the next one.
//!
//! Cancelling or timing out an exec closes its mux session and its pipes:
//! the master closes the channel, and the remote side sees its session close.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::client::SshClient;
use super::config::{ClientFiles, render_ssh_config};
use super::master::{ConnectFailure, Master, exit_socket, jittered, remote_command};
use super::worker::Workers;
use crate::capability::ssh_exec::backend::{
    ExecBackend, ExecError, ExecFuture, ExecOutput, ExecRun, OutputStream,
};
use crate::capability::ssh_exec::grant::{HostGrant, SshGrant};
use crate::capability::ssh_exec::seal::seal;

mod connect;
mod run;
#[cfg(test)]
mod tests;

/// What a connect gives every exec waiting on it.
type ConnectResult = Result<Arc<Master>, NoMaster>;

enum Conn {
    Idle,
    Connecting(watch::Receiver<Option<ConnectResult>>),
    Ready {
        master: Arc<Master>,
        last_used: Instant,
    },
    /// The last connect failed, the `failures`th in a row: no new one
    /// starts before `retry_at`.
    Failed {
        error: ExecError,
        at: Instant,
        failures: u32,
        retry_at: Instant,
    },
}

/// How long after the `failures`th failed connect in a row the next may
/// start: `first`, doubled for each failure after the first, at most `cap`.
fn backoff_after(failures: u32, first: Duration, cap: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    first.saturating_mul(1 << doublings).min(cap)
}

/// Why [`LiveSsh::master`] gave no master: the connect's error, and when
/// the next connect may start.
#[derive(Clone)]
struct NoMaster {
    error: ExecError,
    retry_at: Instant,
}

/// Connections to the granted hosts, shared by every call of one driver.
pub struct LiveSsh {
    grant: SshGrant,
    control_dir: PathBuf,
    config_file: PathBuf,
    files: ClientFiles,
    conns: Arc<Mutex<HashMap<String, Conn>>>,
    handshakes: Arc<Handshakes>,
    /// Names each master's directory (`m<n>`): short, whatever the alias.
    masters: Arc<AtomicU64>,
    /// The long-lived workers ([`super::worker`]).
    workers: Workers,
}

/// The handshakes in flight, which alone need the inline credentials on disk:
/// the first to begin writes them (0600, in the private control directory),
/// the last to end removes them, so that no key outlives the connect that
/// used it, whatever happens to the master afterwards. A host killed during
/// a handshake leaves them until the next start cleans its directory.
struct Handshakes {
    grant: SshGrant,
    dir: PathBuf,
    running: Mutex<usize>,
}

impl Handshakes {
    fn begin(&self) -> std::io::Result<()> {
        if !ClientFiles::any_inline(&self.grant) {
            return Ok(());
        }
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if *running == 0 {
            ClientFiles::remove_inline(&self.dir)?;
            if let Err(e) = ClientFiles::materialize(&self.grant, &self.dir) {
                let _ = ClientFiles::remove_inline(&self.dir);
                return Err(e);
            }
        }
        *running += 1;
        Ok(())
    }

    fn end(&self) {
        if !ClientFiles::any_inline(&self.grant) {
            return;
        }
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        if *running == 0
            && let Err(e) = ClientFiles::remove_inline(&self.dir)
        {
            tracing::warn!(dir = %self.dir.display(), "cannot remove inline ssh credentials: {e}");
        }
    }
}

impl std::fmt::Debug for LiveSsh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSsh")
            .field("hosts", &self.grant.hosts.keys())
            .field("control_dir", &self.control_dir)
            .finish()
    }
}

impl Drop for LiveSsh {
    fn drop(&mut self) {
        // The masters this backend made go with it; one still connecting
        // exits on its own after its idle time, and the next start cleans
        // the directory.
        let masters: Vec<Arc<Master>> = {
            let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            conns
                .values()
                .filter_map(|c| match c {
                    Conn::Ready { master, .. } => Some(master.clone()),
                    _ => None,
                })
                .collect()
        };
        for master in masters {
            master.exit_blocking();
        }
        let _ = std::fs::remove_dir_all(&self.control_dir);
    }
}

/// The per-user directory holding every process's control sockets.
fn control_root() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = crate::uid::current_uid();
    let root = std::env::temp_dir().join(format!("occ-ssh-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{}: the ssh control directory must be a directory of this user with mode 700",
                root.display()
            ),
        ));
    }
    Ok(root)
}

/// This process's start time in clock ticks since boot, from /proc.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22, counted after the parenthesised command name (which may hold spaces).
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Remove the control directories of processes that are gone, asking their
/// masters to exit first (with `client`: any OpenSSH client speaks to any
/// master).
fn clean_stale(root: &Path, client: &SshClient) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `p<pid>-<start time>-<instance>` (older hosts wrote no instance).
        let mut parts = name.strip_prefix('p').unwrap_or("").split('-');
        let (Some(pid), Some(started)) = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if start_time(pid) == Some(started) {
            continue;
        }
        let dir = entry.path();
        if let Ok(conns) = std::fs::read_dir(&dir) {
            for conn in conns.flatten() {
                let socket = conn.path().join("master");
                if socket.exists() {
                    exit_socket(client, &socket);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        tracing::debug!(dir = %dir.display(), "removed a stale ssh control directory");
    }
}

impl LiveSsh {
    /// Prepare this process's private control directory and client configuration.
    pub fn new(grant: SshGrant) -> std::io::Result<LiveSsh> {
        use std::os::unix::fs::DirBuilderExt;
        let root = control_root()?;
        clean_stale(&root, &grant.client);
        // One directory per backend, not per process: a process may hold several
        // (each driver it opens), and each removes its own when dropped.
        static INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let pid = std::process::id();
        let instance = INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let control_dir = root.join(format!(
            "p{pid}-{}-{instance}",
            start_time(pid).unwrap_or(0)
        ));
        let _ = std::fs::remove_dir_all(&control_dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&control_dir)?;
        // Inline credentials are written only while a master is being
        // connected (see `Handshakes`): ssh reads them during the handshake,
        // and the master it leaves needs them no more.
        let files = ClientFiles::plan(&grant, &control_dir);
        let config_file = control_dir.join("ssh_config");
        let prepared = std::fs::write(&config_file, render_ssh_config(&grant, &files))
            .map(|()| (files, config_file));
        let (files, config_file) = match prepared {
            Ok(p) => p,
            Err(e) => {
                // Whatever was written (inline credentials) goes with the directory.
                let _ = std::fs::remove_dir_all(&control_dir);
                return Err(e);
            }
        };
        let handshakes = Arc::new(Handshakes {
            grant: grant.clone(),
            dir: control_dir.clone(),
            running: Mutex::new(0),
        });
        let workers = Workers::new(grant.bounds.idle_master, grant.policy.clone());
        let live = LiveSsh {
            grant,
            control_dir,
            config_file,
            files,
            conns: Arc::new(Mutex::new(HashMap::new())),
            handshakes,
            masters: Arc::new(AtomicU64::new(0)),
            workers,
        };
        live.start_idle_reaper();
        Ok(live)
    }

    /// The grant this backend serves.
    pub fn grant(&self) -> &SshGrant {
        &self.grant
    }

    /// Where ssh reads the credentials (inline ones in the private directory).
    pub fn files(&self) -> &ClientFiles {
        &self.files
    }

    /// The process ids of the masters serving now, by alias (what `-O check`
    /// reported when each came up).
    pub fn master_pids(&self) -> Vec<(String, u32)> {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let mut pids: Vec<(String, u32)> = conns
            .iter()
            .filter_map(|(alias, c)| match c {
                Conn::Ready { master, .. } => master.pid().map(|pid| (alias.clone(), pid)),
                _ => None,
            })
            .collect();
        pids.sort();
        pids
    }

    /// The control sockets of the masters serving now, by alias.
    pub fn master_sockets(&self) -> Vec<(String, PathBuf)> {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let mut sockets: Vec<(String, PathBuf)> = conns
            .iter()
            .filter_map(|(alias, c)| match c {
                Conn::Ready { master, .. } => Some((alias.clone(), master.socket().to_path_buf())),
                _ => None,
            })
            .collect();
        sockets.sort();
        sockets
    }
}

impl ExecBackend for LiveSsh {
    fn exec<'a>(&'a self, req: ExecRun<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            if req.argv.is_empty() {
                return Err(ExecError::Io("empty argument vector".into()));
            }
            let started = Instant::now();
            let mut req = req;
            // A worker answers it when the capability said one may
            // (`ExecRun::serve`).
            if let Some(serve) = req.serve {
                let bounds = &self.grant.bounds;
                let timeout = req.timeout.min(bounds.operation);
                let (alias, host, cancel) = (req.alias, req.host, req.cancel);
                let master = || self.connected(alias, host, cancel);
                match self
                    .workers
                    .worker(alias, cancel, timeout, serve, &master)
                    .await
                {
                    Some(Ok(worker)) => {
                        // The worker's request has the smaller bound.
                        req.timeout = timeout;
                        let result = self
                            .workers
                            .call(
                                worker,
                                req,
                                serve,
                                bounds.stdout_cap,
                                bounds.stderr_tail,
                                master,
                            )
                            .await;
                        log_exec(alias, "worker", started, &result);
                        return result;
                    }
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
            }
            let alias = req.alias;
            let result = self.one_shot(req).await;
            log_exec(alias, "session", started, &result);
            result
        })
    }

    fn kind(&self) -> &'static str {
        "live"
    }
}

/// One debug line per exec (`-vv`): the host, how it ran (a long-lived
/// worker's request or a session of its own), how long it took and how it
/// ended. Never the command or its input: they may carry what a driver keeps
/// out of logs.
fn log_exec(alias: &str, how: &str, started: Instant, result: &Result<ExecOutput, ExecError>) {
    let ms = started.elapsed().as_millis();
    match result {
        Ok(out) => tracing::debug!(host = alias, how, ms, status = ?out.exit_status, "exec ended"),
        Err(e) => tracing::debug!(host = alias, how, ms, "exec failed: {e}"),
    }
}
