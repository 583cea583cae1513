//! Admission of a revision and its harness: every refusal names its field.

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
    revision.plugins = Some(r#"{"driver":{"id":"p","implementation":"x"},"plugins":{}}"#.into());
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
