//! Where a scope's sandbox lives on the target, in OpenClaw's layout:
//!
//! ```text
//! <ssh.workspaceRoot>/<runtime id>/          the runtime root (0700)
//!     workspace/                           seeded from the scope's local workspace
//!     agent/                               the Agent's own workspace, when it has a mount
//! <ssh.workspaceRoot>/<runtime id>.bootstrap-<32 hex>/   a seed being staged
//! ```
//!
//! The mounts follow `workspaceAccess`: `workspace` always, writable unless
//! access is `ro`; `agent` only when the Agent's workspace differs from the
//! scope's and access is not `none`, writable only with `rw`.
//!
//! [`Settings`] are the three values of the configuration the layout depends
//! on. The component reads them while it validates the whole configuration,
//! the host reads them to write each script run's envelope; both through the
//! functions here.

use serde_json::{Map, Value};

use crate::quoted;
use crate::scope::{self, Scope};

/// `ssh.workspaceRoot` when absent.
pub const DEFAULT_WORKSPACE_ROOT: &str = "/tmp/openclaw-sandboxes";

/// `workspaceAccess`: what the sandbox sees of the Agent's own workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    None,
    ReadOnly,
    ReadWrite,
}

impl Access {
    /// Each value as the configuration names it.
    pub const NAMES: &'static [(&'static str, Access)] = &[
        ("none", Access::None),
        ("ro", Access::ReadOnly),
        ("rw", Access::ReadWrite),
    ];

    /// OpenClaw's default.
    pub const DEFAULT: Access = Access::None;
}

/// One mount of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mount {
    Workspace,
    Agent,
}

impl Mount {
    /// Both, in the order a layout lists them.
    pub const ALL: [Mount; 2] = [Mount::Workspace, Mount::Agent];

    /// The directory name under the runtime root, and the scripts' name for it.
    pub fn name(self) -> &'static str {
        match self {
            Mount::Workspace => "workspace",
            Mount::Agent => "agent",
        }
    }

    /// The mount called `name`.
    pub fn from_name(name: &str) -> Option<Mount> {
        Mount::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One mount of a scope's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub mount: Mount,
    /// `<runtime root>/<mount>` on the target.
    pub container_root: String,
    /// The local directory it was seeded from.
    pub local_root: String,
    pub writable: bool,
}

/// What the layout takes from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `ssh.workspaceRoot`, normalized ([`normalize_workspace_root`]).
    pub workspace_root: String,
    /// `scope` (or the legacy `perSession`).
    pub scope: Scope,
    /// `workspaceAccess`.
    pub access: Access,
}

/// A setting that is not one the layout can use: the key under
/// `agents.defaults.sandbox`, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    pub key: &'static str,
    pub reason: String,
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "agents.defaults.sandbox.{}: {}", self.key, self.reason)
    }
}

impl Settings {
    /// Read from the `agents.defaults.sandbox` object, with the defaults.
    pub fn from_sandbox(sandbox: &Map<String, Value>) -> Result<Settings, SettingsError> {
        fn named<T: Copy>(
            sandbox: &Map<String, Value>,
            key: &'static str,
            names: &[(&str, T)],
        ) -> Result<Option<T>, SettingsError> {
            match sandbox.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => names
                    .iter()
                    .find(|(n, _)| n == s)
                    .map(|(_, v)| Some(*v))
                    .ok_or_else(|| SettingsError {
                        key,
                        reason: format!(
                            "must be one of {} (found {})",
                            names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
                            quoted(s)
                        ),
                    }),
                Some(_) => Err(SettingsError {
                    key,
                    reason: "must be a string".into(),
                }),
            }
        }
        let per_session = match sandbox.get("perSession") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                return Err(SettingsError {
                    key: "perSession",
                    reason: "must be true or false".into(),
                });
            }
        };
        let scope =
            named(sandbox, "scope", Scope::NAMES)?.unwrap_or(Scope::default_for(per_session));
        let access = named(sandbox, "workspaceAccess", Access::NAMES)?.unwrap_or(Access::DEFAULT);
        let workspace_root = match sandbox.get("ssh").and_then(|s| s.get("workspaceRoot")) {
            None | Some(Value::Null) => DEFAULT_WORKSPACE_ROOT.to_string(),
            Some(Value::String(raw)) => {
                normalize_workspace_root(raw).map_err(|reason| SettingsError {
                    key: "ssh.workspaceRoot",
                    reason,
                })?
            }
            Some(_) => {
                return Err(SettingsError {
                    key: "ssh.workspaceRoot",
                    reason: "must be a string".into(),
                });
            }
        };
        Ok(Settings {
            workspace_root,
            scope,
            access,
        })
    }
}

/// `ssh.workspaceRoot` as the sandbox uses it. OpenClaw turns backslashes
/// into `/` and drops trailing slashes, then joins the runtime id with
/// `path.posix.join`, which also collapses repeated slashes and `.`; so do we,
/// since the target reads `//` as `/` and `.` as nothing. What stays refused:
/// a relative root, control characters, and `..`, which the target resolves
/// after following a link on the way while a lexical normalization would not:
/// a root whose meaning depends on which resolution applies is not guessed at.
pub fn normalize_workspace_root(raw: &str) -> Result<String, String> {
    let posix = raw.trim().replace('\\', "/");
    if !posix.starts_with('/') {
        return Err(format!(
            "must be an absolute POSIX path (found {})",
            quoted(raw)
        ));
    }
    if posix.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    let mut parts = Vec::new();
    for part in posix.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "must not contain `..`: the target resolves it after following links, \
                     so it is not normalized away (found {})",
                    quoted(raw)
                ));
            }
            p => parts.push(p),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// `<parent>/<name>`, without doubling the slash of `/`.
pub fn join(parent: &str, name: &str) -> String {
    if name.is_empty() {
        parent.to_string()
    } else if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// A local directory named by the caller: absolute, without control
/// characters (the host expands `~` before the component sees it), trailing
/// slashes dropped.
fn local_dir(what: &str, path: &str) -> Result<String, String> {
    if !path.starts_with('/') || path.chars().any(char::is_control) {
        return Err(format!(
            "{what} must be an absolute local path without control characters (found {})",
            quoted(path)
        ));
    }
    let trimmed = path.trim_end_matches('/');
    Ok(if trimmed.is_empty() { "/" } else { trimmed }.to_string())
}

/// The scope a call names (WIT `sandbox-scope`), borrowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScopeRef<'a> {
    pub scope_key: Option<&'a str>,
    pub session_key: Option<&'a str>,
    pub agent_id: Option<&'a str>,
    pub workspace_dir: &'a str,
    pub agent_workspace_dir: Option<&'a str>,
}

/// A scope's sandbox, as paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub runtime_id: String,
    pub workspace_root: String,
    pub runtime_root: String,
    pub mounts: Vec<MountInfo>,
}

impl Layout {
    /// The layout of `scope` under `settings`; fails, with the reason, for a
    /// local directory that is not absolute or an `agent` scope without an
    /// Agent.
    pub fn new(settings: &Settings, scope: &ScopeRef<'_>) -> Result<Layout, String> {
        let workspace_dir = local_dir("workspace-dir", scope.workspace_dir)?;
        let agent_dir = scope
            .agent_workspace_dir
            .map(|d| local_dir("agent-workspace-dir", d))
            .transpose()?;
        let key = match scope.scope_key.map(str::trim) {
            Some(key) if !key.is_empty() => key.to_string(),
            // OpenClaw hashes the Agent's workspace into the key.
            _ => scope::scope_key(
                settings.scope,
                scope.session_key,
                scope.agent_id,
                agent_dir.as_deref().unwrap_or(&workspace_dir),
            )?,
        };
        let runtime_id = scope::runtime_id(&key);
        let workspace_root = settings.workspace_root.clone();
        let runtime_root = join(&workspace_root, &runtime_id);
        let access = settings.access;
        let mut mounts = vec![MountInfo {
            mount: Mount::Workspace,
            container_root: join(&runtime_root, Mount::Workspace.name()),
            local_root: workspace_dir.clone(),
            writable: access != Access::ReadOnly,
        }];
        if let Some(agent) = agent_dir
            && access != Access::None
            && agent != workspace_dir
        {
            mounts.push(MountInfo {
                mount: Mount::Agent,
                container_root: join(&runtime_root, Mount::Agent.name()),
                local_root: agent,
                writable: access == Access::ReadWrite,
            });
        }
        Ok(Layout {
            runtime_id,
            workspace_root,
            runtime_root,
            mounts,
        })
    }

    pub fn mount(&self, mount: Mount) -> Option<&MountInfo> {
        self.mounts.iter().find(|m| m.mount == mount)
    }

    /// The mount every relative path starts from.
    pub fn workspace(&self) -> &MountInfo {
        &self.mounts[0]
    }

    /// The absolute path of `relative` in `mount` on the target.
    pub fn container_path(&self, mount: Mount, relative: &str) -> String {
        let root = self.mount(mount).map_or_else(
            || join(&self.runtime_root, mount.name()),
            |m| m.container_root.clone(),
        );
        join(&root, relative)
    }

    /// The name of a stage for this runtime: beside it, unique by `random`
    /// (32 lowercase hex digits).
    pub fn stage_name(&self, random: &str) -> String {
        format!("{}.bootstrap-{random}", self.runtime_id)
    }

    /// Whether `name` is a stage of this runtime, as [`Layout::stage_name`]
    /// makes them.
    pub fn is_stage(&self, name: &str) -> bool {
        name.strip_prefix(&self.runtime_id)
            .and_then(|rest| rest.strip_prefix(".bootstrap-"))
            .is_some_and(|hex| {
                hex.len() == 32
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(access: &str, scope: &str) -> Settings {
        let v = json!({"scope": scope, "workspaceAccess": access,
                       "ssh": {"target": "me@h:22", "workspaceRoot": "/srv/sandboxes/"}});
        Settings::from_sandbox(v.as_object().unwrap()).unwrap()
    }

    fn scope<'a>(ws: &'a str, agent: Option<&'a str>) -> ScopeRef<'a> {
        ScopeRef {
            session_key: Some("agent:main:main"),
            workspace_dir: ws,
            agent_workspace_dir: agent,
            ..ScopeRef::default()
        }
    }

    #[test]
    fn openclaw_layout() {
        let l = Layout::new(&settings("rw", "session"), &scope("/home/me/ws", None)).unwrap();
        assert!(l.runtime_id.starts_with("openclaw-ssh-workspace-"));
        assert_eq!(l.runtime_root, format!("/srv/sandboxes/{}", l.runtime_id));
        assert_eq!(
            l.workspace().container_root,
            format!("{}/workspace", l.runtime_root)
        );
        assert!(l.workspace().writable);
        assert_eq!(l.mounts.len(), 1);
        let stage = l.stage_name(&"ab".repeat(16));
        assert_eq!(
            stage,
            format!("{}.bootstrap-{}", l.runtime_id, "ab".repeat(16))
        );
        assert!(l.is_stage(&stage));
        for bad in [
            format!("{}.bootstrap-{}", l.runtime_id, "AB".repeat(16)),
            format!("{}.bootstrap-{}", l.runtime_id, "ab".repeat(15)),
            format!("openclaw-ssh-other.bootstrap-{}", "ab".repeat(16)),
            l.runtime_id.clone(),
        ] {
            assert!(!l.is_stage(&bad), "{bad}");
        }
    }

    #[test]
    fn the_agent_mount_follows_workspace_access() {
        let s = scope(
            "/home/me/.openclaw/sandboxes/x",
            Some("/home/me/.openclaw/workspace"),
        );
        let ro = Layout::new(&settings("ro", "agent"), &s).unwrap();
        assert_eq!(ro.mounts.len(), 2);
        assert!(!ro.workspace().writable);
        assert!(!ro.mount(Mount::Agent).unwrap().writable);
        let rw = Layout::new(&settings("rw", "agent"), &s).unwrap();
        assert!(rw.workspace().writable && rw.mount(Mount::Agent).unwrap().writable);
        let none = Layout::new(&settings("none", "agent"), &s).unwrap();
        assert_eq!(none.mounts.len(), 1);
        assert!(none.workspace().writable);
        // The same directory twice is one mount.
        let same = scope("/home/me/ws", Some("/home/me/ws/"));
        assert_eq!(
            Layout::new(&settings("rw", "agent"), &same)
                .unwrap()
                .mounts
                .len(),
            1
        );
        // The key hashes the Agent's workspace, as OpenClaw's does: the same
        // Agent workspace gives the same runtime whatever the sandbox copy.
        let other = scope("/elsewhere", Some("/home/me/.openclaw/workspace"));
        assert_eq!(
            Layout::new(&settings("none", "agent"), &other)
                .unwrap()
                .runtime_id,
            none.runtime_id
        );
    }

    #[test]
    fn a_given_scope_key_wins() {
        let mut s = scope("/w", None);
        s.scope_key = Some("shared");
        let l = Layout::new(&settings("rw", "session"), &s).unwrap();
        assert_eq!(l.runtime_id, "openclaw-ssh-shared-8198076c");
    }

    #[test]
    fn local_directories_must_be_absolute() {
        for bad in ["relative", "", "/a\nb"] {
            assert!(
                Layout::new(&settings("rw", "session"), &scope(bad, None)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn workspace_roots_normalize_as_openclaw_joins_them() {
        for (raw, root) in [
            ("/tmp/openclaw-sandboxes", "/tmp/openclaw-sandboxes"),
            ("/srv/sandboxes/", "/srv/sandboxes"),
            ("//srv//sandboxes//", "/srv/sandboxes"),
            ("/srv/./sandboxes", "/srv/sandboxes"),
            (" \\srv\\sandboxes ", "/srv/sandboxes"),
            ("/", "/"),
            ("///", "/"),
        ] {
            assert_eq!(
                normalize_workspace_root(raw).as_deref(),
                Ok(root),
                "{raw:?}"
            );
        }
        for bad in ["relative/dir", "", "/tmp/../etc", "/a/..", "/a\nb"] {
            assert!(normalize_workspace_root(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn settings_and_their_defaults() {
        let read = |v: Value| Settings::from_sandbox(v.as_object().unwrap());
        assert_eq!(
            read(json!({})).unwrap(),
            Settings {
                workspace_root: DEFAULT_WORKSPACE_ROOT.into(),
                scope: Scope::Agent,
                access: Access::None
            }
        );
        assert_eq!(
            read(json!({"perSession": true})).unwrap().scope,
            Scope::Session
        );
        assert_eq!(
            read(json!({"perSession": false})).unwrap().scope,
            Scope::Shared
        );
        assert_eq!(
            read(json!({"perSession": true, "scope": "agent"}))
                .unwrap()
                .scope,
            Scope::Agent
        );
        assert_eq!(
            read(json!({"scope": "everyone"})).unwrap_err().to_string(),
            "agents.defaults.sandbox.scope: must be one of session, agent, shared (found \"everyone\")"
        );
        assert_eq!(
            read(json!({"ssh": {"workspaceRoot": "/a/../b"}}))
                .unwrap_err()
                .key,
            "ssh.workspaceRoot"
        );
        // A long value is quoted cut short: the refusal stays one short line.
        for (block, key) in [
            (json!({"scope": "s".repeat(10_000)}), "scope"),
            (
                json!({"workspaceAccess": "\n".repeat(10_000)}),
                "workspaceAccess",
            ),
            (
                json!({"ssh": {"workspaceRoot": "x".repeat(10_000)}}),
                "ssh.workspaceRoot",
            ),
            (
                json!({"ssh": {"workspaceRoot": format!("/{}/..", "x".repeat(10_000))}}),
                "ssh.workspaceRoot",
            ),
        ] {
            let e = read(block).unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().len() < 400, "{e}");
        }
        let local = "/a\n".repeat(10_000);
        let scope = ScopeRef {
            workspace_dir: &local,
            ..ScopeRef::default()
        };
        let e = Layout::new(&settings("rw", "session"), &scope).unwrap_err();
        assert!(
            e.starts_with("workspace-dir must be") && e.len() < 400,
            "{e}"
        );
    }
}
