//! The contract's methods: the one list in Rust. The CLI takes them as a
//! `clap::ValueEnum`, JSON-RPC by the same camelCase names, and the Node client
//! reads the same names from `host/node/compute/methods.json` (a test below keeps the
//! two lists equal).

use clap::ValueEnum;

use crate::capability::hooks::Hook;

/// A ComputeDriver contract method, named as OCC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
#[value(rename_all = "camelCase")]
pub enum Method {
    /// The JSON Schema of the driver's configuration, from the component.
    ConfigurationSchema,
    /// Parse and validate the configuration; no host touched.
    ValidateConfiguration,
    /// Verify the local SSH files and probe every configured host.
    Preflight,
    /// Create or verify the Namespace on its host, then afterNamespacePrepared.
    EnsureNamespace,
    /// Check the server-owned identities of an Agent; no host effect.
    BindAgent,
    /// Admit or refuse a revision's harness and authentication.
    ValidateHarnessAuth,
    /// Admit a revision and prepare it on its host.
    PrepareRevision,
    /// beforeWorkloadStart, then unit, current, restart and readiness.
    ActivateRevision,
    /// Verify ownership; nothing to deactivate in this topology.
    DeactivateRevision,
    /// beforeWorkloadStop, then stop and disable the Agent's gateway.
    StopRevision,
    /// beforeWorkloadStop, then remove one revision's snapshot.
    RetireRevision,
    /// Remove one Agent's unit, files and account; an absent Agent is success.
    DeleteAgentRuntimeCredentials,
    /// beforeNamespaceDelete, then remove every owned unit, file and account.
    DeleteNamespace,
    /// The revision's gateway unit, its state, restarts and events; read-only.
    DescribeAgentRuntime,
    /// Raw lines of the gateway's output, within the request's bounds; read-only.
    ReadAgentRuntimeLogs,
    /// The current checks of the revision's deployment; read-only.
    DiagnoseAgentDeployment,
}

method_names!(Method {
    ConfigurationSchema => "configurationSchema",
    ValidateConfiguration => "validateConfiguration",
    Preflight => "preflight",
    EnsureNamespace => "ensureNamespace",
    BindAgent => "bindAgent",
    ValidateHarnessAuth => "validateHarnessAuth",
    PrepareRevision => "prepareRevision",
    ActivateRevision => "activateRevision",
    DeactivateRevision => "deactivateRevision",
    StopRevision => "stopRevision",
    RetireRevision => "retireRevision",
    DeleteAgentRuntimeCredentials => "deleteAgentRuntimeCredentials",
    DeleteNamespace => "deleteNamespace",
    DescribeAgentRuntime => "describeAgentRuntime",
    ReadAgentRuntimeLogs => "readAgentRuntimeLogs",
    DiagnoseAgentDeployment => "diagnoseAgentDeployment",
});

impl Method {
    /// What the params object holds, for `--help` and error messages.
    pub fn params_shape(self) -> &'static str {
        match self {
            Method::ConfigurationSchema | Method::ValidateConfiguration | Method::Preflight => "{}",
            Method::EnsureNamespace | Method::DeleteNamespace => "{\"namespace\": Namespace}",
            Method::BindAgent | Method::DeleteAgentRuntimeCredentials => {
                "{\"namespace\": Namespace, \"agent\": Agent}"
            }
            Method::ValidateHarnessAuth => {
                "{\"harness\": {\"id\", \"version\", \"mode\"}, \"auth\": HarnessAuth, \"secretBindings\"?: {...}}"
            }
            Method::PrepareRevision | Method::ActivateRevision => {
                "{\"revision\": AgentRevision, \"context\"?: ComputeRevisionContext, \"binding\"?: {...}}"
            }
            Method::DescribeAgentRuntime => {
                "{\"namespace\": Namespace, \"agent\": Agent, \"revision\": AgentRevision, \"options\"?: {\"source\"?, \"events\"?}}"
            }
            Method::ReadAgentRuntimeLogs => {
                "{\"namespace\": Namespace, \"agent\": Agent, \"revision\": AgentRevision, \"request\": AgentRuntimeLogRequest}"
            }
            Method::DiagnoseAgentDeployment => {
                "{\"namespace\": Namespace, \"agent\": Agent, \"revision\": AgentRevision}"
            }
            _ => "{\"revision\": AgentRevision, \"binding\"?: {...}}",
        }
    }

    /// The lifecycle hooks a call of this method may run.
    pub fn hooks(self) -> &'static [Hook] {
        match self {
            Method::EnsureNamespace => &[Hook::AfterNamespacePrepared],
            Method::ActivateRevision => &[Hook::BeforeWorkloadStart, Hook::BeforeWorkloadStop],
            Method::StopRevision | Method::RetireRevision => &[Hook::BeforeWorkloadStop],
            Method::DeleteNamespace => &[Hook::BeforeNamespaceDelete],
            _ => &[],
        }
    }

    /// The helper operations a call of this method may run, each only on the
    /// host of the call's own Namespace (preflight: on every host). A method
    /// with none runs nothing on any host.
    pub fn helper_ops(self) -> &'static [HelperOp] {
        match self {
            Method::Preflight => &[HelperOp::Probe],
            Method::EnsureNamespace => &[HelperOp::EnsureNamespace],
            Method::PrepareRevision => &[HelperOp::Prepare],
            Method::ActivateRevision => &[HelperOp::InspectAgent, HelperOp::Activate],
            Method::DeactivateRevision => &[HelperOp::Deactivate],
            Method::StopRevision => &[HelperOp::Stop],
            Method::RetireRevision => &[HelperOp::Retire],
            Method::DeleteAgentRuntimeCredentials => &[HelperOp::DeleteAgent],
            Method::DeleteNamespace => &[HelperOp::DeleteNamespace],
            Method::DescribeAgentRuntime => &[HelperOp::DescribeRuntime],
            Method::ReadAgentRuntimeLogs => &[HelperOp::ReadLogs],
            Method::DiagnoseAgentDeployment => &[HelperOp::Diagnose],
            Method::ConfigurationSchema
            | Method::ValidateConfiguration
            | Method::BindAgent
            | Method::ValidateHarnessAuth => &[],
        }
    }
}

/// An operation of the remote helper, named in `occ_ssh_target::helper`.
pub use occ_ssh_target::helper::HelperOp;

/// The hook the controller must have accepted earlier in the same call
/// before this operation may run: the spec's order (a workload starts only
/// after beforeWorkloadStart, stops only after beforeWorkloadStop, a
/// Namespace goes only after beforeNamespaceDelete).
pub(super) fn required_hook(op: HelperOp) -> Option<Hook> {
    match op {
        HelperOp::Activate => Some(Hook::BeforeWorkloadStart),
        HelperOp::Stop | HelperOp::Retire => Some(Hook::BeforeWorkloadStop),
        HelperOp::DeleteNamespace => Some(Hook::BeforeNamespaceDelete),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_round_trip_and_match_clap() {
        for m in Method::all() {
            assert_eq!(Method::from_name(m.name()), Some(*m));
            let clap_name = m.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(clap_name, m.name());
        }
        assert_eq!(Method::from_name("prepare"), None);
    }

    /// The helper's own table of operations and the fields each may carry
    /// (`helper/helper.js`, `OPERATIONS`) is this one: read with the machine's
    /// `node`, which needs nothing but the helper's built-ins.
    #[test]
    fn the_helper_serves_the_operations_and_fields_the_host_admits() {
        let helper = concat!(env!("CARGO_MANIFEST_DIR"), "/../helper/helper.js");
        let script = format!(
            "const h = require({helper:?});
             process.stdout.write(JSON.stringify({{version: h.PROTOCOL_VERSION,
               ops: Object.fromEntries(Object.entries(h.OPERATIONS).map(([k, v]) => [k, v.fields]))}}));"
        );
        let out = std::process::Command::new("node")
            .args(["-e", &script])
            .output()
            .expect("node on PATH");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(theirs["version"], super::super::envelope::PROTOCOL_VERSION);
        let ours: serde_json::Map<String, serde_json::Value> = HelperOp::ALL
            .iter()
            .map(|op| (op.name().to_string(), serde_json::json!(op.policy_fields())))
            .collect();
        assert_eq!(theirs["ops"], serde_json::Value::Object(ours));
        // Every operation some method may run is one of them, and each method's
        // list names its operations once.
        for m in Method::all() {
            let ops = m.helper_ops();
            for op in ops {
                assert_eq!(ops.iter().filter(|o| *o == op).count(), 1, "{m}");
            }
        }
    }

    #[test]
    fn the_node_client_lists_the_same_methods() {
        let file = format!(
            "{}/node/compute/methods.json",
            std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")
        );
        let node: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let node: Vec<&str> = node["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let rust: Vec<&str> = Method::all().iter().map(|m| m.name()).collect();
        assert_eq!(
            node, rust,
            "host/node/compute/methods.json and Method disagree"
        );
    }
}
