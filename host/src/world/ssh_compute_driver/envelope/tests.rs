//! The envelope and the admission of helper runs, attacked field by field.

use super::*;
use crate::capability::hooks::{Accepted, Hook};

fn trusted() -> Arc<TrustedRuntime> {
    let cfg = json!({
        "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts"},
        "hosts": {
            "stable": {"address": "203.0.113.10", "user": "root"},
            "canary": {"address": "203.0.113.11", "user": "root", "nodePath": "/opt/node24/bin/node"},
        },
        "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js",
                    "user": "openclaw", "root": "/var/lib/openclaw-enterprise"},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    });
    Arc::new(TrustedRuntime::from_configuration(&cfg, "compute-ssh", "occ/ssh").unwrap())
}

const DOCUMENT: &str = r#"{"gateway":{"mode":"local"}}"#;

fn subjects() -> Subjects {
    Subjects {
        namespace: Some(NamespaceSubject {
            id: "ns-1".into(),
            name: "stable".into(),
        }),
        agent: Some(AgentSubject {
            id: "agent-1".into(),
            service_principal_id: "sp-1".into(),
        }),
        revision: Some(RevisionSubject {
            id: "rev-1".into(),
            number: 1,
            harness: "openclaw/embedded".into(),
            configuration_sha256: sha256_hex(DOCUMENT.as_bytes()),
        }),
        ..Subjects::default()
    }
}

fn op(body: Value) -> Vec<String> {
    vec![
        "/usr/bin/node".into(),
        "-".into(),
        BASE64.encode(body.to_string()),
    ]
}

fn run(
    method: Method,
    subjects: Subjects,
    accepted: Accepted,
    alias: &str,
    argv: &[String],
) -> Result<Value, String> {
    let admit = admission(
        method,
        trusted(),
        subjects,
        Arc::new(std::sync::Mutex::new(accepted)),
    );
    let admitted = admit.admit(ExecAsk {
        alias,
        argv,
        stdin: b"",
        streamed: None,
    })?;
    let sent: Value = serde_json::from_slice(&BASE64.decode(&argv[2]).unwrap()).unwrap();
    assert_eq!(
        admitted.audit.get("operation"),
        sent.get("op"),
        "the audit names the operation the driver sent"
    );
    let out = admitted.argv;
    assert_eq!(&out[..3], argv, "the component's argv is kept as it is");
    assert_eq!(out.len(), 4);
    Ok(serde_json::from_slice(&BASE64.decode(&out[3]).unwrap()).unwrap())
}

#[test]
fn the_envelope_names_the_installation_and_the_call() {
    let prepare =
        op(json!({"version": 2, "op": "prepare", "deadlineMs": 170000, "configuration": DOCUMENT}));
    let envelope = run(
        Method::PrepareRevision,
        subjects(),
        Accepted::default(),
        "stable",
        &prepare,
    )
    .unwrap();
    assert_eq!(
        envelope,
        json!({
            "version": 2, "method": "prepareRevision", "ops": ["prepare"], "host": "stable",
            "driver": {"id": "compute-ssh", "implementation": "occ/ssh"},
            "runtime": {"root": "/var/lib/openclaw-enterprise", "unitDirectory": "/etc/systemd/system",
                        "nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js",
                        "user": "openclaw"},
            "gatewayPortRange": {"start": 18800, "end": 18899},
            "namespace": {"id": "ns-1", "name": "stable"},
            "agent": {"id": "agent-1", "servicePrincipalId": "sp-1"},
            "revision": {"id": "rev-1", "number": 1, "harness": "openclaw/embedded",
                         "configurationSha256": sha256_hex(DOCUMENT.as_bytes())},
        })
    );
    // Preflight probes any host, with that host's own paths and no subjects.
    let probe = op(json!({"version": 2, "op": "probe"}));
    let envelope = run(
        Method::Preflight,
        Subjects::default(),
        Accepted::default(),
        "canary",
        &probe,
    )
    .unwrap();
    assert_eq!(envelope["runtime"]["nodePath"], "/opt/node24/bin/node");
    assert_eq!(envelope["ops"], json!(["probe"]));
    assert!(envelope.get("namespace").is_none() && envelope.get("agent").is_none());
    // An Agent operation without a revision carries none.
    let delete = op(json!({"version": 2, "op": "delete-agent"}));
    let envelope = run(
        Method::DeleteAgentRuntimeCredentials,
        subjects(),
        Accepted::default(),
        "stable",
        &delete,
    )
    .unwrap();
    assert!(envelope.get("revision").is_none());
    assert_eq!(envelope["agent"]["id"], "agent-1");
}

#[test]
fn activation_carries_what_the_controller_returned_and_only_after_it_accepted() {
    let activate = op(json!({"version": 2, "op": "activate"}));
    let err = run(
        Method::ActivateRevision,
        subjects(),
        Accepted::default(),
        "stable",
        &activate,
    )
    .unwrap_err();
    assert_eq!(
        err,
        "activate runs only after the controller accepted beforeWorkloadStart in this call"
    );
    let accepted = Accepted {
        hooks: vec![Hook::BeforeWorkloadStart],
        launch_environment: Some(vec![("IAM_SESSION".into(), "opaque-iam-7f3a".into())]),
    };
    let envelope = run(
        Method::ActivateRevision,
        subjects(),
        accepted,
        "stable",
        &activate,
    )
    .unwrap();
    assert_eq!(
        envelope["launchEnvironment"],
        json!({"IAM_SESSION": "opaque-iam-7f3a"})
    );
    assert_eq!(envelope["ops"], json!(["inspect-agent", "activate"]));
}

/// The controller's workspace setup rides with prepare and activate only,
/// in the envelope the host writes; a component cannot send one of its own.
#[test]
fn the_workspace_setup_rides_in_the_envelope_of_prepare_and_activate() {
    let setup = json!({"id": "s-1", "namespaceId": "ns-1", "agentId": "agent-1", "completed": false,
                       "files": {"SOUL.md": "calm"}});
    let with_setup = Subjects {
        workspace_setup: Some(setup.clone()),
        ..subjects()
    };
    let all = Accepted {
        hooks: vec![Hook::BeforeWorkloadStart, Hook::BeforeWorkloadStop],
        launch_environment: Some(Vec::new()),
    };
    let prepare = op(json!({"version": 2, "op": "prepare", "configuration": DOCUMENT}));
    let envelope = run(
        Method::PrepareRevision,
        with_setup.clone(),
        all.clone(),
        "stable",
        &prepare,
    )
    .unwrap();
    assert_eq!(envelope["workspaceSetup"], setup);
    let activate = op(json!({"version": 2, "op": "activate"}));
    let envelope = run(
        Method::ActivateRevision,
        with_setup.clone(),
        all.clone(),
        "stable",
        &activate,
    )
    .unwrap();
    assert_eq!(envelope["workspaceSetup"], setup);
    let inspect = op(json!({"version": 2, "op": "inspect-agent"}));
    let envelope = run(
        Method::ActivateRevision,
        with_setup.clone(),
        all.clone(),
        "stable",
        &inspect,
    )
    .unwrap();
    assert!(envelope.get("workspaceSetup").is_none());
    let stop = op(json!({"version": 2, "op": "stop"}));
    let envelope = run(
        Method::StopRevision,
        with_setup,
        all.clone(),
        "stable",
        &stop,
    )
    .unwrap();
    assert!(envelope.get("workspaceSetup").is_none());
    let forged = op(
        json!({"version": 2, "op": "prepare", "configuration": DOCUMENT,
                           "workspaceSetup": {"id": "s-9", "namespaceId": "ns-9", "agentId": "victim"}}),
    );
    let err = run(Method::PrepareRevision, subjects(), all, "stable", &forged).unwrap_err();
    assert!(
        err.starts_with("operation.workspaceSetup: not a field"),
        "{err}"
    );
}

/// What a component carrying the approved helper might try, field by field:
/// each is refused before any ssh process starts.
#[test]
fn whatever_is_not_policy_is_refused() {
    let all_hooks = Accepted {
        hooks: vec![
            Hook::BeforeWorkloadStart,
            Hook::BeforeWorkloadStop,
            Hook::BeforeNamespaceDelete,
        ],
        launch_environment: Some(Vec::new()),
    };
    let prepare = |extra: Value| {
        let mut body = json!({"version": 2, "op": "prepare", "configuration": DOCUMENT});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        op(body)
    };
    let cases: Vec<(Method, &str, Vec<String>, &str)> = vec![
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"root": "/etc"})),
            "operation.root: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"unitDirectory": "/tmp"})),
            "operation.unitDirectory: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"portRange": {"start": 22, "end": 22}})),
            "operation.portRange: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"snapshot": "{}"})),
            "operation.snapshot: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"namespace": {"id": "ns-2"}})),
            "operation.namespace: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"agent": {"account": "root"}})),
            "operation.agent: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"revision": {"id": "rev-9"}})),
            "operation.revision: not a field",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"configuration": "{\"gateway\":{\"auth\":{\"mode\":\"none\"}}}"})),
            "operation.configuration is not revision \"rev-1\"'s configuration",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"deadlineMs": 999_999})),
            "operation.deadlineMs must be",
        ),
        (
            Method::PrepareRevision,
            "stable",
            prepare(json!({"version": 1})),
            "operation.version must be 2",
        ),
        (
            Method::PrepareRevision,
            "canary",
            prepare(json!({})),
            "placed on host \"stable\", not on \"canary\"",
        ),
        (
            Method::PrepareRevision,
            "stable",
            op(json!({"version": 2, "op": "delete-namespace"})),
            "prepareRevision may run prepare on a host, not delete-namespace",
        ),
        (
            Method::ActivateRevision,
            "stable",
            op(
                json!({"version": 2, "op": "activate", "unit": {"text": "[Service]\nExecStartPre=+/bin/sh -c id"}}),
            ),
            "operation.unit: not a field",
        ),
        (
            Method::ActivateRevision,
            "stable",
            op(json!({"version": 2, "op": "activate", "port": 22})),
            "operation.port: not a field",
        ),
        (
            Method::Preflight,
            "stable",
            op(json!({"version": 2, "op": "probe", "nodePath": "/bin/sh"})),
            "operation.nodePath: not a field",
        ),
        (
            Method::Preflight,
            "stable",
            op(json!({"version": 2, "op": "ensure-namespace"})),
            "preflight may run probe on a host, not ensure-namespace",
        ),
        (
            Method::StopRevision,
            "stable",
            op(json!({"version": 2, "op": "retire"})),
            "stopRevision may run stop on a host, not retire",
        ),
        (
            Method::BindAgent,
            "stable",
            op(json!({"version": 2, "op": "probe"})),
            "bindAgent may run nothing on a host, not probe",
        ),
        (
            Method::ValidateConfiguration,
            "stable",
            op(json!({"version": 2, "op": "probe"})),
            "validateConfiguration may run nothing",
        ),
        (
            Method::EnsureNamespace,
            "stable",
            op(json!({"version": 2, "op": "reboot"})),
            "operation.op \"reboot\" is not a helper operation",
        ),
    ];
    for (method, alias, argv, expected) in cases {
        let err = run(method, subjects(), all_hooks.clone(), alias, &argv).unwrap_err();
        assert!(err.contains(expected), "{method} {alias}: {err}");
    }
    // A call acts only for its own subjects: one whose binding did not own its
    // revision names none, and nothing runs.
    let err = run(
        Method::StopRevision,
        Subjects::default(),
        all_hooks.clone(),
        "stable",
        &op(json!({"version": 2, "op": "stop"})),
    )
    .unwrap_err();
    assert_eq!(err, "this stopRevision call names no Namespace");
    // Stop, retire and Namespace deletion follow their hook.
    for (method, name) in [
        (Method::StopRevision, "stop"),
        (Method::RetireRevision, "retire"),
        (Method::DeleteNamespace, "delete-namespace"),
    ] {
        let err = run(
            method,
            subjects(),
            Accepted::default(),
            "stable",
            &op(json!({"version": 2, "op": name})),
        )
        .unwrap_err();
        assert!(
            err.contains("runs only after the controller accepted"),
            "{err}"
        );
    }
}

#[test]
fn the_trusted_runtime_is_read_with_the_grants_rules() {
    let t = trusted();
    assert_eq!(t.unit_directory, "/etc/systemd/system");
    assert_eq!(t.port_range, (18800, 18899));
    assert_eq!(t.hosts["stable"].node_path, "/usr/bin/node");
    assert_eq!(t.hosts["canary"].node_path, "/opt/node24/bin/node");
    assert_eq!(
        t.hosts["canary"].openclaw_path,
        "/opt/openclaw/current/dist/index.js"
    );
    let base = json!({
        "hosts": {"stable": {"address": "203.0.113.10", "user": "root"}},
        "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/o/index.js",
                    "user": "openclaw", "root": "/var/lib/oe"},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    });
    let with = |pointer: &str, value: Value| {
        let mut v = base.clone();
        *v.pointer_mut(pointer).unwrap() = value;
        TrustedRuntime::from_configuration(&v, "compute-ssh", "occ/ssh").map_err(|e| e.to_string())
    };
    // The spec takes the first 19 characters of a longer runtime user.
    assert!(
        with(
            "/runtime/user",
            json!("a-forty-character-runtime-user-prefix-xx")
        )
        .is_ok()
    );
    for (pointer, value, expected) in [
        (
            "/runtime/root",
            json!("/var/lib/a b"),
            "configuration.runtime.root: ",
        ),
        (
            "/runtime/user",
            json!("root"),
            "configuration.runtime.user: ",
        ),
        (
            "/network/gatewayPortRange/start",
            json!(80),
            "configuration.network.gatewayPortRange.start: ",
        ),
        (
            "/hosts/stable",
            json!({"address": "x", "user": "root", "openclawPath": "/o/%n"}),
            "configuration.hosts.stable.openclawPath: ",
        ),
    ] {
        let err = with(pointer, value).unwrap_err();
        assert!(err.starts_with(expected), "{pointer}: {err}");
    }
}
