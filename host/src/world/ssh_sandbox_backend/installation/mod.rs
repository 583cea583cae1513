//! The sandbox backend's installation: `drivers.sandbox` of the Installation
//! document, and the grants the host reads from it.
//!
//! ```yaml
//! drivers:
//!   sandbox:
//!     id: occ-ssh                        # optional, the default
//!     component: /opt/occ/guest_ssh_sandbox.wasm
//!     approvedScripts:                   # name: SHA-256, as `inspect` prints them
//!       preflight: <sha256>
//!       workspace: <sha256>
//!       exec: <sha256>
//!     localWorkspaces: [/home/me/.openclaw]   # where seeds may be read from
//!     maxRunSeconds: 86400               # optional: the longest one remote run
//!                                        # (a command, a seed) may last
//!     workspaceWorker: true              # optional, the default: one long-lived
//!                                        # worker per target answers every scope's
//!                                        # file operations and commands; false: a
//!                                        # run each; {requestSeconds: 30}: its
//!                                        # bound of one file operation
//!     maxSessions: 8                     # optional: sessions the connection to
//!                                        # the target keeps open at once; more
//!                                        # work waits (sshd ships MaxSessions 10)
//!     reconnectSeconds: 30               # optional: how long an operation keeps
//!                                        # connecting to a target that refuses or
//!                                        # drops connections (backoff 0.25 s,
//!                                        # doubling, at most 5 s); 0: fail at once
//!     configuration:                     # OpenClaw's block, verbatim
//!       agents:
//!         defaults:
//!           sandbox:
//!             mode: all
//!             backend: ssh
//!             scope: session
//!             workspaceAccess: rw
//!             ssh: { target: user@gateway-host:22, identityFile: ~/.ssh/id_ed25519, ... }
//! ```
//!
//! The component validates the whole configuration (unknown keys fail there,
//! naming the key path). The host reads from it only what it grants and owns:
//! the target, the credentials and host key options
//! ([`sandbox_ssh_grant`]). `*Data` credentials (inline text, or a SecretRef
//! `{source: env, provider: default, id: NAME}` resolved from the host's
//! environment) win over `*File`, are written by the host to private files,
//! and are replaced in the configuration the component sees
//! ([`redacted_configuration`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_ssh_target::layout::{Settings, SettingsError};
use serde_json::{Map, Value};

use crate::capability::ssh_exec::{
    Credential, ExecBounds, ExecPolicy, GrantError, HostGrant, HostKeys, SshClient, SshGrant,
};
use crate::error::LoadError;
use crate::world::selection;
use occ_ssh_target::digest::Sha256;

/// Keys the host accepts under `drivers.sandbox`.
const SANDBOX_KEYS: &[&str] = &[
    "id",
    "component",
    "approvedScripts",
    "localWorkspaces",
    "maxRunSeconds",
    "workspaceWorker",
    "maxSessions",
    "reconnectSeconds",
    "configuration",
];

/// `drivers.sandbox.reconnectSeconds` when absent: long enough for sshd to
/// restart or a link to come back, short against OpenClaw's own tool
/// timeouts.
pub const DEFAULT_RECONNECT_SECONDS: u64 = 30;

/// The largest `reconnectSeconds`.
pub const MAX_RECONNECT_SECONDS: u64 = 3600;

/// The first wait after a failed connect; each failure after it doubles the
/// wait, up to [`RECONNECT_MAX_DELAY`].
pub const RECONNECT_FIRST_DELAY: Duration = Duration::from_millis(250);

/// The longest wait between two connects.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(5);

/// `drivers.sandbox.workspaceWorker.requestSeconds` when absent: a file
/// operation's input and output are bounded (8 MiB), so one that takes
/// longer than this is a worker that hangs.
pub const DEFAULT_WORKER_REQUEST_SECONDS: u64 = 30;

/// The largest `workspaceWorker.requestSeconds`.
pub const MAX_WORKER_REQUEST_SECONDS: u64 = 3600;

/// `drivers.sandbox.maxRunSeconds` when absent: a day. OpenClaw ends a command
/// at its own time limit by killing the process it spawned (the relay), which
/// ends the remote command; this bound is only the host's backstop, for a
/// command OpenClaw asked to run without one. An operator raises it here.
pub const DEFAULT_MAX_RUN_SECONDS: u64 = 24 * 60 * 60;

/// The largest `maxRunSeconds`: an exec's limit crosses the `ssh-exec`
/// interface as a `u32` of milliseconds (about 49 days).
pub const MAX_RUN_SECONDS: u64 = u32::MAX as u64 / 1000;

/// `drivers.sandbox.id` when absent.
pub const DEFAULT_ID: &str = "occ-ssh";

/// The alias the target is granted under: the component names it so.
pub use occ_ssh_target::programs::TARGET_ALIAS;

/// What the component sees in place of inline key material.
pub const HELD_BY_HOST: &str = "occ-host-held";

/// A parsed `drivers.sandbox` selection.
#[derive(Debug, Clone)]
pub struct SandboxInstallation {
    /// Where it was read from, for messages.
    pub path: PathBuf,
    /// `drivers.sandbox.id`.
    pub id: String,
    /// The component file, resolved against the installation's directory.
    pub component: PathBuf,
    /// `approvedScripts`: script name to every SHA-256 approved for it (a
    /// hash, or a list of them while two releases roll out).
    pub approved_scripts: BTreeMap<String, Vec<Sha256>>,
    /// `localWorkspaces`.
    pub local_workspaces: Vec<PathBuf>,
    /// `maxRunSeconds`: the host's bound of one remote run.
    pub max_run: Duration,
    /// `workspaceWorker`: the bound of one file operation on the target's long-lived
    /// workspace worker; none when every operation is a run of its own.
    pub worker: Option<Duration>,
    /// `maxSessions`: sessions the connection to the target keeps open at
    /// once (the worker's among them).
    pub max_sessions: usize,
    /// `reconnectSeconds`: how long an operation keeps connecting to a
    /// target that refuses or drops connections.
    pub reconnect: Duration,
    /// `configuration`, as written (with any inline key material).
    pub configuration: Value,
}

impl SandboxInstallation {
    /// Read `drivers.sandbox` of the document at `path`; `component` (the
    /// command line's) replaces the document's.
    pub fn load(path: &Path, component: Option<&Path>) -> Result<SandboxInstallation, LoadError> {
        let doc = crate::installation::read_document(path)?;
        SandboxInstallation::from_document(path, &doc, component)
    }

    /// Parse `drivers.sandbox` of an already read document.
    pub fn from_document(
        path: &Path,
        doc: &Value,
        component_override: Option<&Path>,
    ) -> Result<SandboxInstallation, LoadError> {
        let err = |message: String| LoadError::Installation {
            path: path.to_path_buf(),
            message,
        };
        let sandbox = selection::section(
            path,
            doc,
            "sandbox",
            "select a sandbox backend",
            SANDBOX_KEYS,
        )?;
        let id = match sandbox.get("id") {
            None => DEFAULT_ID.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => return Err(err("drivers.sandbox.id: must be a nonempty string".into())),
        };
        let component = selection::component(
            path,
            sandbox,
            "sandbox",
            component_override,
            "drivers.sandbox.component: missing; name the sandbox component (.wasm) here or with --component",
        )?;
        let approved_scripts = match sandbox.get("approvedScripts") {
            None => BTreeMap::new(),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(name, shas)| {
                    let listed = match shas {
                        Value::Array(items) if !items.is_empty() => items.iter().collect(),
                        Value::Array(_) => Vec::new(),
                        one => vec![one],
                    };
                    let parsed: Option<Vec<Sha256>> = listed
                        .iter()
                        .map(|sha| sha.as_str().and_then(Sha256::parse))
                        .collect();
                    match parsed {
                        Some(hashes) if !hashes.is_empty() => Ok((name.clone(), hashes)),
                        _ => Err(err(format!(
                            "drivers.sandbox.approvedScripts.{name}: must be a SHA-256 in lowercase hex (64 characters), as `occ-driver-host inspect` prints it, or a list of them (the old and the new release's while both roll out)"
                        ))),
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err("drivers.sandbox.approvedScripts: must map script names to SHA-256 hashes".into())),
        };
        let local_workspaces = match sandbox.get("localWorkspaces") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_str() {
                    Some(s) if !s.is_empty() => Ok(selection::relative_to(path, &expand_home(s))),
                    _ => Err(err(format!(
                        "drivers.sandbox.localWorkspaces[{i}]: must be a directory path"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(err(
                    "drivers.sandbox.localWorkspaces: must be a list of directories".into(),
                ));
            }
        };
        let max_run = match sandbox.get("maxRunSeconds") {
            None => Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
            Some(v) => match v.as_u64() {
                Some(n) if (1..=MAX_RUN_SECONDS).contains(&n) => Duration::from_secs(n),
                _ => {
                    return Err(err(format!(
                        "drivers.sandbox.maxRunSeconds: must be a whole number of seconds from 1 to {MAX_RUN_SECONDS}, not {v}"
                    )));
                }
            },
        };
        let worker = worker_setting(sandbox.get("workspaceWorker")).map_err(err)?;
        let max_sessions = crate::capability::ssh_exec::grant::max_sessions_setting(
            sandbox.get("maxSessions"),
            "drivers.sandbox.maxSessions",
        )
        .map_err(err)?;
        let reconnect = match sandbox.get("reconnectSeconds") {
            None => Duration::from_secs(DEFAULT_RECONNECT_SECONDS),
            Some(v) => match v.as_u64() {
                Some(n) if n <= MAX_RECONNECT_SECONDS => Duration::from_secs(n),
                _ => {
                    return Err(err(format!(
                        "drivers.sandbox.reconnectSeconds: must be a whole number of seconds from 0 to {MAX_RECONNECT_SECONDS}, not {v}"
                    )));
                }
            },
        };
        let configuration = selection::configuration(
            path,
            sandbox,
            "sandbox",
            "drivers.sandbox.configuration: missing; put OpenClaw's agents.defaults.sandbox block here",
        )?;
        Ok(SandboxInstallation {
            path: path.to_path_buf(),
            id,
            component,
            approved_scripts,
            local_workspaces,
            max_run,
            worker,
            max_sessions,
            reconnect,
            configuration,
        })
    }
}

/// `drivers.sandbox.workspaceWorker`: `true` (or absent), `false`, or
/// `{requestSeconds: n}`.
fn worker_setting(value: Option<&Value>) -> Result<Option<Duration>, String> {
    let default = Duration::from_secs(DEFAULT_WORKER_REQUEST_SECONDS);
    match value {
        None | Some(Value::Bool(true)) => Ok(Some(default)),
        Some(Value::Bool(false)) => Ok(None),
        Some(Value::Object(m)) => {
            if let Some(unknown) = m.keys().find(|k| k.as_str() != "requestSeconds") {
                return Err(format!(
                    "drivers.sandbox.workspaceWorker.{unknown}: unknown key (expected requestSeconds)"
                ));
            }
            match m.get("requestSeconds") {
                None => Ok(Some(default)),
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=MAX_WORKER_REQUEST_SECONDS).contains(&n) => {
                        Ok(Some(Duration::from_secs(n)))
                    }
                    _ => Err(format!(
                        "drivers.sandbox.workspaceWorker.requestSeconds: must be a whole number of seconds \
                         from 1 to {MAX_WORKER_REQUEST_SECONDS}, not {v}"
                    )),
                },
            }
        }
        Some(v) => Err(format!(
            "drivers.sandbox.workspaceWorker: must be true, false or {{requestSeconds: n}}, not {v}"
        )),
    }
}

/// `~` and `~/...` against `$HOME`, as OpenClaw resolves user paths.
pub fn expand_home(path: &str) -> String {
    let home = || std::env::var("HOME").ok().filter(|h| !h.is_empty());
    match path.strip_prefix('~') {
        Some("") => home().unwrap_or_else(|| path.to_string()),
        Some(rest) if rest.starts_with('/') => {
            home().map_or_else(|| path.to_string(), |h| format!("{h}{rest}"))
        }
        _ => path.to_string(),
    }
}

/// The sandbox configuration object: `agents.defaults.sandbox`.
fn sandbox_block(configuration: &Value) -> Option<&Map<String, Value>> {
    configuration
        .pointer("/agents/defaults/sandbox")?
        .as_object()
}

/// What the envelope of every script run carries from the configuration
/// (`ssh.workspaceRoot`, `scope`, `workspaceAccess`), read by the rules the
/// component reads them by; the reason when they are not usable.
pub fn sandbox_settings(configuration: &Value) -> Result<Settings, SandboxSettingsError> {
    let block = sandbox_block(configuration).ok_or(SandboxSettingsError::Missing)?;
    Settings::from_sandbox(block).map_err(SandboxSettingsError::Invalid)
}

/// Why the configuration gives the envelope no settings
/// ([`sandbox_settings`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxSettingsError {
    /// There is no `agents.defaults.sandbox` object.
    #[error("agents.defaults.sandbox: required")]
    Missing,
    /// A setting under it is not one the layout can use (it names the key).
    #[error("{0}")]
    Invalid(SettingsError),
}

const SSH: &str = "agents.defaults.sandbox.ssh";

fn err(key: &str, reason: impl Into<String>) -> GrantError {
    GrantError {
        path: format!("{SSH}.{key}"),
        reason: reason.into(),
    }
}

/// Bounds of the sandbox world's execs. A file crosses the component whole
/// (at most 8 MiB, the component's own bound), so stdin and collected stdout
/// allow that and a little framing; the remote shell takes the whole command
/// line as one argument, which Linux caps at 128 KiB, so the argument bound
/// stays below it; one run lasts at most `max_run` (`maxRunSeconds`).
pub fn sandbox_bounds(max_run: Duration) -> ExecBounds {
    ExecBounds {
        operation: max_run,
        stdout_cap: (8 << 20) + (64 << 10),
        stderr_tail: 64 << 10,
        max_args: 24,
        max_argv_bytes: 112 << 10,
        max_stdin_bytes: (8 << 20) + (64 << 10),
        connect_backoff: RECONNECT_MAX_DELAY,
        reconnect_first_delay: RECONNECT_FIRST_DELAY,
        reconnect_budget: Duration::from_secs(DEFAULT_RECONNECT_SECONDS),
        idle_master: Duration::from_secs(300),
        max_sessions: crate::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
    }
}

/// One credential: `<item>Data` (inline text or an env SecretRef) wins over
/// `<item>File` (an existing local file).
fn credential(ssh: &Map<String, Value>, item: &str) -> Result<Option<Credential>, GrantError> {
    let data_key = format!("{item}Data");
    let file_key = format!("{item}File");
    match ssh.get(&data_key) {
        None => {}
        Some(Value::String(text)) if !text.trim().is_empty() => {
            return Ok(Some(Credential::Inline(text.clone())));
        }
        Some(Value::String(_)) => return Err(err(&data_key, "must not be empty")),
        Some(Value::Object(r)) => {
            let source = r.get("source").and_then(Value::as_str);
            let id = r
                .get("id")
                .and_then(Value::as_str)
                .filter(|i| !i.is_empty());
            return match (source, id) {
                (Some("env"), Some(name)) => match std::env::var(name) {
                    Ok(text) if !text.trim().is_empty() => Ok(Some(Credential::Inline(text))),
                    _ => Err(err(
                        &data_key,
                        format!(
                            "the SecretRef names environment variable {name}, which the host's environment does not set"
                        ),
                    )),
                },
                (Some(source), _) if source != "env" => Err(err(
                    &data_key,
                    format!(
                        "SecretRef source {source:?} is resolved by OpenClaw's secrets runtime; pass the resolved text, or use source \"env\""
                    ),
                )),
                _ => Err(err(&data_key, "a SecretRef needs source and id")),
            };
        }
        Some(_) => return Err(err(&data_key, "must be a string or a SecretRef")),
    }
    match ssh.get(&file_key) {
        None => Ok(None),
        Some(Value::String(p)) if !p.trim().is_empty() => {
            let path = PathBuf::from(expand_home(p.trim()));
            let meta = std::fs::metadata(&path)
                .map_err(|e| err(&file_key, format!("{}: {e}", path.display())))?;
            if !meta.is_file() {
                return Err(err(
                    &file_key,
                    format!("{}: not a regular file", path.display()),
                ));
            }
            std::fs::File::open(&path)
                .map_err(|e| err(&file_key, format!("{}: {e}", path.display())))?;
            Ok(Some(Credential::File(path)))
        }
        Some(_) => Err(err(&file_key, "must be a path")),
    }
}

fn flag(ssh: &Map<String, Value>, key: &str) -> Result<bool, GrantError> {
    match ssh.get(key) {
        None => Ok(true),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(key, "must be true or false")),
    }
}

/// `ssh.command`: `ssh` from `PATH`, or the OpenSSH client at the path it
/// names, checked here ([`SshClient::verify`]) before anything connects. The
/// host runs what this returns; the component only ever names the target's
/// alias, so it cannot make the host run another program.
fn client(ssh: &Map<String, Value>) -> Result<SshClient, GrantError> {
    let value = match ssh.get("command") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(err("command", "must be a string")),
    };
    match occ_ssh_target::client::parse_command(value).map_err(|why| err("command", why))? {
        occ_ssh_target::client::Command::Default => Ok(SshClient::system()),
        occ_ssh_target::client::Command::Path(path) => {
            SshClient::verify(&path).map_err(|why| err("command", why.to_string()))
        }
    }
}

/// Read the SSH grant of the sandbox world from its configuration: the target
/// under [`TARGET_ALIAS`], the client, the credentials, host key options, the
/// approved scripts and the sandbox bounds. The target follows the
/// component's rules (a test runs both over the same cases).
pub fn sandbox_ssh_grant(
    configuration: &Value,
    approved: &BTreeMap<String, Vec<Sha256>>,
    max_run: Duration,
) -> Result<SshGrant, GrantError> {
    let ssh = sandbox_block(configuration)
        .and_then(|s| s.get("ssh"))
        .and_then(Value::as_object)
        .ok_or_else(|| GrantError {
            path: SSH.into(),
            reason: "required: the target and its credentials".into(),
        })?;
    let target = ssh
        .get("target")
        .and_then(Value::as_str)
        .ok_or_else(|| err("target", "required: user@host[:port]"))?;
    let occ_ssh_target::Target {
        user,
        host: address,
        port,
    } = occ_ssh_target::parse(target).map_err(|why| err("target", why))?;
    Ok(SshGrant {
        client: client(ssh)?,
        identity: credential(ssh, "identity")?,
        certificate: credential(ssh, "certificate")?,
        known_hosts: credential(ssh, "knownHosts")?,
        host_keys: HostKeys {
            strict: flag(ssh, "strictHostKeyChecking")?,
            update: flag(ssh, "updateHostKeys")?,
        },
        connect_timeout: Duration::from_secs(10),
        hosts: BTreeMap::from([(
            TARGET_ALIAS.to_string(),
            HostGrant {
                address,
                port,
                user,
                node_path: String::new(),
            },
        )]),
        policy: ExecPolicy::PinnedScripts {
            approved: approved.clone(),
        },
        bounds: sandbox_bounds(max_run),
    })
}

/// The configuration as the component sees it: each inline `*Data` value
/// replaced by [`HELD_BY_HOST`] (SecretRefs name a variable, not a secret, and
/// stay).
pub fn redacted_configuration(configuration: &Value) -> Value {
    let mut copy = configuration.clone();
    if let Some(ssh) = copy
        .pointer_mut("/agents/defaults/sandbox/ssh")
        .and_then(Value::as_object_mut)
    {
        for key in ["identityData", "certificateData", "knownHostsData"] {
            if let Some(v @ Value::String(_)) = ssh.get_mut(key) {
                *v = Value::String(HELD_BY_HOST.into());
            }
        }
    }
    copy
}

#[cfg(test)]
mod tests;
