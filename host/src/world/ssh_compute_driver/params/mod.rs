//! OCC's JSON shapes (`packages/contracts/src/index.ts` of
//! openclaw/openclaw-enterprise), read with serde, and their WIT counterparts.
//!
//! A controller's params are read into these types before any guest runs; an
//! error names the field (`revision.harness.mode: missing`) and is
//! `invalid-params`. Fields the contract does not use (`createdAt`,
//! `configurationId`, `backendId`, the rest of the Agent) are accepted and not
//! read. Documents OCC treats as opaque (the native configuration, harness auth,
//! plugin state, approvers, Secret bindings) stay raw JSON and cross to the driver
//! as text: admitting them is the driver's job. In OCC an optional field is absent
//! or present; a JSON `null` counts as absent.

use occ_ssh_target::digest::sha256_hex;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::envelope::{AgentSubject, NamespaceSubject, RevisionSubject, Subjects};
use crate::capability::hooks::bindings::occ::compute::types as wit;
use crate::error::CallError;

/// JSON with object keys sorted by their bytes and no white space; scalars as
/// `serde_json` writes them. The controller's native configuration crosses to
/// the driver in this form, and the helper's envelope names its SHA-256, so
/// the same document always has the same hash whatever order its keys came in
/// (and whichever `serde_json` features a build enables).
pub(crate) fn canonical_json(value: &Value) -> String {
    fn write(out: &mut String, value: &Value) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(out, item);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(out, item);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(&mut out, value);
    out
}

/// Read `value` as `T`, naming the field at fault under `at` (`""`: the params).
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
                bounded(inner.split(" at line ").next().unwrap_or(&inner))
            ),
        };
        CallError::invalid_params(message)
    })
}

/// The longest serde explanation a refusal quotes: serde echoes a wrong value
/// whole ("invalid type: string \"...\""), and a refusal stays one short line.
const MAX_EXPLANATION: usize = 200;

fn bounded(explanation: &str) -> String {
    if explanation.chars().count() <= MAX_EXPLANATION {
        return explanation.to_string();
    }
    let head: String = explanation.chars().take(MAX_EXPLANATION).collect();
    format!("{head}... ({} bytes, cut)", explanation.len())
}

/// A JSON value kept raw; `null` is absent.
fn raw(v: &Option<Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.to_string()),
    }
}

/// OCC's `Namespace`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Namespace {
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    existing_namespace: Option<Value>,
    #[serde(default)]
    status: Option<String>,
}

impl Namespace {
    pub(crate) fn subject(&self) -> NamespaceSubject {
        NamespaceSubject {
            id: self.id.clone(),
            name: self.name.clone(),
        }
    }

    pub(crate) fn to_wit(&self) -> wit::Namespace {
        wit::Namespace {
            id: self.id.clone(),
            name: self.name.clone(),
            existing_namespace: match &self.existing_namespace {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            },
            status: self.status.clone().unwrap_or_default(),
        }
    }
}

/// The fields of OCC's `Agent` the contract reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Agent {
    pub(crate) id: String,
    pub(crate) namespace_id: String,
    pub(crate) service_principal_id: String,
}

/// OCC's `ComputeAgentBinding`: `{namespace, agent}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Binding {
    pub(crate) namespace: Namespace,
    pub(crate) agent: Agent,
}

impl Binding {
    pub(crate) fn to_wit(&self) -> wit::AgentBinding {
        wit::AgentBinding {
            namespace: self.namespace.to_wit(),
            agent: wit::Agent {
                id: self.agent.id.clone(),
                namespace_id: self.agent.namespace_id.clone(),
                service_principal_id: self.agent.service_principal_id.clone(),
            },
        }
    }

    /// The Namespace and Agent a call with this binding acts for.
    pub(crate) fn subjects(&self) -> Subjects {
        Subjects {
            namespace: Some(self.namespace.subject()),
            agent: Some(AgentSubject {
                id: self.agent.id.clone(),
                service_principal_id: self.agent.service_principal_id.clone(),
            }),
            ..Subjects::default()
        }
    }

    /// Whether another binding names the same identities (Namespace id and name,
    /// Agent id, its Namespace, its ServicePrincipal).
    pub(crate) fn same_identities(&self, other: &Binding) -> bool {
        self.namespace.id == other.namespace.id
            && self.namespace.name == other.namespace.name
            && self.agent == other.agent
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Harness {
    id: String,
    pub(crate) version: String,
    mode: String,
}

impl Harness {
    pub(crate) fn to_wit(&self) -> wit::Harness {
        wit::Harness {
            id: self.id.clone(),
            version: self.version.clone(),
            mode: self.mode.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ComputeRef {
    id: String,
    implementation: String,
}

/// OCC's `AgentRevision`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Revision {
    pub(crate) id: String,
    pub(crate) namespace_id: String,
    pub(crate) agent_id: String,
    revision: u64,
    service_principal_id: String,
    compute: ComputeRef,
    configuration_kind: String,
    configuration_generation: u64,
    configuration: Value,
    pub(crate) harness: Harness,
    harness_auth: Value,
    #[serde(default)]
    plugins: Option<Value>,
    #[serde(default)]
    plugin_approvers: Option<Value>,
    #[serde(default)]
    secret_bindings: Option<Value>,
    #[serde(default)]
    sandbox_driver_id: Option<String>,
    #[serde(default)]
    secret_driver_id: Option<String>,
}

impl Revision {
    /// The native configuration as the driver receives it.
    pub(crate) fn configuration_text(&self) -> String {
        canonical_json(&self.configuration)
    }

    /// Whom a call for this revision acts for, with the binding it runs with.
    /// A binding that does not own the revision acts for nobody: the driver
    /// refuses the call, and the host lets nothing run on a host for it.
    pub(crate) fn subjects(&self, binding: Option<&Binding>) -> Subjects {
        let Some(binding) = binding.filter(|b| {
            b.namespace.id == self.namespace_id
                && b.agent.id == self.agent_id
                && b.agent.namespace_id == self.namespace_id
                && b.agent.service_principal_id == self.service_principal_id
        }) else {
            return Subjects::default();
        };
        Subjects {
            revision: Some(RevisionSubject {
                id: self.id.clone(),
                number: self.revision,
                harness: format!("{}/{}", self.harness.id, self.harness.mode),
                configuration_sha256: sha256_hex(self.configuration_text().as_bytes()),
            }),
            ..binding.subjects()
        }
    }

    pub(crate) fn to_wit(&self) -> wit::Revision {
        wit::Revision {
            id: self.id.clone(),
            namespace_id: self.namespace_id.clone(),
            agent_id: self.agent_id.clone(),
            revision: self.revision,
            service_principal_id: self.service_principal_id.clone(),
            compute: wit::ComputeRef {
                id: self.compute.id.clone(),
                implementation: self.compute.implementation.clone(),
            },
            configuration_kind: self.configuration_kind.clone(),
            configuration_generation: self.configuration_generation,
            configuration: self.configuration_text(),
            harness: self.harness.to_wit(),
            harness_auth: self.harness_auth.to_string(),
            plugins: raw(&self.plugins),
            plugin_approvers: raw(&self.plugin_approvers),
            secret_bindings: raw(&self.secret_bindings),
            sandbox_driver_id: self.sandbox_driver_id.clone(),
            secret_driver_id: self.secret_driver_id.clone(),
        }
    }
}

/// One `secretEnvironment` entry; only its name is read.
#[derive(Debug, Clone, Deserialize)]
struct SecretEnvironmentEntry {
    name: String,
}

/// OCC's `ComputeRevisionContext`; the SSH contract reads `secretEnvironment`
/// and `workspaceSetup`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RevisionContext {
    #[serde(default)]
    secret_environment: Vec<SecretEnvironmentEntry>,
    /// Read raw, then checked by [`RevisionContext::workspace_setup`].
    #[serde(default)]
    workspace_setup: Option<Value>,
}

/// The four documents OCC's Console may supply (`INITIAL_WORKSPACE_FILE_NAMES`).
pub(crate) const WORKSPACE_FILE_NAMES: [&str; 4] =
    ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"];
/// OCC's bound on one document, in UTF-8 bytes.
pub(crate) const WORKSPACE_FILE_MAX_BYTES: usize = 16 * 1024;
/// OCC's setup runtime's bound on `id`, `namespaceId` and `agentId`.
const WORKSPACE_SETUP_ID_MAX: usize = 256;

impl RevisionContext {
    /// OCC's `WorkspaceSetup` of this call (packages/contracts/src/workspace-setup.ts),
    /// checked as OCC's contract and its setup runtime check it, and for this
    /// revision's own Agent: a setup that is not completed carries one to four
    /// of the four documents, each well-formed Unicode (JSON text cannot carry
    /// anything else) without NUL and at most 16 KiB; a completed one carries
    /// none. Refused before any host is touched, naming the field and never a
    /// document's content. The helper checks it all again.
    pub(crate) fn workspace_setup(&self, revision: &Revision) -> Result<Option<Value>, CallError> {
        let Some(value) = &self.workspace_setup else {
            return Ok(None);
        };
        let at = "context.workspaceSetup";
        let bad = |field: &str, why: String| {
            CallError::invalid_params(if field.is_empty() {
                format!("{at}: {why}")
            } else {
                format!("{at}.{field}: {why}")
            })
        };
        let Value::Object(setup) = value else {
            return Err(bad("", "must be an object (OCC's WorkspaceSetup)".into()));
        };
        if let Some(key) = setup.keys().find(|k| {
            ![
                "id",
                "namespaceId",
                "agentId",
                "defaultsId",
                "files",
                "completed",
            ]
            .contains(&k.as_str())
        }) {
            return Err(bad(
                &crate::runtime::escape_control_head(key, 64),
                "not a field of OCC's WorkspaceSetup".into(),
            ));
        }
        for field in ["id", "namespaceId", "agentId"] {
            match setup.get(field) {
                Some(Value::String(s))
                    if !s.is_empty() && s.encode_utf16().count() <= WORKSPACE_SETUP_ID_MAX => {}
                _ => {
                    return Err(bad(
                        field,
                        format!("must be a string of 1 to {WORKSPACE_SETUP_ID_MAX} characters"),
                    ));
                }
            }
        }
        if setup.get("namespaceId").and_then(Value::as_str) != Some(revision.namespace_id.as_str())
            || setup.get("agentId").and_then(Value::as_str) != Some(revision.agent_id.as_str())
        {
            return Err(bad(
                "",
                format!(
                    "belongs to another Agent than revision.agentId {:?} of Namespace {:?}",
                    revision.agent_id, revision.namespace_id
                ),
            ));
        }
        match setup.get("defaultsId") {
            None => {}
            Some(Value::String(d)) if occ_ssh_target::digest::Sha256::parse(d).is_some() => {}
            Some(_) => {
                return Err(bad(
                    "defaultsId",
                    "must be a SHA-256 digest (64 lowercase hex characters)".into(),
                ));
            }
        }
        let Some(Value::Bool(completed)) = setup.get("completed") else {
            return Err(bad("completed", "must be a boolean".into()));
        };
        let files = match setup.get("files") {
            None => None,
            Some(Value::Object(files)) => Some(files),
            Some(_) => return Err(bad("files", "must be an object".into())),
        };
        if let Some(files) = files {
            if *completed {
                return Err(bad("files", "a completed setup carries no files".into()));
            }
            for (name, content) in files {
                if !WORKSPACE_FILE_NAMES.contains(&name.as_str()) {
                    return Err(bad(
                        "files",
                        format!(
                            "{:?} is not one of {}",
                            crate::runtime::escape_control_head(name, 64),
                            WORKSPACE_FILE_NAMES.join(", ")
                        ),
                    ));
                }
                match content {
                    Value::String(text)
                        if !text.contains('\0') && text.len() <= WORKSPACE_FILE_MAX_BYTES => {}
                    Value::String(text) if text.contains('\0') => {
                        return Err(bad(&format!("files.{name}"), "holds NUL".into()));
                    }
                    Value::String(text) => {
                        return Err(bad(
                            &format!("files.{name}"),
                            format!(
                                "is {} bytes of UTF-8, over OCC's bound of {WORKSPACE_FILE_MAX_BYTES}",
                                text.len()
                            ),
                        ));
                    }
                    _ => return Err(bad(&format!("files.{name}"), "must be a string".into())),
                }
            }
        }
        if !*completed && files.is_none_or(|f| f.is_empty()) {
            return Err(bad(
                "files",
                "a setup that is not completed carries at least one document".into(),
            ));
        }
        Ok(Some(value.clone()))
    }

    pub(crate) fn to_wit(&self) -> wit::RevisionContext {
        wit::RevisionContext {
            secret_environment: self
                .secret_environment
                .iter()
                .map(|e| e.name.clone())
                .collect(),
        }
    }
}

/// `{"namespace": {...}}` of the namespace methods.
#[derive(Debug, Deserialize)]
pub(crate) struct NamespaceParams {
    pub(crate) namespace: Namespace,
}

/// The params of a revision method: `{revision, context?}`, and for a one-shot
/// call (no earlier bindAgent) its `binding`.
#[derive(Debug, Deserialize)]
pub(crate) struct RevisionParams {
    pub(crate) revision: Revision,
    #[serde(default)]
    pub(crate) binding: Option<Binding>,
    #[serde(default)]
    pub(crate) context: Option<RevisionContext>,
}

/// The params of `validateHarnessAuth`: OCC's
/// `(harness, auth, configuration, secretBindings?, credentialSourceType?)` by name.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HarnessAuthParams {
    pub(crate) harness: Harness,
    pub(crate) auth: Value,
    #[serde(default)]
    pub(crate) secret_bindings: Option<Value>,
}

impl HarnessAuthParams {
    pub(crate) fn secret_bindings(&self) -> Option<String> {
        raw(&self.secret_bindings)
    }
}

/// OCC's `ComputeAgentRevisionBinding` (`{namespace, agent, revision}`) and
/// what the runtime method of the call adds: `options` of
/// describeAgentRuntime, `request` of readAgentRuntimeLogs.
#[derive(Debug, Deserialize)]
pub(crate) struct RuntimeParams {
    pub(crate) namespace: Namespace,
    pub(crate) agent: Agent,
    pub(crate) revision: Revision,
    #[serde(default)]
    pub(crate) options: Option<DescribeOptions>,
    #[serde(default)]
    pub(crate) request: Option<LogRequest>,
}

impl RuntimeParams {
    /// The Namespace and Agent of the binding.
    pub(crate) fn binding(&self) -> Binding {
        Binding {
            namespace: self.namespace.clone(),
            agent: self.agent.clone(),
        }
    }
}

/// OCC's `AgentRuntimeDescribeOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescribeOptions {
    /// `gateway` or `agent`: describe only this source.
    #[serde(default)]
    pub(crate) source: Option<String>,
    /// `false` lists no events.
    #[serde(default)]
    pub(crate) events: Option<bool>,
}

/// The sources an embedded Agent has: its gateway alone.
pub(crate) const LOG_SOURCES: [&str; 2] = ["gateway", "agent"];
/// The most lines one read returns (OCC asks at most 1000).
pub(crate) const MAX_TAIL_LINES: u32 = 1000;
/// The most bytes one read returns (OCC asks 1 MiB).
pub(crate) const MAX_LIMIT_BYTES: u32 = 1 << 20;
/// The furthest back `sinceSeconds` reaches (OCC clamps a cursor to a day).
pub(crate) const MAX_SINCE_SECONDS: u32 = 366 * 86_400;

/// OCC's `AgentRuntimeLogRequest`, less its `signal`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogRequest {
    pub(crate) source: String,
    pub(crate) pod: String,
    pub(crate) pod_uid: String,
    pub(crate) container: String,
    pub(crate) previous: bool,
    pub(crate) tail_lines: u32,
    #[serde(default)]
    pub(crate) since_seconds: Option<u32>,
    pub(crate) limit_bytes: u32,
}

impl LogRequest {
    /// Checked before the component runs: the gateway's source and container,
    /// a systemd invocation id, and bounds within OCC's. A refused request
    /// touches no host.
    pub(crate) fn check(&self) -> Result<(), CallError> {
        let refuse = |m: String| Err(CallError::invalid_params(format!("request.{m}")));
        if self.source != "gateway" {
            return refuse(format!(
                "source: {:?} is not a source of an embedded Agent's runtime (only \"gateway\")",
                self.source
            ));
        }
        if self.container != "gateway" {
            return refuse(format!(
                "container: {:?} is not the gateway's container (\"gateway\")",
                self.container
            ));
        }
        if self.pod.is_empty() || self.pod.len() > 255 || self.pod.chars().any(char::is_control) {
            return refuse("pod: must be the unit describeAgentRuntime listed".into());
        }
        if !(self.pod_uid.len() == 32
            && self
                .pod_uid
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            return refuse(
                "podUid: must be the invocation id describeAgentRuntime listed (32 lowercase hex characters)"
                    .into(),
            );
        }
        if !(1..=MAX_TAIL_LINES).contains(&self.tail_lines) {
            return refuse(format!("tailLines: must be from 1 to {MAX_TAIL_LINES}"));
        }
        if !(1..=MAX_LIMIT_BYTES).contains(&self.limit_bytes) {
            return refuse(format!("limitBytes: must be from 1 to {MAX_LIMIT_BYTES}"));
        }
        if let Some(s) = self.since_seconds
            && !(1..=MAX_SINCE_SECONDS).contains(&s)
        {
            return refuse(format!(
                "sinceSeconds: must be from 1 to {MAX_SINCE_SECONDS}"
            ));
        }
        Ok(())
    }

    /// What the helper's envelope carries of it.
    pub(crate) fn envelope(&self) -> Value {
        let mut v = serde_json::json!({
            "pod": self.pod,
            "podUid": self.pod_uid,
            "previous": self.previous,
            "tailLines": self.tail_lines,
            "limitBytes": self.limit_bytes,
        });
        if let Some(s) = self.since_seconds {
            v["sinceSeconds"] = s.into();
        }
        v
    }
}

/// `bindAgent` and `deleteAgentRuntimeCredentials` take `{namespace, agent}` (or
/// `{binding: {namespace, agent}}`).
pub(crate) fn binding_params(params: &Value) -> Result<Binding, CallError> {
    match params.get("binding") {
        Some(b) => read(b, "binding"),
        None => read(params, ""),
    }
}

#[cfg(test)]
pub(crate) mod tests;
