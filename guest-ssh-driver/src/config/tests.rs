//! The parser held to every rule of the key tables and the spec.

use super::keys::{Key, Rule};
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
            .is_none_or(|p| regex_lite::Regex::new(p).unwrap().is_match(s))
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
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
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
