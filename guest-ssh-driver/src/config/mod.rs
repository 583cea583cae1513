//! The driver configuration: `drivers.compute.configuration` of the Installation
//! document, as JSON.
//!
//! Parsing is closed: every object admits only the spec's keys, and every error names
//! the key path from `configuration`. Paths are checked against an allowlist rather
//! than a denylist because they cross two interpreters: the remote login shell that
//! joins the exec's argv, and systemd, which expands `%` specifiers and `$` variables
//! in unit lines.

use std::collections::BTreeMap;

use occ_ssh_target::settings;
use serde_json::{Map, Value};

use crate::error::{Error, named, quoted};

pub use occ_ssh_target::settings::PATH_PUNCTUATION;

/// Where units go when `runtime.systemdUnitDirectory` is omitted.
pub const DEFAULT_UNIT_DIRECTORY: &str = "/etc/systemd/system";
/// The SSH port when `hosts.<name>.port` is omitted.
pub const DEFAULT_SSH_PORT: u16 = 22;
/// Bound on `ssh.connectTimeoutSeconds`: above five minutes a connect attempt would
/// outlive the 180 s operation bound it is part of.
pub const MAX_CONNECT_TIMEOUT_SECONDS: u64 = 300;
/// Bound on `runtime.user`. Accounts take its first 19 characters (the spec's
/// rule), so a longer prefix is accepted and cut, as OCC's driver cuts it.
const MAX_USER_LEN: usize = 255;
/// The lowest gateway port: an Agent's unprivileged account cannot bind below it.
pub const MIN_GATEWAY_PORT: u16 = 1024;

mod keys;
#[cfg(test)]
mod tests;

pub use keys::schema;
use keys::{HOST_KEYS, NETWORK_KEYS, PORT_RANGE_KEYS, ROOT_KEYS, RUNTIME_KEYS, SSH_KEYS, names};

/// The parsed and validated driver configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub ssh: Ssh,
    /// Namespace name to host, sorted by name.
    pub hosts: BTreeMap<String, Host>,
    pub runtime: Runtime,
    pub network: Network,
}

/// `configuration.ssh`: the controller-side SSH inputs (the host uses them; the guest
/// only validates them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    pub identity_file: String,
    pub known_hosts_file: String,
    pub connect_timeout_seconds: Option<u32>,
}

/// `configuration.hosts.<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub address: String,
    pub port: u16,
    pub user: String,
    pub node_path: Option<String>,
    pub openclaw_path: Option<String>,
}

/// `configuration.runtime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub node_path: String,
    pub openclaw_path: String,
    pub user: String,
    pub root: String,
    pub systemd_unit_directory: String,
}

/// `configuration.network`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    pub gateway_port_range: PortRange,
}

/// An inclusive port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub start: u16,
    pub end: u16,
}

/// Where a Namespace runs: the host alias and the executables on that host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement<'a> {
    /// The configured host key, which is also the alias the host grants for exec.
    pub alias: &'a str,
    pub node_path: &'a str,
    pub openclaw_path: &'a str,
}

impl Config {
    /// Parses and validates the configuration document.
    pub fn parse(json: &str) -> Result<Self, Error> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::config("configuration", format!("not valid JSON: {e}")))?;
        let root = Object::new("configuration".into(), &value)?;
        root.closed(&names(ROOT_KEYS))?;
        let config = Self {
            ssh: parse_ssh(&root.object("ssh")?)?,
            hosts: parse_hosts(&root.object("hosts")?)?,
            runtime: parse_runtime(&root.object("runtime")?)?,
            network: parse_network(&root.object("network")?)?,
        };
        Ok(config)
    }

    /// The placement of a Namespace name. A host entry's `nodePath`/`openclawPath`
    /// override `runtime.nodePath`/`runtime.openclawPath` for that host only.
    pub fn placement(&self, namespace_name: &str) -> Result<Placement<'_>, Error> {
        let (alias, host) =
            self.hosts
                .get_key_value(namespace_name)
                .ok_or_else(|| Error::UnmappedNamespace {
                    name: namespace_name.to_owned(),
                })?;
        Ok(self.placement_of(alias, host))
    }

    /// Every configured placement, sorted by host alias.
    pub fn placements(&self) -> impl Iterator<Item = Placement<'_>> {
        self.hosts
            .iter()
            .map(|(alias, host)| self.placement_of(alias, host))
    }

    fn placement_of<'a>(&'a self, alias: &'a str, host: &'a Host) -> Placement<'a> {
        Placement {
            alias,
            node_path: host.node_path.as_deref().unwrap_or(&self.runtime.node_path),
            openclaw_path: host
                .openclaw_path
                .as_deref()
                .unwrap_or(&self.runtime.openclaw_path),
        }
    }
}

fn parse_ssh(ssh: &Object<'_>) -> Result<Ssh, Error> {
    ssh.closed(&names(SSH_KEYS))?;
    let connect_timeout_seconds = ssh
        .optional_integer("connectTimeoutSeconds", 1, MAX_CONNECT_TIMEOUT_SECONDS)?
        .map(|n| u32::try_from(n).expect("bounded by MAX_CONNECT_TIMEOUT_SECONDS"));
    Ok(Ssh {
        identity_file: ssh.path("identityFile")?,
        known_hosts_file: ssh.path("knownHostsFile")?,
        connect_timeout_seconds,
    })
}

fn parse_hosts(hosts: &Object<'_>) -> Result<BTreeMap<String, Host>, Error> {
    if hosts.map.is_empty() {
        return Err(Error::config(
            &hosts.path,
            "must map at least one Namespace name to a host",
        ));
    }
    let mut parsed = BTreeMap::new();
    for name in hosts.sorted_keys() {
        let key_path = key_path(&hosts.path, name);
        settings::check_namespace_name(name).map_err(|r| Error::config(&key_path, r))?;
        let host = hosts.object(name)?;
        host.closed(&names(HOST_KEYS))?;
        let address = host.string("address")?;
        settings::check_address(&address)
            .map_err(|r| Error::config(host.key_path("address"), r))?;
        let user = host.string("user")?;
        if user != "root" {
            return Err(Error::config(
                host.key_path("user"),
                "must be root: non-root SSH and sudo are unsupported",
            ));
        }
        let port = host
            .optional_integer("port", 1, u16::MAX.into())?
            .map_or(DEFAULT_SSH_PORT, port_of);
        parsed.insert(
            name.to_owned(),
            Host {
                address,
                port,
                user,
                node_path: host.optional_path("nodePath")?,
                openclaw_path: host.optional_path("openclawPath")?,
            },
        );
    }
    Ok(parsed)
}

fn parse_runtime(runtime: &Object<'_>) -> Result<Runtime, Error> {
    runtime.closed(&names(RUNTIME_KEYS))?;
    let user = runtime.string("user")?;
    check_user(&runtime.key_path("user"), &user)?;
    Ok(Runtime {
        node_path: runtime.path("nodePath")?,
        openclaw_path: runtime.path("openclawPath")?,
        user,
        root: runtime.path("root")?,
        systemd_unit_directory: runtime
            .optional_path("systemdUnitDirectory")?
            .unwrap_or_else(|| DEFAULT_UNIT_DIRECTORY.to_owned()),
    })
}

fn parse_network(network: &Object<'_>) -> Result<Network, Error> {
    network.closed(&names(NETWORK_KEYS))?;
    let range = network.object("gatewayPortRange")?;
    range.closed(&names(PORT_RANGE_KEYS))?;
    // An Agent's unprivileged account could never bind below 1024.
    let start = port_of(range.integer("start", MIN_GATEWAY_PORT.into(), u16::MAX.into())?);
    let end = port_of(range.integer("end", MIN_GATEWAY_PORT.into(), u16::MAX.into())?);
    if start > end {
        return Err(Error::config(
            &range.path,
            format!("start {start} is greater than end {end}"),
        ));
    }
    Ok(Network {
        gateway_port_range: PortRange { start, end },
    })
}

fn port_of(n: u64) -> u16 {
    u16::try_from(n).expect("bounded to 1..=65535 by the caller")
}

/// `parent.key`, naming the key as written when it is a plain word and as a
/// quoted, escaped string otherwise ([`named`], [`quoted`]: cut after
/// [`MAX_QUOTED`](crate::error::MAX_QUOTED) characters with its length), so that a refusal stays one
/// short line whatever a document's keys hold: control characters,
/// separators, 10 KB names.
fn key_path(parent: &str, key: &str) -> String {
    // A `.` in a key would read as a separator: quote it.
    if key.contains('.') {
        format!("{parent}.{}", quoted(key))
    } else {
        format!("{parent}.{}", named(key))
    }
}

/// A JSON object being read, with the key path it sits at.
struct Object<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Object<'a> {
    fn new(path: String, value: &'a Value) -> Result<Self, Error> {
        match value {
            Value::Object(map) => Ok(Self { path, map }),
            _ => Err(Error::config(path, "must be an object")),
        }
    }

    fn key_path(&self, key: &str) -> String {
        key_path(&self.path, key)
    }

    /// Keys in a fixed order, so that the first error reported does not depend on how
    /// the JSON map happens to be ordered.
    fn sorted_keys(&self) -> Vec<&'a str> {
        let mut keys: Vec<&str> = self.map.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// Unknown keys fail, naming the first one.
    fn closed(&self, allowed: &[&str]) -> Result<(), Error> {
        match self
            .sorted_keys()
            .into_iter()
            .find(|k| !allowed.contains(k))
        {
            Some(key) => Err(Error::config(self.key_path(key), "unknown key")),
            None => Ok(()),
        }
    }

    fn required(&self, key: &str) -> Result<&'a Value, Error> {
        self.map
            .get(key)
            .ok_or_else(|| Error::config(self.key_path(key), "required"))
    }

    fn object(&self, key: &str) -> Result<Object<'a>, Error> {
        Object::new(self.key_path(key), self.required(key)?)
    }

    fn string(&self, key: &str) -> Result<String, Error> {
        match self.required(key)? {
            Value::String(s) => Ok(s.clone()),
            _ => Err(Error::config(self.key_path(key), "must be a string")),
        }
    }

    fn path(&self, key: &str) -> Result<String, Error> {
        let value = self.string(key)?;
        check_path(&self.key_path(key), &value)
    }

    fn optional_path(&self, key: &str) -> Result<Option<String>, Error> {
        self.map.get(key).map(|_| self.path(key)).transpose()
    }

    fn integer(&self, key: &str, min: u64, max: u64) -> Result<u64, Error> {
        let value = self.required(key)?;
        value
            .as_u64()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                Error::config(
                    self.key_path(key),
                    format!("must be an integer from {min} to {max}"),
                )
            })
    }

    fn optional_integer(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>, Error> {
        self.map
            .get(key)
            .map(|_| self.integer(key, min, max))
            .transpose()
    }
}

/// A path setting, checked with the rule the host's grant reads it by
/// ([`settings::check_path`]): the path without a trailing `/`.
fn check_path(key_path: &str, value: &str) -> Result<String, Error> {
    settings::check_path(value)
        .map(str::to_string)
        .map_err(|reason| Error::config(key_path, reason))
}

/// `runtime.user` prefixes every Agent account name, so it must be made of a Linux
/// user name's characters, and never be `root`.
fn check_user(key_path: &str, user: &str) -> Result<(), Error> {
    let mut chars = user.chars();
    let valid = user.len() <= MAX_USER_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid {
        return Err(Error::config(
            key_path,
            format!(
                "must be a Linux user name prefix of at most {MAX_USER_LEN} characters: lowercase \
                 letters, digits, `_` and `-`, starting with a letter or `_`"
            ),
        ));
    }
    if user == "root" {
        return Err(Error::config(
            key_path,
            "must not be root: each Agent runs as its own unprivileged account",
        ));
    }
    Ok(())
}
