//! Generated input against the sandbox configuration parser
//! (`agents.defaults.sandbox`): one key of a sound document changed to any
//! value, deleted, or added beside the others. Nothing panics; a refusal is
//! a configuration error of at most 2 KiB naming the key at fault from
//! `agents`; an accepted document gives a target, a client and a workspace
//! root the host can use as they are, and a layout inside that root.
//!
//! Each property sets its own case count (in its doc), chosen to run in well
//! under a second in release mode.

use guest_ssh_sandbox::config::{Config, SshCommand};
use guest_ssh_sandbox::layout::Layout;
use guest_ssh_sandbox::model::SandboxScope;
use occ_strategies::{
    add_key, cases, change_key, hostile_text, is_normalized_root, json_value, object_at,
    replacement,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

/// The longest refusal a generated input may produce.
const MAX_MESSAGE: usize = 2048;

/// A sound document that sets every key the parser reads, the starting point
/// of every change.
fn base() -> Value {
    json!({"agents": {"defaults": {"sandbox": {
        "mode": "all", "backend": "ssh", "scope": "session", "workspaceAccess": "rw",
        "perSession": true, "sessionToolsVisibility": "spawned", "workspaceRoot": "/x",
        "docker": {"image": "x"}, "browser": {"enabled": false}, "prune": {"idleHours": 1},
        "ssh": {
            "target": "user@gateway-host:22", "command": "/usr/bin/ssh",
            "workspaceRoot": "/tmp/openclaw-sandboxes",
            "strictHostKeyChecking": true, "updateHostKeys": true,
            "identityFile": "~/.ssh/id_ed25519", "certificateFile": "~/.ssh/id_ed25519-cert.pub",
            "knownHostsFile": "~/.ssh/known_hosts",
            "identityData": {"source": "env", "provider": "default", "id": "SSH_KEY"},
            "knownHostsData": "gateway-host ssh-ed25519 AAAA",
        },
    }}}})
}

/// Text a hostile configuration would hold: any Unicode, separators and `..`,
/// NUL and other controls, metacharacters, targets and roots almost right,
/// and 10 KB runs.
fn text() -> BoxedStrategy<String> {
    hostile_text(
        "a-z0-9./\\\\ @:%$\"'`;|&*?~\\x00\\n\\t-",
        &[
            "",
            " ",
            ".",
            "..",
            "/",
            "/a/..",
            "//x//",
            "ssh",
            "ssh me@h",
            "me@h",
            "me@[::1]:22",
            "me@h:0",
            "-o@h",
            "me@-h",
            "agent",
            "rw",
            "all",
            "env",
            "\u{0}",
            "\u{202e}",
        ],
        "a-z@/.:-",
    )
}

/// Any JSON value, texts and keys drawn from [`text`].
fn value() -> BoxedStrategy<Value> {
    json_value(text())
}

/// Whether `key` is named as written: a plain word of a bounded length.
fn plain(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A refusal names `path` (from `agents`), a key inside it (a changed object
/// can lack a required key or hold a bad one) or a key enclosing it (the
/// object whose rule it broke). A key that is not a plain word may be named
/// quoted and cut, so only the plain words before it are compared.
fn names_the_key(message: &str, path: &[String]) -> bool {
    let named = |n: usize| path[..n].join(".");
    let words = path.iter().take_while(|k| plain(k)).count();
    let enclosing =
        (1..=words.min(path.len() - 1)).any(|n| message.starts_with(&format!("{}: ", named(n))));
    if words < path.len() {
        let prefix = if words == 0 {
            String::new()
        } else {
            format!("{}.", named(words))
        };
        return enclosing || message.starts_with(&prefix) && message.len() > prefix.len();
    }
    let at = named(path.len());
    enclosing || message.starts_with(&format!("{at}: ")) || message.starts_with(&format!("{at}."))
}

/// Parses a changed document: a refusal is a short configuration error
/// naming `path`; an accepted one holds a target, a client and a root the
/// host can take as they are, and gives a layout inside that root. Whether
/// it was accepted.
fn check_document(doc: &Value, path: &[String]) -> Result<bool, TestCaseError> {
    let config = match Config::parse(&doc.to_string()) {
        Err(e) => {
            let message = e.to_string();
            prop_assert_eq!(e.code(), "invalid-configuration");
            prop_assert!(
                !message.is_empty() && message.len() <= MAX_MESSAGE,
                "{} bytes: {message:.200}",
                message.len()
            );
            prop_assert!(
                names_the_key(&message, path),
                "{message:.300} does not name {}",
                path.join(".")
            );
            return Ok(false);
        }
        Ok(config) => config,
    };
    let ssh = &config.ssh;
    // Neither the login name nor the host reads as an option or splits; the
    // host is an IP address or made of a DNS name's characters.
    let safe = |s: &str| {
        !s.is_empty()
            && !s.starts_with('-')
            && !s.chars().any(|c| c.is_whitespace() || c.is_control())
    };
    let host = &ssh.target.host;
    let addressable = host.parse::<std::net::IpAddr>().is_ok()
        || host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    prop_assert!(
        safe(&ssh.target.user) && safe(host) && addressable && ssh.target.port > 0,
        "{:?}",
        ssh.target
    );
    if let SshCommand::Path(p) = &ssh.command {
        prop_assert!(
            p.starts_with('/') && !p.chars().any(char::is_control),
            "{p:?}"
        );
    }
    prop_assert!(
        is_normalized_root(&ssh.workspace_root),
        "{:?}",
        ssh.workspace_root
    );
    let scope = SandboxScope {
        session_key: Some("agent:main:main".into()),
        workspace_dir: "/home/me/ws".into(),
        agent_workspace_dir: Some("/home/me/agent".into()),
        ..SandboxScope::default()
    };
    let layout = Layout::new(&config, &scope).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let root = ssh.workspace_root.trim_end_matches('/');
    for m in &layout.mounts {
        prop_assert!(
            m.container_root.starts_with(&format!("{root}/")),
            "{}",
            m.container_root
        );
    }
    Ok(true)
}

proptest! {
    #![proptest_config(cases(1024))]

    /// One key of a sound document, at any depth, replaced by any value (a
    /// string a third of the time) or deleted (1024 cases): refused naming
    /// it, or a configuration the host can use.
    #[test]
    fn a_changed_or_deleted_key_is_refused_by_name_or_usable(
        pick in any::<prop::sample::Index>(),
        replacement in replacement(value(), text()),
    ) {
        let mut doc = base();
        let path = change_key(&mut doc, &pick, replacement);
        check_document(&doc, &path)?;
    }

    /// A key of any name added to any object of a sound document (1024
    /// cases): refused naming it, except in the objects of other backends'
    /// settings (`docker`, `browser`, `prune`), which are not read.
    #[test]
    fn an_added_key_is_refused_by_name_where_objects_are_closed(
        pick in any::<prop::sample::Index>(),
        key in text(),
        added in value(),
    ) {
        let a = add_key(&base(), &pick, &key, added);
        let accepted = check_document(&a.doc, &a.path)?;
        let open = ["docker", "browser", "prune"].iter().any(|o| a.parent.last().is_some_and(|p| p == o));
        prop_assert!(!(accepted && a.fresh && !open), "an unknown key was accepted");
    }
}

/// Text shaped like `user@host[:port]`: users, hosts of names, addresses,
/// colons, brackets and what ssh would read as an option, ports in and out of
/// range; now and then pieces in any order.
fn target_text() -> impl Strategy<Value = String> {
    let user = prop::sample::select(vec!["me", "-o", "a.b", "", "u b", "é", "ssh me"]);
    let host = prop::collection::vec(
        prop::sample::select(vec![
            "h",
            "gw-1.example.com",
            "10.0.0.1",
            ":",
            "::1",
            "fe80",
            "-o",
            " ",
            "\t",
            "\u{0}",
            "[",
            "]",
            "@",
            "é",
            ".",
        ]),
        0..4,
    );
    let port = prop::option::of(prop::sample::select(vec![
        "22", "0", "65536", "+22", "", " 22",
    ]));
    let shaped = (user, host, port).prop_map(|(user, host, port)| {
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("{user}@{}{port}", host.concat())
    });
    let loose = prop::collection::vec(
        prop::sample::select(vec!["me", "@", "[", "]", "::1", ":", "22", " ", "-", "h"]),
        0..7,
    )
    .prop_map(|pieces| pieces.concat());
    prop_oneof![4 => shaped, 1 => loose]
}

proptest! {
    #![proptest_config(cases(1024))]

    /// `ssh.target` given target-like text (1024 cases): refused naming it,
    /// or a login name and host neither of which ssh would read as an option.
    #[test]
    fn a_target_is_refused_by_name_or_usable(target in target_text()) {
        let mut doc = base();
        doc["agents"]["defaults"]["sandbox"]["ssh"]["target"] = json!(target);
        let path: Vec<String> = ["agents", "defaults", "sandbox", "ssh", "target"].map(String::from).to_vec();
        check_document(&doc, &path)?;
    }
}

/// The sound document is accepted, and a changed, a deleted and an added key
/// are refused by name: both branches of the properties above are reachable.
#[test]
fn the_sound_document_is_usable_and_changes_are_named() {
    assert!(check_document(&base(), &[]).unwrap());
    let path = |p: &str| p.split('.').map(String::from).collect::<Vec<_>>();
    let mut doc = base();
    doc["agents"]["defaults"]["sandbox"]["ssh"]["target"] = json!("gateway-host");
    assert!(!check_document(&doc, &path("agents.defaults.sandbox.ssh.target")).unwrap());
    let mut doc = base();
    object_at(&mut doc, &path("agents.defaults.sandbox")).remove("ssh");
    assert!(!check_document(&doc, &path("agents.defaults.sandbox.ssh")).unwrap());
    let mut doc = base();
    doc["agents"]["defaults"]["sandbox"]["ssh"]["port"] = json!(22);
    assert!(!check_document(&doc, &path("agents.defaults.sandbox.ssh.port")).unwrap());
}
