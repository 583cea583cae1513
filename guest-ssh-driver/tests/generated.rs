//! Generated input against the driver's parsers: the configuration document and
//! the server-owned IDs the host layout is built from. Whatever a hostile
//! installation or controller sends, parsing does not panic, a refusal names the
//! key at fault and stays short, and an accepted ID reaches the layout only as
//! its 12-hex-digit hash.
//!
//! `PROPTEST_CASES` sets the number of cases per property (256 by default; CI
//! runs the default).

use guest_ssh_driver::ids::{MAX_ID_LEN, account_name, check_id, short_hash};
use guest_ssh_driver::validate_configuration;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

/// The longest refusal a generated input may produce: a message names the key
/// and the rule, and quotes at most a bounded excerpt of a value.
const MAX_MESSAGE: usize = 1024;

fn config() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

/// A valid configuration, the starting point every mutation changes one key of.
fn base() -> Value {
    json!({
        "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519",
                "knownHostsFile": "/etc/openclaw/ssh/known_hosts", "connectTimeoutSeconds": 10},
        "hosts": {
            "stable": {"address": "203.0.113.10", "port": 22, "user": "root"},
            "canary": {"address": "gw-1.example.com", "user": "root", "nodePath": "/opt/node24/bin/node"},
        },
        "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/dist/index.js",
                    "user": "openclaw", "root": "/var/lib/openclaw-enterprise",
                    "systemdUnitDirectory": "/etc/systemd/system"},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    })
}

/// Every key path of `v` (objects only), outermost first.
fn key_paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Value::Object(map) = v {
        for (k, child) in map {
            prefix.push(k.clone());
            out.push(prefix.clone());
            key_paths(child, prefix, out);
            prefix.pop();
        }
    }
}

fn object_at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Map<String, Value> {
    let mut at = v;
    for k in path {
        at = at.get_mut(k).unwrap();
    }
    at.as_object_mut().unwrap()
}

/// Text a hostile document would try: any Unicode, path separators and `..`,
/// NUL and other controls, shell and systemd metacharacters, and 10 KB runs.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9./\\\\ %$\"'`;|&*?~\\x00\\n\\t-]{0,40}",
        prop::sample::select(vec![
            "",
            ".",
            "..",
            "/..",
            "/var/lib/../../etc",
            "//",
            "/",
            "\u{0}",
            "~root",
            "a\nb",
            "$(id)",
            "%h",
            "\u{202e}",
            "\u{fffd}",
        ])
        .prop_map(str::to_string),
        ("[a-z/.]{1,4}", 1usize..3000).prop_map(|(unit, n)| unit.repeat(n)),
    ]
}

/// Any JSON value, texts and keys drawn from [`text`].
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The dotted key path the driver names (`configuration.a.b`).
fn dotted(path: &[String]) -> String {
    std::iter::once("configuration")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(".")
}

/// A refusal names `path`, a key inside it (a changed object can lack a
/// required key) or a key enclosing it (the object whose rule it broke). A key
/// that is not a plain word is named quoted and may be cut, so only the plain
/// words of `path` before it are compared.
fn names_the_key(message: &str, path: &[String]) -> bool {
    let plain = path
        .iter()
        .take_while(|k| {
            !k.is_empty()
                && k.len() <= 64
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .count();
    if plain < path.len() {
        let prefix = format!("{}.", dotted(&path[..plain]));
        return message.starts_with(&prefix)
            || (0..=plain).any(|n| message.starts_with(&format!("{}: ", dotted(&path[..n]))));
    }
    let at = dotted(path);
    message.starts_with(&format!("{at}: "))
        || message.starts_with(&format!("{at}."))
        || (0..path.len()).any(|n| message.starts_with(&format!("{}: ", dotted(&path[..n]))))
}

proptest! {
    #![proptest_config(config())]

    /// One key of a valid document replaced by any value.
    #[test]
    fn a_changed_value_is_accepted_or_refused_naming_its_key(
        pick in any::<prop::sample::Index>(),
        replacement in value(),
    ) {
        let mut doc = base();
        let mut paths = Vec::new();
        key_paths(&doc, &mut Vec::new(), &mut paths);
        let path = pick.get(&paths).clone();
        let (last, parent) = path.split_last().unwrap();
        object_at(&mut doc, parent).insert(last.clone(), replacement);
        if let Err(e) = validate_configuration(&doc.to_string()) {
            let message = e.to_string();
            prop_assert!(message.len() <= MAX_MESSAGE, "{} bytes: {message:.200}", message.len());
            prop_assert!(names_the_key(&message, &path), "{message:.300} does not name {}", dotted(&path));
        }
    }

    /// A key of any name added to any object of a valid document.
    #[test]
    fn an_added_key_is_accepted_only_where_names_are_free_and_is_named_otherwise(
        pick in any::<prop::sample::Index>(),
        key in text(),
        added in value(),
    ) {
        let doc = base();
        let mut objects = vec![Vec::new()];
        let mut paths = Vec::new();
        key_paths(&doc, &mut Vec::new(), &mut paths);
        objects.extend(paths.into_iter().filter(|p| {
            let mut at = &doc;
            for k in p { at = &at[k]; }
            at.is_object()
        }));
        let parent = pick.get(&objects).clone();
        let mut changed = doc.clone();
        let fresh = !object_at(&mut changed, &parent).contains_key(&key);
        object_at(&mut changed, &parent).insert(key.clone(), added);
        let result = validate_configuration(&changed.to_string());
        // Only `hosts` takes keys of its own choosing (Namespace names).
        if fresh && parent != ["hosts"] {
            let e = result.expect_err("an unknown key was accepted");
            let message = e.to_string();
            let mut path = parent.clone();
            path.push(key);
            prop_assert!(message.len() <= MAX_MESSAGE, "{} bytes: {message:.200}", message.len());
            prop_assert!(names_the_key(&message, &path), "{message:.300}");
        } else if let Err(e) = result {
            let message = e.to_string();
            let mut path = parent.clone();
            path.push(key);
            prop_assert!(message.len() <= MAX_MESSAGE, "{} bytes: {message:.200}", message.len());
            prop_assert!(names_the_key(&message, &path), "{message:.300}");
        }
    }

    /// Any text as a document: never a panic, always the document named.
    #[test]
    fn any_text_is_parsed_or_refused(document in text()) {
        if let Err(e) = validate_configuration(&document) {
            let message = e.to_string();
            prop_assert!(message.starts_with("configuration"), "{message:.200}");
            prop_assert!(message.len() <= MAX_MESSAGE);
        }
    }

    /// A server-owned ID is refused naming its field, or reaches the layout
    /// only as 12 lowercase hex digits, and the account name stays a valid
    /// Linux user name.
    #[test]
    fn an_id_is_refused_naming_its_field_or_becomes_a_hash(
        id in text(),
        other in text(),
        user in "[a-z_][a-z0-9_-]{0,254}",
    ) {
        match check_id("agent.id", &id) {
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.starts_with("agent.id: "), "{message:.200}");
                prop_assert!(message.len() <= MAX_MESSAGE);
            }
            Ok(()) => {
                prop_assert!(!id.is_empty() && id.len() <= MAX_ID_LEN);
                prop_assert!(!id.chars().any(|c| c.is_control() || "%$\"\\".contains(c)));
                let hash = short_hash(&id);
                prop_assert!(hash.len() == 12 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
                let account = account_name(&user, &other, &id);
                prop_assert!(account.len() <= 32, "{account}");
                prop_assert!(account.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'));
            }
        }
    }
}
