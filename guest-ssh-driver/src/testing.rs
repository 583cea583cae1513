//! Shared fixtures of the unit tests: the spec's example configuration and one bound
//! Agent with one revision.

use serde_json::{Value, json};

use crate::model::{Agent, AgentBinding, ComputeRef, Harness, Namespace, Revision, Selection};

/// The spec's example configuration.
pub(crate) fn spec_example() -> Value {
    json!({
        "ssh": {
            "identityFile": "/etc/openclaw/ssh/id_ed25519",
            "knownHostsFile": "/etc/openclaw/ssh/known_hosts",
            "connectTimeoutSeconds": 10
        },
        "hosts": {
            "stable": {
                "address": "203.0.113.10",
                "port": 22,
                "user": "root",
                "nodePath": "/usr/bin/node",
                "openclawPath": "/opt/openclaw/current/dist/index.js"
            }
        },
        "runtime": {
            "nodePath": "/usr/bin/node",
            "openclawPath": "/opt/openclaw/current/dist/index.js",
            "user": "openclaw",
            "root": "/var/lib/openclaw-enterprise",
            "systemdUnitDirectory": "/etc/systemd/system"
        },
        "network": { "gatewayPortRange": { "start": 18800, "end": 18899 } }
    })
}

/// The installation's selection of the driver, with the spec's configuration.
pub(crate) fn selection() -> Selection {
    Selection {
        id: "compute-ssh".into(),
        implementation: "occ/ssh".into(),
        configuration: spec_example().to_string(),
    }
}

pub(crate) fn namespace() -> Namespace {
    Namespace {
        id: "ns-1".into(),
        name: "stable".into(),
        existing_namespace: None,
        status: "ready".into(),
    }
}

pub(crate) fn binding() -> AgentBinding {
    AgentBinding {
        namespace: namespace(),
        agent: Agent {
            id: "agent-1".into(),
            namespace_id: "ns-1".into(),
            service_principal_id: "sp-1".into(),
        },
    }
}

/// An admissible revision of `binding()`.
pub(crate) fn revision() -> Revision {
    Revision {
        id: "rev-1".into(),
        namespace_id: "ns-1".into(),
        agent_id: "agent-1".into(),
        revision: 1,
        service_principal_id: "sp-1".into(),
        compute: ComputeRef {
            id: "compute-ssh".into(),
            implementation: "occ/ssh".into(),
        },
        configuration_kind: "agent".into(),
        configuration_generation: 1,
        harness: Harness {
            id: "openclaw".into(),
            version: "2026.9.6".into(),
            mode: "embedded".into(),
        },
        harness_auth: r#"{"method":"runtime"}"#.into(),
        configuration: r#"{"gateway":{"mode":"local","auth":{"mode":"password"}},"agents":{"defaults":{"model":"anthropic/claude"}}}"#.into(),
        plugins: None,
        plugin_approvers: None,
        secret_bindings: None,
        sandbox_driver_id: None,
        secret_driver_id: None,
    }
}
