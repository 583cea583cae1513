//! Where a scope's sandbox lives on the target, in OpenClaw's layout:
//!
//! ```text
//! <ssh.workspaceRoot>/<runtime id>/          the runtime root (0700)
//!     workspace/                           seeded from the scope's local workspace
//!     agent/                               with workspaceAccess "ro": the Agent's own workspace
//! <ssh.workspaceRoot>/<runtime id>.bootstrap-<32 hex>/   a seed being staged
//! ```
//!
//! The `workspace` mount is writable unless `workspaceAccess` is `ro`; the
//! `agent` mount exists only when the Agent's workspace differs from the
//! scope's and access is not `none`, and is writable only with `rw`.

use crate::config::{Access, Config};
use crate::error::{Code, Error};
use crate::model::{Mount, Root, RuntimeInfo, SandboxScope};
use crate::scope;

/// One mount of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub mount: Mount,
    /// `<runtime root>/<mount>` on the target.
    pub container_root: String,
    /// The local directory it was seeded from.
    pub local_root: String,
    pub writable: bool,
}

/// A scope's sandbox, as paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub runtime_id: String,
    pub workspace_root: String,
    pub runtime_root: String,
    pub config_label: String,
    pub mounts: Vec<MountInfo>,
}

/// A local directory named by the caller: absolute, without NUL or control
/// characters (the host expands `~` before the component sees it).
fn local_dir(what: &str, path: &str) -> Result<String, Error> {
    if !path.starts_with('/') || path.chars().any(char::is_control) {
        return Err(Error::new(
            Code::InvalidPath,
            format!(
                "{what} must be an absolute local path without control characters (found {path:?})"
            ),
        ));
    }
    let trimmed = path.trim_end_matches('/');
    Ok(if trimmed.is_empty() { "/" } else { trimmed }.to_string())
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

impl Layout {
    /// The layout of `scope` under `config`.
    pub fn new(config: &Config, scope: &SandboxScope) -> Result<Layout, Error> {
        let workspace_dir = local_dir("workspace-dir", &scope.workspace_dir)?;
        let agent_dir = scope
            .agent_workspace_dir
            .as_deref()
            .map(|d| local_dir("agent-workspace-dir", d))
            .transpose()?;
        let key = match scope.scope_key.as_deref().map(str::trim) {
            Some(key) if !key.is_empty() => key.to_string(),
            // OpenClaw hashes the Agent's workspace into the key.
            _ => scope::scope_key(
                config.scope,
                scope.session_key.as_deref(),
                scope.agent_id.as_deref(),
                agent_dir.as_deref().unwrap_or(&workspace_dir),
            )?,
        };
        let runtime_id = scope::runtime_id(&key);
        let workspace_root = config.ssh.workspace_root.clone();
        let runtime_root = join(&workspace_root, &runtime_id);
        let access = config.workspace_access;
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
            config_label: config.ssh.target_label.clone(),
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

    /// What is seeded from where: each mount from its local root.
    pub fn seeds(&self) -> Vec<(Mount, Root)> {
        self.mounts
            .iter()
            .map(|m| {
                (
                    m.mount,
                    match m.mount {
                        Mount::Workspace => Root::Workspace,
                        Mount::Agent => Root::Agent,
                    },
                )
            })
            .collect()
    }

    /// The name of a stage for this runtime: beside it, unique by `random`
    /// (32 lowercase hex digits).
    pub fn stage_name(&self, random: &str) -> String {
        format!("{}.bootstrap-{random}", self.runtime_id)
    }

    /// The runtime as a caller sees it.
    pub fn info(&self, running: bool) -> RuntimeInfo {
        RuntimeInfo {
            runtime_id: self.runtime_id.clone(),
            runtime_root: self.runtime_root.clone(),
            workdir: self.workspace().container_root.clone(),
            agent_workdir: self.mount(Mount::Agent).map(|m| m.container_root.clone()),
            config_label: self.config_label.clone(),
            running,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(access: &str, scope: &str) -> Config {
        Config::parse(
            &json!({"agents": {"defaults": {"sandbox": {
                "scope": scope, "workspaceAccess": access,
                "ssh": {"target": "me@h:22", "workspaceRoot": "/srv/sandboxes/"}
            }}}})
            .to_string(),
        )
        .unwrap()
    }

    fn scope(ws: &str, agent: Option<&str>) -> SandboxScope {
        SandboxScope {
            session_key: Some("agent:main:main".into()),
            workspace_dir: ws.into(),
            agent_workspace_dir: agent.map(str::to_string),
            ..SandboxScope::default()
        }
    }

    #[test]
    fn openclaw_layout() {
        let l = Layout::new(&config("rw", "session"), &scope("/home/me/ws", None)).unwrap();
        assert!(l.runtime_id.starts_with("openclaw-ssh-workspace-"));
        assert_eq!(l.runtime_root, format!("/srv/sandboxes/{}", l.runtime_id));
        assert_eq!(
            l.workspace().container_root,
            format!("{}/workspace", l.runtime_root)
        );
        assert!(l.workspace().writable);
        assert_eq!(l.mounts.len(), 1);
        assert_eq!(l.stage_name("ab"), format!("{}.bootstrap-ab", l.runtime_id));
    }

    #[test]
    fn the_agent_mount_follows_workspace_access() {
        let s = scope(
            "/home/me/.openclaw/sandboxes/x",
            Some("/home/me/.openclaw/workspace"),
        );
        let ro = Layout::new(&config("ro", "agent"), &s).unwrap();
        assert_eq!(ro.mounts.len(), 2);
        assert!(!ro.workspace().writable);
        assert!(!ro.mount(Mount::Agent).unwrap().writable);
        assert_eq!(
            ro.seeds(),
            vec![
                (Mount::Workspace, Root::Workspace),
                (Mount::Agent, Root::Agent)
            ]
        );
        let none = Layout::new(&config("none", "agent"), &s).unwrap();
        assert_eq!(none.mounts.len(), 1);
        assert!(none.workspace().writable);
        // The key hashes the Agent's workspace, as OpenClaw's does: the same
        // Agent workspace gives the same runtime whatever the sandbox copy.
        let other = scope("/elsewhere", Some("/home/me/.openclaw/workspace"));
        assert_eq!(
            Layout::new(&config("none", "agent"), &other)
                .unwrap()
                .runtime_id,
            none.runtime_id
        );
    }

    #[test]
    fn a_given_scope_key_wins() {
        let mut s = scope("/w", None);
        s.scope_key = Some("shared".into());
        let l = Layout::new(&config("rw", "session"), &s).unwrap();
        assert_eq!(l.runtime_id, "openclaw-ssh-shared-8198076c");
    }

    #[test]
    fn local_directories_must_be_absolute() {
        for bad in ["relative", "", "/a\nb"] {
            assert!(
                Layout::new(&config("rw", "session"), &scope(bad, None)).is_err(),
                "{bad:?}"
            );
        }
    }
}
