//! Generated input against the driver's parsers: the configuration document and
//! the server-owned IDs the host layout is built from. Whatever a hostile
//! installation or controller sends, parsing does not panic, a refusal names the
//! key at fault and stays short, an accepted document holds only paths the spec
//! allows, and an accepted ID reaches the layout only as its 12-hex-digit hash.
//!
//! `PROPTEST_CASES` sets the number of cases of the properties that take the
//! default (256; CI runs the default); the others name their count in their
//! doc.

use guest_ssh_driver::config::{self, PATH_PUNCTUATION};
use guest_ssh_driver::ids::{
    AgentIds, MAX_ID_LEN, MAX_REVISION_NUMBER, RevisionIds, account_name, check_id, short_hash,
};
use guest_ssh_driver::model::{Agent, AgentBinding, Namespace, Revision};
use guest_ssh_driver::validate_configuration;
// The unit tests' fixtures (`src/testing.rs`), which name the model as
// `crate::model`; the ones this file does not call go unused.
use guest_ssh_driver::model;
#[path = "../src/testing.rs"]
#[allow(dead_code)]
mod testing;
use occ_strategies::{
    add_key, cases, change_key, default_cases, hostile_text, json_value, key_paths, set_or_remove,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value, json};

/// The longest refusal a generated input may produce: a message names the key
/// and the rule, and quotes at most a bounded excerpt of a value.
const MAX_MESSAGE: usize = 1024;

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

/// Text a hostile document would try: any Unicode, path separators and `..`,
/// NUL and other controls, shell and systemd metacharacters, and 10 KB runs.
fn text() -> BoxedStrategy<String> {
    hostile_text(
        "a-z0-9./\\\\ %$\"'`;|&*?~\\x00\\n\\t-",
        &[
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
        ],
        "a-z/.",
    )
}

/// Any JSON value, texts and keys drawn from [`text`].
fn value() -> BoxedStrategy<Value> {
    json_value(text())
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

/// The spec's rule, "Paths cannot contain whitespace, quotes, control
/// characters, shell metacharacters, or systemd expansion syntax", and the
/// driver's own, stricter one: absolute and normalized, of ASCII letters,
/// digits and [`PATH_PUNCTUATION`] only.
fn obeys_path_rule(path: &str) -> bool {
    const FORBIDDEN: &str = "\"'`|&;<>()$*?[]{}~!#\\%";
    let spec = !path
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || FORBIDDEN.contains(c));
    let allowed = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || PATH_PUNCTUATION.contains(c));
    let normalized = path.strip_prefix('/').is_some_and(|rest| {
        rest.split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
    });
    spec && allowed && normalized
}

/// Every path of a parsed configuration, with its key.
fn paths_of(c: &config::Config) -> Vec<(String, &str)> {
    let mut paths = vec![
        ("ssh.identityFile".into(), c.ssh.identity_file.as_str()),
        ("ssh.knownHostsFile".into(), &c.ssh.known_hosts_file),
        ("runtime.nodePath".into(), &c.runtime.node_path),
        ("runtime.openclawPath".into(), &c.runtime.openclaw_path),
        ("runtime.root".into(), &c.runtime.root),
        (
            "runtime.systemdUnitDirectory".into(),
            &c.runtime.systemd_unit_directory,
        ),
    ];
    for p in c.placements() {
        paths.push((format!("hosts.{}.nodePath", p.alias), p.node_path));
        paths.push((format!("hosts.{}.openclawPath", p.alias), p.openclaw_path));
    }
    paths
}

/// Parses a changed document: a refusal is short and names one of `changed`
/// ([`names_the_key`]); an accepted document holds only paths that obey the
/// rule. Whether it was accepted.
fn check_document(doc: &Value, changed: &[Vec<String>]) -> Result<bool, TestCaseError> {
    match config::Config::parse(&doc.to_string()) {
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                !message.is_empty() && message.len() <= MAX_MESSAGE,
                "{} bytes: {message:.200}",
                message.len()
            );
            prop_assert!(
                changed.iter().any(|path| names_the_key(&message, path)),
                "{message:.300} does not name {:?}",
                changed.iter().map(|p| dotted(p)).collect::<Vec<_>>()
            );
            Ok(false)
        }
        Ok(parsed) => {
            for (key, path) in paths_of(&parsed) {
                prop_assert!(obeys_path_rule(path), "{key} {path:?} was accepted");
            }
            Ok(true)
        }
    }
}

/// Whether the schema the driver publishes requires the key at `path` (a
/// `hosts` entry is not: any one of them may go while another remains).
fn required(path: &[String]) -> bool {
    let mut at = config::schema();
    let (last, parent) = path.split_last().unwrap();
    for k in parent {
        at = match at["properties"].get(k) {
            Some(s) => s.clone(),
            None => at["additionalProperties"].clone(),
        };
    }
    at["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|k| k == last.as_str()))
}

proptest! {
    #![proptest_config(default_cases())]

    /// One key of a valid document replaced by any value.
    #[test]
    fn a_changed_value_is_accepted_or_refused_naming_its_key(
        pick in any::<prop::sample::Index>(),
        replacement in value(),
    ) {
        let mut doc = base();
        let path = change_key(&mut doc, &pick, Some(replacement));
        check_document(&doc, &[path])?;
    }

    /// A key of any name added to any object of a valid document.
    #[test]
    fn an_added_key_is_accepted_only_where_names_are_free_and_is_named_otherwise(
        pick in any::<prop::sample::Index>(),
        key in text(),
        added in value(),
    ) {
        let a = add_key(&base(), &pick, &key, added);
        let accepted = check_document(&a.doc, &[a.path])?;
        // Only `hosts` takes keys of its own choosing (Namespace names).
        prop_assert!(!(accepted && a.fresh && a.parent != ["hosts"]), "an unknown key was accepted");
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

proptest! {
    #![proptest_config(cases(512))]

    /// Up to three keys of a valid document deleted, at any depth (512
    /// cases): refused naming a deleted key exactly when the schema requires
    /// one of them (or no host is left), and otherwise accepted with the
    /// defaults, every path still obeying the rule.
    #[test]
    fn deleted_keys_are_refused_by_name_exactly_when_required(
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
    ) {
        let mut doc = base();
        let paths = key_paths(&doc);
        let mut deleted: Vec<Vec<String>> = picks.iter().map(|i| i.get(&paths).clone()).collect();
        deleted.sort();
        deleted.dedup();
        // A key inside a deleted one goes with it.
        deleted = deleted
            .iter()
            .filter(|p| !deleted.iter().any(|q| q.len() < p.len() && p.starts_with(q)))
            .cloned()
            .collect();
        for path in &deleted {
            set_or_remove(&mut doc, path, None);
        }
        let no_host = doc["hosts"].as_object().is_some_and(Map::is_empty);
        let mut named = deleted.clone();
        if no_host {
            named.push(vec!["hosts".into()]);
        }
        let accepted = check_document(&doc, &named)?;
        let refusable = no_host || deleted.iter().any(|p| required(p));
        prop_assert_eq!(accepted, !refusable, "{:?}", deleted);
    }
}

/// A deleted optional key is accepted and a deleted required one refused: both
/// branches of the property above are reachable.
#[test]
fn deleting_an_optional_key_is_accepted_and_a_required_one_named() {
    for (path, required) in [
        (vec!["runtime", "systemdUnitDirectory"], false),
        (vec!["hosts", "canary"], false),
        (vec!["runtime", "root"], true),
    ] {
        let path: Vec<String> = path.into_iter().map(String::from).collect();
        let mut doc = base();
        set_or_remove(&mut doc, &path, None);
        assert_eq!(
            check_document(&doc, std::slice::from_ref(&path)).unwrap(),
            !required,
            "{path:?}"
        );
    }
}

/// Path-like text: absolute or not, segments of the allowed characters, `.`,
/// `..` and empty ones, and now and then one character the spec forbids.
fn path_text() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        6 => "[A-Za-z0-9_.:@+-]{1,8}",
        1 => prop::sample::select(vec!["", ".", ".."]).prop_map(str::to_string),
        1 => ("[a-z]{0,3}", prop::sample::select(
                " \t\n\r\u{0}\u{7}\u{7f}\u{a0}\u{2028}\"'`|&;<>()$*?[]{}~!#\\%é🙂".chars().collect::<Vec<_>>()
             ), "[a-z]{0,3}").prop_map(|(a, c, b)| format!("{a}{c}{b}")),
    ];
    (
        any::<bool>(),
        prop::collection::vec(segment, 1..6),
        any::<bool>(),
    )
        .prop_map(|(absolute, segments, trailing)| {
            let joined = segments.join("/");
            let lead = if absolute { "/" } else { "" };
            let tail = if trailing { "/" } else { "" };
            format!("{lead}{joined}{tail}")
        })
}

proptest! {
    #![proptest_config(cases(1024))]

    /// A path key of a valid document given path-like text (1024 cases):
    /// accepted exactly when the text, less one trailing `/`, obeys the rule,
    /// and otherwise refused naming the key.
    #[test]
    fn a_path_is_accepted_exactly_when_it_obeys_the_rule(
        pick in any::<prop::sample::Index>(),
        value in path_text(),
    ) {
        let mut doc = base();
        let mut paths = key_paths(&doc);
        paths.retain(|p| {
            let mut at = &doc;
            for k in p { at = &at[k]; }
            at.as_str().is_some_and(|s| s.starts_with('/'))
        });
        let path = pick.get(&paths).clone();
        set_or_remove(&mut doc, &path, Some(json!(value)));
        let accepted = check_document(&doc, &[path])?;
        let obeys = obeys_path_rule(&value) || value.strip_suffix('/').is_some_and(obeys_path_rule);
        prop_assert_eq!(accepted, obeys);
    }
}

/// A sound path is accepted, one with a trailing `/` too, and one with `$`
/// refused by name: both branches of the property above are reachable.
#[test]
fn a_sound_path_is_accepted_and_an_expanding_one_named() {
    let path: Vec<String> = ["runtime", "nodePath"].map(String::from).to_vec();
    for (value, accepted) in [
        ("/opt/node24/bin/node", true),
        ("/opt/node24/", true),
        ("/opt/$x", false),
    ] {
        let mut doc = base();
        doc["runtime"]["nodePath"] = json!(value);
        let got = check_document(&doc, std::slice::from_ref(&path)).unwrap();
        assert_eq!(got, accepted, "{value}");
    }
}

/// IDs as a hostile controller would send them: any Unicode mixed with
/// separators, `..`, NUL, line breaks and what systemd expands, runs around
/// [`MAX_ID_LEN`], and up to 10 KB.
fn id_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9_.:@-]{1,12}",
        "[a-z]{250,260}",
        prop::sample::select(vec![
            "/", "\\", "..", ".", "\u{0}", "\n", "\r", ":", "%", "$", "\"", "é", "🙂", "\u{202e}",
        ])
        .prop_map(str::to_string),
    ];
    prop_oneof![
        3 => prop::collection::vec(fragment.clone(), 1..12).prop_map(|f| f.concat()),
        1 => (fragment, 1usize..10_000).prop_map(|(f, n)| f.repeat(n.min(10_000 / f.len().max(1)))),
    ]
}

/// A server-owned ID: a sound one, or [`id_text`].
fn id() -> impl Strategy<Value = String> {
    prop_oneof![1 => "[a-zA-Z0-9_.:@/-]{1,40}", 2 => id_text()]
}

/// The reason an ID is refused, by the rule `check_id` documents.
fn bad_id(id: &str) -> bool {
    id.is_empty()
        || id.len() > MAX_ID_LEN
        || id
            .chars()
            .any(|c| c.is_control() || matches!(c, '%' | '$' | '"' | '\\'))
}

fn binding(namespace: &str, agent: &str, principal: &str) -> AgentBinding {
    AgentBinding {
        namespace: Namespace {
            id: namespace.into(),
            name: "stable".into(),
            existing_namespace: None,
            status: "ready".into(),
        },
        agent: Agent {
            id: agent.into(),
            namespace_id: namespace.into(),
            service_principal_id: principal.into(),
        },
    }
}

/// The unit tests' revision with another id and number, and no configuration.
fn revision(id: &str, number: u64) -> Revision {
    Revision {
        id: id.into(),
        revision: number,
        configuration: "{}".into(),
        ..testing::revision()
    }
}

/// 12 lowercase hex digits: what a hash puts in a name.
fn is_short_hash(s: &str) -> bool {
    s.len() == 12
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A Linux account name that is also one safe path component.
fn is_account(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// What `new` refused or derived: a refusal must name `refused`, the field
/// the rule refuses first; anything derived is held to `check`.
fn check_derived<T>(
    derived: Result<T, guest_ssh_driver::Error>,
    refused: Option<&str>,
    check: impl FnOnce(T) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    match (derived, refused) {
        (Err(e), Some(field)) => {
            let message = e.to_string();
            prop_assert!(
                message.starts_with(&format!("{field}: ")),
                "{message:.200} does not name {field}"
            );
            prop_assert!(message.len() <= MAX_MESSAGE, "{} bytes", message.len());
            Ok(())
        }
        (Ok(derived), None) => check(derived),
        (Err(e), None) => Err(TestCaseError::fail(format!("sound IDs refused: {e:.200}"))),
        (Ok(_), Some(field)) => Err(TestCaseError::fail(format!("{field} was accepted"))),
    }
}

proptest! {
    #![proptest_config(cases(1024))]

    /// The IDs of a binding and of a revision, as the layout types take them
    /// (1024 cases): refused naming the first field the rule refuses, or every
    /// name derived for the host (the Namespace, Agent and revision hashes and
    /// the account) depends on the IDs only through their hash and is one
    /// safe path component.
    #[test]
    fn ids_reach_the_layout_only_through_their_hash(
        namespace in id(),
        agent in id(),
        principal in id(),
        rev in id(),
        number in prop_oneof![1u64..=MAX_REVISION_NUMBER, any::<u64>()],
        user in "[a-z_][a-z0-9_-]{0,254}",
    ) {
        let refused = [("namespace.id", &namespace), ("agent.id", &agent), ("agent.servicePrincipalId", &principal)]
            .into_iter()
            .find(|(_, id)| bad_id(id))
            .map(|(field, _)| field);
        check_derived(AgentIds::new(&binding(&namespace, &agent, &principal), &user), refused, |ids| {
            prop_assert_eq!(&ids.namespace_hash, &short_hash(&namespace));
            prop_assert_eq!(&ids.agent_hash, &short_hash(&agent));
            prop_assert!(is_short_hash(&ids.namespace_hash) && is_short_hash(&ids.agent_hash));
            let prefix: String = user.chars().take(19).collect();
            prop_assert_eq!(&ids.account, &format!("{prefix}-{}", short_hash(&format!("{namespace}:{agent}"))));
            prop_assert!(is_account(&ids.account), "{}", ids.account);
            Ok(())
        })?;
        let refused = if bad_id(&rev) {
            Some("revision.id")
        } else {
            (!(1..=MAX_REVISION_NUMBER).contains(&number)).then_some("revision.revision")
        };
        check_derived(RevisionIds::new(&revision(&rev, number)), refused, |ids| {
            prop_assert_eq!(&ids.hash, &short_hash(&rev));
            prop_assert!(is_short_hash(&ids.hash));
            Ok(())
        })?;
    }
}

/// Sound IDs reach the layout, and a NUL anywhere is refused by name: both
/// branches of the property above are reachable.
#[test]
fn sound_ids_are_accepted_and_a_nul_named() {
    let ids = AgentIds::new(&binding("ns-1", "agent-1", "sp-1"), "openclaw").unwrap();
    assert_eq!(ids.account, "openclaw-cd338df39c47");
    assert_eq!(
        RevisionIds::new(&revision("rev-1", 1)).unwrap().hash,
        "a6d1d4ea8e5a"
    );
    let e = AgentIds::new(&binding("ns-1", "a\u{0}/../b", "sp-1"), "openclaw").unwrap_err();
    assert!(e.to_string().starts_with("agent.id: "), "{e}");
}
