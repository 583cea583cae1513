//! The driver configuration: `drivers.compute.configuration` of the Installation
//! document, as JSON.
//!
//! Parsing is closed: every object admits only the spec's keys, and every error names
//! the key path from `configuration`. Paths are checked against an allowlist rather
//! than a denylist because they cross two interpreters: the remote login shell that
//! joins the exec's argv, and systemd, which expands `%` specifiers and `$` variables
//! in unit lines.

use std::collections::BTreeMap;

use occ_ssh_target::settings::{self, MAX_NAME_LEN};
use serde_json::{Map, Value, json};

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

/// How one key is checked. The parser closes every object with these tables and
/// [`schema`] renders them as JSON Schema, so the schema a controller shows and the
/// keys the driver accepts come from one place (the tests below hold the parser to
/// each rule).
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// An absolute normalized path of [`PATH_PUNCTUATION`], letters and digits.
    Path,
    /// An IP address or a DNS name.
    Address,
    /// Exactly `root`.
    Root,
    /// A Linux user name prefix other than `root`.
    UserPrefix,
    /// An integer in a range.
    Integer(u64, u64),
    /// A closed object.
    Object(&'static [Key]),
    /// Namespace names mapped to closed objects.
    Names(&'static [Key]),
}

/// One key of a closed object.
#[derive(Debug, Clone, Copy)]
struct Key {
    name: &'static str,
    required: bool,
    rule: Rule,
    doc: &'static str,
}

const fn key(name: &'static str, rule: Rule, doc: &'static str) -> Key {
    Key {
        name,
        required: true,
        rule,
        doc,
    }
}

const fn optional(name: &'static str, rule: Rule, doc: &'static str) -> Key {
    Key {
        name,
        required: false,
        rule,
        doc,
    }
}

const SSH_KEYS: &[Key] = &[
    key(
        "identityFile",
        Rule::Path,
        "The controller's SSH private key (protect it: mode 600).",
    ),
    key(
        "knownHostsFile",
        Rule::Path,
        "The known-hosts file every host key is checked against.",
    ),
    optional(
        "connectTimeoutSeconds",
        Rule::Integer(1, MAX_CONNECT_TIMEOUT_SECONDS),
        "Seconds to wait for an SSH connection (default 10).",
    ),
];

const HOST_KEYS: &[Key] = &[
    key(
        "address",
        Rule::Address,
        "IP address or DNS name of the host.",
    ),
    optional("port", Rule::Integer(1, 65535), "SSH port (default 22)."),
    key(
        "user",
        Rule::Root,
        "The SSH account: root (non-root SSH and sudo are unsupported).",
    ),
    optional(
        "nodePath",
        Rule::Path,
        "Node.js 24 on this host (default runtime.nodePath).",
    ),
    optional(
        "openclawPath",
        Rule::Path,
        "The OpenClaw entrypoint on this host (default runtime.openclawPath).",
    ),
];

const RUNTIME_KEYS: &[Key] = &[
    key("nodePath", Rule::Path, "Node.js 24 on the hosts."),
    key(
        "openclawPath",
        Rule::Path,
        "The OpenClaw entrypoint (dist/index.js) on the hosts.",
    ),
    key(
        "user",
        Rule::UserPrefix,
        "Prefix of every Agent's account name (its first 19 characters are used).",
    ),
    key(
        "root",
        Rule::Path,
        "The state root shared by every Driver addressing a host.",
    ),
    optional(
        "systemdUnitDirectory",
        Rule::Path,
        "Where gateway units are written (default /etc/systemd/system).",
    ),
];

const PORT_RANGE_KEYS: &[Key] = &[
    key(
        "start",
        Rule::Integer(MIN_GATEWAY_PORT as u64, 65535),
        "First gateway port.",
    ),
    key(
        "end",
        Rule::Integer(MIN_GATEWAY_PORT as u64, 65535),
        "Last gateway port.",
    ),
];

const NETWORK_KEYS: &[Key] = &[key(
    "gatewayPortRange",
    Rule::Object(PORT_RANGE_KEYS),
    "Loopback ports reserved for the gateways; the lowest unused one is allocated.",
)];

const ROOT_KEYS: &[Key] = &[
    key(
        "ssh",
        Rule::Object(SSH_KEYS),
        "The controller-side SSH inputs.",
    ),
    key(
        "hosts",
        Rule::Names(HOST_KEYS),
        "Namespace names mapped to the hosts their Agents run on.",
    ),
    key(
        "runtime",
        Rule::Object(RUNTIME_KEYS),
        "What runs on the hosts and where.",
    ),
    key("network", Rule::Object(NETWORK_KEYS), "Gateway ports."),
];

fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

fn rule_schema(rule: Rule) -> Value {
    match rule {
        Rule::Path => json!({
            "type": "string",
            // `-` ends PATH_PUNCTUATION, so it stays literal in the class.
            "pattern": format!("^/[A-Za-z0-9{PATH_PUNCTUATION}]*$"),
            "description": "An absolute, normalized path (no `.`, `..` or `//`; a trailing `/` is dropped)."
        }),
        Rule::Address => json!({
            "type": "string",
            "pattern": "^[A-Za-z0-9:][A-Za-z0-9.:-]*$",
            "maxLength": MAX_NAME_LEN
        }),
        Rule::Root => json!({"const": "root"}),
        Rule::UserPrefix => json!({
            "type": "string",
            "pattern": format!("^[a-z_][a-z0-9_-]{{0,{}}}$", MAX_USER_LEN - 1),
            "not": {"const": "root"}
        }),
        Rule::Integer(min, max) => json!({"type": "integer", "minimum": min, "maximum": max}),
        Rule::Object(keys) => object_schema(keys),
        Rule::Names(keys) => json!({
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"minLength": 1, "maxLength": MAX_NAME_LEN, "pattern": "^[^\\u0000-\\u001f\\u007f]+$"},
            "additionalProperties": object_schema(keys)
        }),
    }
}

fn object_schema(keys: &[Key]) -> Value {
    let properties: Map<String, Value> = keys
        .iter()
        .map(|k| {
            let mut s = rule_schema(k.rule);
            s["description"] = json!(k.doc);
            (k.name.to_owned(), s)
        })
        .collect();
    let required: Vec<&str> = keys.iter().filter(|k| k.required).map(|k| k.name).collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": properties,
    })
}

/// The JSON Schema (2020-12) of the configuration, rendered from the same key
/// tables the parser closes its objects with. Rules JSON Schema cannot state
/// (normalized paths, `start` not above `end`, IP address syntax) are checked by
/// [`Config::parse`] alone.
pub fn schema() -> Value {
    let mut schema = object_schema(ROOT_KEYS);
    let extra = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "SSH Compute Driver configuration (drivers.compute.configuration)",
    });
    if let (Some(s), Value::Object(e)) = (schema.as_object_mut(), extra) {
        s.extend(e);
    }
    schema
}

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

    /// The subset of JSON Schema [`schema`] uses, enough to check documents
    /// against it: `type`, `const`, `not`, `pattern`, `minimum`/`maximum`,
    /// `minLength`/`maxLength`, `minProperties`, `properties`, `required`,
    /// `additionalProperties` and `propertyNames`.
    fn conforms(schema: &Value, v: &Value) -> bool {
        let pattern_ok = |p: &Value, s: &str| {
            p.as_str()
                .is_none_or(|p| regex::Regex::new(p).unwrap().is_match(s))
        };
        if let Some(c) = schema.get("const")
            && c != v
        {
            return false;
        }
        if schema.get("not").is_some_and(|n| conforms(n, v)) {
            return false;
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => {
                let Some(s) = v.as_str() else { return false };
                let len = s.chars().count() as u64;
                pattern_ok(&schema["pattern"], s)
                    && schema["maxLength"].as_u64().is_none_or(|m| len <= m)
                    && schema["minLength"].as_u64().is_none_or(|m| len >= m)
            }
            Some("integer") => v.as_u64().is_some_and(|n| {
                schema["minimum"].as_u64().is_none_or(|m| n >= m)
                    && schema["maximum"].as_u64().is_none_or(|m| n <= m)
            }),
            Some("object") => {
                let Some(map) = v.as_object() else {
                    return false;
                };
                let props = schema["properties"].as_object();
                schema["minProperties"]
                    .as_u64()
                    .is_none_or(|m| map.len() as u64 >= m)
                    && schema["required"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|r| map.contains_key(r.as_str().unwrap()))
                    && map.iter().all(|(k, val)| {
                        let names = &schema["propertyNames"];
                        let name_ok = names.is_null()
                            || conforms(
                                &{
                                    let mut n = names.clone();
                                    n["type"] = json!("string");
                                    n
                                },
                                &json!(k),
                            );
                        let value_ok = match props.and_then(|p| p.get(k)) {
                            Some(s) => conforms(s, val),
                            None => match &schema["additionalProperties"] {
                                Value::Bool(false) => false,
                                Value::Object(_) => conforms(&schema["additionalProperties"], val),
                                _ => true,
                            },
                        };
                        name_ok && value_ok
                    })
            }
            _ => true,
        }
    }

    /// The schema and the parser agree on the driver's own fixtures, except for
    /// the rules JSON Schema cannot state, which the schema documents.
    #[test]
    fn the_schema_agrees_with_the_parser_on_every_fixture() {
        let schema = schema();
        assert_eq!(schema["additionalProperties"], json!(false));
        let dir = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        )
        .join("tests/fixtures");
        let cases: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap())
                .unwrap();
        let beyond_schema = ["invalid-port-range.json"];
        for case in cases.as_array().unwrap() {
            let file = case["file"].as_str().unwrap();
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let doc: Value = serde_json::from_str(&text).unwrap();
            let parsed = Config::parse(&text).is_ok();
            if beyond_schema.contains(&file) {
                assert!(!parsed && conforms(&schema, &doc), "{file}");
                continue;
            }
            assert_eq!(
                conforms(&schema, &doc),
                parsed,
                "{file}: schema and parser disagree"
            );
        }
    }

    /// Every required key of the tables is required by the parser, every
    /// optional one may be left out, and every integer range is enforced.
    #[test]
    fn the_parser_enforces_each_rule_of_the_tables() {
        let objects: [(&str, &[Key]); 5] = [
            ("", ROOT_KEYS),
            ("/ssh", SSH_KEYS),
            ("/hosts/stable", HOST_KEYS),
            ("/runtime", RUNTIME_KEYS),
            ("/network/gatewayPortRange", PORT_RANGE_KEYS),
        ];
        for (at, keys) in objects {
            for k in keys {
                let pointer = format!("{at}/{}", k.name);
                let without = Config::parse(&with(&pointer, None));
                assert_eq!(without.is_err(), k.required, "{pointer}");
                if let Rule::Integer(min, max) = k.rule {
                    for bad in [min - 1, max + 1] {
                        let doc = with(&pointer, Some(json!(bad)));
                        assert!(
                            error(&doc).contains(&format!("from {min} to {max}")),
                            "{pointer} = {bad}"
                        );
                    }
                }
            }
        }
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

    /// What the spec accepts and the driver used to refuse: a runtime user longer
    /// than an account name (accounts take its first 19 characters), and a path
    /// with a trailing `/` (the same directory, kept without it).
    #[test]
    fn long_runtime_users_and_trailing_slashes_are_accepted() {
        let mut doc = spec_example();
        doc["runtime"]["user"] = json!("a-forty-character-runtime-user-prefix-xx");
        doc["runtime"]["root"] = json!("/var/lib/openclaw-enterprise/");
        doc["hosts"]["stable"]["openclawPath"] = json!("/opt/openclaw/current/dist/index.js");
        doc["ssh"]["knownHostsFile"] = json!("/etc/openclaw/ssh/known_hosts");
        doc["runtime"]["systemdUnitDirectory"] = json!("/etc/systemd/system/");
        let config = Config::parse(&doc.to_string()).unwrap();
        assert_eq!(config.runtime.root, "/var/lib/openclaw-enterprise");
        assert_eq!(config.runtime.systemd_unit_directory, "/etc/systemd/system");
        assert_eq!(config.runtime.user.len(), 40);
        let binding = crate::testing::binding();
        let ids = crate::ids::AgentIds::new(&binding, &config.runtime.user).unwrap();
        assert_eq!(
            ids.account,
            format!(
                "a-forty-character-r-{}",
                crate::ids::short_hash("ns-1:agent-1")
            )
        );
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
                "configuration.network.gatewayPortRange.start: must be an integer from 1024 to 65535",
            ),
            (
                "/network/gatewayPortRange/end",
                Some(json!(70000)),
                "configuration.network.gatewayPortRange.end: must be an integer from 1024 to 65535",
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
                "configuration.runtime.user: must be a Linux user name prefix of at most 255 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("-oc")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 255 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("9oc")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 255 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 255 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
            ),
            (
                "/runtime/user",
                Some(json!("open claw")),
                "configuration.runtime.user: must be a Linux user name prefix of at most 255 characters: lowercase letters, digits, `_` and `-`, starting with a letter or `_`",
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
        let normal = "must be a normalized path below / (no `//`, `.` or `..`)";
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
            ("/runtime/root", "/var/lib//", normal.to_owned()),
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
            "configuration.hosts.\"bad\\u{1}name\": a Namespace name must be 1 to 253 bytes without control characters"
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
