//! Execs on the real hosts: one multiplexed master connection per host, a
//! channel per exec.
//!
//! Connections:
//! - Every master runs the grant's OpenSSH client ([`super::client`]) with
//!   the private client configuration of [`super::config`]; execs speak the
//!   mux protocol to it directly, in this process ([`super::master`] says
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

use super::backend::{ExecBackend, ExecError, ExecFuture, ExecOutput, ExecRequest, OutputStream};
use super::client::SshClient;
use super::config::{ClientFiles, render_ssh_config};
use super::grant::{HostGrant, SshGrant};
use super::master::{ConnectFailure, Master, exit_socket, jittered, remote_command};
use super::seal::seal;
use super::worker::{Ask, Workers};

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

    /// Close masters idle longer than the grant allows. Only runs inside a
    /// Tokio runtime (there is none when a backend is built for `check`).
    fn start_idle_reaper(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let conns = Arc::downgrade(&self.conns);
        let idle = self.grant.bounds.idle_master;
        handle.spawn(async move {
            loop {
                tokio::time::sleep(idle / 2).await;
                let Some(conns) = conns.upgrade() else { return };
                let stale: Vec<Arc<Master>> = {
                    let mut map = conns.lock().unwrap_or_else(|p| p.into_inner());
                    let mut stale = Vec::new();
                    for conn in map.values_mut() {
                        if let Conn::Ready { master, last_used } = conn
                            && last_used.elapsed() > idle
                            && Arc::strong_count(master) == 1
                        {
                            stale.push(master.clone());
                            *conn = Conn::Idle;
                        }
                    }
                    stale
                };
                for master in stale {
                    master.exit().await;
                }
            }
        });
    }

    /// The master for `alias`: the live one, the connect in flight, or a new
    /// connect (in its own task) when there is neither and no backoff holds
    /// it back.
    async fn master(&self, alias: &str, host: &HostGrant) -> ConnectResult {
        enum Next {
            Check(Arc<Master>),
            Wait(watch::Receiver<Option<ConnectResult>>),
            Fail(NoMaster),
        }
        loop {
            let next = {
                let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
                let conn = conns.entry(alias.to_string()).or_insert(Conn::Idle);
                match conn {
                    Conn::Ready { master, last_used } => {
                        *last_used = Instant::now();
                        Next::Check(master.clone())
                    }
                    Conn::Failed {
                        error,
                        at,
                        retry_at,
                        ..
                    } if Instant::now() < *retry_at => Next::Fail(NoMaster {
                        error: backed_off(error, *at, *retry_at),
                        retry_at: *retry_at,
                    }),
                    Conn::Connecting(rx) => Next::Wait(rx.clone()),
                    Conn::Idle | Conn::Failed { .. } => {
                        let failures = match conn {
                            Conn::Failed { failures, .. } => *failures,
                            _ => 0,
                        };
                        let (tx, rx) = watch::channel(None);
                        *conn = Conn::Connecting(rx.clone());
                        self.spawn_connect(alias, host, failures, tx);
                        Next::Wait(rx)
                    }
                }
            };
            match next {
                Next::Fail(e) => return Err(e),
                Next::Check(master) => {
                    if master.is_alive().await {
                        return Ok(master);
                    }
                    tracing::debug!(host = alias, "ssh master is gone; reconnecting");
                    self.forget(alias, &master).await;
                }
                Next::Wait(mut rx) => {
                    let result = rx
                        .wait_for(Option::is_some)
                        .await
                        .map(|r| r.clone())
                        .ok()
                        .flatten();
                    // None: the connect task died without an answer; try again.
                    if let Some(r) = result {
                        return r;
                    }
                }
            }
        }
    }

    /// Drop `master`, found gone, so that the next exec connects anew (unless
    /// another exec already replaced it); its files, a socket nothing
    /// answers, go with it.
    async fn forget(&self, alias: &str, master: &Arc<Master>) {
        let gone = {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            match conns.get(alias) {
                Some(Conn::Ready { master: m, .. }) if Arc::ptr_eq(m, master) => {
                    conns.insert(alias.to_string(), Conn::Idle);
                    true
                }
                _ => false,
            }
        };
        if gone {
            master.exit().await;
        }
    }

    /// A connect to `alias` in a task of its own, after `failures` failed
    /// ones in a row; its result goes to the map and to everyone on `tx`.
    fn spawn_connect(
        &self,
        alias: &str,
        host: &HostGrant,
        failures: u32,
        tx: watch::Sender<Option<ConnectResult>>,
    ) {
        let conns = self.conns.clone();
        let alias = alias.to_string();
        let host = host.clone();
        let handshakes = self.handshakes.clone();
        let client = self.grant.client.clone();
        let config = self.config_file.clone();
        let control_dir = self.control_dir.clone();
        let masters = self.masters.clone();
        let idle = self.grant.bounds.idle_master;
        let sessions = self.grant.bounds.max_sessions;
        let (first_delay, cap) = (
            self.grant.bounds.reconnect_first_delay,
            self.grant.bounds.connect_backoff,
        );
        // ssh bounds the TCP connect itself; the handshake after it gets as long
        // again, and a client still running then is killed.
        let bound = self.grant.connect_timeout * 2 + CONNECT_SLACK;
        tokio::spawn(async move {
            let result = match handshakes.begin() {
                Ok(()) => {
                    // sshd drops connections past its unauthenticated limit
                    // (`MaxStartups`, 10:30:100 as shipped) before they
                    // authenticate: nothing ran, so the connect is made again,
                    // after a pause that varies so that connections dropped
                    // together do not all come back together.
                    let give_up = Instant::now() + PREAUTH_RETRY_BOUND;
                    let mut pause = PREAUTH_FIRST_PAUSE;
                    let connected = loop {
                        let dir = control_dir
                            .join(format!("m{}", masters.fetch_add(1, Ordering::Relaxed)));
                        match Master::connect(&client, &config, dir, &host, idle, bound, sessions)
                            .await
                        {
                            Err(e)
                                if dropped_before_auth(&e.0)
                                    && Instant::now() + pause < give_up =>
                            {
                                let wait = jittered(pause);
                                tracing::info!(
                                    host = alias,
                                    "the server dropped the connection before authentication ({}); \
                                     connecting again in {} ms",
                                    e.0.trim(),
                                    wait.as_millis()
                                );
                                tokio::time::sleep(wait).await;
                                pause = (pause * 2).min(PREAUTH_MAX_PAUSE);
                            }
                            other => break other,
                        }
                    }
                    .map(Arc::new)
                    .map_err(|e| connect_error(&alias, &host, &e));
                    handshakes.end();
                    connected
                }
                Err(e) => Err(ExecError::Io(format!(
                    "{alias}: cannot write the inline ssh credentials: {e}"
                ))),
            };
            let at = Instant::now();
            let failures = failures.saturating_add(1);
            let retry_at = at + backoff_after(failures, first_delay, cap);
            let next = match &result {
                Ok(master) => Conn::Ready {
                    master: master.clone(),
                    last_used: at,
                },
                Err(error) => Conn::Failed {
                    error: error.clone(),
                    at,
                    failures,
                    retry_at,
                },
            };
            conns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(alias, next);
            let _ = tx.send(Some(result.map_err(|error| NoMaster { error, retry_at })));
        });
    }

    /// Feed and read the session `child` opened on `master` for `req` until
    /// the remote command ends; `input` is the stdin written before `req`'s
    /// stream (its own stdin, sealed).
    async fn run(
        &self,
        master: &Master,
        mut child: openssh::Child<&openssh::Session>,
        input: &[u8],
        req: ExecRequest<'_>,
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
            if let Some(mut stream) = stream {
                let _ = tokio::io::copy(&mut stream, &mut child_stdin).await;
            }
            let _ = child_stdin.shutdown().await;
        };
        let cap = bounds.stdout_cap;
        let on_line = req.on_line;
        let sink = req.output;
        let tail_max = bounds.stderr_tail;
        let read_out = async move {
            if let Some(sink) = sink {
                // Passed on as it arrives; only the end is kept for the result.
                let mut tail = Vec::new();
                let mut buf = vec![0u8; 16 << 10];
                loop {
                    let n = child_stdout
                        .read(&mut buf)
                        .await
                        .map_err(|e| ExecError::Io(e.to_string()))?;
                    if n == 0 {
                        sink(OutputStream::Stdout, Vec::new()).await;
                        return Ok(tail);
                    }
                    sink(OutputStream::Stdout, buf[..n].to_vec()).await;
                    keep_tail(&mut tail, &buf[..n], tail_max);
                }
            }
            // The cap applies as bytes arrive, whether or not they end a line.
            let mut out: Vec<u8> = Vec::new();
            let mut line_start = 0;
            let mut buf = vec![0u8; 16 << 10];
            loop {
                let n = child_stdout
                    .read(&mut buf)
                    .await
                    .map_err(|e| ExecError::Io(e.to_string()))?;
                if n == 0 {
                    break;
                }
                if out.len() + n > cap {
                    return Err(ExecError::OutputTooLarge(cap as u64));
                }
                out.extend_from_slice(&buf[..n]);
                while let Some(i) = out[line_start..].iter().position(|b| *b == b'\n') {
                    let end = line_start + i;
                    on_line(String::from_utf8_lossy(&out[line_start..end]).trim_end());
                    line_start = end + 1;
                }
            }
            Ok(out)
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
fn dropped_unanswered(e: &openssh::Error) -> bool {
    matches!(e, openssh::Error::SshMux(_))
        && causes(e).any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
        })
}

/// The errors `e` was caused by, nearest first.
fn causes(e: &openssh::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(e), |cause| cause.source())
}

/// An openssh error with its causes, for the caller.
fn error_text(e: &openssh::Error) -> String {
    let mut text = e.to_string();
    for cause in causes(e) {
        text.push_str(": ");
        text.push_str(&cause.to_string());
    }
    text
}

/// Append `bytes` to `tail`, keeping its last `max` bytes.
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8], max: usize) {
    tail.extend_from_slice(bytes);
    if tail.len() > max {
        tail.drain(..tail.len() - max);
    }
}

/// Waiting for a connect in flight may take a little longer than the connect
/// timeout itself (the master forks after authenticating).
const CONNECT_SLACK: Duration = Duration::from_secs(5);

impl LiveSsh {
    /// The master for `req`'s alias, within the connect bound and the call's
    /// cancellation.
    async fn connected(
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
    async fn one_shot(&self, req: ExecRequest<'_>) -> Result<ExecOutput, ExecError> {
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

impl ExecBackend for LiveSsh {
    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            if req.argv.is_empty() {
                return Err(ExecError::Io("empty argument vector".into()));
            }
            let started = Instant::now();
            let mut req = req;
            // A file operation goes to the target's worker when it holds its
            // whole input and collects its output; a command streams both.
            if let Some(serve) = req.serve
                && (serve.command || (req.stdin_stream.is_none() && req.output.is_none()))
            {
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
                        let ask = Ask {
                            alias,
                            stdin: req.stdin,
                            timeout,
                            on_line: req.on_line,
                            cancel,
                            stream: req.stdin_stream.take(),
                            output: req.output,
                        };
                        let result = self
                            .workers
                            .call(
                                worker,
                                ask,
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

/// A host still unreachable when the reconnect budget ran out: one error that
/// names it, the budget, and the last connect's error.
fn unreachable(
    alias: &str,
    host: &HostGrant,
    budget: Duration,
    started: Instant,
    last: ExecError,
) -> ExecError {
    let last = match last {
        ExecError::Connect(m) => m,
        other => other.to_string(),
    };
    ExecError::Connect(format!(
        "{alias} ({}@{}:{}): unreachable: no connection within the reconnect budget of {} s \
         (reconnectSeconds; tried for {:.1} s, and the next attempt falls past it); nothing \
         ran on it. The last attempt: {last}",
        host.user,
        host.address,
        host.port,
        budget.as_secs(),
        started.elapsed().as_secs_f64()
    ))
}

fn backed_off(error: &ExecError, at: Instant, retry_at: Instant) -> ExecError {
    let again = retry_at
        .saturating_duration_since(Instant::now())
        .as_secs_f64();
    let note = format!(
        " (connecting failed {:.1} s ago; not retried for another {again:.1} s)",
        at.elapsed().as_secs_f64()
    );
    match error {
        ExecError::Connect(m) => ExecError::Connect(format!("{m}{note}")),
        ExecError::HostKey(m) => ExecError::HostKey(format!("{m}{note}")),
        ExecError::Auth(m) => ExecError::Auth(format!("{m}{note}")),
        other => other.clone(),
    }
}

/// How long a connect keeps being made again while the server drops it
/// before authentication, and the pauses between (doubling, with jitter).
const PREAUTH_RETRY_BOUND: Duration = Duration::from_secs(20);
const PREAUTH_FIRST_PAUSE: Duration = Duration::from_millis(100);
const PREAUTH_MAX_PAUSE: Duration = Duration::from_secs(2);

/// Whether ssh's words say the server closed the connection before any
/// authentication (sshd past `MaxStartups`, or shedding load): what ssh
/// prints then, and never after a refused identity or host key.
fn dropped_before_auth(text: &str) -> bool {
    let refused = text.contains("Permission denied")
        || text.contains("Host key verification failed")
        || text.contains("HOST IDENTIFICATION HAS CHANGED");
    !refused
        && (text.contains("kex_exchange_identification")
            || text.contains("Connection closed by")
            || text.contains("Connection reset by"))
}

fn connect_error(alias: &str, host: &HostGrant, e: &ConnectFailure) -> ExecError {
    let text = &e.0;
    let at = format!("{alias} ({}@{}:{})", host.user, host.address, host.port);
    if text.contains("Host key verification failed")
        || text.contains("HOST IDENTIFICATION HAS CHANGED")
        || text.contains("host key")
    {
        // The driver says what to do about it; the host says what happened.
        ExecError::HostKey(format!("{at}: {text}"))
    } else if text.contains("Permission denied") {
        // The host is there and answers, but refuses the identity: a
        // configuration an operator must fix, not a transient failure.
        ExecError::Auth(format!("{at}: {text}"))
    } else {
        ExecError::Connect(format!("{at}: {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ssh prints when sshd drops a connection before authentication
    /// (seen on a stock sshd with 20 connections at once) is told apart from
    /// a refused port, identity or host key.
    #[test]
    fn a_drop_before_authentication_is_told_apart() {
        for dropped in [
            "kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 10.201.5.2 port 22",
            "kex_exchange_identification: Connection closed by remote host\r\nConnection closed by 10.201.5.2 port 22",
        ] {
            assert!(dropped_before_auth(dropped), "{dropped}");
        }
        for other in [
            "ssh: connect to host 10.201.5.2 port 22: Connection refused",
            "ssh: connect to host 192.0.2.1 port 22: Connection timed out",
            "root@10.201.5.2: Permission denied (publickey).\r\nConnection closed by 10.201.5.2 port 22",
            "Host key verification failed.",
        ] {
            assert!(!dropped_before_auth(other), "{other}");
        }
    }

    /// The wait after each failed connect in a row: the first delay, doubled
    /// each time, never past the cap; a first delay equal to the cap is a
    /// fixed wait (the compute world's).
    #[test]
    fn connects_back_off_exponentially_up_to_the_cap() {
        let ms = Duration::from_millis;
        let waits: Vec<_> = (1..=7)
            .map(|n| backoff_after(n, ms(250), ms(5000)))
            .collect();
        assert_eq!(
            waits,
            [
                ms(250),
                ms(500),
                ms(1000),
                ms(2000),
                ms(4000),
                ms(5000),
                ms(5000)
            ]
        );
        assert_eq!(backoff_after(u32::MAX, ms(250), ms(5000)), ms(5000));
        assert_eq!(backoff_after(1, ms(5000), ms(5000)), ms(5000));
        assert_eq!(backoff_after(9, ms(5000), ms(5000)), ms(5000));
    }

    /// Two backends in one process (two drivers opened side by side) each get
    /// their own control directory: dropping one leaves the other's sockets
    /// and credential files where they were.
    #[test]
    fn each_backend_owns_its_control_directory() {
        let first = LiveSsh::new(SshGrant::none()).unwrap();
        let second = LiveSsh::new(SshGrant::none()).unwrap();
        assert_ne!(first.control_dir, second.control_dir);
        let kept = second.control_dir.clone();
        let dropped = first.control_dir.clone();
        drop(first);
        assert!(!dropped.exists(), "{}", dropped.display());
        assert!(
            kept.is_dir(),
            "{} went with the other backend",
            kept.display()
        );
        assert!(second.config_file.is_file());
    }
}
