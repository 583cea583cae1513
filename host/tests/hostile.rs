//! A hostile driver component against the host's grants and bounds, with no test
//! host at all: everything here is refused before any connection is attempted
//! (the granted alias points at a port where nothing listens, so an attempt would
//! show up as a connect error instead of a refusal).
//!
//! The fault guest (`tests/guests/fault-guest`) misbehaves on request; each case
//! checks what the guest was answered, what reached the controller and the audit
//! log, and that the host then serves the next call. Cases that need a real host
//! (an output flood, a connect loop) are in the rig suite.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use occ_driver_host::runtime::{CallData, Sandbox};
use occ_driver_host::{
    CallError, CallOptions, Driver, DriverOptions, HookAnswer, HookFuture, HookRequest,
    Installation, LifecycleHooks, Limits, Method, Runtime,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

mod support;
use support::{component, validate};

/// SHA-256 of the fault guest's helper, as an operator would pin it.
fn fault_helper_sha() -> String {
    let path =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../tests/guests/fault-guest/helper.js");
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn installation(fault: &str, extra: Value, approved: Vec<String>) -> Installation {
    let mut configuration = json!({
        "fault": fault, "host": "granted", "node": "/usr/bin/node",
        "ssh": {"identityFile": "/nonexistent/id", "knownHostsFile": "/nonexistent/known_hosts", "connectTimeoutSeconds": 2},
        // Port 1 on loopback: nothing listens, so a connection would fail loudly.
        "hosts": {"granted": {"address": "127.0.0.1", "port": 1, "user": "root"}},
        "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/dist/index.js",
                    "user": "openclaw", "root": "/var/lib/openclaw-enterprise"},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    });
    if let (Some(c), Value::Object(e)) = (configuration.as_object_mut(), extra) {
        c.extend(e);
    }
    Installation {
        path: PathBuf::from("hostile-installation.yaml"),
        driver_id: "compute-fault".into(),
        implementation: "occ/ssh".into(),
        approved_helpers: approved
            .iter()
            .map(|s| occ_ssh_target::digest::Sha256::parse(s).expect("a SHA-256"))
            .collect(),
        component: component("fault_guest"),
        max_sessions: occ_driver_host::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
        configuration,
    }
}

struct Opened {
    driver: Driver,
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

fn open(rt: &Arc<Runtime>, installation: Installation) -> Opened {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let driver = Driver::open(
        rt.clone(),
        installation,
        &DriverOptions {
            audit_log: Some(audit.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    Opened {
        driver,
        audit,
        _dir: dir,
    }
}

fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn runtime() -> Arc<Runtime> {
    Arc::new(Runtime::new(Limits::default()).unwrap())
}

/// The three ways to run something other than the approved helper: a shell, the
/// helper with one byte changed, a helper nobody approved. Each is refused before
/// any connection, says why (and how to pin), and is audited as refused.
#[tokio::test]
async fn only_the_pinned_helper_runs_and_everything_else_is_refused_before_any_connection() {
    let rt = runtime();
    let sha = fault_helper_sha();
    let cases = [
        (
            "root-shell",
            vec![sha.clone()],
            "Refused(\"on granted only `/usr/bin/node - <operation>` with the approved helper on stdin may run, not program \\\"sh\\\" with 2 arguments\")".to_string(),
        ),
        (
            "tampered-helper",
            vec![sha.clone()],
            "is not one the installation approves".to_string(),
        ),
        (
            "helper",
            vec![],
            format!("no helper is approved for this driver; after auditing the helper the component ships (`occ-driver-host inspect` shows its SHA-256), add it under drivers.compute in the installation: approvedHelpers: [\\\"{sha}\\\"]"),
        ),
    ];
    for (fault, approved, expected) in cases {
        let opened = open(&rt, installation(fault, json!({}), approved));
        let err = validate(&opened.driver).await.unwrap_err();
        assert!(
            err.message.contains("Refused(") && err.message.contains(&expected),
            "{fault}: {}",
            err.message
        );
        let events = audit_events(&opened.audit);
        let refused: Vec<&Value> = events.iter().filter(|e| e["event"] == "refused").collect();
        assert_eq!(refused.len(), 1, "{fault}: {events:?}");
        assert_eq!(refused[0]["error"], "refused");
        // Beside the driver's words, the host's own, as it audited them:
        // whatever the component makes of a refusal, the caller sees it.
        assert_eq!(
            err.refusal.as_deref(),
            refused[0]["message"]
                .as_str()
                .and_then(|m| m.strip_prefix("refused: "))
                .map(|why| format!("ssh-exec on granted: {why}"))
                .as_deref(),
            "{fault}"
        );
        assert!(
            events.iter().all(|e| e["event"] != "begin"),
            "{fault}: an exec began: {events:?}"
        );
        // The same host serves the next call.
        let healthy = open(&rt, installation("none", json!({}), vec![]));
        assert_eq!(
            validate(&healthy.driver).await.unwrap()["warnings"][0]["code"],
            "fault-guest"
        );
    }
}

/// Huge arguments (20 MB each) are refused by their size before anything is
/// recorded: the audit log holds counts, not the arguments.
#[tokio::test]
async fn an_argument_flood_leaves_the_audit_log_small() {
    let rt = runtime();
    let opened = open(
        &rt,
        installation(
            "argv-flood",
            json!({"count": "20"}),
            vec![fault_helper_sha()],
        ),
    );
    let err = validate(&opened.driver).await.unwrap_err();
    assert_eq!(
        err.message.matches("Refused(").count(),
        20,
        "{}",
        err.message
    );
    assert!(err.message.contains("exceed the bound"), "{}", err.message);
    let size = std::fs::metadata(&opened.audit).unwrap().len();
    assert!(
        size < 64 << 10,
        "20 refused 20 MB arguments wrote {size} bytes of audit"
    );
    assert_eq!(
        audit_events(&opened.audit)
            .iter()
            .filter(|e| e["event"] == "refused")
            .count(),
        20
    );
}

/// A controller that records every hook it is asked.
#[derive(Default)]
struct Recorder(Mutex<Vec<Value>>);

impl LifecycleHooks for Recorder {
    fn call(&self, request: HookRequest) -> HookFuture<'_> {
        self.0.lock().unwrap().push(request.params);
        Box::pin(async { Ok(HookAnswer::NotSelected) })
    }
}

async fn ensure(driver: &Driver, controller: Arc<Recorder>) -> Value {
    driver
        .call_json(
            Method::EnsureNamespace,
            &json!({"namespace": {"id": "ns-1", "name": "granted", "status": "ready"}}),
            CallOptions {
                hooks: controller,
                ..CallOptions::default()
            },
        )
        .await
        .map_err(|e| e.message)
        .unwrap_err()
        .into()
}

/// Hooks belong to the call: another Namespace never reaches the controller, and
/// a flood of the call's own hook reaches it only up to the bound.
#[tokio::test]
async fn foreign_hook_arguments_and_hook_floods_do_not_reach_the_controller() {
    let rt = runtime();
    let controller = Arc::new(Recorder::default());
    let foreign = open(&rt, installation("hook-foreign", json!({}), vec![]));
    let outcome = ensure(&foreign.driver, controller.clone()).await;
    assert!(
        outcome.as_str().unwrap().contains("NotAllowed(\"the host refused the hook call: afterNamespacePrepared names Namespace \\\"someone-elses-namespace\\\", not this call's\")"),
        "{outcome}"
    );
    assert!(controller.0.lock().unwrap().is_empty());

    let flood = open(
        &rt,
        installation("hook-flood", json!({"count": "1000"}), vec![]),
    );
    let outcome = ensure(&flood.driver, controller.clone()).await;
    let text = outcome.as_str().unwrap();
    assert_eq!(text.matches("Ok(())").count(), 4, "{text}");
    assert_eq!(
        text.matches("exceeds the bound of 4 hook calls").count(),
        996
    );
    let seen = controller.0.lock().unwrap();
    assert_eq!(seen.len(), 4);
    // What the controller got is the call's own Namespace, with the call's id.
    assert_eq!(seen[0]["namespace"]["status"], "ready");
    assert!(seen[0]["callId"].as_str().is_some_and(|id| !id.is_empty()));
}

struct Bare {
    sandbox: Sandbox,
}

impl CallData for Bare {
    fn sandbox(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }
}

/// Instantiate a hand-written component in a fresh bounded store.
async fn instantiate(rt: &Runtime, wat: &str) -> Result<(), CallError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.wasm");
    std::fs::write(&path, wat::parse_str(wat).unwrap()).unwrap();
    let compiled = rt.compile(&path, None).unwrap();
    let linker = rt.linker::<Bare>().unwrap();
    let component = compiled.component.clone();
    let data = Bare {
        sandbox: Sandbox::new(&rt.limits()),
    };
    rt.call("hostile", data, &Default::default(), move |store| {
        Box::pin(async move {
            linker.instantiate_async(&mut *store, &component).await?;
            Ok(())
        })
    })
    .await
}

/// Memory is bounded per call, across every memory a component has: four
/// memories of 19 MiB each are refused under a 64 MiB bound although each alone
/// would fit, and more memories than a call may have are refused too.
#[tokio::test]
async fn extra_memories_cannot_exceed_the_bound_of_one_call() {
    let rt = runtime();
    let memories = |n: usize, pages: u32| {
        let mut wat = String::from("(component\n");
        for i in 0..n {
            wat.push_str(&format!(
                "  (core module $m{i} (memory {pages}))\n  (core instance (instantiate $m{i}))\n"
            ));
        }
        wat.push(')');
        wat
    };
    // 304 pages of 64 KiB: 19 MiB.
    instantiate(&rt, &memories(3, 304)).await.unwrap();
    let err = instantiate(&rt, &memories(4, 304)).await.unwrap_err();
    assert_eq!(err.code, "memory-limit", "{err:?}");
    assert!(
        err.message.contains("past the 64 MiB limit of one call"),
        "{}",
        err.message
    );
    // More memories than a call may have are refused when the component loads.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.wasm");
    std::fs::write(&path, wat::parse_str(memories(5, 1)).unwrap()).unwrap();
    let err = rt.compile(&path, None).unwrap_err().to_string();
    assert!(
        err.contains("5 Wasm linear memories") && err.contains("maximum of 4"),
        "{err}"
    );
    // The runtime goes on.
    instantiate(&rt, &memories(1, 1)).await.unwrap();
}
