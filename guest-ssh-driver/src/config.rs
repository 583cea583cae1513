//! The driver configuration: `drivers.compute.configuration` of the Installation
//! document, as JSON.
//!
//! Parsing is closed: every object admits only the spec's keys, and every error names
//! the key path from `configuration`. Paths are checked against an allowlist rather
//! than a denylist because they cross two interpreters: the remote login shell that
//! joins the exec's argv, and systemd, which expands `%` specifiers and `$` variables
//! in unit lines.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::error::Error;

/// Where units go when `runtime.systemdUnitDirectory` is omitted.
pub const DEFAULT_UNIT_DIRECTORY: &str = "/etc/systemd/system";
/// The SSH port when `hosts.<name>.port` is omitted.
pub const DEFAULT_SSH_PORT: u16 = 22;
/// Bound on `ssh.connectTimeoutSeconds`: above five minutes a connect attempt would
/// outlive the 180 s operation bound it is part of.
pub const MAX_CONNECT_TIMEOUT_SECONDS: u64 = 300;
/// Linux account names are at most 32 bytes.
const MAX_USER_LEN: usize = 32;
/// A DNS name is at most 253 characters; Namespace names are held to the same bound.
const MAX_NAME_LEN: usize = 253;

const PATH_RULE: &str = "must be an absolute path without whitespace, quotes, control \
                         characters, shell metacharacters or systemd expansion (`%`, `$`)";

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
        root.closed(&["ssh", "hosts", "runtime", "network"])?;
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
    ssh.closed(&["identityFile", "knownHostsFile", "connectTimeoutSeconds"])?;
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
        let key_path = format!("{}.{name}", hosts.path);
        check_namespace_name(&key_path, name)?;
        let host = hosts.object(name)?;
        host.closed(&["address", "port", "user", "nodePath", "openclawPath"])?;
        let address = host.string("address")?;
        check_address(&host.key_path("address"), &address)?;
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
    runtime.closed(&[
        "nodePath",
        "openclawPath",
        "user",
        "root",
        "systemdUnitDirectory",
    ])?;
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
    network.closed(&["gatewayPortRange"])?;
    let range = network.object("gatewayPortRange")?;
    range.closed(&["start", "end"])?;
    let start = port_of(range.integer("start", 1, u16::MAX.into())?);
    let end = port_of(range.integer("end", 1, u16::MAX.into())?);
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
        format!("{}.{key}", self.path)
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
        check_path(&self.key_path(key), &value)?;
        Ok(value)
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

/// Paths: absolute, normalized (so the layout derived from them has one spelling), and
/// made only of `A-Z a-z 0-9 _ . / : @ + -`.
pub(crate) fn check_path(key_path: &str, value: &str) -> Result<(), Error> {
    if let Some(c) = value.chars().find(|c| !is_path_char(*c)) {
        return Err(Error::config(
            key_path,
            format!("{PATH_RULE}: contains {}", describe_char(c)),
        ));
    }
    if !value.starts_with('/') {
        return Err(Error::config(
            key_path,
            format!("{PATH_RULE}: not absolute"),
        ));
    }
    let normalized = value.len() > 1
        && !value.ends_with('/')
        && value[1..]
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if !normalized {
        return Err(Error::config(
            key_path,
            "must be a normalized path below / (no trailing `/`, `//`, `.` or `..`)",
        ));
    }
    Ok(())
}

/// Besides ASCII letters and digits, the only characters a path may hold. The
/// helper's `SAFE_PATH` admits exactly these (`tests/helper_protocol.rs`).
pub const PATH_PUNCTUATION: &str = "_./:@+-";

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || PATH_PUNCTUATION.contains(c)
}

fn describe_char(c: char) -> String {
    if c.is_whitespace() {
        format!("whitespace {c:?}")
    } else if c.is_control() {
        format!("control character {c:?}")
    } else if matches!(c, '"' | '\'' | '`') {
        format!("quote {c:?}")
    } else if matches!(c, '%' | '$') {
        format!("systemd expansion syntax {c:?}")
    } else if c.is_ascii() {
        format!("shell metacharacter {c:?}")
    } else {
        format!("unsupported character {c:?}")
    }
}

/// Namespace names become exec aliases and key paths in messages.
fn check_namespace_name(key_path: &str, name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(Error::config(
            key_path,
            format!(
                "a Namespace name must be 1 to {MAX_NAME_LEN} bytes without control characters"
            ),
        ));
    }
    Ok(())
}

/// An IP address or a DNS name; a leading `-` would read as an ssh option.
fn check_address(key_path: &str, address: &str) -> Result<(), Error> {
    if address.parse::<IpAddr>().is_ok() || is_dns_name(address) {
        return Ok(());
    }
    Err(Error::config(
        key_path,
        format!("{address:?} is not an IP address or a DNS name"),
    ))
}

fn is_dns_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// `runtime.user` prefixes every Agent account name, so it must itself be a valid
/// Linux user name, and never `root`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spec_example;
    use serde_json::json;

    /// The spec example with one pointer replaced (`None` removes the key).
    fn with(pointer: &str, value: Option<Value>) -> String {
        let mut doc = spec_example();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let parent = doc.pointer_mut(parent).unwrap().as_object_mut().unwrap();
        match value {
            Some(v) => parent.insert(key.to_owned(), v),
            None => parent.remove(key),
        };
        doc.to_string()
    }

    fn error(json: &str) -> String {
        let err = Config::parse(json).unwrap_err();
        assert_eq!(err.code(), "invalid-configuration", "{err}");
        assert_eq!(err.kind(), crate::error::FailureKind::Permanent);
        err.to_string()
    }

    #[test]
    fn spec_example_parses() {
        let config = Config::parse(&spec_example().to_string()).unwrap();
        assert_eq!(config.ssh.connect_timeout_seconds, Some(10));
        assert_eq!(config.runtime.user, "openclaw");
        assert_eq!(
            config.network.gateway_port_range,
            PortRange {
                start: 18800,
                end: 18899
            }
        );
        let host = &config.hosts["stable"];
        assert_eq!((host.address.as_str(), host.port), ("203.0.113.10", 22));
    }

    #[test]
    fn optional_keys_take_their_defaults() {
        let mut doc = spec_example();
        doc["hosts"]["stable"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| k == "address" || k == "user");
        doc["runtime"]
            .as_object_mut()
            .unwrap()
            .remove("systemdUnitDirectory");
        doc["ssh"]
            .as_object_mut()
            .unwrap()
            .remove("connectTimeoutSeconds");
        doc["runtime"]["nodePath"] = json!("/opt/node24/bin/node");
        let config = Config::parse(&doc.to_string()).unwrap();
        assert_eq!(config.hosts["stable"].port, 22);
        assert_eq!(config.runtime.systemd_unit_directory, "/etc/systemd/system");
        assert_eq!(config.ssh.connect_timeout_seconds, None);
        // Without host overrides the runtime paths apply.
        let placement = config.placement("stable").unwrap();
        assert_eq!(placement.node_path, "/opt/node24/bin/node");
        assert_eq!(
            placement.openclaw_path,
            "/opt/openclaw/current/dist/index.js"
        );
    }

    #[test]
    fn host_paths_override_runtime_paths() {
        let json = with("/hosts/stable/nodePath", Some(json!("/opt/node/bin/node")));
        let config = Config::parse(&json).unwrap();
        let placement = config.placement("stable").unwrap();
        assert_eq!(placement.alias, "stable");
        assert_eq!(placement.node_path, "/opt/node/bin/node");
    }

    #[test]
    fn unmapped_namespace_fails_permanently() {
        let config = Config::parse(&spec_example().to_string()).unwrap();
        let err = config.placement("canary").unwrap_err();
        assert_eq!(err.code(), "unmapped-namespace");
        assert_eq!(err.kind(), crate::error::FailureKind::Permanent);
        assert_eq!(
            err.to_string(),
            "namespace name \"canary\" is not mapped to a host (configuration.hosts has no such key)"
        );
    }

    #[test]
    fn refusals_name_the_key_path() {
        let cases: &[(&str, Option<Value>, &str)] = &[
            // Unknown keys, at every level.
            (
                "/runtime/nodepath",
                Some(json!("/usr/bin/node")),
                "configuration.runtime.nodepath: unknown key",
            ),
            ("/extra", Some(json!(1)), "configuration.extra: unknown key"),
            (
                "/ssh/port",
                Some(json!(22)),
                "configuration.ssh.port: unknown key",
            ),
            (
                "/hosts/stable/identityFile",
                Some(json!("/x")),
                "configuration.hosts.stable.identityFile: unknown key",
            ),
            (
                "/network/gatewayPortRange/step",
                Some(json!(1)),
                "configuration.network.gatewayPortRange.step: unknown key",
            ),
            (
                "/network/ports",
                Some(json!(1)),
                "configuration.network.ports: unknown key",
            ),
            // Required keys and types.
            ("/ssh", None, "configuration.ssh: required"),
            (
                "/runtime/root",
                None,
                "configuration.runtime.root: required",
            ),
            (
                "/hosts/stable/user",
                None,
                "configuration.hosts.stable.user: required",
            ),
            (
                "/hosts/stable/address",
                None,
                "configuration.hosts.stable.address: required",
            ),
            (
                "/network/gatewayPortRange/end",
                None,
                "configuration.network.gatewayPortRange.end: required",
            ),
            (
                "/runtime",
                Some(json!([])),
                "configuration.runtime: must be an object",
            ),
            (
                "/hosts",
                Some(json!({})),
                "configuration.hosts: must map at least one Namespace name to a host",
            ),
            (
                "/hosts/stable",
                Some(json!("203.0.113.10")),
                "configuration.hosts.stable: must be an object",
            ),
            (
                "/runtime/user",
                Some(json!(7)),
                "configuration.runtime.user: must be a string",
            ),
            // SSH user and ports.
            (
                "/hosts/stable/user",
                Some(json!("admin")),
                "configuration.hosts.stable.user: must be root: non-root SSH and sudo are unsupported",
            ),
            (
                "/hosts/stable/port",
                Some(json!(0)),
                "configuration.hosts.stable.port: must be an integer from 1 to 65535",
            ),
            (
                "/hosts/stable/port",
                Some(json!(65536)),
                "configuration.hosts.stable.port: must be an integer from 1 to 65535",
            ),
            (
                "/hosts/stable/port",
                Some(json!("22")),
                "configuration.hosts.stable.port: must be an integer from 1 to 65535",
            ),
            (
                "/hosts/stable/port",
                Some(json!(22.5)),
                "configuration.hosts.stable.port: must be an integer from 1 to 65535",
            ),
            (
                "/network/gatewayPortRange/start",
                Some(json!(0)),
                "configuration.network.gatewayPortRange.start: must be an integer from 1 to 65535",
            ),
            (
                "/network/gatewayPortRange/end",
                Some(json!(70000)),
                "configuration.network.gatewayPortRange.end: must be an integer from 1 to 65535",
            ),
            (
                "/network/gatewayPortRange/start",
                Some(json!(18900)),
                "configuration.network.gatewayPortRange: start 18900 is greater than end 18899",
            ),
            // Connect timeout.
            (
                "/ssh/connectTimeoutSeconds",
                Some(json!(0)),
                "configuration.ssh.connectTimeoutSeconds: must be an integer from 1 to 300",
            ),
            (
                "/ssh/connectTimeoutSeconds",
                Some(json!(301)),
                "configuration.ssh.connectTimeoutSeconds: must be an integer from 1 to 300",
            ),
            (
                "/ssh/connectTimeoutSeconds",
                Some(json!(-1)),
                "configuration.ssh.connectTimeoutSeconds: must be an integer from 1 to 300",
            ),
            // Runtime user.
            (
                "/runtime/user",
                Some(json!("root")),
                "configuration.runtime.user: must not be root: each Agent runs as its own unprivileged account",
            ),
            (
                "/runtime/user",
                Some(json!("OpenClaw")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 32 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("-oc")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 32 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("9oc")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 32 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 32 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("open claw")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 32 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            // Addresses.
            (
                "/hosts/stable/address",
                Some(json!("-oProxyCommand=x")),
                "configuration.hosts.stable.address: \"-oProxyCommand=x\" is not an IP address or a DNS name",
            ),
            (
                "/hosts/stable/address",
                Some(json!("host name")),
                "configuration.hosts.stable.address: \"host name\" is not an IP address or a DNS name",
            ),
            (
                "/hosts/stable/address",
                Some(json!("")),
                "configuration.hosts.stable.address: \"\" is not an IP address or a DNS name",
            ),
            (
                "/hosts/stable/address",
                Some(json!("root@host")),
                "configuration.hosts.stable.address: \"root@host\" is not an IP address or a DNS name",
            ),
            (
                "/hosts/stable/address",
                Some(json!("host.")),
                "configuration.hosts.stable.address: \"host.\" is not an IP address or a DNS name",
            ),
        ];
        for (pointer, value, expected) in cases {
            assert_eq!(&error(&with(pointer, value.clone())), expected, "{pointer}");
        }
    }

    #[test]
    fn addresses_accept_ips_and_dns_names() {
        for address in [
            "203.0.113.10",
            "2001:db8::1",
            "::1",
            "gw-1.example.com",
            "host",
            "10.201.1.2",
        ] {
            let json = with("/hosts/stable/address", Some(json!(address)));
            assert!(Config::parse(&json).is_ok(), "{address}");
        }
    }

    #[test]
    fn unsafe_paths_are_refused_naming_the_key() {
        let rule = "must be an absolute path without whitespace, quotes, control characters, \
                    shell metacharacters or systemd expansion (`%`, `$`)";
        let normal = "must be a normalized path below / (no trailing `/`, `//`, `.` or `..`)";
        let cases: &[(&str, &str, String)] = &[
            (
                "/runtime/root",
                "relative/root",
                format!("{rule}: not absolute"),
            ),
            (
                "/runtime/root",
                "/var/lib/open claw",
                format!("{rule}: contains whitespace ' '"),
            ),
            (
                "/runtime/root",
                "/var/lib/open\tclaw",
                format!("{rule}: contains whitespace '\\t'"),
            ),
            (
                "/runtime/root",
                "/var/lib/\"oc\"",
                format!("{rule}: contains quote '\"'"),
            ),
            (
                "/runtime/root",
                "/var/lib/'oc'",
                format!("{rule}: contains quote '\\''"),
            ),
            (
                "/runtime/root",
                "/var/lib/`oc`",
                format!("{rule}: contains quote '`'"),
            ),
            (
                "/runtime/root",
                "/var/lib/oc\u{7}",
                format!("{rule}: contains control character '\\u{{7}}'"),
            ),
            (
                "/runtime/root",
                "/var/lib/%n",
                format!("{rule}: contains systemd expansion syntax '%'"),
            ),
            (
                "/runtime/root",
                "/var/lib/$HOME",
                format!("{rule}: contains systemd expansion syntax '$'"),
            ),
            (
                "/runtime/root",
                "/var/lib/oc;reboot",
                format!("{rule}: contains shell metacharacter ';'"),
            ),
            (
                "/runtime/root",
                "/var/lib/oc|x",
                format!("{rule}: contains shell metacharacter '|'"),
            ),
            (
                "/runtime/root",
                "/var/lib/oc&",
                format!("{rule}: contains shell metacharacter '&'"),
            ),
            (
                "/runtime/root",
                "/var/lib/o*",
                format!("{rule}: contains shell metacharacter '*'"),
            ),
            (
                "/runtime/root",
                "/var/lib/~oc",
                format!("{rule}: contains shell metacharacter '~'"),
            ),
            (
                "/runtime/root",
                "/var/lib/oc\\x",
                format!("{rule}: contains shell metacharacter '\\\\'"),
            ),
            (
                "/runtime/root",
                "/var/lib/é",
                format!("{rule}: contains unsupported character 'é'"),
            ),
            ("/runtime/root", "/", normal.to_owned()),
            ("/runtime/root", "/var/lib/", normal.to_owned()),
            ("/runtime/root", "/var//lib", normal.to_owned()),
            ("/runtime/root", "/var/../etc", normal.to_owned()),
            ("/runtime/root", "/var/./lib", normal.to_owned()),
            (
                "/runtime/nodePath",
                "/usr/bin/node --inspect",
                format!("{rule}: contains whitespace ' '"),
            ),
            (
                "/runtime/openclawPath",
                "/opt/$x",
                format!("{rule}: contains systemd expansion syntax '$'"),
            ),
            (
                "/runtime/systemdUnitDirectory",
                "/etc/systemd/%i",
                format!("{rule}: contains systemd expansion syntax '%'"),
            ),
            (
                "/ssh/identityFile",
                "~/.ssh/id",
                format!("{rule}: contains shell metacharacter '~'"),
            ),
            (
                "/ssh/knownHostsFile",
                "known_hosts",
                format!("{rule}: not absolute"),
            ),
            (
                "/hosts/stable/nodePath",
                "/usr/bin/node\n",
                format!("{rule}: contains whitespace '\\n'"),
            ),
            (
                "/hosts/stable/openclawPath",
                "/opt/a(b)",
                format!("{rule}: contains shell metacharacter '('"),
            ),
        ];
        for (pointer, path, reason) in cases {
            let key = format!("configuration{}", pointer.replace('/', "."));
            assert_eq!(
                error(&with(pointer, Some(json!(path)))),
                format!("{key}: {reason}"),
                "{path:?}"
            );
        }
    }

    #[test]
    fn top_level_shape_is_checked() {
        assert_eq!(error("[]"), "configuration: must be an object");
        assert!(error("{").starts_with("configuration: not valid JSON: "));
        let mut doc = spec_example();
        doc["hosts"]["bad\u{1}name"] = doc["hosts"]["stable"].clone();
        assert_eq!(
            error(&doc.to_string()),
            "configuration.hosts.bad\u{1}name: a Namespace name must be 1 to 253 bytes without control characters"
        );
    }

    #[test]
    fn placements_are_sorted_by_alias() {
        let mut doc = spec_example();
        doc["hosts"]["canary"] = doc["hosts"]["stable"].clone();
        doc["hosts"]["alpha"] = doc["hosts"]["stable"].clone();
        let config = Config::parse(&doc.to_string()).unwrap();
        let aliases: Vec<&str> = config.placements().map(|p| p.alias).collect();
        assert_eq!(aliases, ["alpha", "canary", "stable"]);
    }
}
