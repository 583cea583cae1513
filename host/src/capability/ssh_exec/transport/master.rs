//! One OpenSSH control master, run with the grant's client
//! ([`super::client`]), and the execs over its control socket:
//!
//! - the master: `<client> -F <config> -E <log> -S <socket> -M -f -N -o
//!   ControlPersist=<2 × idle>s -p <port> -l <user> -- <address>`; the
//!   client forks into the background once authenticated, and exits on its
//!   own after twice the idle time should this process die without closing
//!   it;
//! - each exec: a session this process opens itself over the control socket,
//!   speaking OpenSSH's mux protocol (the openssh crate's native mux, which
//!   only ever resumes a socket: it never runs a program). Its standard
//!   streams are pipes whose far ends go to the master with the request; the
//!   master reports the remote command's exit status, 255 included, or that it
//!   ended without one (a signal). No exec runs a process, and none can
//!   connect on its own: without the master's socket there is nothing to
//!   speak to, so every connection is one this host made (with its backoff
//!   and credential window);
//! - `-O check` after connecting, `-O exit` to close.
//!
//! ssh's own messages go to the master's `-E` log, never into a remote
//! command's stderr.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::client::SshClient;
use crate::capability::ssh_exec::grant::HostGrant;

/// One master connection: its files in the private control directory (the
/// socket and the master's log), and this process's mux session over them.
pub(crate) struct Master {
    client: SshClient,
    config: PathBuf,
    dir: PathBuf,
    socket: PathBuf,
    address: String,
    pid: Option<u32>,
    /// Speaks the mux protocol to `socket`; resumed, so dropping it leaves
    /// the master alone (closing is `-O exit`'s).
    mux: std::sync::Arc<openssh::Session>,
    /// The sessions this master may have open at once: fewer than sshd's
    /// `MaxSessions` (10 as shipped), so a session is never refused; more
    /// work waits for a place.
    sessions: std::sync::Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Master {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Master")
            .field("socket", &self.socket)
            .field("pid", &self.pid)
            .finish()
    }
}

/// How a master failed to come up: what ssh logged, or why it could not run.
#[derive(Debug)]
pub(crate) struct ConnectFailure(pub String);

impl Master {
    /// Start a master for `host` in `dir` (created here, private), and wait
    /// until it serves or failed. Bounded: ssh's own connect timeout, plus
    /// `slack` for the handshake; a client still running then is killed.
    pub(crate) async fn connect(
        client: &SshClient,
        config: &Path,
        dir: PathBuf,
        host: &HostGrant,
        idle: Duration,
        bound: Duration,
        sessions: usize,
    ) -> Result<Master, ConnectFailure> {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ConnectFailure(format!("cannot create {}: {e}", dir.display())))?;
        let socket = dir.join("master");
        let log = dir.join("log");
        let mut command = client.command();
        command
            .arg("-F")
            .arg(config)
            .arg("-E")
            .arg(&log)
            .arg("-S")
            .arg(&socket)
            .args(["-M", "-f", "-N", "-o"])
            // Twice the idle bound: the reaper of a live process closes an
            // idle master within 1.5 times the bound of its last session's
            // start, so the master's own timer only ever ends one whose
            // process died.
            .arg(format!("ControlPersist={}s", (idle * 2).as_secs().max(1)))
            .arg("-p")
            .arg(host.port.to_string())
            .arg("-l")
            .arg(&host.user)
            .arg("--")
            .arg(&host.address)
            // The forked master keeps whatever it was given: nothing to hold open.
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let failed = |why: String| {
            let _ = std::fs::remove_dir_all(&dir);
            ConnectFailure(why)
        };
        let mut child = command.spawn().map_err(|e| {
            failed(format!(
                "cannot run the ssh client {}: {e}",
                client.program.display()
            ))
        })?;
        let status = match tokio::time::timeout(bound, child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(failed(format!("waiting for ssh: {e}"))),
            Err(_) => {
                let _ = child.kill().await;
                return Err(failed(format!(
                    "ssh did not authenticate within {} s",
                    bound.as_secs()
                )));
            }
        };
        if !status.success() {
            let text = read_log(&log);
            return Err(failed(if text.is_empty() {
                format!("ssh exited with {status}")
            } else {
                text
            }));
        }
        let mut master = Master {
            client: client.clone(),
            config: config.to_path_buf(),
            dir,
            socket: socket.clone(),
            address: host.address.clone(),
            pid: None,
            mux: std::sync::Arc::new(openssh::Session::resume_mux(
                socket.clone().into_boxed_path(),
                None,
            )),
            sessions: std::sync::Arc::new(tokio::sync::Semaphore::new(sessions.max(1))),
        };
        match master.check().await {
            Ok(pid) => master.pid = pid,
            Err(why) => {
                master.exit().await;
                return Err(ConnectFailure(format!(
                    "the master connection did not answer: {why}"
                )));
            }
        }
        Ok(master)
    }

    /// The master's process id, as `-O check` reported it.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The control socket this process speaks the mux protocol to.
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// `-O check`: the master's pid when it answers.
    async fn check(&self) -> Result<Option<u32>, String> {
        let out = self
            .control("check")
            .output()
            .await
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(text.trim().to_string());
        }
        Ok(text
            .split_once("pid=")
            .and_then(|(_, rest)| rest.split(')').next())
            .and_then(|pid| pid.parse().ok()))
    }

    /// Whether the master still serves its socket: the mux protocol's alive
    /// check, in this process.
    pub(crate) async fn is_alive(&self) -> bool {
        self.mux.check().await.is_ok()
    }

    /// A place among the sessions this master may have open at once, held
    /// for as long as one is: waits while the budget is spent.
    pub(crate) async fn session(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.sessions
            .clone()
            .acquire_owned()
            .await
            .expect("the session budget is never closed")
    }

    /// Open a session with `spawn`, once more each time the server refuses
    /// it as over its limit (`Session open refused by peer`: sshd's
    /// `MaxSessions`, which a budget below it still meets while sessions
    /// this process already let go of are being closed on the server), with
    /// a backoff of 10 ms doubling to 500 ms and jitter, until `deadline`. A
    /// refused session started nothing, so opening it again runs nothing
    /// twice.
    pub(crate) async fn open<T, F, Fut>(
        &self,
        mut spawn: F,
        deadline: std::time::Instant,
    ) -> Result<T, openssh::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, openssh::Error>>,
    {
        let mut wait = Duration::from_millis(10);
        loop {
            match spawn().await {
                Err(e) if refused_by_peer(&e) => {
                    let pause = jittered(wait);
                    if std::time::Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    tracing::debug!(
                        address = %self.address,
                        "the server refused a session over its limit; opening it again in {} ms",
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
                other => return other,
            }
        }
    }

    /// A session over the master for the remote command line `line`, whose
    /// standard streams are pipes to this process.
    pub(crate) fn command(&self, line: &str) -> openssh::OwningCommand<&openssh::Session> {
        let mut command = self.mux.raw_command(line);
        command
            .stdin(openssh::Stdio::piped())
            .stdout(openssh::Stdio::piped())
            .stderr(openssh::Stdio::piped());
        command
    }

    /// Like [`Master::command`], for a session that outlives the borrow: a
    /// long-lived worker's.
    pub(crate) fn owned_command(
        &self,
        line: &str,
    ) -> openssh::OwningCommand<std::sync::Arc<openssh::Session>> {
        let mut command = openssh::Session::arc_raw_command(self.mux.clone(), line);
        command
            .stdin(openssh::Stdio::piped())
            .stdout(openssh::Stdio::piped())
            .stderr(openssh::Stdio::piped());
        command
    }

    fn control(&self, op: &str) -> tokio::process::Command {
        let mut command = self.client.command();
        command
            .arg("-F")
            .arg(&self.config)
            .arg("-S")
            .arg(&self.socket)
            .args(["-O", op, "--"])
            .arg(&self.address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// What the master logged since it connected (its `-E` log, at the
    /// client's `LogLevel ERROR`: a lost connection, a server that stopped
    /// answering), its last lines joined; empty when it logged nothing.
    pub(crate) fn log_tail(&self) -> String {
        let text = read_log(&self.dir.join("log"));
        match text.char_indices().rev().nth(511) {
            Some((i, _)) => format!("...{}", &text[i..]),
            None => text,
        }
    }

    /// `-O exit`, and the master's files go.
    pub(crate) async fn exit(&self) {
        let _ = self.control("exit").output().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// `-O exit` without a runtime (a backend dropped as the process ends).
    pub(crate) fn exit_blocking(&self) {
        exit_socket(&self.client, &self.socket);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Ask the master behind `socket` to exit, with `client` (any OpenSSH client
/// speaks to any master).
pub(crate) fn exit_socket(client: &SshClient, socket: &Path) {
    let _ = client
        .std_command()
        .arg("-F")
        .arg("/dev/null")
        .arg("-S")
        .arg(socket)
        .args(["-O", "exit", "occ-stale"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// ssh's log of a failed connect, its lines joined.
fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The remote command line of `argv`: ssh hands the remote shell one string,
/// so each argument is quoted for it. Arguments made only of characters no
/// shell treats specially go as they are; others in single quotes, a quote
/// inside one as `'\''`. `command_line_len` (the capability's) bounds the result.
pub fn remote_command(argv: &[String]) -> String {
    let mut line = String::new();
    for (i, arg) in argv.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let plain = !arg.is_empty()
            && arg.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b'-' | b'_' | b'=' | b'/' | b',' | b'.' | b'+')
            });
        if plain {
            line.push_str(arg);
            continue;
        }
        line.push('\'');
        for c in arg.chars() {
            if c == '\'' {
                line.push_str("'\\''");
            } else {
                line.push(c);
            }
        }
        line.push('\'');
    }
    line
}

/// Whether `e` is the server refusing a session (a channel open failure the
/// master passes on), which ran nothing.
pub(crate) fn refused_by_peer(e: &openssh::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.to_string().contains("Session open refused by peer") {
            return true;
        }
        cause = c.source();
    }
    false
}

/// `wait` and up to half of it again, so that sessions refused together are
/// not all asked for again together.
pub(crate) fn jittered(wait: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let half = wait.as_micros() as u64 / 2;
    wait + Duration::from_micros(if half == 0 { 0 } else { h.finish() % half })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_session_is_asked_for_again_after_a_pause_with_jitter() {
        let wait = Duration::from_millis(10);
        let pauses: Vec<Duration> = (0..200).map(|_| jittered(wait)).collect();
        assert!(pauses.iter().all(|p| *p >= wait && *p < wait * 3 / 2));
        assert!(
            pauses.iter().any(|p| *p != pauses[0]),
            "the pauses differ, so sessions refused together are not asked for together"
        );
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn quoting_for_the_remote_shell() {
        let cases: &[(&[&str], &str)] = &[
            (&["node", "-", "eyJ2IjoxfQ=="], "node - eyJ2IjoxfQ=="),
            (
                &["/bin/sh", "-c", "echo $HOME; ls"],
                "/bin/sh -c 'echo $HOME; ls'",
            ),
            (&["a b", ""], "'a b' ''"),
            (&["it's"], "'it'\\''s'"),
            (&["!x", "`id`", "\"q\""], "'!x' '`id`' '\"q\"'"),
            (&["line\nbreak"], "'line\nbreak'"),
            (&["über"], "'über'"),
        ];
        for (argv, expected) in cases {
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            let line = remote_command(&argv);
            assert_eq!(line, *expected, "{argv:?}");
            assert!(
                line.len() <= crate::capability::ssh_exec::command_line_len(&argv),
                "{argv:?}"
            );
        }
    }

    /// Each argument comes back whole from a real shell.
    #[test]
    fn a_shell_reads_back_every_argument() {
        let argv: Vec<String> = [
            "printf",
            "%s\\n",
            "plain",
            "two words",
            "it's",
            "'",
            "$(id)",
            "a\\b",
            "",
            "*",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(remote_command(&argv))
            .output()
            .unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&out.stdout)
            .unwrap()
            .split('\n')
            .collect();
        assert_eq!(&lines[..8], &argv[2..], "{lines:?}");
    }
}
