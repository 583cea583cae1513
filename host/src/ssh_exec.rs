//! The `ssh-exec` capability: run an argument vector on a granted host.
//!
//! The grant comes from the trusted installation only: the identity and
//! known-hosts files, the connect timeout, and each host alias's address, port and
//! user. A driver names hosts by alias and never sees any of them. The grant is
//! checked again inside every exec, right before the effect, and an alias that is
//! not granted is refused with its name.
//!
//! Every connection uses the same fixed options (see [`SSH_OPTIONS`]) through a
//! private `ssh_config` file, and one multiplexed master per host in a private
//! control directory, so that an operation on a warm host costs a channel rather
//! than a handshake. Cancelling or timing out an exec kills the local client:
//! the remote side sees its session close.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openssh::{KnownHosts, Session, SessionBuilder};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::audit::ExecRecord;
use crate::bindings::occ::compute::ssh_exec::{self, ExecError, ExecOutput};
use crate::runtime::CallState;
use crate::transcript::{Recorder, Replay};

/// No single operation runs longer than this, whatever the driver asks: the
/// remote helper keeps its own deadline below it.
pub const OPERATION_BOUND: Duration = Duration::from_secs(180);
/// Stdout beyond this is refused (and the client killed): the helper writes a
/// heartbeat per second and one result line, so megabytes mean a runaway.
pub const STDOUT_CAP: usize = 4 << 20;
/// Only the end of stderr is kept: it is for diagnosis, not data.
pub const STDERR_TAIL: usize = 16 << 10;

/// The fixed client options, whatever the operator's own ssh configuration says.
pub const SSH_OPTIONS: &[(&str, &str)] = &[
    ("BatchMode", "yes"),
    ("StrictHostKeyChecking", "yes"),
    ("IdentitiesOnly", "yes"),
    ("IdentityAgent", "none"),
    ("GlobalKnownHostsFile", "/dev/null"),
    ("UpdateHostKeys", "no"),
    ("PasswordAuthentication", "no"),
    ("KbdInteractiveAuthentication", "no"),
    ("ForwardAgent", "no"),
    ("ClearAllForwardings", "yes"),
    ("ServerAliveInterval", "15"),
    ("ServerAliveCountMax", "3"),
    ("LogLevel", "ERROR"),
];

/// Where one alias points, from `configuration.hosts.<alias>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGrant {
    /// IP address or DNS name.
    pub address: String,
    /// SSH port.
    pub port: u16,
    /// Login user.
    pub user: String,
}

/// What the installation grants a driver: the trusted SSH inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshGrant {
    /// `configuration.ssh.identityFile`.
    pub identity_file: PathBuf,
    /// `configuration.ssh.knownHostsFile`.
    pub known_hosts_file: PathBuf,
    /// `configuration.ssh.connectTimeoutSeconds`.
    pub connect_timeout: Duration,
    /// `configuration.hosts`, by alias.
    pub hosts: BTreeMap<String, HostGrant>,
}

impl SshGrant {
    /// A grant of nothing: no hosts, so every exec is refused.
    pub fn none() -> SshGrant {
        SshGrant {
            identity_file: PathBuf::new(),
            known_hosts_file: PathBuf::new(),
            connect_timeout: Duration::from_secs(10),
            hosts: BTreeMap::new(),
        }
    }

    /// Read the grant from a driver configuration. Only the keys the transport
    /// needs are read here; the driver validates the whole document.
    pub fn from_configuration(cfg: &Value) -> Result<SshGrant, String> {
        let key = |path: &str| format!("drivers.compute.configuration.{path}");
        let ssh = cfg
            .get("ssh")
            .ok_or_else(|| format!("{}: missing", key("ssh")))?;
        let file = |name: &str| -> Result<PathBuf, String> {
            match ssh.get(name) {
                Some(Value::String(s)) if s.starts_with('/') => Ok(PathBuf::from(s)),
                Some(_) => Err(format!(
                    "{}: must be an absolute path",
                    key(&format!("ssh.{name}"))
                )),
                None => Err(format!("{}: missing", key(&format!("ssh.{name}")))),
            }
        };
        let identity_file = file("identityFile")?;
        let known_hosts_file = file("knownHostsFile")?;
        let connect_timeout = match ssh.get("connectTimeoutSeconds") {
            None => Duration::from_secs(10),
            Some(v) => match v.as_u64() {
                Some(n @ 1..=300) => Duration::from_secs(n),
                _ => {
                    return Err(format!(
                        "{}: must be a whole number of seconds from 1 to 300",
                        key("ssh.connectTimeoutSeconds")
                    ));
                }
            },
        };
        let mut hosts = BTreeMap::new();
        let entries = cfg.get("hosts").and_then(Value::as_object).ok_or_else(|| {
            format!(
                "{}: must be a mapping of Namespace names to hosts",
                key("hosts")
            )
        })?;
        for (alias, h) in entries {
            let at = |k: &str| key(&format!("hosts.{alias}.{k}"));
            let address = h
                .get("address")
                .and_then(Value::as_str)
                .filter(|a| {
                    !a.is_empty() && !a.starts_with('-') && !a.contains(char::is_whitespace)
                })
                .ok_or_else(|| format!("{}: must be an IP address or host name", at("address")))?;
            let port = match h.get("port") {
                None => 22,
                Some(p) => p
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{}: must be a port from 1 to 65535", at("port")))?,
            };
            let user = h
                .get("user")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{}: missing", at("user")))?;
            hosts.insert(
                alias.clone(),
                HostGrant {
                    address: address.to_string(),
                    port,
                    user: user.to_string(),
                },
            );
        }
        Ok(SshGrant {
            identity_file,
            known_hosts_file,
            connect_timeout,
            hosts,
        })
    }

    /// Preflight of the host's own inputs: both files exist and are readable, and
    /// the identity is not readable by other users (ssh itself would refuse it).
    pub fn verify_local_files(&self) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        for (what, path) in [
            ("ssh.identityFile", &self.identity_file),
            ("ssh.knownHostsFile", &self.known_hosts_file),
        ] {
            let meta =
                std::fs::metadata(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
            if !meta.is_file() {
                return Err(format!("{what} {}: not a regular file", path.display()));
            }
            std::fs::File::open(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
            if what == "ssh.identityFile" && meta.permissions().mode() & 0o077 != 0 {
                return Err(format!(
                    "{what} {}: mode {:o} lets other users read the private key; chmod 600 it",
                    path.display(),
                    meta.permissions().mode() & 0o777
                ));
            }
        }
        Ok(())
    }
}

/// One host's master connection, created on first use and replaced when it dies.
type SessionSlot = Arc<tokio::sync::Mutex<Option<Arc<Session>>>>;

/// Connections to the granted hosts, shared by every call of one driver.
pub struct SshTransport {
    grant: SshGrant,
    control_dir: tempfile::TempDir,
    config_file: PathBuf,
    sessions: tokio::sync::Mutex<HashMap<String, SessionSlot>>,
    recorder: Option<Recorder>,
    replay: Option<Replay>,
}

/// Where execs go: the hosts, the hosts with a recording, or a recording alone.
#[derive(Debug, Clone, Default)]
pub enum SshMode {
    /// Run on the granted hosts.
    #[default]
    Live,
    /// Run on the granted hosts and append each exec to this file.
    Record(PathBuf),
    /// Answer each exec from this recording; connect to nothing.
    Replay(PathBuf),
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport")
            .field("hosts", &self.grant.hosts.keys())
            .finish()
    }
}

/// Render the private client configuration: the fixed options plus the grant's
/// files and timeout. `Host *` applies them whatever the destination.
pub fn render_ssh_config(grant: &SshGrant) -> String {
    let mut out = String::from(
        "# Written by occ-driver-host for one driver; removed when it exits.\nHost *\n",
    );
    for (k, v) in SSH_OPTIONS {
        out.push_str(&format!("  {k} {v}\n"));
    }
    out.push_str(&format!(
        "  IdentityFile \"{}\"\n",
        grant.identity_file.display()
    ));
    out.push_str(&format!(
        "  UserKnownHostsFile \"{}\"\n",
        grant.known_hosts_file.display()
    ));
    out.push_str(&format!(
        "  ConnectTimeout {}\n",
        grant.connect_timeout.as_secs()
    ));
    out
}

impl SshTransport {
    /// Prepare a private control directory (0700) and client configuration.
    pub fn new(grant: SshGrant) -> std::io::Result<SshTransport> {
        let control_dir = tempfile::Builder::new().prefix("occ-ssh-").tempdir()?;
        // tempfile creates the directory 0700 already; the config is private too.
        let config_file = control_dir.path().join("ssh_config");
        std::fs::write(&config_file, render_ssh_config(&grant))?;
        Ok(SshTransport {
            grant,
            control_dir,
            config_file,
            sessions: Default::default(),
            recorder: None,
            replay: None,
        })
    }

    /// A transport in `mode` (see [`SshMode`]).
    pub fn with_mode(grant: SshGrant, mode: &SshMode) -> Result<SshTransport, String> {
        let mut t = SshTransport::new(grant).map_err(|e| format!("cannot prepare ssh: {e}"))?;
        match mode {
            SshMode::Live => {}
            SshMode::Record(path) => {
                t.recorder = Some(
                    Recorder::create(path)
                        .map_err(|e| format!("ssh recording {}: {e}", path.display()))?,
                );
            }
            SshMode::Replay(path) => t.replay = Some(Replay::load(path)?),
        }
        Ok(t)
    }

    /// Whether execs are answered from a recording.
    pub fn is_replay(&self) -> bool {
        self.replay.is_some()
    }

    /// The grant this transport serves.
    pub fn grant(&self) -> &SshGrant {
        &self.grant
    }

    async fn session(&self, alias: &str, host: &HostGrant) -> Result<Arc<Session>, ExecError> {
        let slot = {
            let mut sessions = self.sessions.lock().await;
            sessions.entry(alias.to_string()).or_default().clone()
        };
        // One connect per host at a time; other callers wait for it and share it.
        let mut slot = slot.lock().await;
        if let Some(session) = slot.as_ref() {
            if session.check().await.is_ok() {
                return Ok(session.clone());
            }
            tracing::debug!(host = alias, "ssh master is gone; reconnecting");
        }
        let mut builder = SessionBuilder::default();
        builder
            .user(host.user.clone())
            .port(host.port)
            .keyfile(&self.grant.identity_file)
            .known_hosts_check(KnownHosts::Strict)
            .user_known_hosts_file(&self.grant.known_hosts_file)
            .connect_timeout(self.grant.connect_timeout)
            .config_file(&self.config_file)
            .control_directory(self.control_dir.path());
        let session = builder
            .connect(&host.address)
            .await
            .map_err(|e| connect_error(alias, host, &e))?;
        let session = Arc::new(session);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Run `argv` on `alias`. `on_line` sees each stdout line as it arrives
    /// (progress); the whole output is returned at the end.
    pub async fn exec(
        &self,
        alias: &str,
        argv: &[String],
        stdin: &[u8],
        timeout: Duration,
        on_line: &(dyn Fn(&str, &str) + Send + Sync),
    ) -> Result<ExecOutput, ExecError> {
        // The grant is checked here, at the effect, not only when the driver loaded.
        let host = self
            .grant
            .hosts
            .get(alias)
            .ok_or_else(|| ExecError::UnknownHost(alias.to_string()))?;
        if let Some(replay) = &self.replay {
            return replay.answer(alias, argv, stdin);
        }
        let result = self
            .exec_live(alias, host, argv, stdin, timeout, on_line)
            .await;
        if let Some(recorder) = &self.recorder {
            recorder.record(alias, argv, stdin, &result);
        }
        result
    }

    async fn exec_live(
        &self,
        alias: &str,
        host: &HostGrant,
        argv: &[String],
        stdin: &[u8],
        timeout: Duration,
        on_line: &(dyn Fn(&str, &str) + Send + Sync),
    ) -> Result<ExecOutput, ExecError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| ExecError::Io("empty argument vector".into()))?;
        let bound = timeout.min(OPERATION_BOUND);
        let run = async {
            let session = self.session(alias, host).await?;
            let mut command = session.command(program.as_str());
            command
                .args(args.iter().map(String::as_str))
                .stdin(openssh::Stdio::piped())
                .stdout(openssh::Stdio::piped())
                .stderr(openssh::Stdio::piped());
            let mut child = command
                .spawn()
                .await
                .map_err(|e| ExecError::Io(error_text(&e)))?;
            let mut child_stdin = child
                .stdin()
                .take()
                .ok_or_else(|| ExecError::Io("no stdin".into()))?;
            let child_stdout = child
                .stdout()
                .take()
                .ok_or_else(|| ExecError::Io("no stdout".into()))?;
            let mut child_stderr = child
                .stderr()
                .take()
                .ok_or_else(|| ExecError::Io("no stderr".into()))?;
            let input = stdin.to_vec();
            let feed = async move {
                // A remote command may exit without reading all of its input; that
                // is its business, so a broken pipe here is not an error.
                let _ = child_stdin.write_all(&input).await;
                let _ = child_stdin.shutdown().await;
            };
            let read_out = async move {
                let mut reader = BufReader::new(child_stdout);
                let mut out = Vec::new();
                let mut line = Vec::new();
                loop {
                    line.clear();
                    let n = reader
                        .read_until(b'\n', &mut line)
                        .await
                        .map_err(|e| ExecError::Io(e.to_string()))?;
                    if n == 0 {
                        break;
                    }
                    if out.len() + n > STDOUT_CAP {
                        return Err(ExecError::OutputTooLarge(STDOUT_CAP as u64));
                    }
                    out.extend_from_slice(&line);
                    on_line(alias, String::from_utf8_lossy(&line).trim_end());
                }
                Ok(out)
            };
            let read_err = async move {
                let mut tail = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    match child_stderr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            tail.extend_from_slice(&buf[..n]);
                            if tail.len() > STDERR_TAIL {
                                tail.drain(..tail.len() - STDERR_TAIL);
                            }
                        }
                    }
                }
                tail
            };
            let ((), stdout, stderr_tail) = tokio::join!(feed, read_out, read_err);
            let stdout = stdout?;
            let status = child
                .wait()
                .await
                .map_err(|e| ExecError::Io(error_text(&e)))?;
            Ok(ExecOutput {
                exit_status: status.code(),
                stdout,
                stderr_tail,
            })
        };
        match tokio::time::timeout(bound, run).await {
            Ok(result) => result,
            // Dropping `run` dropped the child: the local client is killed and the
            // remote session closes under the helper.
            Err(_) => Err(ExecError::Timeout),
        }
    }
}

fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn connect_error(alias: &str, host: &HostGrant, e: &openssh::Error) -> ExecError {
    let text = error_text(e);
    let at = format!("{alias} ({}@{}:{})", host.user, host.address, host.port);
    if text.contains("Host key verification failed")
        || text.contains("HOST IDENTIFICATION HAS CHANGED")
        || text.contains("host key")
    {
        ExecError::HostKey(format!(
            "{at}: its host key is not the one in the known-hosts file ({text}); never disable host-key checking to bypass this"
        ))
    } else {
        ExecError::Connect(format!("{at}: {text}"))
    }
}

/// Runs an exec for the guest: checks the grant, records the audit line, keeps
/// the time out of the CPU budget.
impl ssh_exec::Host for CallState {
    async fn hosts(&mut self) -> Vec<String> {
        self.ctx.transport.grant().hosts.keys().cloned().collect()
    }

    async fn exec(
        &mut self,
        host: String,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError> {
        let ctx = self.ctx.clone();
        let mut record = ExecRecord::begin(&ctx, &host, &argv, &stdin);
        let timeout = Duration::from_millis(timeout_ms.into());
        let result = self
            .outside_guest(
                ctx.transport
                    .exec(&host, &argv, &stdin, timeout, &*ctx.progress),
            )
            .await;
        record.finish(&result);
        result
    }
}

/// SHA-256 of `bytes`, hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    crate::cache::hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> Value {
        json!({
            "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts", "connectTimeoutSeconds": 10},
            "hosts": {"stable": {"address": "203.0.113.10", "port": 22, "user": "root", "nodePath": "/usr/bin/node"}},
        })
    }

    #[test]
    fn reads_the_grant_from_the_spec_example() {
        let g = SshGrant::from_configuration(&cfg()).unwrap();
        assert_eq!(
            g.identity_file,
            PathBuf::from("/etc/openclaw/ssh/id_ed25519")
        );
        assert_eq!(g.connect_timeout, Duration::from_secs(10));
        assert_eq!(
            g.hosts["stable"],
            HostGrant {
                address: "203.0.113.10".into(),
                port: 22,
                user: "root".into()
            }
        );
    }

    #[test]
    fn grant_refusals_name_the_key() {
        type Mutation<'a> = &'a dyn Fn(&mut Value);
        let cases: [(Mutation, &str); 6] = [
            (
                &|c| c["ssh"]["identityFile"] = json!("relative/key"),
                "configuration.ssh.identityFile: must be an absolute path",
            ),
            (
                &|c| {
                    c["ssh"].as_object_mut().unwrap().remove("knownHostsFile");
                },
                "configuration.ssh.knownHostsFile: missing",
            ),
            (
                &|c| c["ssh"]["connectTimeoutSeconds"] = json!(0),
                "configuration.ssh.connectTimeoutSeconds",
            ),
            (
                &|c| c["hosts"]["stable"]["port"] = json!(70000),
                "configuration.hosts.stable.port",
            ),
            (
                &|c| c["hosts"]["stable"]["address"] = json!("-oProxyCommand=x"),
                "configuration.hosts.stable.address",
            ),
            (
                &|c| c["hosts"] = json!([]),
                "configuration.hosts: must be a mapping",
            ),
        ];
        for (mutate, expected) in cases {
            let mut c = cfg();
            mutate(&mut c);
            let err = SshGrant::from_configuration(&c).unwrap_err();
            assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        }
    }

    #[test]
    fn client_config_fixes_every_option() {
        let text = render_ssh_config(&SshGrant::from_configuration(&cfg()).unwrap());
        for needle in [
            "BatchMode yes",
            "StrictHostKeyChecking yes",
            "IdentitiesOnly yes",
            "LogLevel ERROR",
            "IdentityFile \"/etc/openclaw/ssh/id_ed25519\"",
            "UserKnownHostsFile \"/etc/openclaw/ssh/known_hosts\"",
            "ConnectTimeout 10",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
    }
}
