//! The configuration's keys, written once: the tables [`super::Config::parse`]
//! closes every object with, and the JSON Schema [`schema`] renders from them.

use occ_ssh_target::settings::MAX_NAME_LEN;
use serde_json::{Map, Value, json};

use super::{MAX_CONNECT_TIMEOUT_SECONDS, MAX_USER_LEN, MIN_GATEWAY_PORT, PATH_PUNCTUATION};

/// How one key is checked. The parser closes every object with these tables and
/// [`schema`] renders them as JSON Schema, so the schema a controller shows and the
/// keys the driver accepts come from one place (the tests below hold the parser to
/// each rule).
#[derive(Debug, Clone, Copy)]
pub(super) enum Rule {
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
pub(super) struct Key {
    pub(super) name: &'static str,
    pub(super) required: bool,
    pub(super) rule: Rule,
    pub(super) doc: &'static str,
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

pub(super) const SSH_KEYS: &[Key] = &[
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

pub(super) const HOST_KEYS: &[Key] = &[
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

pub(super) const RUNTIME_KEYS: &[Key] = &[
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

pub(super) const PORT_RANGE_KEYS: &[Key] = &[
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

pub(super) const NETWORK_KEYS: &[Key] = &[key(
    "gatewayPortRange",
    Rule::Object(PORT_RANGE_KEYS),
    "Loopback ports reserved for the gateways; the lowest unused one is allocated.",
)];

pub(super) const ROOT_KEYS: &[Key] = &[
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

pub(super) fn names(keys: &[Key]) -> Vec<&'static str> {
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
