//! Generated input against the rules the component and the host share: a
//! caller's path (and its `cwd`) against a scope's layout, a scope key's
//! runtime id, and the settings the layout takes from the configuration.
//! Nothing panics; a resolved path stays inside one of the layout's mounts;
//! every runtime id is one directory name of ours; a refused setting names
//! its key in a short message.
//!
//! Each property sets its own case count (in its doc), chosen to run in well
//! under a second in release mode.

use std::sync::LazyLock;

use occ_ssh_target::layout::{Access, Layout, Mount, MountInfo, ScopeRef, Settings, join};
use occ_ssh_target::paths::{PathError, Resolved, exec_workdir, resolve};
use occ_ssh_target::scope::{Scope, is_runtime_id, runtime_id, scope_key};
use occ_strategies::{
    cases, change_key, hostile_text, is_normalized_root, json_value, replacement,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

/// The longest refusal a generated input may produce.
const MAX_MESSAGE: usize = 2048;

/// Layouts of every shape: one mount or two, an Agent workspace inside the
/// sandbox's own, the filesystem root as a local workspace or as the
/// workspace root, and a scope key whose runtime id holds `..`.
static LAYOUTS: LazyLock<Vec<Layout>> = LazyLock::new(|| {
    let layout = |root: &str, access, key: Option<&str>, ws: &str, agent: Option<&str>| {
        let settings = Settings {
            workspace_root: root.into(),
            scope: Scope::Shared,
            access,
        };
        let scope = ScopeRef {
            scope_key: key,
            session_key: Some("agent:main:main"),
            workspace_dir: ws,
            agent_workspace_dir: agent,
            ..ScopeRef::default()
        };
        Layout::new(&settings, &scope).unwrap()
    };
    vec![
        layout(
            "/r",
            Access::ReadOnly,
            None,
            "/home/me/sbx",
            Some("/home/me/agent"),
        ),
        layout("/", Access::ReadWrite, None, "/", Some("/home/me/agent")),
        layout(
            "/tmp/openclaw-sandboxes",
            Access::None,
            Some("main"),
            "/home/me/ws",
            Some("/home/me/ws/agent"),
        ),
        layout(
            "/srv/sand boxes/é",
            Access::ReadWrite,
            Some(".."),
            "/home/me/ws",
            Some("/home/me/ws/.agent"),
        ),
    ]
});

/// Pieces of a path: dot segments and names most often, then separators,
/// NUL, white space and the byte order mark the resolver trims, any Unicode,
/// long names, and the layouts' own roots and names.
fn fragment() -> impl Strategy<Value = String> {
    let mut named: Vec<String> = [
        "/",
        "//",
        "\\",
        "\u{0}",
        " ",
        "\n",
        "\u{feff}",
        "~",
        "workspace",
        "agent",
        "é",
        "🙂",
        "\u{202e}",
    ]
    .map(String::from)
    .to_vec();
    for l in LAYOUTS.iter() {
        named.extend([
            l.workspace_root.clone(),
            l.runtime_root.clone(),
            l.runtime_id.clone(),
        ]);
        for m in &l.mounts {
            named.extend([m.container_root.clone(), m.local_root.clone()]);
        }
    }
    prop_oneof![
        4 => prop::sample::select(vec!["..", ".", "", "a", "b"]).prop_map(str::to_string),
        4 => prop::sample::select(named),
        1 => any::<String>(),
        1 => "[a-z.]{200,300}",
    ]
}

/// Fragments joined with or without `/` or `\` between them, absolute half
/// of the time.
fn path() -> impl Strategy<Value = String> {
    let parts = prop::collection::vec(
        (fragment(), prop::sample::select(vec!["/", "", "\\"])),
        0..7,
    );
    (any::<bool>(), parts).prop_map(|(absolute, parts)| {
        let lead = if absolute { "/" } else { "" };
        std::iter::once(lead.to_string())
            .chain(parts.into_iter().flat_map(|(f, s)| [f, s.to_string()]))
            .collect()
    })
}

/// The path the resolver reads: trimmed as OpenClaw's bridge trims it.
fn trimmed(path: &str) -> &str {
    path.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// `path` normalized lexically, with string operations: `.` and empty
/// segments dropped, `..` taking the last one away (and none past `/`).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The mount whose root (as `root_of` picks it) holds `place` most closely,
/// by a string prefix with a `/` boundary, and the rest of `place` below it.
fn placed(
    layout: &Layout,
    place: &str,
    root_of: fn(&MountInfo) -> &str,
) -> Option<(Mount, String)> {
    let below = |root: &str| match root {
        "/" => Some(place[1..].to_string()),
        _ if place == root => Some(String::new()),
        _ => place.strip_prefix(&format!("{root}/")).map(str::to_string),
    };
    layout
        .mounts
        .iter()
        .filter_map(|m| below(root_of(m)).map(|rel| (root_of(m).len(), m.mount, rel)))
        .max_by_key(|(len, ..)| *len)
        .map(|(_, mount, rel)| (mount, rel))
}

/// Where `path` lies by the rules `paths` documents, computed independently:
/// the place the caller names (a sandbox path, else an absolute path, else one
/// relative to `cwd` or the workspace), then the container root holding it,
/// else the local root.
fn model(layout: &Layout, path: &str, cwd: Option<&str>) -> Result<(Mount, String), PathError> {
    let container: fn(&MountInfo) -> &str = |m| &m.container_root;
    let local: fn(&MountInfo) -> &str = |m| &m.local_root;
    let anywhere =
        |place: &str| placed(layout, place, container).or_else(|| placed(layout, place, local));
    let path = trimmed(path);
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') || cwd.is_some_and(|c| c.contains('\0')) {
        return Err(PathError::Nul);
    }
    let posix = path.replace('\\', "/");
    if let Some(found) = posix
        .starts_with('/')
        .then(|| placed(layout, &normalize(&posix), container))
        .flatten()
    {
        return Ok(found);
    }
    let place = if path.starts_with('/') {
        normalize(path)
    } else {
        let base = match cwd.filter(|c| !c.is_empty()) {
            None => layout.workspace().container_root.clone(),
            Some(cwd) if cwd.starts_with('/') => {
                let (mount, rel) =
                    anywhere(&normalize(cwd)).ok_or_else(|| PathError::Escapes(cwd.into()))?;
                layout.container_path(mount, &rel)
            }
            Some(cwd) => format!("{}/{cwd}", layout.workspace().container_root),
        };
        normalize(&format!("{base}/{path}"))
    };
    anywhere(&place).ok_or_else(|| PathError::Escapes(path.into()))
}

/// A resolution is refused for the reason its input gives, naming it, or lies
/// in a mount of `layout`: its path on the target and its local path are the
/// mount's root or below it, without `..` or NUL.
fn check_resolved(
    layout: &Layout,
    resolved: Result<Resolved, PathError>,
    path: &str,
    cwd: Option<&str>,
) -> Result<(), TestCaseError> {
    let r = match resolved {
        Err(PathError::Empty) => {
            prop_assert!(trimmed(path).is_empty());
            return Ok(());
        }
        Err(PathError::Nul) => {
            prop_assert!(path.contains('\0') || cwd.is_some_and(|c| c.contains('\0')));
            return Ok(());
        }
        Err(PathError::Escapes(at)) => {
            prop_assert!(!at.is_empty());
            prop_assert!(
                at == trimmed(path) || Some(at.as_str()) == cwd,
                "{at:?} names neither"
            );
            return Ok(());
        }
        Ok(r) => r,
    };
    let Some(mount) = layout.mount(r.mount) else {
        return Err(TestCaseError::fail(format!(
            "{:?} is not a mount of the layout",
            r.mount
        )));
    };
    prop_assert!(
        r.relative_path.is_empty()
            || r.relative_path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."),
        "{:?}",
        r.relative_path
    );
    let on_target = layout.container_path(r.mount, &r.relative_path);
    for (full, root) in [
        (on_target, &mount.container_root),
        (join(&mount.local_root, &r.relative_path), &mount.local_root),
    ] {
        let inside = full == *root || full.starts_with(&format!("{}/", root.trim_end_matches('/')));
        prop_assert!(inside, "{full:?} is outside {root:?}");
        prop_assert!(
            !full.contains('\0') && !full.split('/').any(|c| c == ".."),
            "{full:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(2048))]

    /// Any path and `cwd` against any layout (2048 cases): where the model
    /// puts it, which is a refusal for the reason the input gives or a place
    /// inside one of the layout's mounts.
    #[test]
    fn a_path_resolves_inside_a_mount_or_is_refused(
        layout in prop::sample::select(LAYOUTS.clone()),
        path in path(),
        cwd in prop::option::of(path()),
    ) {
        let resolved = resolve(&layout, &path, cwd.as_deref());
        prop_assert_eq!(
            resolved.clone().map(|r| (r.mount, r.relative_path)),
            model(&layout, &path, cwd.as_deref())
        );
        check_resolved(&layout, resolved, &path, cwd.as_deref())?;
    }

    /// Any `workdir` of an exec (2048 cases): the workspace when it names
    /// none, else where the model puts it, inside a mount or refused.
    #[test]
    fn an_exec_workdir_lies_inside_a_mount_or_is_refused(
        layout in prop::sample::select(LAYOUTS.clone()),
        workdir in prop::option::of(path()),
    ) {
        let resolved = exec_workdir(&layout, workdir.as_deref());
        match workdir.as_deref().filter(|w| !w.is_empty()) {
            None => prop_assert_eq!(
                resolved.map(|r| (r.mount, r.relative_path)),
                Ok((layout.workspace().mount, String::new()))
            ),
            Some(w) => {
                prop_assert_eq!(resolved.clone().map(|r| (r.mount, r.relative_path)), model(&layout, w, None));
                check_resolved(&layout, resolved, w, None)?;
            }
        }
    }
}

/// Paths a caller means resolve, `..` past a mount root is refused: both
/// branches of the properties above are reachable on every layout.
#[test]
fn sound_paths_resolve_and_escapes_are_refused() {
    for layout in LAYOUTS.iter() {
        let last = layout.mounts.last().unwrap();
        for (path, cwd, rel) in [
            ("a/./b/../c", None, "a/c"),
            ("x", Some("sub"), "sub/x"),
            (&format!("{}/d/e", last.container_root), None, "d/e"),
            (&format!("{}/d", last.local_root), None, "d"),
        ] {
            let r = resolve(layout, path, cwd);
            assert_eq!(
                r.as_ref().map(|r| r.relative_path.as_str()),
                Ok(rel),
                "{path} {cwd:?}"
            );
            check_resolved(layout, r, path, cwd).unwrap();
        }
        // With `/` as a local root every absolute path is a local one inside it.
        if layout.mounts.iter().all(|m| m.local_root != "/") {
            let escape = format!("{}/../../x", layout.workspace().container_root);
            assert_eq!(
                resolve(layout, &escape, None),
                Err(PathError::Escapes(escape.clone()))
            );
            assert!(exec_workdir(layout, Some("../..")).is_err());
        }
    }
}

/// Scope keys: any Unicode, separators and dots, and keys that end in
/// `:workspace:` and 32 hex digits of either case (OpenClaw's hashed form).
fn key() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9:./ _-]{0,80}",
        prop::sample::select(vec![
            "",
            " ",
            "..",
            ".",
            "/",
            "a..b",
            "../../etc",
            "\u{0}",
            "\u{212a}"
        ])
        .prop_map(str::to_string),
        ("[a-z.]{1,3}", 1usize..3000).prop_map(|(unit, n)| unit.repeat(n)),
    ];
    (text, prop::option::of("[0-9a-fA-F]{32}"), "[ \t]{0,2}").prop_map(|(k, hex, pad)| match hex {
        Some(hex) => format!("{k}:workspace:{hex}{pad}"),
        None => k,
    })
}

/// One directory name on the target: not `.` or `..`, no separator, no NUL.
fn is_one_component(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && name.len() <= 255
}

proptest! {
    #![proptest_config(cases(2048))]

    /// Any scope key (2048 cases): its runtime id is one this crate
    /// recognizes and a single path component, and so is every stage of it.
    #[test]
    fn every_runtime_id_is_one_directory_name_of_ours(key in key(), random in "[0-9a-f]{32}") {
        let id = runtime_id(&key);
        prop_assert!(is_runtime_id(&id), "{key:?} gives {id:?}");
        prop_assert!(is_one_component(&id), "{id:?}");
        let layout = Layout::new(
            &Settings { workspace_root: "/r".into(), scope: Scope::Session, access: Access::ReadWrite },
            &ScopeRef { scope_key: Some(&key), workspace_dir: "/w", ..ScopeRef::default() },
        )
        .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&layout.runtime_root, &join("/r", &layout.runtime_id));
        let stage = layout.stage_name(&random);
        prop_assert!(is_one_component(&stage) && layout.is_stage(&stage), "{stage:?}");
    }

    /// A session or Agent scope's key, for any session key and Agent id
    /// (2048 cases): OpenClaw's hashed runtime id, or for an Agent scope that
    /// names no Agent a short refusal saying so.
    #[test]
    fn session_and_agent_scopes_get_hashed_runtime_ids(
        agent_scope in any::<bool>(),
        session in prop::option::of(key()),
        agent in prop::option::of(key()),
        workspace in "/[a-z/]{0,20}",
    ) {
        let scope = if agent_scope { Scope::Agent } else { Scope::Session };
        match scope_key(scope, session.as_deref(), agent.as_deref(), &workspace) {
            Ok(key) => {
                let id = runtime_id(&key);
                let hex = id.strip_prefix("openclaw-ssh-workspace-");
                prop_assert!(
                    hex.is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit())),
                    "{key:?} gives {id:?}"
                );
            }
            Err(why) => {
                prop_assert!(agent_scope && why.contains("needs the Agent"), "{why:.200}");
                prop_assert!(why.len() <= MAX_MESSAGE, "{} bytes", why.len());
            }
        }
    }
}

/// Plain and hashed keys give ids of ours: the accepted branch of the
/// properties above.
#[test]
fn runtime_ids_of_plain_and_hashed_keys_are_ours() {
    for key in ["shared", "main", "", "Agent:Main:Telegram:Group:-100123"] {
        let id = runtime_id(key);
        assert!(is_runtime_id(&id) && is_one_component(&id), "{key:?}: {id}");
    }
    let key = scope_key(Scope::Session, Some("main"), None, "/home/me/ws").unwrap();
    assert!(runtime_id(&key).starts_with("openclaw-ssh-workspace-"));
    assert!(scope_key(Scope::Agent, Some("telegram:1"), None, "/w").is_err());
}

/// A sound `agents.defaults.sandbox` object, the starting point of every
/// change.
fn sandbox() -> Value {
    json!({"scope": "session", "workspaceAccess": "rw", "perSession": true,
           "ssh": {"target": "me@h:22", "workspaceRoot": "/srv/sandboxes"}})
}

/// Text a hostile configuration would hold.
fn text() -> BoxedStrategy<String> {
    hostile_text(
        "a-z0-9./\\\\ %$\"'`;|&*?~\\x00\\n\\t-",
        &[
            "", "/", "..", "/a/..", "//x//", " /x ", "session", "rw", "\u{0}",
        ],
        "a-z/.",
    )
}

/// Absolute paths of names, dot segments, separators and white space, as a
/// workspace root might be written.
fn root_text() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec!["", ".", "..", "a", "b", "\\", " ", "\t", "\u{0}"]);
    prop::collection::vec(part, 1..6).prop_map(|parts| format!("/{}", parts.join("/")))
}

fn value() -> BoxedStrategy<Value> {
    json_value(text())
}

proptest! {
    #![proptest_config(cases(1024))]

    /// One key of a sound settings object replaced by any value or deleted
    /// (1024 cases): refused in a short message naming that key, or settings
    /// whose workspace root is normalized.
    #[test]
    fn a_changed_setting_is_refused_by_name_or_normalized(
        pick in any::<prop::sample::Index>(),
        replacement in replacement(value(), root_text()),
    ) {
        let mut block = sandbox();
        let path = change_key(&mut block, &pick, replacement);
        match Settings::from_sandbox(block.as_object().unwrap()) {
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.len() <= MAX_MESSAGE, "{} bytes: {message:.200}", message.len());
                let dotted = path.join(".");
                prop_assert!(
                    e.key == dotted || e.key.starts_with(&format!("{dotted}.")),
                    "{message:.200} does not name {dotted}"
                );
                prop_assert!(!e.reason.is_empty());
                let prefix = format!("agents.defaults.sandbox.{}: ", e.key);
                prop_assert!(message.starts_with(&prefix), "{message:.200}");
            }
            Ok(settings) => {
                prop_assert!(is_normalized_root(&settings.workspace_root), "{:?}", settings.workspace_root);
            }
        }
    }
}

/// The sound object is accepted and a relative root refused by name: both
/// branches of the property above are reachable.
#[test]
fn sound_settings_are_accepted_and_a_bad_root_named() {
    let settings = Settings::from_sandbox(sandbox().as_object().unwrap()).unwrap();
    assert_eq!(settings.workspace_root, "/srv/sandboxes");
    let mut block = sandbox();
    block["ssh"]["workspaceRoot"] = json!("srv");
    let e = Settings::from_sandbox(block.as_object().unwrap()).unwrap_err();
    assert_eq!(e.key, "ssh.workspaceRoot");
}
