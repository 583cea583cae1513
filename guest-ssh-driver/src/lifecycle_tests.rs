//! Orchestration tests: a scripted [`Effects`] records every hook call and helper run
//! so that each contract method's order, operations and failure handling are checked
//! exactly.

use std::collections::{HashMap, VecDeque};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::error::{Error, ExecError, FailureKind};
use crate::lifecycle::{Driver, Effects, validate_configuration, validate_harness_auth};
use crate::model::{
    AgentBinding, ExecOutput, HookError, Level, Namespace, Readiness, Revision, RevisionContext,
    Selection, Warning,
};
use crate::testing;

/// Scripted effects: queued helper outputs per operation (a default success
/// otherwise), hook answers, and a record of every call.
#[derive(Default)]
struct Script {
    /// `exec <host> <op>` and `<hook> <subject>` in call order.
    calls: Vec<String>,
    /// Decoded operation JSON of every helper run.
    operations: Vec<Value>,
    logs: Vec<(Level, String)>,
    outputs: HashMap<String, VecDeque<Result<ExecOutput, ExecError>>>,
    after_namespace_prepared: Option<HookError>,
    before_workload_start: Option<Result<Vec<(String, String)>, HookError>>,
    before_workload_stop: Option<HookError>,
    before_namespace_delete: Option<HookError>,
}

/// The controller's refusal, retryable as when it gives no verdict.
fn refused(message: &str) -> HookError {
    HookError::Refused {
        message: message.into(),
        failure: FailureKind::Retryable,
    }
}

fn ok_line(fields: Value) -> ExecOutput {
    let mut result = json!({"event": "result", "ok": true, "changed": true});
    result
        .as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    ExecOutput {
        exit_status: Some(0),
        stdout: format!("{{\"event\":\"heartbeat\",\"elapsedMs\":1000}}\n{result}\n").into_bytes(),
        stderr_tail: Vec::new(),
    }
}

fn failure_line(code: &str, permanent: bool) -> ExecOutput {
    let result = json!({"event": "result", "ok": false,
        "error": {"code": code, "message": "refused by helper", "permanent": permanent}});
    ExecOutput {
        exit_status: Some(1),
        stdout: format!("{result}\n").into_bytes(),
        stderr_tail: Vec::new(),
    }
}

impl Script {
    fn answer(&mut self, op: &str, output: Result<ExecOutput, ExecError>) -> &mut Self {
        self.outputs
            .entry(op.to_owned())
            .or_default()
            .push_back(output);
        self
    }

    fn default_output(op: &str) -> ExecOutput {
        match op {
            "prepare" => ok_line(json!({"ready": true, "port": 18800, "uid": 990, "gid": 990})),
            "inspect-agent" => ok_line(json!({
                "port": 18805, "account": "openclaw-cd338df39c47", "uid": 990, "gid": 990
            })),
            "activate" => ok_line(json!({"port": 18805, "readyAfterMs": 7000})),
            "probe" => ok_line(json!({"checks": []})),
            _ => ok_line(json!({})),
        }
    }
}

impl Effects for Script {
    fn run_helper(
        &mut self,
        host: &str,
        encoded: &str,
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError> {
        assert_eq!(timeout_ms, 180_000);
        // What the host takes in one exec's arguments, on a host with the
        // example's nodePath.
        assert!(
            crate::lifecycle::exec_bytes("/usr/bin/node", encoded)
                <= crate::lifecycle::MAX_EXEC_ARGV
        );
        let operation: Value = serde_json::from_slice(&BASE64.decode(encoded).unwrap()).unwrap();
        assert_eq!(operation["deadlineMs"], 170_000);
        assert_eq!(operation["version"], 2);
        let op = operation["op"].as_str().unwrap().to_owned();
        self.calls.push(format!("exec {host} {op}"));
        self.operations.push(operation);
        self.outputs
            .get_mut(&op)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| Ok(Self::default_output(&op)))
    }

    fn after_namespace_prepared(&mut self, namespace: &Namespace) -> Result<(), HookError> {
        self.calls
            .push(format!("afterNamespacePrepared {}", namespace.id));
        self.after_namespace_prepared.clone().map_or(Ok(()), Err)
    }

    fn before_workload_start(
        &mut self,
        revision: &Revision,
    ) -> Result<Vec<(String, String)>, HookError> {
        self.calls.push(format!(
            "beforeWorkloadStart {} {}",
            revision.agent_id, revision.id
        ));
        self.before_workload_start.clone().unwrap_or(Ok(Vec::new()))
    }

    fn before_workload_stop(
        &mut self,
        revision: &Revision,
        cleanup: bool,
    ) -> Result<(), HookError> {
        self.calls.push(format!(
            "beforeWorkloadStop {} {}{}",
            revision.agent_id,
            revision.id,
            if cleanup { " cleanup" } else { "" }
        ));
        self.before_workload_stop.clone().map_or(Ok(()), Err)
    }

    fn before_namespace_delete(&mut self, namespace: &Namespace) -> Result<(), HookError> {
        self.calls
            .push(format!("beforeNamespaceDelete {}", namespace.id));
        self.before_namespace_delete.clone().map_or(Ok(()), Err)
    }

    fn log(&mut self, level: Level, message: &str) {
        self.logs.push((level, message.to_owned()));
    }
}

fn config_json() -> String {
    testing::spec_example().to_string()
}

fn selection(configuration: String) -> Selection {
    Selection {
        configuration,
        ..testing::selection()
    }
}

fn with_driver<T>(script: &mut Script, f: impl FnOnce(&mut Driver<'_, Script>) -> T) -> T {
    let mut driver = Driver::new(&selection(config_json()), script).unwrap();
    f(&mut driver)
}

fn summary(err: &Error) -> (FailureKind, &str, Option<&str>, String) {
    (err.kind(), err.code(), err.host(), err.to_string())
}

#[test]
fn validate_configuration_parses_only() {
    assert_eq!(
        validate_configuration(&config_json()).unwrap(),
        Vec::<Warning>::new()
    );
    let err = validate_configuration("{}").unwrap_err();
    assert_eq!(err.to_string(), "configuration.ssh: required");
}

#[test]
fn preflight_probes_every_host_in_order_and_returns_the_first_failure() {
    let mut doc = testing::spec_example();
    doc["hosts"]["canary"] = doc["hosts"]["stable"].clone();
    doc["hosts"]["canary"]["nodePath"] = json!("/opt/node24/bin/node");
    doc["hosts"]["alpha"] = doc["hosts"]["stable"].clone();
    let config = doc.to_string();

    // All pass.
    let mut script = Script::default();
    let warnings = Driver::new(&selection(config.clone()), &mut script)
        .unwrap()
        .preflight()
        .unwrap();
    assert_eq!(warnings, []);
    assert_eq!(
        script.calls,
        ["exec alpha probe", "exec canary probe", "exec stable probe"]
    );
    assert_eq!(
        script.operations[0],
        json!({"version": 2, "op": "probe", "deadlineMs": 170000})
    );
    let infos: Vec<&str> = script.logs.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        infos,
        [
            "host alpha: preflight probe passed",
            "host canary: preflight probe passed",
            "host stable: preflight probe passed"
        ]
    );

    // canary fails its probe, stable cannot be reached: canary is named, all are tried.
    let mut script = Script::default();
    script
        .answer("probe", Ok(Script::default_output("probe")))
        .answer("probe", Ok(failure_line("probe-failed", true)))
        .answer(
            "probe",
            Err(ExecError::Connect("connection refused".into())),
        );
    let err = Driver::new(&selection(config.clone()), &mut script)
        .unwrap()
        .preflight()
        .unwrap_err();
    assert_eq!(
        summary(&err),
        (
            FailureKind::Permanent,
            "probe-failed",
            Some("canary"),
            "host canary: probe failed: probe-failed: refused by helper".into()
        )
    );
    assert_eq!(script.calls.len(), 3);
    let levels: Vec<Level> = script.logs.iter().map(|(l, _)| *l).collect();
    assert_eq!(levels, [Level::Info, Level::Error, Level::Error]);
    assert_eq!(
        script.logs[2].1,
        "preflight failed: host stable: probe: ssh connection failed: connection refused"
    );
}

#[test]
fn ensure_namespace_runs_the_helper_then_the_hook() {
    let mut script = Script::default();
    with_driver(&mut script, |d| d.ensure_namespace(&testing::namespace())).unwrap();
    assert_eq!(
        script.calls,
        [
            "exec stable ensure-namespace",
            "afterNamespacePrepared ns-1"
        ]
    );
    // Which effect, nothing else: where and for whom is the host's envelope.
    assert_eq!(
        script.operations[0],
        json!({"version": 2, "op": "ensure-namespace", "deadlineMs": 170000})
    );
}

#[test]
fn ensure_namespace_failures() {
    // The hook refuses after the marker exists.
    let mut script = Script {
        after_namespace_prepared: Some(refused("quota exceeded")),
        ..Script::default()
    };
    let err = with_driver(&mut script, |d| d.ensure_namespace(&testing::namespace())).unwrap_err();
    assert_eq!(
        summary(&err),
        (
            FailureKind::Retryable,
            "hook-refused",
            None,
            "lifecycle hook afterNamespacePrepared refused: quota exceeded".into()
        )
    );

    // A helper failure skips the hook.
    let mut script = Script::default();
    script.answer("ensure-namespace", Ok(failure_line("foreign-marker", true)));
    let err = with_driver(&mut script, |d| d.ensure_namespace(&testing::namespace())).unwrap_err();
    assert_eq!(err.kind(), FailureKind::Permanent);
    assert_eq!(script.calls, ["exec stable ensure-namespace"]);

    // An unmapped name or an invalid ID touches nothing.
    for (namespace, code) in [
        (
            Namespace {
                name: "canary".into(),
                ..testing::namespace()
            },
            "unmapped-namespace",
        ),
        (
            Namespace {
                id: "".into(),
                ..testing::namespace()
            },
            "invalid-identity",
        ),
        (
            Namespace {
                existing_namespace: Some("team-a".into()),
                ..testing::namespace()
            },
            "unsupported-existing-namespace",
        ),
    ] {
        let mut script = Script::default();
        let err = with_driver(&mut script, |d| d.ensure_namespace(&namespace)).unwrap_err();
        assert_eq!((err.code(), err.kind()), (code, FailureKind::Permanent));
        assert_eq!(script.calls, Vec::<String>::new());
    }
}

#[test]
fn bind_agent_checks_identities_and_placement_without_effects() {
    let mut script = Script::default();
    with_driver(&mut script, |d| {
        d.bind_agent(&testing::binding()).unwrap();
        let mut unmapped = testing::binding();
        unmapped.namespace.name = "canary".into();
        assert_eq!(
            d.bind_agent(&unmapped).unwrap_err().code(),
            "unmapped-namespace"
        );
        let mut bad = testing::binding();
        bad.agent.service_principal_id = "sp\n1".into();
        assert_eq!(
            d.bind_agent(&bad).unwrap_err().to_string(),
            "agent.servicePrincipalId: must not contain control character '\\n'"
        );
        let mut elsewhere = testing::binding();
        elsewhere.agent.namespace_id = "ns-2".into();
        assert_eq!(
            d.bind_agent(&elsewhere).unwrap_err().code(),
            "unbound-agent"
        );
    });
    assert!(script.calls.is_empty());
}

/// Every revision method, called with a binding and a revision.
type RevisionCall =
    fn(&mut Driver<'_, Script>, Option<&AgentBinding>, &Revision) -> Result<(), Error>;

fn revision_methods() -> Vec<(&'static str, RevisionCall)> {
    vec![
        ("prepare", |d, b, r| {
            d.prepare_revision(b, r, Some(&RevisionContext::default()))
                .map(drop)
        }),
        ("activate", |d, b, r| d.activate_revision(b, r, None)),
        ("deactivate", |d, b, r| d.deactivate_revision(b, r)),
        ("stop", |d, b, r| d.stop_revision(b, r)),
        ("retire", |d, b, r| d.retire_revision(b, r)),
    ]
}

#[test]
fn every_revision_method_fails_closed_without_touching_anything() {
    let mut other = testing::binding();
    other.agent.id = "agent-2".into();
    let mut unmapped = testing::binding();
    unmapped.namespace.name = "canary".into();
    let mut zero = testing::revision();
    zero.revision = 0;
    let cases: Vec<(Option<AgentBinding>, Revision, &str)> = vec![
        (None, testing::revision(), "unbound-agent"),
        (Some(other), testing::revision(), "unbound-agent"),
        (Some(unmapped), testing::revision(), "unmapped-namespace"),
        (Some(testing::binding()), zero, "invalid-identity"),
    ];
    for (name, method) in revision_methods() {
        for (binding, revision, code) in &cases {
            let mut script = Script::default();
            let err =
                with_driver(&mut script, |d| method(d, binding.as_ref(), revision)).unwrap_err();
            assert_eq!(
                (err.code(), err.kind()),
                (*code, FailureKind::Permanent),
                "{name}"
            );
            assert!(script.calls.is_empty(), "{name}: {:?}", script.calls);
        }
    }
}

#[test]
fn validate_harness_auth_checks_harness_and_auth_alone() {
    let revision = testing::revision();
    validate_harness_auth(&revision.harness, &revision.harness_auth, None).unwrap();
    validate_harness_auth(&revision.harness, &revision.harness_auth, Some("{}")).unwrap();
    let err =
        validate_harness_auth(&revision.harness, r#"{"method":"api_key"}"#, None).unwrap_err();
    assert_eq!(err.code(), "unsupported-harness-auth");
    let mut dedicated = revision.harness.clone();
    dedicated.mode = "dedicated".into();
    let err = validate_harness_auth(&dedicated, &revision.harness_auth, None).unwrap_err();
    assert_eq!(err.code(), "unsupported-harness");
    let err = validate_harness_auth(
        &revision.harness,
        &revision.harness_auth,
        Some(r#"{"KEY":{"source":{"kind":"secret","id":"s","namespaceId":"ns-1"}}}"#),
    )
    .unwrap_err();
    assert_eq!(err.code(), "unsupported-secret");
}

#[test]
fn prepare_sends_the_controllers_document_and_reads_readiness() {
    let mut script = Script::default();
    let revision = testing::revision();
    let result = prepare(&mut script, &revision).unwrap();
    assert!(result.ready);
    assert_eq!(script.calls, ["exec stable prepare"]);
    // The document exactly as received: the host hashed it, the helper renders
    // the snapshot from it.
    assert_eq!(
        script.operations[0],
        json!({
            "version": 2, "op": "prepare", "deadlineMs": 170000,
            "configuration": revision.configuration,
        })
    );
}

#[test]
fn prepare_of_a_trusted_proxy_revision_sends_it_as_it_is() {
    let mut revision = testing::revision();
    revision.configuration = r#"{"gateway":{"mode":"local","bind":"loopback","auth":{"mode":"trusted-proxy","trustedProxy":{"userHeader":"x-forwarded-user"}}}}"#.into();
    let mut script = Script::default();
    prepare(&mut script, &revision).unwrap();
    assert_eq!(
        script.operations[0]["configuration"],
        json!(revision.configuration)
    );
}

#[test]
fn prepare_outcomes() {
    // Superseded: not ready, nothing else.
    let mut script = Script::default();
    script.answer("prepare", Ok(ok_line(json!({"ready": false}))));
    let result = prepare(&mut script, &testing::revision()).unwrap();
    assert!(!result.ready);
    assert!(script.logs.iter().any(|(_, m)| m.contains("superseded")));

    // A result without `ready` is an unexpected helper failure.
    let mut script = Script::default();
    script.answer("prepare", Ok(ok_line(json!({}))));
    let err = prepare(&mut script, &testing::revision()).unwrap_err();
    assert_eq!(
        summary(&err),
        (
            FailureKind::Retryable,
            "invalid-helper-result",
            Some("stable"),
            "host stable: prepare: invalid helper result: `ready` is not a boolean".into()
        )
    );

    // Admission refusals happen before any exec.
    let context = RevisionContext {
        secret_environment: vec!["OPENAI_API_KEY".into()],
    };
    let mut script = Script::default();
    let err = with_driver(&mut script, |d| {
        d.prepare_revision(
            Some(&testing::binding()),
            &testing::revision(),
            Some(&context),
        )
    })
    .unwrap_err();
    assert_eq!(err.code(), "unsupported-secret");
    assert!(script.calls.is_empty());
}

#[test]
fn transport_failures_name_the_host() {
    let cases = [
        (
            ExecError::Timeout,
            FailureKind::Retryable,
            "ssh-timeout",
            "host stable: prepare: ssh operation timed out",
        ),
        (
            ExecError::Cancelled,
            FailureKind::Retryable,
            "cancelled",
            "host stable: prepare: ssh operation cancelled",
        ),
        (
            ExecError::OutputTooLarge(1 << 20),
            FailureKind::Retryable,
            "output-too-large",
            "host stable: prepare: helper output exceeded the host's cap of 1048576 bytes",
        ),
        (
            ExecError::Io("spawn ssh: not found".into()),
            FailureKind::Retryable,
            "ssh-io",
            "host stable: prepare: ssh client failed: spawn ssh: not found",
        ),
        (
            ExecError::UnknownHost("stable".into()),
            FailureKind::Permanent,
            "unknown-host",
            "host stable: prepare: host alias is not granted to this driver: stable",
        ),
    ];
    for (error, kind, code, message) in cases {
        let mut script = Script::default();
        script.answer("prepare", Err(error));
        let err = prepare(&mut script, &testing::revision()).unwrap_err();
        assert_eq!(
            summary(&err),
            (kind, code, Some("stable"), message.to_owned())
        );
    }
}

/// `revision` prepared for `testing::binding()` with an empty context.
fn prepare(script: &mut Script, revision: &Revision) -> Result<Readiness, Error> {
    with_driver(script, |d| {
        d.prepare_revision(
            Some(&testing::binding()),
            revision,
            Some(&RevisionContext::default()),
        )
    })
}

/// `revision` deactivated, stopped and retired for `testing::binding()`: each
/// succeeds, and only the stop hook runs, before each of the last two.
fn tear_down(script: &mut Script, revision: &Revision) {
    let b = testing::binding();
    with_driver(script, |d| {
        d.deactivate_revision(Some(&b), revision)?;
        d.stop_revision(Some(&b), revision)?;
        d.retire_revision(Some(&b), revision)
    })
    .unwrap();
    assert_eq!(
        script.calls,
        [
            "exec stable deactivate",
            "beforeWorkloadStop agent-1 rev-1",
            "exec stable stop",
            "beforeWorkloadStop agent-1 rev-1",
            "exec stable retire"
        ]
    );
}

fn activate(script: &mut Script) -> Result<(), Error> {
    with_driver(script, |d| {
        d.activate_revision(Some(&testing::binding()), &testing::revision(), None)
    })
}

#[test]
fn activation_inspects_runs_the_hook_and_activates() {
    let mut script = Script {
        before_workload_start: Some(Ok(vec![
            ("SLACK_BOT_TOKEN".into(), "opaque-cfg:slack.bot".into()),
            ("IAM_SESSION".into(), "opaque-iam-7f3a".into()),
        ])),
        ..Script::default()
    };
    activate(&mut script).unwrap();
    assert_eq!(
        script.calls,
        [
            "exec stable inspect-agent",
            "beforeWorkloadStart agent-1 rev-1",
            "exec stable activate"
        ]
    );
    // The unit is the helper's to render, with the placeholders the host saw
    // the controller return: the driver sends neither.
    for op in &script.operations {
        assert_eq!(op.as_object().unwrap().len(), 3, "{op}");
    }
    assert!(script.logs.iter().any(|(level, m)| *level == Level::Info
        && m == "host stable: revision \"rev-1\" is serving on port 18805 (ready after 7000 ms)"));
}

#[test]
fn a_refusing_start_hook_prevents_launch_without_compensation() {
    let mut script = Script {
        before_workload_start: Some(Err(refused("IAM denied"))),
        ..Script::default()
    };
    let err = activate(&mut script).unwrap_err();
    assert_eq!(
        err.to_string(),
        "lifecycle hook beforeWorkloadStart refused: IAM denied"
    );
    assert_eq!(
        script.calls,
        [
            "exec stable inspect-agent",
            "beforeWorkloadStart agent-1 rev-1"
        ]
    );
}

#[test]
fn an_unprepared_agent_fails_before_the_hooks() {
    let mut script = Script::default();
    script.answer("inspect-agent", Ok(failure_line("missing-revision", true)));
    let err = activate(&mut script).unwrap_err();
    assert_eq!(
        (err.code(), err.kind()),
        ("missing-revision", FailureKind::Permanent)
    );
    assert_eq!(script.calls, ["exec stable inspect-agent"]);

    let mut script = Script::default();
    script.answer("inspect-agent", Ok(ok_line(json!({"exists": false}))));
    let err = activate(&mut script).unwrap_err();
    assert_eq!(
        summary(&err),
        (
            FailureKind::Permanent,
            "missing-revision",
            Some("stable"),
            "host stable: inspect-agent failed: missing-revision: agent \"agent-1\" has not been \
             prepared on this host; prepare revision \"rev-1\" first"
                .into()
        )
    );
    assert_eq!(script.calls, ["exec stable inspect-agent"]);

    let mut script = Script::default();
    script.answer(
        "inspect-agent",
        Ok(ok_line(
            json!({"port": 18805, "account": "openclaw-000000000000"}),
        )),
    );
    let err = activate(&mut script).unwrap_err();
    assert_eq!(
        err.to_string(),
        "host stable: inspect-agent: invalid helper result: account Some(\"openclaw-000000000000\") \
         differs from the derived account \"openclaw-cd338df39c47\""
    );
    assert_eq!(script.calls, ["exec stable inspect-agent"]);
}

#[test]
fn failures_after_the_start_hook_are_compensated() {
    // The host refused the controller's answer (a reserved name): the controller
    // agreed to a start that must not happen, so it is compensated.
    let bad_placeholders = Script {
        before_workload_start: Some(Err(HookError::InvalidAnswer(
            "placeholder name LD_PRELOAD is reserved".into(),
        ))),
        ..Script::default()
    };
    let mut readiness = Script::default();
    readiness.answer("activate", Ok(failure_line("readiness-timeout", false)));
    let mut transport = Script::default();
    transport.answer("activate", Err(ExecError::Timeout));

    let cases = [
        (
            bad_placeholders,
            "invalid-placeholder",
            FailureKind::Permanent,
            false,
        ),
        (readiness, "readiness-timeout", FailureKind::Retryable, true),
        (transport, "ssh-timeout", FailureKind::Retryable, true),
    ];
    for (mut script, code, kind, activated) in cases {
        let err = activate(&mut script).unwrap_err();
        assert_eq!((err.code(), err.kind()), (code, kind));
        let mut expected = vec![
            "exec stable inspect-agent",
            "beforeWorkloadStart agent-1 rev-1",
        ];
        if activated {
            expected.push("exec stable activate");
        }
        expected.push("beforeWorkloadStop agent-1 rev-1 cleanup");
        assert_eq!(script.calls, expected, "{code}");
    }
}

#[test]
fn a_failing_compensation_is_logged_and_the_original_error_returned() {
    let mut script = Script {
        before_workload_stop: Some(refused("controller unavailable")),
        ..Script::default()
    };
    script.answer("activate", Ok(failure_line("foreign-unit", true)));
    let err = activate(&mut script).unwrap_err();
    assert_eq!(
        summary(&err),
        (
            FailureKind::Permanent,
            "foreign-unit",
            Some("stable"),
            "host stable: activate failed: foreign-unit: refused by helper".into()
        )
    );
    assert!(
        script.logs.contains(&(
            Level::Warn,
            "compensating beforeWorkloadStop for revision \"rev-1\" failed: lifecycle hook \
         beforeWorkloadStop refused: controller unavailable (activation failed: host stable: \
         activate failed: foreign-unit: refused by helper)"
                .into()
        ))
    );
}

#[test]
fn activation_refuses_what_admission_refuses_before_any_effect() {
    let mut revision = testing::revision();
    revision.plugin_approvers = Some("[]".into());
    let mut script = Script::default();
    let err = with_driver(&mut script, |d| {
        d.activate_revision(Some(&testing::binding()), &revision, None)
    })
    .unwrap_err();
    assert_eq!(err.code(), "unsupported-plugin-approvers");
    assert!(script.calls.is_empty());
}

/// Teardown never checks gateway settings: an older revision OCC would refuse
/// today can still be deactivated, stopped and retired; prepare refuses it.
#[test]
fn teardown_is_exempt_from_the_gateway_settings_check() {
    let mut revision = testing::revision();
    revision.configuration = r#"{"gateway":{"mode":"local","tls":{"enabled":true}}}"#.into();
    let mut script = Script::default();
    tear_down(&mut script, &revision);
    let b = testing::binding();
    let mut script = Script::default();
    let err = with_driver(&mut script, |d| {
        d.prepare_revision(Some(&b), &revision, None)
    })
    .unwrap_err();
    assert_eq!(err.code(), "unsupported-gateway-setting");
    assert!(script.calls.is_empty(), "{:?}", script.calls);
}

#[test]
fn stop_and_retire_run_the_stop_hook_first() {
    for op in ["stop", "retire"] {
        let call = |d: &mut Driver<'_, Script>| {
            let (b, r) = (testing::binding(), testing::revision());
            if op == "stop" {
                d.stop_revision(Some(&b), &r)
            } else {
                d.retire_revision(Some(&b), &r)
            }
        };
        let mut script = Script::default();
        with_driver(&mut script, call).unwrap();
        assert_eq!(
            script.calls,
            [
                "beforeWorkloadStop agent-1 rev-1".to_owned(),
                format!("exec stable {op}")
            ]
        );

        let mut script = Script {
            before_workload_stop: Some(refused("draining")),
            ..Script::default()
        };
        let err = with_driver(&mut script, call).unwrap_err();
        assert_eq!(
            err.to_string(),
            "lifecycle hook beforeWorkloadStop refused: draining"
        );
        assert_eq!(script.calls, ["beforeWorkloadStop agent-1 rev-1"]);
    }
}

#[test]
fn teardown_does_not_depend_on_admission() {
    // A revision admission refuses today can still be deactivated, stopped or retired.
    let mut refused = testing::revision();
    refused.plugins =
        Some(r#"{"driver":{"id":"p","implementation":"x"},"plugins":{"p":{}}}"#.into());
    let mut unrenderable = testing::revision();
    unrenderable.configuration = r#"{"gateway":{"auth":{"mode":"token"}}}"#.into();
    let cases = [refused, unrenderable];
    for revision in cases {
        let mut script = Script::default();
        tear_down(&mut script, &revision);
        for op in &script.operations {
            assert_eq!(op.as_object().unwrap().len(), 3, "{op}");
        }
    }
}

#[test]
fn delete_namespace_runs_its_hook_first() {
    let mut script = Script::default();
    with_driver(&mut script, |d| d.delete_namespace(&testing::namespace())).unwrap();
    assert_eq!(
        script.calls,
        ["beforeNamespaceDelete ns-1", "exec stable delete-namespace"]
    );
    assert_eq!(
        script.operations[0],
        json!({"version": 2, "op": "delete-namespace", "deadlineMs": 170000})
    );

    let mut script = Script {
        before_namespace_delete: Some(refused("agents remain")),
        ..Script::default()
    };
    let err = with_driver(&mut script, |d| d.delete_namespace(&testing::namespace())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "lifecycle hook beforeNamespaceDelete refused: agents remain"
    );
    assert_eq!(script.calls, ["beforeNamespaceDelete ns-1"]);

    let mut script = Script::default();
    let unmapped = Namespace {
        name: "canary".into(),
        ..testing::namespace()
    };
    let err = with_driver(&mut script, |d| d.delete_namespace(&unmapped)).unwrap_err();
    assert_eq!(err.code(), "unmapped-namespace");
    assert!(script.calls.is_empty());
}

#[test]
fn helper_progress_is_logged_at_debug() {
    let mut script = Script::default();
    let mut output = ok_line(json!({}));
    output.stdout = [
        b"{\"event\":\"progress\",\"step\":\"lock\",\"message\":\"lock acquired\"}\n".as_slice(),
        &output.stdout,
    ]
    .concat();
    script.answer("ensure-namespace", Ok(output));
    with_driver(&mut script, |d| d.ensure_namespace(&testing::namespace())).unwrap();
    assert_eq!(
        script.logs,
        [(
            Level::Debug,
            "host stable: ensure-namespace: lock: lock acquired".to_owned()
        )]
    );
}

#[test]
fn a_configuration_too_large_for_the_hosts_argument_bound_is_refused_permanent_before_any_exec() {
    // About 200 KB of native configuration: base64 makes the operation larger
    // than the 256 KiB the host takes in one exec's arguments.
    let mut revision = testing::revision();
    let big = "x".repeat(200_000);
    revision.configuration =
        format!(r#"{{"gateway":{{"mode":"local"}},"agents":{{"defaults":{{"note":"{big}"}}}}}}"#);
    let mut script = Script::default();
    let err = prepare(&mut script, &revision).unwrap_err();
    let (kind, code, host, message) = summary(&err);
    assert_eq!(
        (kind, code, host),
        (FailureKind::Permanent, "configuration-too-large", None)
    );
    assert!(message.starts_with("revision.configuration: "), "{message}");
    assert!(
        message.contains("over the 262144 bytes the host takes"),
        "{message}"
    );
    assert!(script.calls.is_empty(), "{:?}", script.calls);

    // At the boundary: the largest configuration admitted still fits the host's
    // bound (the script asserts it of every exec), and one more byte of it is
    // refused before any exec.
    let prepare = |note: usize| {
        let mut revision = testing::revision();
        revision.configuration = format!(
            r#"{{"gateway":{{"mode":"local"}},"agents":{{"defaults":{{"note":"{}"}}}}}}"#,
            "x".repeat(note)
        );
        let mut script = Script::default();
        let result = prepare(&mut script, &revision);
        (result.map(drop), script)
    };
    let (mut fits, mut over) = (150_000, 200_000);
    while over - fits > 1 {
        let mid = (fits + over) / 2;
        if prepare(mid).0.is_ok() {
            fits = mid;
        } else {
            over = mid;
        }
    }
    let (ok, script) = prepare(fits);
    ok.unwrap();
    assert_eq!(script.calls, ["exec stable prepare"]);
    let (refused, script) = prepare(over);
    assert_eq!(refused.unwrap_err().code(), "configuration-too-large");
    assert!(script.calls.is_empty());
}
