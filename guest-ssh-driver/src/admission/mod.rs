//! Admission: what the SSH topology accepts, decided before any host effect.
//!
//! Only embedded OpenClaw with runtime authentication, committed for this driver,
//! with no OCC Secrets, no SandboxDriver, no plugins and no plugin approvers, and
//! native gateway authentication limited to the modes the driver can serve:
//! password through the managed environment SecretRef, or trusted-proxy. Field
//! names in refusals are OCC's (`revision.pluginApprovers`, ...).

use serde_json::{Map, Value, json};

use crate::error::{Error, named, quoted};
use crate::model::{
    AgentBinding, ComputeRef, Harness, Namespace, Revision, RevisionContext, Warning,
};

/// The environment variable the managed gateway password is delivered in.
pub const GATEWAY_PASSWORD_ENV: &str = "OPENCLAW_GATEWAY_PASSWORD";

/// The only SecretRef a native `gateway.auth.password` may hold.
pub fn gateway_password_ref() -> Value {
    json!({"source": "env", "provider": "default", "id": GATEWAY_PASSWORD_ENV})
}

/// The one expression form of the managed password OCC accepts besides the
/// SecretRef: the variable, expanded by the gateway.
pub const GATEWAY_PASSWORD_EXPRESSION: &str = "${OPENCLAW_GATEWAY_PASSWORD}";

/// The `gateway.auth` fields OCC supports (openclaw-enterprise
/// `apps/controller/src/gateway/auth-fields.ts`), in every mode; in trusted-proxy
/// mode `password` opts into the loopback password.
const SUPPORTED_AUTH_FIELDS: &[&str] = &[
    "mode",
    "password",
    "allowTailscale",
    "identityScopes",
    "rateLimit",
    "trustedProxy",
];

/// An admitted revision: what the operator should know. The snapshot itself is
/// the helper's to render, from the controller's document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub warnings: Vec<Warning>,
}

/// A Namespace SSH Compute can serve: OCC's `existingNamespace` adoption is
/// unsupported.
pub fn check_namespace(namespace: &Namespace) -> Result<(), Error> {
    if namespace.existing_namespace.is_some() {
        return Err(Error::refused(
            "unsupported-existing-namespace",
            "namespace.existingNamespace",
            "SSH Compute does not adopt existing namespaces; remove existingNamespace",
        ));
    }
    Ok(())
}

/// A binding OCC may make: its Namespace is servable and the Agent belongs to it.
pub fn check_binding(binding: &AgentBinding) -> Result<(), Error> {
    check_namespace(&binding.namespace)?;
    if binding.agent.namespace_id != binding.namespace.id {
        return Err(Error::UnboundAgent(format!(
            "agent.namespaceId: agent {} belongs to namespace {}, not to the bound namespace {}",
            quoted(&binding.agent.id),
            quoted(&binding.agent.namespace_id),
            quoted(&binding.namespace.id)
        )));
    }
    Ok(())
}

/// The binding that owns `revision`. No binding, or one for another Namespace,
/// Agent or ServicePrincipal, fails closed.
pub fn bound<'a>(
    binding: Option<&'a AgentBinding>,
    revision: &Revision,
) -> Result<&'a AgentBinding, Error> {
    let binding = binding.ok_or_else(|| {
        Error::UnboundAgent(format!(
            "revision.agentId: revision {} names agent {}, which has no binding: bindAgent \
             must accept the Agent before revision operations",
            quoted(&revision.id),
            quoted(&revision.agent_id)
        ))
    })?;
    check_binding(binding)?;
    let pairs = [
        (
            "namespaceId",
            "namespace",
            &revision.namespace_id,
            &binding.namespace.id,
        ),
        ("agentId", "agent", &revision.agent_id, &binding.agent.id),
        (
            "servicePrincipalId",
            "service principal",
            &revision.service_principal_id,
            &binding.agent.service_principal_id,
        ),
    ];
    for (field, what, theirs, bound) in pairs {
        if theirs != bound {
            return Err(Error::UnboundAgent(format!(
                "revision.{field}: revision {} belongs to {what} {} but its binding is for {what} {}",
                quoted(&revision.id),
                quoted(theirs),
                quoted(bound)
            )));
        }
    }
    Ok(binding)
}

/// The driver a revision was committed for must be this one.
pub fn check_compute(revision: &Revision, ours: &ComputeRef) -> Result<(), Error> {
    let compute = &revision.compute;
    if compute != ours {
        return Err(Error::refused(
            "foreign-compute",
            "revision.compute",
            format!(
                "the revision was committed for Compute Driver {} ({}), not for this one, {} ({})",
                quoted(&compute.id),
                quoted(&compute.implementation),
                quoted(&ours.id),
                quoted(&ours.implementation)
            ),
        ));
    }
    Ok(())
}

/// OCC's `validateHarnessAuth`: the harness and its auth, and (when given) that
/// no Secret bindings ride along.
pub fn check_harness_and_auth(
    harness: &Harness,
    harness_auth: &str,
    secret_bindings: Option<&str>,
) -> Result<(), Error> {
    if harness.id != "openclaw" || harness.mode != "embedded" {
        return Err(Error::refused(
            "unsupported-harness",
            "revision.harness",
            format!(
                "{}/{} is unsupported: SSH Compute runs only openclaw/embedded; use Kubernetes \
                 Compute for dedicated Codex",
                named(&harness.id),
                named(&harness.mode)
            ),
        ));
    }
    check_harness_auth(harness_auth)?;
    check_secret_bindings(secret_bindings)
}

/// Admits a revision, or refuses it naming the field at fault. `context` is checked
/// when the call has one.
pub fn admit(revision: &Revision, context: Option<&RevisionContext>) -> Result<Admission, Error> {
    let mut warnings = Vec::new();
    if revision.configuration_kind != "agent" {
        return Err(Error::refused(
            "invalid-revision",
            "revision.configurationKind",
            format!(
                "{} is not an Agent configuration",
                quoted(&revision.configuration_kind)
            ),
        ));
    }
    if revision.configuration_generation == 0 {
        return Err(Error::refused(
            "invalid-revision",
            "revision.configurationGeneration",
            "must be a positive integer",
        ));
    }
    check_harness_and_auth(
        &revision.harness,
        &revision.harness_auth,
        revision.secret_bindings.as_deref(),
    )?;
    if let Some(context) = context.filter(|c| !c.secret_environment.is_empty()) {
        let names: Vec<&str> = context
            .secret_environment
            .iter()
            .map(String::as_str)
            .collect();
        return Err(secret_refusal(
            "context.secretEnvironment",
            "Secret-backed environment entries",
            &names,
        ));
    }
    if let Some(sandbox) = &revision.sandbox_driver_id {
        return Err(Error::refused(
            "unsupported-sandbox-driver",
            "revision.sandboxDriverId",
            format!(
                "SandboxDriver composition ({}) is unsupported by SSH Compute; use \
                 Kubernetes Compute for sandboxed Agents",
                quoted(sandbox)
            ),
        ));
    }
    check_plugins(revision)?;
    check_gateway_settings(&revision.configuration)?;
    let native = render_native(&revision.configuration)?;
    if native.defaulted_mode {
        warnings.push(Warning::new(
            "gateway-auth-defaulted",
            format!(
                "configuration.gateway.auth.mode is omitted: the snapshot uses password mode \
                 with the managed {GATEWAY_PASSWORD_ENV} SecretRef"
            ),
        ));
    }
    Ok(Admission { warnings })
}

/// Native gateway settings an SSH Compute gateway cannot serve, as OCC's own SSH
/// driver refuses them (its `validateGatewaySettings`): the path of the setting,
/// the value refused there, and why. A refusal names the setting, never the
/// document's value. Only the workload operations (prepare, activate) check
/// them: stopping or retiring an older revision never does.
pub const REFUSED_GATEWAY_SETTINGS: &[(&[&str], &str, &str)] = &[
    (
        &["gateway", "tls", "enabled"],
        "true",
        "gateway TLS is unsupported by SSH Compute: OCC reaches the gateway over loopback \
         HTTP on its host; remove the setting",
    ),
    (
        &[
            "plugins",
            "entries",
            "codex",
            "config",
            "appServer",
            "approvalPolicy",
        ],
        "\"untrusted\"",
        "the untrusted approval policy of the Codex app server is unsupported by SSH Compute: \
         it asks a person to approve each command, and an SSH Agent has no one to ask; choose \
         another approval policy",
    ),
];

/// Refuses the settings of [`REFUSED_GATEWAY_SETTINGS`].
pub fn check_gateway_settings(configuration: &str) -> Result<(), Error> {
    let Ok(document) = serde_json::from_str::<Value>(configuration) else {
        // Not JSON: `render_native` says so.
        return Ok(());
    };
    for (path, refused, why) in REFUSED_GATEWAY_SETTINGS {
        let found = path.iter().try_fold(&document, |v, key| v.get(key));
        let refused: Value = serde_json::from_str(refused).expect("a JSON value");
        if found == Some(&refused) {
            return Err(Error::refused(
                "unsupported-gateway-setting",
                format!("configuration.{}", path.join(".")),
                *why,
            ));
        }
    }
    Ok(())
}

fn check_harness_auth(harness_auth: &str) -> Result<(), Error> {
    let auth: Option<Value> = serde_json::from_str(harness_auth).ok();
    if auth != Some(json!({"method": "runtime"})) {
        return Err(Error::refused(
            "unsupported-harness-auth",
            "revision.harnessAuth",
            "must be exactly {\"method\":\"runtime\"}: SSH Compute uses model credentials \
             supplied on the host (OCC Secret-backed keys and managed ChatGPT accounts are \
             unsupported)",
        ));
    }
    Ok(())
}

/// `secretBindings` is a map of names to bindings; any entry is refused.
fn check_secret_bindings(secret_bindings: Option<&str>) -> Result<(), Error> {
    let Some(text) = secret_bindings else {
        return Ok(());
    };
    let map: Map<String, Value> = match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        Ok(Value::Null) => return Ok(()),
        _ => {
            return Err(Error::refused(
                "invalid-revision",
                "revision.secretBindings",
                "must be an object mapping names to Secret bindings",
            ));
        }
    };
    if map.is_empty() {
        return Ok(());
    }
    let mut names: Vec<&str> = map.keys().map(String::as_str).collect();
    names.sort_unstable();
    Err(secret_refusal(
        "revision.secretBindings",
        "OCC Secret bindings",
        &names,
    ))
}

fn secret_refusal(path: &str, what: &str, names: &[&str]) -> Error {
    Error::refused(
        "unsupported-secret",
        path,
        format!(
            "{what} are unsupported by SSH Compute (found {}); provision credentials in the \
             operator-owned <agentDir>/env file and reference them through native environment \
             SecretRefs",
            names.join(", ")
        ),
    )
}

const CLEAR_PLUGINS: &str = "clear the Agent's plugins and plugin approvers before deploying \
                             through SSH; use Kubernetes Compute for PluginDriver";

fn check_plugins(revision: &Revision) -> Result<(), Error> {
    if revision.plugin_approvers.is_some() {
        return Err(Error::refused(
            "unsupported-plugin-approvers",
            "revision.pluginApprovers",
            format!(
                "SSH Compute refuses any Agent plugin approver list, including an explicit \
                 empty one; {CLEAR_PLUGINS}"
            ),
        ));
    }
    let Some(text) = &revision.plugins else {
        return Ok(());
    };
    let plugins = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(state)) => match state.get("plugins") {
            Some(Value::Object(plugins)) => plugins.clone(),
            _ => {
                return Err(Error::refused(
                    "invalid-revision",
                    "revision.plugins.plugins",
                    "must be an object mapping plugin IDs to selections",
                ));
            }
        },
        _ => {
            return Err(Error::refused(
                "invalid-revision",
                "revision.plugins",
                "must be an object {\"driver\", \"plugins\"}",
            ));
        }
    };
    if !plugins.is_empty() {
        let mut names: Vec<&str> = plugins.keys().map(String::as_str).collect();
        names.sort_unstable();
        return Err(Error::refused(
            "unsupported-plugins",
            "revision.plugins.plugins",
            format!(
                "SSH Compute refuses a nonempty plugin selection (found {}); {CLEAR_PLUGINS}",
                names.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The native document with its gateway authentication rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeDocument {
    pub document: Value,
    pub needs_password: bool,
    /// `gateway.auth.mode` was omitted and password mode was rendered.
    pub defaulted_mode: bool,
}

/// Admits `gateway.auth` and renders it as OCC's SSH driver does
/// (`sshGatewayConfigurationDocument` in openclaw-enterprise
/// `apps/controller/src/drivers/compute/ssh/index.ts`): password mode (explicit
/// or omitted) always carries the managed SecretRef, whichever accepted form the
/// document used; trusted-proxy is kept as written. The helper renders the
/// snapshot it writes by the same rule.
pub fn render_native(configuration: &str) -> Result<NativeDocument, Error> {
    let refuse = |path: &str, reason: String| {
        Error::refused(
            "unsupported-gateway-auth",
            format!("configuration{path}"),
            reason,
        )
    };
    let mut document: Value = serde_json::from_str(configuration).map_err(|e| {
        Error::refused(
            "invalid-native-configuration",
            "configuration",
            format!("not valid JSON: {e}"),
        )
    })?;
    let Value::Object(root) = &mut document else {
        return Err(Error::refused(
            "invalid-native-configuration",
            "configuration",
            "the native configuration must be a JSON object",
        ));
    };
    let gateway = root
        .entry("gateway")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| refuse(".gateway", "must be an object".into()))?;
    let auth = gateway
        .entry("auth")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| refuse(".gateway.auth", "must be an object".into()))?;

    let mode = match auth.get("mode") {
        None => None,
        Some(Value::String(mode)) if mode == "password" || mode == "trusted-proxy" => {
            Some(mode.clone())
        }
        Some(Value::String(mode)) => {
            return Err(refuse(
                ".gateway.auth.mode",
                format!(
                    "{} is unsupported: SSH Compute supports password (the default) and \
                     trusted-proxy",
                    quoted(mode)
                ),
            ));
        }
        Some(_) => return Err(refuse(".gateway.auth.mode", "must be a string".into())),
    };
    let trusted_proxy = mode.as_deref() == Some("trusted-proxy");
    let mut fields: Vec<&String> = auth.keys().collect();
    fields.sort_unstable();
    if let Some(field) = fields
        .into_iter()
        .find(|f| !SUPPORTED_AUTH_FIELDS.contains(&f.as_str()))
    {
        return Err(refuse(
            &format!(".gateway.auth.{field}"),
            format!(
                "unsupported field: SSH Compute admits only {}",
                SUPPORTED_AUTH_FIELDS.join(", ")
            ),
        ));
    }
    if auth
        .get("password")
        .is_some_and(|p| *p != gateway_password_ref() && *p != json!(GATEWAY_PASSWORD_EXPRESSION))
    {
        return Err(refuse(
            ".gateway.auth.password",
            format!(
                "must be the managed SecretRef \
                 {{\"source\":\"env\",\"provider\":\"default\",\"id\":\"{GATEWAY_PASSWORD_ENV}\"}} \
                 or the expression \"{GATEWAY_PASSWORD_EXPRESSION}\""
            ),
        ));
    }

    let needs_password = !trusted_proxy || auth.contains_key("password");
    if !trusted_proxy {
        auth.insert("mode".into(), json!("password"));
        auth.insert("password".into(), gateway_password_ref());
    }
    Ok(NativeDocument {
        document,
        needs_password,
        defaulted_mode: mode.is_none(),
    })
}

#[cfg(test)]
mod tests;
