//! Where a scope's sandbox lives on the target, in OpenClaw's layout
//! ([`occ_ssh_target::layout`], which the host uses to write each script
//! run's envelope), with what the backend adds: the config label, and what is
//! seeded from where.

use occ_ssh_target::layout::{ScopeRef, Settings};

use crate::config::Config;
use crate::error::{Code, Error};
use crate::model::{Mount, Root, RuntimeInfo, SandboxScope};

pub use occ_ssh_target::layout::{MountInfo, join};

/// A scope's sandbox, as paths: the shared layout (its fields read through
/// `Deref`) and the config label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub shared: occ_ssh_target::layout::Layout,
    pub config_label: String,
}

impl std::ops::Deref for Layout {
    type Target = occ_ssh_target::layout::Layout;

    fn deref(&self) -> &Self::Target {
        &self.shared
    }
}

/// The settings the layout takes from a parsed configuration.
pub fn settings(config: &Config) -> Settings {
    Settings {
        workspace_root: config.ssh.workspace_root.clone(),
        scope: config.scope,
        access: config.workspace_access,
    }
}

/// A scope as the shared rules take it.
pub fn scope_ref(scope: &SandboxScope) -> ScopeRef<'_> {
    ScopeRef {
        scope_key: scope.scope_key.as_deref(),
        session_key: scope.session_key.as_deref(),
        agent_id: scope.agent_id.as_deref(),
        workspace_dir: &scope.workspace_dir,
        agent_workspace_dir: scope.agent_workspace_dir.as_deref(),
    }
}

impl Layout {
    /// The layout of `scope` under `config`.
    pub fn new(config: &Config, scope: &SandboxScope) -> Result<Layout, Error> {
        let shared = occ_ssh_target::layout::Layout::new(&settings(config), &scope_ref(scope))
            .map_err(|why| Error::new(Code::InvalidPath, why))?;
        Ok(Layout {
            shared,
            config_label: config.ssh.target_label.clone(),
        })
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
                "ssh": {"target": "me@h:22", "workspaceRoot": "/srv//sandboxes/"}
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
        let info = l.info(true);
        assert_eq!(info.workdir, format!("{}/workspace", l.runtime_root));
        assert_eq!(info.agent_workdir, None);
        assert_eq!(info.config_label, "me@h:22");
    }

    #[test]
    fn each_mount_is_seeded_from_its_own_root() {
        let s = scope(
            "/home/me/.openclaw/sandboxes/x",
            Some("/home/me/.openclaw/workspace"),
        );
        let ro = Layout::new(&config("ro", "agent"), &s).unwrap();
        assert_eq!(
            ro.seeds(),
            vec![
                (Mount::Workspace, Root::Workspace),
                (Mount::Agent, Root::Agent)
            ]
        );
        let none = Layout::new(&config("none", "agent"), &s).unwrap();
        assert_eq!(none.seeds(), vec![(Mount::Workspace, Root::Workspace)]);
    }

    #[test]
    fn refusals_are_invalid_paths() {
        let e = Layout::new(&config("rw", "session"), &scope("relative", None)).unwrap_err();
        assert_eq!(e.code(), "invalid-path");
        let mut s = scope("/w", None);
        s.session_key = Some("telegram:123".into());
        let e = Layout::new(&config("rw", "agent"), &s).unwrap_err();
        assert!(e.to_string().contains("needs the Agent"), "{e}");
    }
}
