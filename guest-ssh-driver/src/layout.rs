//! The host layout of the spec, computed in one place.
//!
//! The helper derives the same paths from `root`, `unitDirectory` and the hashes it
//! is sent; the guest needs them to render the unit. Both `root` and the unit
//! directory are validated, normalized absolute paths, so joining with `/` gives one
//! spelling per file.

use crate::config::Runtime;
use crate::ids::AgentIds;

/// Every host path of one Agent and one of its revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<root>/.compute-lock`: the host-wide kernel flock.
    pub lock: String,
    /// `<root>/accounts/<account>.json`: the account ownership marker.
    pub account_marker: String,
    /// `<root>/namespaces/<nsHash>`.
    pub namespace_dir: String,
    /// `<root>/namespaces/<nsHash>/namespace.json`.
    pub namespace_marker: String,
    /// `<root>/namespaces/<nsHash>/agents/<agentHash>`.
    pub agent_dir: String,
    /// `<agentDir>/agent.json`.
    pub agent_marker: String,
    /// `<agentDir>/home`: HOME and the working directory, 0700.
    pub home: String,
    /// `<agentDir>/state`: OPENCLAW_STATE_DIR, 0700.
    pub state: String,
    /// `<agentDir>/gateway-password.env`: the managed gateway password, 0600.
    pub gateway_password_env: String,
    /// `<agentDir>/env`: operator-owned, never read or written by the driver.
    pub operator_env: String,
    /// `<agentDir>/revisions/<revHash>`.
    pub revision_dir: String,
    /// `<agentDir>/revisions/<revHash>/openclaw.json`: the immutable snapshot.
    pub snapshot: String,
    /// `<agentDir>/revisions/<revHash>/revision.json`.
    pub revision_marker: String,
    /// `<agentDir>/current`, a symlink to [`Layout::current_target`].
    pub current: String,
    /// `revisions/<revHash>`, relative so that the Agent tree can move as a whole.
    pub current_target: String,
    /// `<agentDir>/current/openclaw.json`: OPENCLAW_CONFIG_PATH, read through `current`.
    pub current_config: String,
    /// `<agentDir>/served.json`.
    pub served: String,
    /// `openclaw-enterprise-gateway-<agentHash>.service`.
    pub unit_name: String,
    /// `<systemdUnitDirectory>/<unitName>`.
    pub unit_path: String,
}

impl Layout {
    pub fn new(runtime: &Runtime, agent: &AgentIds, revision_hash: &str) -> Self {
        let root = &runtime.root;
        let namespace_dir = format!("{root}/namespaces/{}", agent.namespace_hash);
        let agent_dir = format!("{namespace_dir}/agents/{}", agent.agent_hash);
        let current_target = format!("revisions/{revision_hash}");
        let revision_dir = format!("{agent_dir}/{current_target}");
        let unit_name = unit_name(&agent.agent_hash);
        Self {
            lock: format!("{root}/.compute-lock"),
            account_marker: format!("{root}/accounts/{}.json", agent.account),
            namespace_marker: format!("{namespace_dir}/namespace.json"),
            agent_marker: format!("{agent_dir}/agent.json"),
            home: format!("{agent_dir}/home"),
            state: format!("{agent_dir}/state"),
            gateway_password_env: format!("{agent_dir}/gateway-password.env"),
            operator_env: format!("{agent_dir}/env"),
            snapshot: format!("{revision_dir}/openclaw.json"),
            revision_marker: format!("{revision_dir}/revision.json"),
            current: format!("{agent_dir}/current"),
            current_config: format!("{agent_dir}/current/openclaw.json"),
            served: format!("{agent_dir}/served.json"),
            unit_path: format!("{}/{unit_name}", runtime.systemd_unit_directory),
            unit_name,
            current_target,
            revision_dir,
            agent_dir,
            namespace_dir,
        }
    }
}

/// The systemd unit name of an Agent's gateway.
pub fn unit_name(agent_hash: &str) -> String {
    format!("openclaw-enterprise-gateway-{agent_hash}.service")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn layout_matches_the_spec() {
        let config = testing::config();
        let agent = testing::agent_ids();
        let layout = Layout::new(&config.runtime, &agent, "a6d1d4ea8e5a");
        let agent_dir = "/var/lib/openclaw-enterprise/namespaces/7a6379f31660/agents/6ff3b3bd11c4";
        let expected = Layout {
            lock: "/var/lib/openclaw-enterprise/.compute-lock".into(),
            account_marker: "/var/lib/openclaw-enterprise/accounts/openclaw-cd338df39c47.json"
                .into(),
            namespace_dir: "/var/lib/openclaw-enterprise/namespaces/7a6379f31660".into(),
            namespace_marker: "/var/lib/openclaw-enterprise/namespaces/7a6379f31660/namespace.json"
                .into(),
            agent_dir: agent_dir.into(),
            agent_marker: format!("{agent_dir}/agent.json"),
            home: format!("{agent_dir}/home"),
            state: format!("{agent_dir}/state"),
            gateway_password_env: format!("{agent_dir}/gateway-password.env"),
            operator_env: format!("{agent_dir}/env"),
            revision_dir: format!("{agent_dir}/revisions/a6d1d4ea8e5a"),
            snapshot: format!("{agent_dir}/revisions/a6d1d4ea8e5a/openclaw.json"),
            revision_marker: format!("{agent_dir}/revisions/a6d1d4ea8e5a/revision.json"),
            current: format!("{agent_dir}/current"),
            current_target: "revisions/a6d1d4ea8e5a".into(),
            current_config: format!("{agent_dir}/current/openclaw.json"),
            served: format!("{agent_dir}/served.json"),
            unit_name: "openclaw-enterprise-gateway-6ff3b3bd11c4.service".into(),
            unit_path: "/etc/systemd/system/openclaw-enterprise-gateway-6ff3b3bd11c4.service"
                .into(),
        };
        assert_eq!(layout, expected);
    }
}
