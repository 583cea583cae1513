//! One OpenSSH control master and the execs over it, all run with the grant's
//! client ([`super::client`]):
//!
//! - the master: `<client> -F <config> -E <log> -S <socket> -M -f -N -o
//!   ControlPersist=<idle>s -p <port> -l <user> -- <address>`; the client
//!   forks into the background once authenticated, and exits on its own after
//!   the idle time should this process die without closing it;
//! - each exec: `<client> -F <config> -E <exec log> -S <socket> -o
//!   ControlMaster=no -o ProxyCommand=/bin/false -T ... -- <address> <line>`,
//!   a mux client that hands its standard streams to the master. Should the
//!   master be gone, the client would open a connection of its own instead:
//!   the proxy that exits at once makes that fail, so no exec ever connects
//!   but through a master this host made (with its backoff and credential
//!   window);
//! - `-O check` after connecting, `-O exit` to close.
//!
//! ssh's own messages go to the `-E` logs, never into the remote command's
//! stderr. An exec's log is read at debug level for one line: whether the
//! master reported the remote command's exit status (then it is the status,
//! 255 included) or not (the command ended by a signal, or the connection was
//! lost: the master's socket tells which).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::client::SshClient;
use super::grant::HostGrant;

/// One master connection's files in the private control directory: the
/// socket, the master's log, and each exec's log while it runs.
pub(crate) struct Master {
    client: SshClient,
    config: PathBuf,
    dir: PathBuf,
    socket: PathBuf,
    address: String,
    pid: Option<u32>,
    execs: AtomicU64,
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

/// What an exec's mux client says about the remote command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The master reported this exit status.
    Status(i32),
    /// The session closed without one.
    NoStatus,
    /// ssh itself failed (its log says why).
    Failed(String),
}

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
            .arg(format!("ControlPersist={}s", idle.as_secs().max(1)))
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
            socket,
            address: host.address.clone(),
            pid: None,
            execs: AtomicU64::new(0),
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

    /// Whether the master still serves its socket: a connect only, no process.
    pub(crate) async fn is_alive(&self) -> bool {
        tokio::net::UnixStream::connect(&self.socket).await.is_ok()
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

    /// The mux client for one exec of `argv`, with the log it writes; the
    /// caller removes the log when the exec ends ([`Master::ending`]).
    pub(crate) fn exec(&self, argv: &[String]) -> (tokio::process::Command, PathBuf) {
        let n = self.execs.fetch_add(1, Ordering::Relaxed);
        let log = self.dir.join(format!("x{n}.log"));
        let mut command = self.client.command();
        command
            .arg("-F")
            .arg(&self.config)
            .arg("-E")
            .arg(&log)
            .arg("-S")
            .arg(&self.socket)
            .args([
                "-o",
                "ControlMaster=no",
                "-o",
                "ProxyCommand=/bin/false",
                // The one line read back (`Received exit status from master`)
                // is logged at this level; nothing of it reaches the caller.
                "-o",
                "LogLevel=DEBUG2",
                "-T",
                "--",
            ])
            .arg(&self.address)
            .arg(remote_command(argv))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        (command, log)
    }

    /// What the exec that wrote `log` ended with, the log removed.
    pub(crate) async fn ending(&self, log: &Path) -> Ending {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let _ = std::fs::remove_file(log);
        match ending_of(&text) {
            Ending::NoStatus if !self.is_alive().await => {
                Ending::Failed("the master connection is gone".into())
            }
            ending => ending,
        }
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

/// An exec's log, read: the exit status the master reported; none reported
/// (the mux client saw its session end without one); or an error ssh logged.
fn ending_of(log: &str) -> Ending {
    let mut errors = Vec::new();
    for line in log.lines() {
        if let Some(status) = line
            .strip_prefix("debug2: Received exit status from master ")
            .and_then(|s| s.trim().parse().ok())
        {
            return Ending::Status(status);
        }
        if !line.starts_with("debug") && !line.trim().is_empty() {
            errors.push(line.trim());
        }
    }
    if errors.is_empty() {
        Ending::NoStatus
    } else {
        Ending::Failed(errors.join("; "))
    }
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
/// inside one as `'\''`. [`super::command_line_len`] bounds the result.
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

#[cfg(test)]
mod tests {
    use super::*;

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
                line.len() <= super::super::command_line_len(&argv),
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

    #[test]
    fn an_exec_log_read() {
        let ok = "debug1: Reading configuration data cfg\ndebug2: mux_client_hello_exchange: master version 4\n\
                  debug1: mux_client_request_session: master session id: 2\ndebug2: Received exit status from master 255\n";
        assert_eq!(ending_of(ok), Ending::Status(255));
        let signal = "debug2: mux_client_hello_exchange: master version 4\ndebug2: Control master terminated unexpectedly\n";
        assert_eq!(ending_of(signal), Ending::NoStatus);
        let refused = "debug2: mux_client_hello_exchange: master version 4\n\
                       mux_client_request_session: session request failed: Session open refused by peer\n";
        assert_eq!(
            ending_of(refused),
            Ending::Failed(
                "mux_client_request_session: session request failed: Session open refused by peer"
                    .into()
            )
        );
        let gone = "debug1: Control socket \"m\" does not exist\ndebug1: Executing proxy command: exec /bin/false\n\
                    kex_exchange_identification: Connection closed by remote host\nConnection closed by UNKNOWN port 65535\n";
        assert!(
            matches!(ending_of(gone), Ending::Failed(m) if m.contains("kex_exchange_identification"))
        );
    }
}
