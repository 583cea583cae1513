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
mod tests {
    use super::*;
    use crate::testing;

    fn refusal(result: Result<impl std::fmt::Debug, Error>) -> (String, String) {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), crate::error::FailureKind::Permanent, "{err}");
        (err.code().to_owned(), err.to_string())
    }

    #[test]
    fn the_sample_revision_is_admitted() {
        let admission = admit(&testing::revision(), Some(&RevisionContext::default())).unwrap();
        assert_eq!(admission.warnings, []);
        // OCC's own shapes that SSH accepts: an empty Secret map, plugin state with
        // no plugins.
        let mut revision = testing::revision();
        revision.secret_bindings = Some("{}".into());
        revision.plugins =
            Some(r#"{"driver":{"id":"p","implementation":"x"},"plugins":{}}"#.into());
        admit(&revision, None).unwrap();
    }

    #[test]
    fn binding_must_own_the_revision() {
        let revision = testing::revision();
        let binding = testing::binding();
        assert_eq!(bound(Some(&binding), &revision).unwrap(), &binding);
        let mut other_namespace = binding.clone();
        other_namespace.namespace.id = "ns-2".into();
        other_namespace.agent.namespace_id = "ns-2".into();
        let mut other_agent = binding.clone();
        other_agent.agent.id = "agent-2".into();
        let mut other_principal = binding.clone();
        other_principal.agent.service_principal_id = "sp-2".into();
        let mut moved_agent = binding.clone();
        moved_agent.agent.namespace_id = "ns-9".into();
        let cases = [
            (
                None,
                "revision.agentId: revision \"rev-1\" names agent \"agent-1\", which has no binding: bindAgent must accept the Agent before revision operations",
            ),
            (
                Some(&other_namespace),
                "revision.namespaceId: revision \"rev-1\" belongs to namespace \"ns-1\" but its binding is for namespace \"ns-2\"",
            ),
            (
                Some(&other_agent),
                "revision.agentId: revision \"rev-1\" belongs to agent \"agent-1\" but its binding is for agent \"agent-2\"",
            ),
            (
                Some(&other_principal),
                "revision.servicePrincipalId: revision \"rev-1\" belongs to service principal \"sp-1\" but its binding is for service principal \"sp-2\"",
            ),
            (
                Some(&moved_agent),
                "agent.namespaceId: agent \"agent-1\" belongs to namespace \"ns-9\", not to the bound namespace \"ns-1\"",
            ),
        ];
        for (binding, message) in cases {
            let (code, text) = refusal(bound(binding, &revision));
            assert_eq!((code.as_str(), text.as_str()), ("unbound-agent", message));
        }
    }

    #[test]
    fn existing_namespaces_and_foreign_computes_are_refused() {
        let mut namespace = testing::namespace();
        namespace.existing_namespace = Some("team-a".into());
        assert_eq!(
            refusal(check_namespace(&namespace)),
            (
                "unsupported-existing-namespace".into(),
                "namespace.existingNamespace: SSH Compute does not adopt existing namespaces; \
                 remove existingNamespace"
                    .into()
            )
        );
        assert_eq!(
            refusal(check_compute(
                &testing::revision(),
                &ComputeRef {
                    id: "compute-ssh".into(),
                    implementation: "other/impl".into()
                }
            ))
            .0,
            "foreign-compute"
        );
        check_compute(
            &testing::revision(),
            &ComputeRef {
                id: "compute-ssh".into(),
                implementation: "occ/ssh".into(),
            },
        )
        .unwrap();
    }

    #[test]
    fn revision_refusals_name_the_field() {
        let clear = "clear the Agent's plugins and plugin approvers before deploying through SSH; \
                     use Kubernetes Compute for PluginDriver";
        type Edit = fn(&mut Revision);
        let cases: Vec<(Edit, &str, String)> = vec![
            (|r| r.harness.mode = "dedicated".into(), "unsupported-harness",
             "revision.harness: openclaw/dedicated is unsupported: SSH Compute runs only openclaw/embedded; use Kubernetes Compute for dedicated Codex".into()),
            (|r| r.harness.id = "codex".into(), "unsupported-harness",
             "revision.harness: codex/embedded is unsupported: SSH Compute runs only openclaw/embedded; use Kubernetes Compute for dedicated Codex".into()),
            (|r| r.harness_auth = r#"{"method":"api_key","source":{"kind":"secret","id":"s","namespaceId":"n"},"secretDriverId":"d"}"#.into(), "unsupported-harness-auth", harness_auth_message()),
            (|r| r.harness_auth = r#"{"method":"runtime","account":"a"}"#.into(), "unsupported-harness-auth", harness_auth_message()),
            (|r| r.harness_auth = r#"{"method":"credential_source","sourceId":"x"}"#.into(), "unsupported-harness-auth", harness_auth_message()),
            (|r| r.harness_auth = "{}".into(), "unsupported-harness-auth", harness_auth_message()),
            (|r| r.harness_auth = "not json".into(), "unsupported-harness-auth", harness_auth_message()),
            (|r| r.secret_bindings = Some(r#"{"OPENAI_API_KEY":{"source":{"kind":"secret","id":"s-1","namespaceId":"ns-1"}}}"#.into()),
             "unsupported-secret",
             "revision.secretBindings: OCC Secret bindings are unsupported by SSH Compute (found OPENAI_API_KEY); provision credentials in the operator-owned <agentDir>/env file and reference them through native environment SecretRefs".into()),
            (|r| r.secret_bindings = Some("[]".into()), "invalid-revision",
             "revision.secretBindings: must be an object mapping names to Secret bindings".into()),
            (|r| r.plugins = Some(r#"{"driver":{"id":"p","implementation":"x"},"plugins":{"zeta":{"enabled":true},"alpha":{"enabled":false}}}"#.into()), "unsupported-plugins",
             format!("revision.plugins.plugins: SSH Compute refuses a nonempty plugin selection (found alpha, zeta); {clear}")),
            (|r| r.plugins = Some("[]".into()), "invalid-revision", "revision.plugins: must be an object {\"driver\", \"plugins\"}".into()),
            (|r| r.plugin_approvers = Some("[]".into()), "unsupported-plugin-approvers",
             format!("revision.pluginApprovers: SSH Compute refuses any Agent plugin approver list, including an explicit empty one; {clear}")),
            (|r| r.plugin_approvers = Some(r#"[{"channel":"slack","id":"u-1"}]"#.into()), "unsupported-plugin-approvers",
             format!("revision.pluginApprovers: SSH Compute refuses any Agent plugin approver list, including an explicit empty one; {clear}")),
            (|r| r.sandbox_driver_id = Some("sandbox-k8s".into()), "unsupported-sandbox-driver",
             "revision.sandboxDriverId: SandboxDriver composition (\"sandbox-k8s\") is unsupported by SSH Compute; use Kubernetes Compute for sandboxed Agents".into()),
            (|r| r.configuration_kind = "team".into(), "invalid-revision",
             "revision.configurationKind: \"team\" is not an Agent configuration".into()),
            (|r| r.configuration_generation = 0, "invalid-revision",
             "revision.configurationGeneration: must be a positive integer".into()),
            (|r| r.configuration = "[]".into(), "invalid-native-configuration",
             "configuration: the native configuration must be a JSON object".into()),
            (|r| r.configuration = "null".into(), "invalid-native-configuration",
             "configuration: the native configuration must be a JSON object".into()),
        ];
        for (edit, code, message) in cases {
            let mut revision = testing::revision();
            edit(&mut revision);
            assert_eq!(refusal(admit(&revision, None)), (code.to_owned(), message));
        }
    }

    fn harness_auth_message() -> String {
        "revision.harnessAuth: must be exactly {\"method\":\"runtime\"}: SSH Compute uses model \
         credentials supplied on the host (OCC Secret-backed keys and managed ChatGPT accounts \
         are unsupported)"
            .into()
    }

    /// OCC's SSH driver's gateway settings refusals, table-driven: the setting
    /// is named, its value never quoted, and anything else at that path passes.
    #[test]
    fn gateway_settings_an_ssh_gateway_cannot_serve_are_refused_naming_the_setting() {
        let admit_with = |document: Value| {
            let mut revision = testing::revision();
            revision.configuration = document.to_string();
            admit(&revision, None)
        };
        let codex = |policy: Value| {
            json!({"gateway": {"mode": "local"},
                   "plugins": {"entries": {"codex": {"config": {"appServer": {"approvalPolicy": policy}}}}}})
        };
        for (document, field) in [
            (
                json!({"gateway": {"mode": "local", "tls": {"enabled": true, "certPath": "/secret/cert.pem"}}}),
                "configuration.gateway.tls.enabled",
            ),
            (
                codex(json!("untrusted")),
                "configuration.plugins.entries.codex.config.appServer.approvalPolicy",
            ),
        ] {
            let (code, message) = refusal(admit_with(document));
            assert_eq!(code, "unsupported-gateway-setting");
            assert!(message.starts_with(&format!("{field}: ")), "{message}");
            assert!(!message.contains("/secret/cert.pem"), "{message}");
        }
        for document in [
            json!({"gateway": {"mode": "local", "tls": {"enabled": false}}}),
            json!({"gateway": {"mode": "local", "tls": {}}}),
            codex(json!("on-request")),
            codex(json!("never")),
            json!({"gateway": {"mode": "local"}, "plugins": {"entries": {"other": {"config": {"appServer": {"approvalPolicy": "untrusted"}}}}}}),
        ] {
            admit_with(document.clone()).unwrap_or_else(|e| panic!("{document}: {e}"));
        }
    }

    #[test]
    fn secret_environment_is_refused_when_the_context_has_it() {
        let context = RevisionContext {
            secret_environment: vec!["A".into(), "B".into()],
        };
        assert_eq!(
            refusal(admit(&testing::revision(), Some(&context))),
            (
                "unsupported-secret".into(),
                "context.secretEnvironment: Secret-backed environment entries are unsupported by \
                 SSH Compute (found A, B); provision credentials in the operator-owned \
                 <agentDir>/env file and reference them through native environment SecretRefs"
                    .into()
            )
        );
    }

    #[test]
    fn a_defaulted_gateway_auth_mode_is_warned() {
        let mut revision = testing::revision();
        revision.configuration = "{}".into();
        let codes: Vec<String> = admit(&revision, None)
            .unwrap()
            .warnings
            .into_iter()
            .map(|w| w.code)
            .collect();
        assert_eq!(codes, ["gateway-auth-defaulted"]);
    }

    #[test]
    fn gateway_auth_is_rendered() {
        let reference = gateway_password_ref();
        let password = json!({"mode": "password", "password": reference});
        let cases = [
            // Omitted gateway, auth or mode: password mode with the managed SecretRef.
            (
                json!({}),
                json!({"gateway": {"auth": password}}),
                true,
                true,
            ),
            (
                json!({"gateway": {"mode": "local"}}),
                json!({"gateway": {"mode": "local", "auth": password}}),
                true,
                true,
            ),
            (
                json!({"gateway": {"auth": {}}}),
                json!({"gateway": {"auth": password}}),
                true,
                true,
            ),
            (
                json!({"gateway": {"auth": {"password": reference}}}),
                json!({"gateway": {"auth": password}}),
                true,
                true,
            ),
            // Explicit password mode, with or without the SecretRef.
            (
                json!({"gateway": {"auth": {"mode": "password"}}}),
                json!({"gateway": {"auth": password}}),
                true,
                false,
            ),
            (
                json!({"gateway": {"auth": password}}),
                json!({"gateway": {"auth": password}}),
                true,
                false,
            ),
            // The expression form becomes the SecretRef in password mode; OCC's
            // other supported fields stay.
            (
                json!({"gateway": {"auth": {"mode": "password", "password": "${OPENCLAW_GATEWAY_PASSWORD}",
                                            "allowTailscale": true, "rateLimit": {"perMinute": 10},
                                            "identityScopes": ["operator"]}}}),
                json!({"gateway": {"auth": {"mode": "password", "password": reference,
                                            "allowTailscale": true, "rateLimit": {"perMinute": 10},
                                            "identityScopes": ["operator"]}}}),
                true,
                false,
            ),
            // Trusted proxy, with and without the loopback password: kept as written.
            (
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {"userHeader": "x-user"}}}}),
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {"userHeader": "x-user"}}}}),
                false,
                false,
            ),
            (
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {}, "password": reference}}}),
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {}, "password": reference}}}),
                true,
                false,
            ),
            (
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "password": "${OPENCLAW_GATEWAY_PASSWORD}"}}}),
                json!({"gateway": {"auth": {"mode": "trusted-proxy", "password": "${OPENCLAW_GATEWAY_PASSWORD}"}}}),
                true,
                false,
            ),
        ];
        for (input, expected, needs_password, defaulted) in cases {
            let native = render_native(&input.to_string()).unwrap();
            assert_eq!(native.document, expected, "{input}");
            assert_eq!(native.needs_password, needs_password, "{input}");
            assert_eq!(native.defaulted_mode, defaulted, "{input}");
        }
    }

    #[test]
    fn unsupported_gateway_auth_is_refused_naming_the_field() {
        let sref = "must be the managed SecretRef {\"source\":\"env\",\"provider\":\"default\",\"id\":\"OPENCLAW_GATEWAY_PASSWORD\"} or the expression \"${OPENCLAW_GATEWAY_PASSWORD}\"";
        let fields = "unsupported field: SSH Compute admits only mode, password, allowTailscale, identityScopes, rateLimit, trustedProxy";
        let cases = [
            (json!({"gateway": []}), "configuration.gateway: must be an object".to_owned()),
            (json!({"gateway": {"auth": "password"}}), "configuration.gateway.auth: must be an object".into()),
            (json!({"gateway": {"auth": {"mode": "token", "token": "t"}}}),
             "configuration.gateway.auth.mode: \"token\" is unsupported: SSH Compute supports password (the default) and trusted-proxy".into()),
            (json!({"gateway": {"auth": {"mode": "none"}}}),
             "configuration.gateway.auth.mode: \"none\" is unsupported: SSH Compute supports password (the default) and trusted-proxy".into()),
            (json!({"gateway": {"auth": {"mode": 1}}}), "configuration.gateway.auth.mode: must be a string".into()),
            (json!({"gateway": {"auth": {"token": "t"}}}),
             format!("configuration.gateway.auth.token: {fields}")),
            (json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {}, "users": []}}}),
             format!("configuration.gateway.auth.users: {fields}")),
            (json!({"gateway": {"auth": {"mode": "password", "password": "hunter2"}}}),
             format!("configuration.gateway.auth.password: {sref}")),
            (json!({"gateway": {"auth": {"password": "$OPENCLAW_GATEWAY_PASSWORD"}}}),
             format!("configuration.gateway.auth.password: {sref}")),
            (json!({"gateway": {"auth": {"password": {"source": "env", "provider": "default", "id": "OTHER"}}}}),
             format!("configuration.gateway.auth.password: {sref}")),
            (json!({"gateway": {"auth": {"password": {"source": "file", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD"}}}}),
             format!("configuration.gateway.auth.password: {sref}")),
            (json!({"gateway": {"auth": {"password": {"source": "env", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD", "x": 1}}}}),
             format!("configuration.gateway.auth.password: {sref}")),
            (json!({"gateway": {"auth": {"mode": "trusted-proxy", "trustedProxy": {}, "password": "p"}}}),
             format!("configuration.gateway.auth.password: {sref}")),
        ];
        for (input, message) in cases {
            assert_eq!(
                refusal(render_native(&input.to_string())),
                ("unsupported-gateway-auth".to_owned(), message),
                "{input}"
            );
        }
    }
}
