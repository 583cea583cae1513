//! The runtime's bounds, proven with real misbehaving components.
//!
//! The guests are built by `cargo guests` (see the README) into
//! `<target>/wasm32-wasip2/release/`; each test ends in a clear error and then shows
//! the same host serving the next call.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use occ_driver_host::{
    CallOptions, ComponentCache, Driver, DriverOptions, FailureKind, Installation, Limits,
    LoadError, Method, Runtime,
};
use serde_json::json;

mod support;
use support::{component, validate};

fn installation(component: PathBuf, fault: &str) -> Installation {
    Installation {
        path: PathBuf::from("test-installation.yaml"),
        driver_id: "compute-fault".into(),
        implementation: "occ/ssh".into(),
        approved_helpers: Vec::new(),
        component,
        max_sessions: occ_driver_host::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
        configuration: json!({
            "fault": fault,
            "ssh": {"identityFile": "/nonexistent/id", "knownHostsFile": "/nonexistent/known_hosts"},
            "hosts": {"granted": {"address": "127.0.0.1", "port": 22, "user": "root"}},
            "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/dist/index.js",
                        "user": "openclaw", "root": "/var/lib/openclaw-enterprise"},
            "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
        }),
    }
}

fn limits() -> Limits {
    Limits {
        cpu: Duration::from_millis(300),
        wall: Duration::from_secs(20),
        memory_bytes: 32 << 20,
        max_instances: 16,
        ..Limits::default()
    }
}

fn open(rt: &Arc<Runtime>, fault: &str) -> Driver {
    Driver::open(
        rt.clone(),
        installation(component("fault_guest"), fault),
        &DriverOptions::default(),
    )
    .unwrap()
}

#[tokio::test]
async fn misbehaving_guests_end_in_clear_errors_and_the_host_serves_on() {
    let rt = Arc::new(Runtime::new(limits()).unwrap());
    let healthy = open(&rt, "none");

    let cases = [
        ("loop", "cpu-limit", "more than 300 ms of CPU"),
        ("alloc", "memory-limit", "past the 32 MiB limit"),
        ("panic", "driver-panic", "the fault guest panics on request"),
        (
            "result-flood",
            "result-too-large",
            "over the bound of 1048576",
        ),
        (
            "ungranted-host",
            "fault-outcome",
            "UnknownHost(\"not-granted\")",
        ),
    ];
    for (fault, code, message) in cases {
        let err = validate(&open(&rt, fault)).await.unwrap_err();
        assert_eq!(err.code, code, "{fault}: {err:?}");
        assert!(
            err.message.contains(message),
            "{fault}: {:?} lacks {message:?}",
            err.message
        );
        assert_eq!(err.failure, FailureKind::Permanent, "{fault}");
        // The same runtime, and a sibling driver, keep serving.
        let ok = validate(&healthy).await.unwrap();
        assert_eq!(ok["warnings"][0]["code"], "fault-guest", "after {fault}");
    }
}

/// A looping guest yields to the executor as it burns fuel, so on a runtime
/// with a single thread other tasks still run during the call and the
/// wall-clock bound ends it: the ticker's ticks land before the call's end.
#[tokio::test(flavor = "current_thread")]
async fn a_looping_guest_yields_and_the_wall_clock_bound_ends_it() {
    let rt = Arc::new(
        Runtime::new(Limits {
            cpu: Duration::from_secs(60),
            wall: Duration::from_millis(400),
            ..limits()
        })
        .unwrap(),
    );
    let events = Arc::new(std::sync::Mutex::new(Vec::<&str>::new()));
    let ticker = {
        let events = events.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                events.lock().unwrap().push("tick");
            }
        })
    };
    let err = validate(&open(&rt, "loop")).await.unwrap_err();
    events.lock().unwrap().push("call ended");
    ticker.abort();
    assert_eq!(err.code, "call-timeout");
    assert_eq!(err.failure, FailureKind::Retryable);
    let events = events.lock().unwrap();
    let end = events.iter().position(|e| *e == "call ended").unwrap();
    assert!(
        events[..end].contains(&"tick"),
        "nothing else ran while the guest looped: {events:?}"
    );
}

#[tokio::test]
async fn cancellation_stops_a_running_call() {
    let rt = Arc::new(
        Runtime::new(Limits {
            cpu: Duration::from_secs(60),
            ..limits()
        })
        .unwrap(),
    );
    let driver = open(&rt, "loop");
    let options = CallOptions::default();
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let err = driver
        .call_json(Method::ValidateConfiguration, &json!({}), options)
        .await
        .unwrap_err();
    assert_eq!(err.code, "cancelled");
    assert_eq!(err.failure, FailureKind::Retryable);
}

#[tokio::test]
async fn concurrent_calls_get_their_own_instances() {
    let rt = Arc::new(Runtime::new(limits()).unwrap());
    let driver = Arc::new(open(&rt, "none"));
    let calls = (0..12).map(|_| {
        let d = driver.clone();
        tokio::spawn(async move { validate(&d).await })
    });
    for c in calls {
        assert!(c.await.unwrap().is_ok());
    }
}

#[test]
fn a_component_importing_the_filesystem_is_refused_before_it_runs() {
    let rt = Arc::new(Runtime::new(limits()).unwrap());
    let err = match Driver::open(
        rt,
        installation(component("fs_guest"), "none"),
        &DriverOptions::default(),
    ) {
        Err(e) => e,
        Ok(_) => panic!("the filesystem guest was loaded"),
    };
    match &err {
        LoadError::RefusedImports { refused, .. } => {
            assert!(
                refused.iter().any(|i| i.starts_with("wasi:filesystem/")),
                "{refused:?}"
            );
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(
        err.to_string().contains("imports wasi:filesystem/"),
        "{err}"
    );
}

#[test]
fn the_precompiled_cache_is_used_on_the_next_load() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::open(dir.path().join("cache")).unwrap();
    let rt = Runtime::new(limits()).unwrap();
    let path = component("fault_guest");
    let first = rt.compile(&path, Some(&cache)).unwrap();
    assert!(!first.from_cache);
    let artifact = cache.artifact_path(rt.engine(), &first.sha256);
    assert!(artifact.exists(), "{} was not written", artifact.display());
    let second = rt.compile(&path, Some(&cache)).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.imports, second.imports);
    // A corrupt artifact is ignored and replaced, not trusted.
    std::fs::write(&artifact, b"not an artifact").unwrap();
    let third = rt.compile(&path, Some(&cache)).unwrap();
    assert!(!third.from_cache);
    assert!(rt.compile(&path, Some(&cache)).unwrap().from_cache);
}

#[test]
fn a_cache_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = ComponentCache::open(&shared).unwrap_err();
    assert!(err.to_string().contains("closed to others"), "{err}");
}
