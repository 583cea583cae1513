//! OCC's JSON shapes, read with serde, and their WIT counterparts.
//!
//! A controller's params are read into these types before any guest runs; an
//! error names the field (`revision.harness.mode: missing`) and is
//! `invalid-params`. Documents OCC treats as opaque (the native configuration,
//! harness auth, the plugin map) stay raw JSON and cross to the driver as text:
//! admitting them is the driver's job.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::capability::hooks::bindings::occ::compute::types as wit;
use crate::error::CallError;

/// Read `value` as `T`, naming the field at fault under `at`.
pub(crate) fn read<T: DeserializeOwned>(value: &Value, at: &str) -> Result<T, CallError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.inner().to_string();
        let located = e.path().to_string();
        let path = match (at, located.as_str()) {
            ("", ".") => "params".to_string(),
            ("", l) => l.to_string(),
            (a, ".") => a.to_string(),
            (a, l) => format!("{a}.{l}"),
        };
        // serde reports a missing field at its parent; name the field itself.
        let message = match inner
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            Some(field) => format!("{path}.{field}: missing"),
            None => format!(
                "{path}: {}",
                inner.split(" at line ").next().unwrap_or(&inner)
            ),
        };
        CallError::invalid_params(message)
    })
}

/// OCC's Namespace: the fields the contract uses; others (status, createdAt)
/// are accepted and not used.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Namespace {
    pub(crate) id: String,
    pub(crate) name: String,
}

impl Namespace {
    pub(crate) fn to_wit(&self) -> wit::Namespace {
        wit::Namespace {
            id: self.id.clone(),
            name: self.name.clone(),
        }
    }
}

/// The Agent part of a binding.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Agent {
    pub(crate) id: String,
    pub(crate) service_principal_id: String,
}

/// OCC's binding: `{namespace, agent}`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Binding {
    pub(crate) namespace: Namespace,
    pub(crate) agent: Agent,
}

impl Binding {
    pub(crate) fn to_wit(&self) -> wit::AgentBinding {
        wit::AgentBinding {
            namespace: self.namespace.to_wit(),
            agent_id: self.agent.id.clone(),
            service_principal_id: self.agent.service_principal_id.clone(),
        }
    }

    /// The binding as hooks and the bindings store carry it.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "namespace": {"id": self.namespace.id, "name": self.namespace.name},
            "agent": {"id": self.agent.id, "servicePrincipalId": self.agent.service_principal_id},
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Harness {
    id: String,
    mode: String,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SecretBinding {
    name: String,
    secret_id: String,
}

/// OCC's AgentRevision. Fields the SSH contract does not use (configurationId,
/// createdAt, compute, ...) are accepted and not used.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Revision {
    pub(crate) id: String,
    pub(crate) namespace_id: String,
    pub(crate) agent_id: String,
    revision: u64,
    harness: Harness,
    #[serde(default)]
    harness_auth: Option<Value>,
    #[serde(default)]
    configuration: Option<Value>,
    #[serde(default)]
    requested_plugins: Option<Value>,
    #[serde(default)]
    default_plugin_approver_policy: Option<Value>,
    #[serde(default)]
    secret_bindings: Option<Vec<SecretBinding>>,
}

fn json_text(v: &Option<Value>, default: &str) -> String {
    match v {
        None | Some(Value::Null) => default.to_string(),
        Some(v) => v.to_string(),
    }
}

impl Revision {
    pub(crate) fn to_wit(&self) -> wit::Revision {
        wit::Revision {
            id: self.id.clone(),
            namespace_id: self.namespace_id.clone(),
            agent_id: self.agent_id.clone(),
            number: self.revision,
            harness: wit::Harness {
                id: self.harness.id.clone(),
                mode: self.harness.mode.clone(),
                version: self.harness.version.clone(),
            },
            harness_auth: json_text(&self.harness_auth, "null"),
            configuration: json_text(&self.configuration, "null"),
            requested_plugins: json_text(&self.requested_plugins, "{}"),
            default_plugin_approver_policy: match &self.default_plugin_approver_policy {
                None | Some(Value::Null) => None,
                Some(p) => Some(p.to_string()),
            },
            secret_bindings: self
                .secret_bindings
                .iter()
                .flatten()
                .map(|b| wit::SecretBinding {
                    name: b.name.clone(),
                    secret_id: b.secret_id.clone(),
                })
                .collect(),
        }
    }
}

/// One entry of `context.secretEnvironment`: a name, or an object naming one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum SecretEnvironmentEntry {
    Name(String),
    Named { name: String },
    Other(Value),
}

/// What OCC resolved for a revision before preparation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RevisionContext {
    #[serde(default)]
    secret_environment: Option<Vec<SecretEnvironmentEntry>>,
}

impl RevisionContext {
    pub(crate) fn to_wit(&self) -> wit::RevisionContext {
        wit::RevisionContext {
            secret_environment: self
                .secret_environment
                .iter()
                .flatten()
                .map(|e| match e {
                    SecretEnvironmentEntry::Name(s) | SecretEnvironmentEntry::Named { name: s } => {
                        s.clone()
                    }
                    SecretEnvironmentEntry::Other(v) => v.to_string(),
                })
                .collect(),
        }
    }
}

/// `{"namespace": {...}}` of the namespace methods.
#[derive(Debug, Deserialize)]
pub(crate) struct NamespaceParams {
    pub(crate) namespace: Namespace,
}

/// The params of a revision method.
#[derive(Debug, Deserialize)]
pub(crate) struct RevisionParams {
    pub(crate) revision: Revision,
    #[serde(default)]
    pub(crate) binding: Option<Binding>,
    #[serde(default)]
    pub(crate) context: Option<RevisionContext>,
}

/// `bindAgent` takes `{namespace, agent}` or `{binding: {namespace, agent}}`.
pub(crate) fn binding_params(params: &Value) -> Result<Binding, CallError> {
    match params.get("binding") {
        Some(b) => read(b, "binding"),
        None => read(params, "binding"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_occ_revision_shape() {
        let r: Revision = read(
            &json!({
                "id": "rev-1", "namespaceId": "ns-1", "agentId": "agent-1", "revision": 2,
                "harness": {"id": "openclaw", "mode": "embedded", "version": "2026.9.6"},
                "harnessAuth": {"method": "runtime"},
                "configuration": {"gateway": {"mode": "local"}},
                "configurationId": "ignored",
            }),
            "revision",
        )
        .unwrap();
        let w = r.to_wit();
        assert_eq!(w.number, 2);
        assert_eq!(w.harness_auth, r#"{"method":"runtime"}"#);
        assert_eq!(w.requested_plugins, "{}");
        assert_eq!(w.default_plugin_approver_policy, None);
    }

    #[test]
    fn param_errors_name_the_field() {
        let cases = [
            (
                read::<Revision>(&json!({"id": "r"}), "revision").unwrap_err(),
                "revision.namespaceId: missing",
            ),
            (
                binding_params(&json!({"namespace": {"id": "n", "name": "x"}})).unwrap_err(),
                "binding.agent: missing",
            ),
            (
                read::<NamespaceParams>(&json!({"namespace": {"id": "n"}}), "").unwrap_err(),
                "namespace.name: missing",
            ),
            (
                read::<RevisionContext>(&json!({"secretEnvironment": 3}), "context").unwrap_err(),
                "context.secretEnvironment",
            ),
            (
                read::<Revision>(
                    &json!({"id": "r", "namespaceId": "n", "agentId": "a", "revision": "one",
                            "harness": {"id": "openclaw", "mode": "embedded"}}),
                    "revision",
                )
                .unwrap_err(),
                "revision.revision: invalid type",
            ),
        ];
        for (err, expected) in cases {
            assert!(
                err.message.contains(expected),
                "{expected} in {}",
                err.message
            );
            assert_eq!(err.code, "invalid-params");
        }
    }
}
