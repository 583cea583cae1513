//! The SSH grant: what the trusted installation lets a driver reach, and the
//! bounds every exec is held to.
//!
//! The grant is read from the driver's `configuration` with the rules the SSH
//! Compute Driver applies to the same keys (`occ_ssh_target::settings`, which
//! both link; a test runs the driver's own fixtures through both readers and
//! compares the verdicts), so a configuration the driver accepts is always one
//! the host can grant, and a refusal names the same key path whichever side
//! finds it first.

use occ_ssh_target::digest::Sha256;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use occ_ssh_target::settings;
use serde_json::{Map, Value};

use super::client::SshClient;

/// No single operation runs longer than this, whatever the driver asks: the
/// spec bounds operations to 180 s and the remote helper keeps its own deadline
/// below it.
pub const OPERATION_BOUND: Duration = Duration::from_secs(180);

/// Sessions per master by default: two below sshd's shipped `MaxSessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 8;

/// The most `maxSessions` an installation may set.
pub const MAX_MAX_SESSIONS: u64 = 64;

/// An installation's `maxSessions` (at `key`, for messages): how many
/// sessions one SSH connection keeps open at once; [`DEFAULT_MAX_SESSIONS`]
/// when absent. Keep it below the target sshd's `MaxSessions`.
pub fn max_sessions_setting(value: Option<&Value>, key: &str) -> Result<usize, String> {
    match value {
        None => Ok(DEFAULT_MAX_SESSIONS),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_MAX_SESSIONS).contains(&n) => Ok(n as usize),
            _ => Err(format!(
                "{key}: must be a whole number of sessions from 1 to {MAX_MAX_SESSIONS}, below the \
                 target sshd's MaxSessions (10 as shipped), not {v}"
            )),
        },
    }
}

/// The limits one exec is held to. They are part of the grant so that an
/// operator reads them in one place and a test can tighten them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecBounds {
    /// Longest operation, connecting included.
    pub operation: Duration,
    /// Stdout beyond this is refused (and the client killed) as it is read: the
    /// helper writes a heartbeat per second and one result line, so megabytes
    /// mean a runaway.
    pub stdout_cap: usize,
    /// Only the end of stderr is kept: it is for diagnosis, not data.
    pub stderr_tail: usize,
    /// Arguments per exec.
    pub max_args: usize,
    /// Bytes of all arguments together; a larger vector is refused before
    /// anything is recorded. (What travels on the remote command line is
    /// bounded on its own: see [`super::MAX_COMMAND_LINE`].)
    pub max_argv_bytes: usize,
    /// Bytes of stdin.
    pub max_stdin_bytes: usize,
    /// After a failed connect to a host, no new connect to it starts for a
    /// while: the first failure waits `reconnect_first_delay`, each failure
    /// after it twice as long as the one before, up to this. A loop of execs
    /// cannot hammer sshd: they share the wait.
    pub connect_backoff: Duration,
    /// The first wait after a failed connect (see `connect_backoff`).
    pub reconnect_first_delay: Duration,
    /// How long an exec keeps trying to connect to a host that refuses or
    /// drops connections (sshd restarting, a link down for a few seconds),
    /// waiting out each backoff; zero: an exec fails at once with the connect
    /// error, and so do the execs during the backoff. Only connecting is tried
    /// again, never a command: a session that opened ran its command, whatever
    /// became of it.
    pub reconnect_budget: Duration,
    /// An idle master connection is closed after this long.
    pub idle_master: Duration,
    /// Sessions one master connection may have open at once: below sshd's
    /// shipped `MaxSessions` (10), so a target as its distribution ships it
    /// never refuses one; more work waits for a place.
    pub max_sessions: usize,
}

impl Default for ExecBounds {
    fn default() -> Self {
        ExecBounds {
            operation: OPERATION_BOUND,
            stdout_cap: 4 << 20,
            stderr_tail: 16 << 10,
            max_args: 16,
            max_argv_bytes: 256 << 10,
            max_stdin_bytes: 1 << 20,
            connect_backoff: Duration::from_secs(5),
            reconnect_first_delay: Duration::from_secs(5),
            reconnect_budget: Duration::ZERO,
            idle_master: Duration::from_secs(60),
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }
}

/// Where one alias points, from `configuration.hosts.<alias>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGrant {
    /// IP address or DNS name.
    pub address: String,
    /// SSH port.
    pub port: u16,
    /// Login user.
    pub user: String,
    /// The Node.js executable on that host: `hosts.<alias>.nodePath`, else
    /// `runtime.nodePath`. The only program the driver may run there (empty
    /// where the policy runs no Node.js helper).
    pub node_path: String,
}

/// What may run on a granted host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecPolicy {
    /// Only `[<the host's nodePath>, "-", <one base64 operation>]`, with a helper
    /// on stdin whose SHA-256 the installation approves
    /// (`drivers.compute.approvedHelpers`). The helper runs as root: it is the
    /// trust boundary on a host, so a driver can do there only what its audited
    /// helper allows. An empty list approves nothing.
    NodeHelper {
        /// SHA-256 of every approved helper.
        approved: Vec<Sha256>,
    },
    /// Only `[<interpreter>, "-c", <script>, <name>, <args...>]` where the
    /// installation approves `name` with the script's SHA-256
    /// (`drivers.sandbox.approvedScripts`) and the interpreter is what the
    /// script's first line names (`#!/bin/sh`: `/bin/sh`; `#!/usr/bin/env
    /// python3`: `python3`). The arguments and stdin are data, bounded by
    /// [`ExecBounds`]. An empty map approves nothing. A name may be approved
    /// with more than one hash: during a rollout, the old release's script
    /// and the new one's.
    PinnedScripts {
        /// Script name to every SHA-256 approved for it.
        approved: BTreeMap<String, Vec<Sha256>>,
    },
}

impl ExecPolicy {
    /// Whether the policy approves the program `name` (a script's name; a
    /// helper's is not part of its approval) whose text has SHA-256 `sha256`.
    pub fn approves(&self, name: &str, sha256: &Sha256) -> bool {
        match self {
            ExecPolicy::NodeHelper { approved } => approved.iter().any(|a| a == sha256),
            ExecPolicy::PinnedScripts { approved } => approved
                .get(name)
                .is_some_and(|hashes| hashes.contains(sha256)),
        }
    }
}

/// A credential file ssh reads: a local file the installation names, or inline
/// text the host writes to a private file of its own (mode 0600, removed with
/// the connection's control directory) so that ssh can read it.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// An existing local file.
    File(PathBuf),
    /// Inline contents, never shown in logs or errors.
    Inline(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::File(p) => f.debug_tuple("File").field(p).finish(),
            Credential::Inline(text) => write!(f, "Inline(<{} bytes>)", text.len()),
        }
    }
}

/// How host keys are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostKeys {
    /// `StrictHostKeyChecking yes` (else `no`).
    pub strict: bool,
    /// `UpdateHostKeys yes` (else `no`).
    pub update: bool,
}

/// What the installation grants a driver: the trusted SSH inputs and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshGrant {
    /// The OpenSSH client that runs the master connections and every exec:
    /// `ssh` from `PATH`, or one the installation names and the host checked.
    pub client: SshClient,
    /// The identity (`configuration.ssh.identityFile`); none leaves ssh its
    /// default identity files.
    pub identity: Option<Credential>,
    /// A certificate for the identity.
    pub certificate: Option<Credential>,
    /// The known hosts (`configuration.ssh.knownHostsFile`); none leaves ssh
    /// its default file, or `/dev/null` when host keys are not checked.
    pub known_hosts: Option<Credential>,
    /// Host key checking.
    pub host_keys: HostKeys,
    /// `configuration.ssh.connectTimeoutSeconds` (default 10).
    pub connect_timeout: Duration,
    /// `configuration.hosts`, by alias.
    pub hosts: BTreeMap<String, HostGrant>,
    /// What may run on them.
    pub policy: ExecPolicy,
    /// The bounds of every exec.
    pub bounds: ExecBounds,
}

/// A refusal of the grant, naming the key path from `configuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct GrantError {
    /// The key at fault, e.g. `configuration.hosts.stable.address`.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The connect timeout when `ssh.connectTimeoutSeconds` is omitted.
const DEFAULT_CONNECT_TIMEOUT: u64 = 10;
/// Bound on `ssh.connectTimeoutSeconds`: above five minutes a connect attempt
/// would outlive the operation bound it is part of.
const MAX_CONNECT_TIMEOUT: u64 = 300;
fn err(path: impl Into<String>, reason: impl Into<String>) -> GrantError {
    GrantError {
        path: path.into(),
        reason: reason.into(),
    }
}

impl SshGrant {
    /// A grant of nothing: no host, no helper.
    pub fn none() -> SshGrant {
        SshGrant {
            client: SshClient::system(),
            identity: None,
            certificate: None,
            known_hosts: None,
            host_keys: HostKeys {
                strict: true,
                update: false,
            },
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT),
            hosts: BTreeMap::new(),
            policy: ExecPolicy::NodeHelper {
                approved: Vec::new(),
            },
            bounds: ExecBounds::default(),
        }
    }

    /// Read the grant from a driver configuration (`ssh`, `hosts` and
    /// `runtime.nodePath`; other keys are the driver's to validate) and the
    /// helpers the installation approves.
    pub fn from_configuration(
        cfg: &Value,
        approved_helpers: &[Sha256],
    ) -> Result<SshGrant, GrantError> {
        let root = object("configuration", Some(cfg))?;
        let ssh = object("configuration.ssh", root.get("ssh"))?;
        let identity_file = path("configuration.ssh.identityFile", ssh.get("identityFile"))?;
        let known_hosts_file = path(
            "configuration.ssh.knownHostsFile",
            ssh.get("knownHostsFile"),
        )?;
        let connect_timeout = match ssh.get("connectTimeoutSeconds") {
            None => DEFAULT_CONNECT_TIMEOUT,
            v => integer(
                "configuration.ssh.connectTimeoutSeconds",
                v,
                1,
                MAX_CONNECT_TIMEOUT,
            )?,
        };
        let hosts_map = object("configuration.hosts", root.get("hosts"))?;
        if hosts_map.is_empty() {
            return Err(err(
                "configuration.hosts",
                "must map at least one Namespace name to a host",
            ));
        }
        let runtime = object("configuration.runtime", root.get("runtime"))?;
        let default_node = path("configuration.runtime.nodePath", runtime.get("nodePath"))?;
        let mut names: Vec<&String> = hosts_map.keys().collect();
        names.sort_unstable();
        let mut hosts = BTreeMap::new();
        for name in names {
            let at = format!("configuration.hosts.{name}");
            settings::check_namespace_name(name).map_err(|r| err(&at, r))?;
            let host = object(&at, hosts_map.get(name))?;
            let address = string(&format!("{at}.address"), host.get("address"))?;
            settings::check_address(&address).map_err(|r| err(format!("{at}.address"), r))?;
            let user = string(&format!("{at}.user"), host.get("user"))?;
            if user != "root" {
                return Err(err(
                    format!("{at}.user"),
                    "must be root: non-root SSH and sudo are unsupported",
                ));
            }
            let port = match host.get("port") {
                None => 22,
                v => integer(&format!("{at}.port"), v, 1, u16::MAX.into())?,
            };
            let node_path = match host.get("nodePath") {
                None => default_node.clone(),
                v => path(&format!("{at}.nodePath"), v)?,
            };
            hosts.insert(
                name.clone(),
                HostGrant {
                    address,
                    port: u16::try_from(port).expect("bounded to 1..=65535"),
                    user,
                    node_path: node_path.to_string_lossy().into_owned(),
                },
            );
        }
        Ok(SshGrant {
            client: SshClient::system(),
            identity: Some(Credential::File(identity_file)),
            certificate: None,
            known_hosts: Some(Credential::File(known_hosts_file)),
            host_keys: HostKeys {
                strict: true,
                update: false,
            },
            connect_timeout: Duration::from_secs(connect_timeout),
            hosts,
            policy: ExecPolicy::NodeHelper {
                approved: approved_helpers.to_vec(),
            },
            bounds: ExecBounds::default(),
        })
    }

    /// Preflight of the host's own inputs: both files exist, are regular files
    /// and readable, the identity is readable by this user alone (ssh itself
    /// would refuse it otherwise) and the known-hosts file cannot be changed by
    /// other users (whoever can add a line there can impersonate a host).
    pub fn verify_local_files(&self) -> Result<(), LocalFileError> {
        use std::os::unix::fs::PermissionsExt;
        let files = [
            ("ssh.identityFile", &self.identity),
            ("ssh.certificateFile", &self.certificate),
            ("ssh.knownHostsFile", &self.known_hosts),
        ];
        // Inline credentials are the host's own files, written 0600.
        let files = files.into_iter().filter_map(|(what, c)| match c {
            Some(Credential::File(path)) => Some((what, path)),
            _ => None,
        });
        for (what, path) in files {
            let meta = std::fs::metadata(path).map_err(|source| LocalFileError::Stat {
                what,
                path: path.clone(),
                source,
            })?;
            if !meta.is_file() {
                return Err(LocalFileError::NotAFile {
                    what,
                    path: path.clone(),
                });
            }
            std::fs::File::open(path).map_err(|source| LocalFileError::Open {
                what,
                path: path.clone(),
                source,
            })?;
            let mode = meta.permissions().mode() & 0o777;
            if what == "ssh.identityFile" && mode & 0o077 != 0 {
                return Err(LocalFileError::IdentityReadable {
                    path: path.clone(),
                    mode,
                });
            }
            if what == "ssh.knownHostsFile" && mode & 0o022 != 0 {
                return Err(LocalFileError::KnownHostsWritable {
                    path: path.clone(),
                    mode,
                });
            }
        }
        Ok(())
    }
}

/// Why a file the grant names fails [`SshGrant::verify_local_files`]. Every
/// message names the key (`ssh.identityFile`, ...) and the path.
#[derive(Debug, thiserror::Error)]
pub enum LocalFileError {
    /// It cannot be examined (it does not exist, most often).
    #[error("{what} {}: {source}", path.display())]
    Stat {
        /// The key that names it.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is a directory, a device or a pipe.
    #[error("{what} {}: not a regular file", path.display())]
    NotAFile {
        /// The key that names it.
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// This user cannot open it.
    #[error("{what} {}: {source}", path.display())]
    Open {
        /// The key that names it.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Other users may read the private key (ssh itself would refuse it).
    #[error(
        "ssh.identityFile {}: mode {mode:o} lets other users read the private key; chmod 600 it",
        path.display()
    )]
    IdentityReadable {
        /// The identity file.
        path: PathBuf,
        /// Its mode's permission bits.
        mode: u32,
    },
    /// Other users may change the known-hosts file, and so impersonate a host.
    #[error(
        "ssh.knownHostsFile {}: mode {mode:o} lets other users add host keys; chmod 644 it",
        path.display()
    )]
    KnownHostsWritable {
        /// The known-hosts file.
        path: PathBuf,
        /// Its mode's permission bits.
        mode: u32,
    },
}

pub(crate) fn object<'a>(
    path: &str,
    v: Option<&'a Value>,
) -> Result<&'a Map<String, Value>, GrantError> {
    match v {
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(err(path, "must be an object")),
        None => Err(err(path, "required")),
    }
}

pub(crate) fn string(path: &str, v: Option<&Value>) -> Result<String, GrantError> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(err(path, "must be a string")),
        None => Err(err(path, "required")),
    }
}

pub(crate) fn integer(
    path: &str,
    v: Option<&Value>,
    min: u64,
    max: u64,
) -> Result<u64, GrantError> {
    let v = v.ok_or_else(|| err(path, "required"))?;
    v.as_u64()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| err(path, format!("must be an integer from {min} to {max}")))
}

/// A path setting, by the rule the driver reads it with
/// ([`settings::check_path`]); a trailing `/` (the same directory) is dropped.
pub(crate) fn path(key: &str, v: Option<&Value>) -> Result<PathBuf, GrantError> {
    let value = string(key, v)?;
    settings::check_path(&value)
        .map(PathBuf::from)
        .map_err(|reason| err(key, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `maxSessions`: below sshd's shipped limit by default, bounded, and
    /// refused naming the key when it is not a count.
    #[test]
    fn max_sessions_is_a_bounded_count() {
        let key = "drivers.sandbox.maxSessions";
        assert_eq!(max_sessions_setting(None, key), Ok(8));
        assert_eq!(
            max_sessions_setting(Some(&serde_json::json!(3)), key),
            Ok(3)
        );
        assert_eq!(
            max_sessions_setting(Some(&serde_json::json!(64)), key),
            Ok(64)
        );
        for bad in [
            serde_json::json!(0),
            serde_json::json!(65),
            serde_json::json!("8"),
            serde_json::json!(-1),
        ] {
            let e = max_sessions_setting(Some(&bad), key).unwrap_err();
            assert!(
                e.starts_with(
                    "drivers.sandbox.maxSessions: must be a whole number of sessions from 1 to 64"
                ),
                "{e}"
            );
        }
    }
    use serde_json::json;

    fn cfg() -> Value {
        json!({
            "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts", "connectTimeoutSeconds": 10},
            "hosts": {"stable": {"address": "203.0.113.10", "port": 22, "user": "root", "nodePath": "/opt/node/bin/node"},
                      "canary": {"address": "canary.example", "user": "root"}},
            "runtime": {"nodePath": "/usr/bin/node"},
        })
    }

    #[test]
    fn reads_the_grant_from_the_spec_example() {
        let g = SshGrant::from_configuration(&cfg(), &[]).unwrap();
        assert_eq!(
            g.identity,
            Some(Credential::File(PathBuf::from(
                "/etc/openclaw/ssh/id_ed25519"
            )))
        );
        assert_eq!(g.connect_timeout, Duration::from_secs(10));
        assert_eq!(
            g.hosts["stable"],
            HostGrant {
                address: "203.0.113.10".into(),
                port: 22,
                user: "root".into(),
                node_path: "/opt/node/bin/node".into(),
            }
        );
        // Without a host override the runtime's Node.js applies.
        assert_eq!(g.hosts["canary"].node_path, "/usr/bin/node");
        assert_eq!(g.bounds.operation, Duration::from_secs(180));
    }

    /// The driver's own fixtures, through the driver's validator and the grant:
    /// whatever the driver accepts the host can grant, and where the grant
    /// refuses, it says exactly what the driver says.
    #[test]
    fn the_grant_agrees_with_the_driver_on_its_own_fixtures() {
        let dir = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        )
        .join("../guest-ssh-driver/tests/fixtures");
        let cases: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap())
                .unwrap();
        let mut compared = 0;
        for case in cases.as_array().unwrap() {
            let file = case["file"].as_str().unwrap();
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let driver = guest_ssh_driver::validate_configuration(&text);
            let grant = SshGrant::from_configuration(&serde_json::from_str(&text).unwrap(), &[]);
            let path = case["path"].as_str().unwrap_or_default();
            let grant_key = path.starts_with("configuration.ssh")
                || path.starts_with("configuration.hosts")
                || path == "configuration.runtime"
                || path == "configuration.runtime.nodePath";
            match (driver, grant) {
                (Ok(_), Ok(_)) => {}
                (Ok(_), Err(g)) => panic!("{file}: the driver accepts what the grant refuses: {g}"),
                (Err(d), Err(g)) if grant_key => {
                    assert_eq!(d.to_string(), g.to_string(), "{file}");
                    compared += 1;
                }
                (Err(d), Ok(_)) if grant_key => {
                    panic!("{file}: the grant accepts {path} that the driver refuses: {d}")
                }
                // A key the grant does not read.
                (Err(_), _) => {}
            }
        }
        assert!(compared >= 6, "only {compared} refusals compared");
    }
}
