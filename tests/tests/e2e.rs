//! The SSH Compute Driver end to end: the host binary and the built component
//! deploy the real OpenClaw gateway onto disposable test hosts (systemd-nspawn
//! with real systemd, sshd and shadow tools) and the tests inspect each host
//! over SSH as an operator would.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use std::process::Command;
use std::time::Instant;

use occ_e2e::compute::{Agent, Deployment, ROOT, UNIT_DIR, config, hash12, marker, unique};
use occ_e2e::rig::{Host, Rig};
use occ_e2e::{component, run_host, write_installation};
use serde_json::{Value, json};

/// The port the driver must allocate next on `host`: the lowest of the range
/// that no Agent marker under the root holds (other tests may have left some).
fn next_port(rig: &Rig, host: &Host) -> u64 {
    let used = rig.sh_ok(
        host,
        &format!("cat {ROOT}/namespaces/*/agents/*/agent.json 2>/dev/null | grep -o '\"port\":[0-9]*' | cut -d: -f2 || true"),
    );
    let used: Vec<u64> = used.lines().filter_map(|l| l.trim().parse().ok()).collect();
    (18800..=18899)
        .find(|p| !used.contains(p))
        .expect("a free port in the range")
}

fn readyz(rig: &Rig, host: &Host, port: u64) -> String {
    rig.sh_ok(
        host,
        &format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/readyz || true"),
    )
}

/// bytes' SHA-256, mode, inode and mtime of the operator's env file.
fn env_state(rig: &Rig, host: &Host, agent: &Agent) -> String {
    rig.sh_ok(
        host,
        &format!(
            "f={}/env; sha256sum < $f | cut -c1-64; stat -c '%a %u:%g %i %Y' $f",
            agent.dir()
        ),
    )
}

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn deploys_cuts_over_isolates_retires_and_deletes_real_gateways() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let d = Deployment::new(&[("alpha", &host), ("beta", &host)], None);

    assert_eq!(d.ok("preflight", json!({}))["warnings"], json!([]));

    let alpha = json!({"id": unique("ns-alpha"), "name": "alpha"});
    let beta = json!({"id": unique("ns-beta"), "name": "beta"});
    assert_eq!(
        d.ok("ensureNamespace", json!({"namespace": alpha}))["namespaceReady"],
        true
    );
    // Idempotent: ensuring again verifies the marker and succeeds.
    assert_eq!(
        d.ok("ensureNamespace", json!({"namespace": alpha}))["namespaceReady"],
        true
    );
    assert_eq!(
        d.ok("ensureNamespace", json!({"namespace": beta}))["namespaceReady"],
        true
    );

    // First revision of the first Agent: prepare, activate, serving.
    let a = Agent::new(&alpha);
    let rev1 = a.revision(&unique("rev"), 1, config(json!({})));
    let expected_port = next_port(&rig, &host);
    assert_eq!(d.ok("prepareRevision", a.params(&rev1))["ready"], true);
    let started = Instant::now();
    d.ok("activateRevision", a.params(&rev1));
    println!(
        "activate to served, first revision: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let agent_marker = marker(&rig, &host, &format!("{}/agent.json", a.dir()));
    let port = agent_marker["port"].as_u64().unwrap();
    assert_eq!(port, expected_port, "the lowest free port of the range");
    assert_eq!(agent_marker["account"], a.account());
    assert_eq!(readyz(&rig, &host, port), "200");
    let rev1_hash = hash12(rev1["id"].as_str().unwrap());
    assert_eq!(
        rig.sh_ok(&host, &format!("readlink {}/current", a.dir())),
        format!("revisions/{rev1_hash}")
    );
    assert_eq!(
        marker(&rig, &host, &format!("{}/served.json", a.dir()))["revisionId"],
        rev1["id"]
    );
    assert_eq!(
        rig.sh_ok(&host, &format!("systemctl is-active {}", a.unit())),
        "active"
    );

    // Modes and owners as the spec states them.
    let modes = rig.sh_ok(
        &host,
        &format!(
            "cd {}; stat -c '%n %a %U %G' agent.json gateway-password.env home state revisions/{rev1_hash}/openclaw.json revisions/{rev1_hash}/revision.json",
            a.dir()
        ),
    );
    let acct = a.account();
    for expected in [
        "agent.json 600 root root".to_string(),
        "gateway-password.env 600 root root".to_string(),
        format!("home 700 {acct} {acct}"),
        format!("state 700 {acct} {acct}"),
        format!("revisions/{rev1_hash}/openclaw.json 640 root {acct}"),
        format!("revisions/{rev1_hash}/revision.json 600 root root"),
    ] {
        assert!(
            modes.lines().any(|l| l == expected),
            "{expected:?} not in\n{modes}"
        );
    }
    let shell = rig.sh_ok(&host, &format!("getent passwd {acct} | cut -d: -f7"));
    assert!(shell.ends_with("nologin"), "{acct} has login shell {shell}");

    // State written by the gateway's account, and the operator's env file.
    rig.sh_ok(
        &host,
        &format!(
            "runuser -u {acct} -- sh -c 'echo first > {}/state/proof'",
            a.dir()
        ),
    );
    rig.sh_ok(
        &host,
        &format!(
            "umask 077; printf 'MODEL_KEY=test-only\\n' > {}/env",
            a.dir()
        ),
    );
    let env_before = env_state(&rig, &host, &a);

    // Cutover to a second revision.
    let rev2 = a.revision(
        &unique("rev"),
        2,
        config(json!({"agents": {"defaults": {"timeoutSeconds": 90}}})),
    );
    assert_eq!(d.ok("prepareRevision", a.params(&rev2))["ready"], true);
    // Preparation leaves the running revision alone.
    assert_eq!(
        rig.sh_ok(&host, &format!("readlink {}/current", a.dir())),
        format!("revisions/{rev1_hash}")
    );
    let started = Instant::now();
    d.ok("activateRevision", a.params(&rev2));
    println!(
        "activate to served, cutover: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rev2_hash = hash12(rev2["id"].as_str().unwrap());
    assert_eq!(
        rig.sh_ok(&host, &format!("readlink {}/current", a.dir())),
        format!("revisions/{rev2_hash}")
    );
    assert_eq!(
        marker(&rig, &host, &format!("{}/served.json", a.dir()))["revisionId"],
        rev2["id"]
    );
    assert_eq!(readyz(&rig, &host, port), "200");
    assert_eq!(
        rig.sh_ok(&host, &format!("cat {}/state/proof", a.dir())),
        "first",
        "state lost in cutover"
    );
    assert_eq!(
        env_state(&rig, &host, &a),
        env_before,
        "operator env file changed by redeploy"
    );
    // A superseded candidate is not prepared.
    let stale = a.revision(&unique("rev"), 1, config(json!({})));
    assert_eq!(d.ok("prepareRevision", a.params(&stale))["ready"], false);

    // A sibling Agent: its own account, port, and no access to the first one's files.
    let b = Agent::new(&alpha);
    let revb = b.revision(&unique("rev"), 1, config(json!({})));
    let expected_port = next_port(&rig, &host);
    assert_eq!(d.ok("prepareRevision", b.params(&revb))["ready"], true);
    let b_marker = marker(&rig, &host, &format!("{}/agent.json", b.dir()));
    assert_eq!(b_marker["port"], expected_port);
    assert_ne!(b_marker["port"], agent_marker["port"]);
    assert_ne!(b_marker["uid"], agent_marker["uid"]);
    assert_ne!(b_marker["gid"], agent_marker["gid"]);
    let bacct = b.account();
    let denied = |cmd: String| rig.sh(&host, &cmd).status.success();
    assert!(
        !denied(format!("runuser -u {bacct} -- cat {}/state/proof", a.dir())),
        "sibling read state"
    );
    assert!(
        !denied(format!(
            "runuser -u {bacct} -- cat {}/revisions/{rev2_hash}/openclaw.json",
            a.dir()
        )),
        "sibling read the snapshot"
    );
    assert!(denied(format!(
        "runuser -u {acct} -- cat {}/revisions/{rev2_hash}/openclaw.json",
        a.dir()
    )));
    // The gateway cannot rewrite its admitted document.
    assert!(!denied(format!(
        "runuser -u {acct} -- sh -c 'echo x >> {}/revisions/{rev2_hash}/openclaw.json'",
        a.dir()
    )));

    // A second Namespace on the same host gets the next free port of the host's
    // whole inventory, whatever else runs there.
    let c = Agent::new(&beta);
    let revc = c.revision(&unique("rev"), 1, config(json!({})));
    let expected_port = next_port(&rig, &host);
    assert_eq!(d.ok("prepareRevision", c.params(&revc))["ready"], true);
    assert_eq!(
        marker(&rig, &host, &format!("{}/agent.json", c.dir()))["port"],
        expected_port
    );

    // The gateway logs to journald under its unit.
    let journal = rig.sh_ok(
        &host,
        &format!("journalctl -u {} --no-pager -o cat | tail -n 50", a.unit()),
    );
    assert!(!journal.is_empty(), "journal of {} is empty", a.unit());

    // Retire the old revision: only its snapshot goes.
    d.ok("retireRevision", a.params(&rev1));
    assert!(!denied(format!(
        "test -e {}/revisions/{rev1_hash}",
        a.dir()
    )));
    assert!(denied(format!(
        "test -e {}/revisions/{rev2_hash}/openclaw.json",
        a.dir()
    )));
    assert_eq!(readyz(&rig, &host, port), "200");

    // Stop: unit stopped and disabled, pointer and served.json gone, the rest kept.
    d.ok("stopRevision", a.params(&rev2));
    assert_ne!(
        rig.sh_ok(&host, &format!("systemctl is-active {} || true", a.unit())),
        "active"
    );
    assert!(!denied(format!("test -e {}/current", a.dir())));
    assert!(!denied(format!("test -e {}/served.json", a.dir())));
    assert!(denied(format!(
        "test -e {}/revisions/{rev2_hash}/openclaw.json",
        a.dir()
    )));
    assert_eq!(
        rig.sh_ok(&host, &format!("cat {}/state/proof", a.dir())),
        "first"
    );
    assert_eq!(
        env_state(&rig, &host, &a),
        env_before,
        "operator env file changed by stop"
    );
    d.ok("retireRevision", a.params(&rev2));
    assert!(!denied(format!(
        "test -e {}/revisions/{rev2_hash}",
        a.dir()
    )));
    assert_eq!(
        env_state(&rig, &host, &a),
        env_before,
        "operator env file changed by retire"
    );

    // Every exec was audited.
    let audit = std::fs::read_to_string(&d.audit).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["capability"] == "ssh-exec")
        .collect();
    assert!(records.iter().any(|r| r["method"] == "activateRevision"
        && r["host"] == "alpha"
        && r["exitStatus"] == 0));
    assert!(
        records
            .iter()
            .all(|r| r["stdinSha256"].as_str().map(str::len) == Some(64))
    );

    // Deleting the Namespaces removes units, trees and accounts.
    assert_eq!(
        d.ok("deleteNamespace", json!({"namespace": alpha}))["namespaceDeleted"],
        true
    );
    assert_eq!(
        d.ok("deleteNamespace", json!({"namespace": beta}))["namespaceDeleted"],
        true
    );
    for agent in [&a, &b, &c] {
        assert!(
            !denied(format!("test -e {UNIT_DIR}/{}", agent.unit())),
            "unit left: {}",
            agent.unit()
        );
        assert!(
            !denied(format!("getent passwd {}", agent.account())),
            "account left: {}",
            agent.account()
        );
        assert!(!denied(format!(
            "test -e {ROOT}/accounts/{}.json",
            agent.account()
        )));
    }
    assert!(!denied(format!(
        "test -e {ROOT}/namespaces/{}",
        hash12(alpha["id"].as_str().unwrap())
    )));
    // Deleting again is a no-op success.
    assert_eq!(
        d.ok("deleteNamespace", json!({"namespace": alpha}))["namespaceDeleted"],
        true
    );
}

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn refusals_change_nothing_and_name_the_host() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let d = Deployment::new(&[("alpha", &host)], None);
    let alpha = json!({"id": unique("ns-alpha"), "name": "alpha"});

    // An unmapped Namespace name fails permanently.
    let (code, v) = d.call(
        "ensureNamespace",
        json!({"namespace": {"id": unique("ns"), "name": "nowhere"}}),
    );
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["namespaceReady"], false);
    assert_eq!(v["failure"], "permanent");

    d.ok("ensureNamespace", json!({"namespace": alpha}));
    let a = Agent::new(&alpha);
    let listing = |rig: &Rig| rig.sh_ok(&host, &format!("find {ROOT} | sort"));
    let before = listing(&rig);
    // Each refused revision leaves the host exactly as it was.
    let refused = [
        json!({"harnessAuth": {"method": "secret", "secretId": "s"}}),
        json!({"plugins": {"driver": {"id": "plugins", "implementation": "x"}, "plugins": {"slack": {"enabled": true}}}}),
        json!({"pluginApprovers": []}),
        json!({"secretBindings": {"API_KEY": {"source": {"kind": "secret", "id": "sec-1", "namespaceId": "ns"}}}}),
        json!({"sandboxDriverId": "sandbox-k8s"}),
        json!({"compute": {"id": "compute-k8s", "implementation": "occ/k8s"}}),
        json!({"configuration": {"gateway": {"auth": {"mode": "token", "token": "x"}}}}),
    ];
    for change in refused {
        let mut rev = a.revision(&unique("rev"), 1, config(json!({})));
        rev.as_object_mut()
            .unwrap()
            .extend(change.as_object().unwrap().clone());
        let (code, v) = d.call("prepareRevision", a.params(&rev));
        assert_eq!(code, 65, "{change}: {v}");
        assert_eq!(v["failure"], "permanent", "{change}");
        assert_eq!(listing(&rig), before, "{change} changed the host");
    }
    // Unbound: no binding passed and none kept.
    let rev = a.revision(&unique("rev"), 1, config(json!({})));
    let (code, v) = d.call("prepareRevision", json!({"revision": rev}));
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["code"], "unbound-agent", "{v}");
    assert_eq!(listing(&rig), before);
    d.ok("deleteNamespace", json!({"namespace": alpha}));
}

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_mismatched_host_key_fails_permanently_naming_the_host() {
    let rig = Rig::load();
    let host = rig.hosts.last().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("known_hosts");
    // A valid ed25519 key that is not the host's.
    let key = dir.path().join("other");
    assert!(
        std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap()
            .success()
    );
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    std::fs::write(&wrong, format!("{} {}", host.address, public)).unwrap();
    let d = Deployment::new(&[("edge", &host)], Some(&wrong));
    let (code, v) = d.call("preflight", json!({}));
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["failure"], "permanent");
    assert_eq!(v["host"], "edge");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("edge") && message.contains("host key"),
        "{message}"
    );
}

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn an_unreachable_host_is_retryable_and_named() {
    let rig = Rig::load();
    // A test host's address on a port where nothing listens: connection refused.
    let nobody = Host {
        port: 2222,
        ..rig.hosts[0].clone()
    };
    let d = Deployment::new(&[("gone", &nobody)], None);
    let (code, v) = d.call(
        "ensureNamespace",
        json!({"namespace": {"id": unique("ns"), "name": "gone"}}),
    );
    assert_eq!(code, 75, "{v}");
    // OCC's NamespaceEnsureResult exactly; the operator's text, naming the host,
    // in `reason`.
    assert_eq!(
        v.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["failure", "namespaceId", "namespaceReady", "reason"],
        "{v}"
    );
    assert_eq!(v["failure"], "retryable");
    assert!(v["reason"].as_str().unwrap().contains("host gone"), "{v}");
}

/// Cancelling while the remote helper waits for readiness closes its ssh
/// session: the call answers `cancelled`, the audit records the exec as cancelled, the
/// helper (its session gone) never writes `served.json`, and the retry converges
/// on the exact revision and its readiness.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn cancelling_mid_exec_closes_the_session_and_the_retry_converges() {
    use std::sync::{Arc, Mutex};

    use occ_driver_host::{
        CallOptions, Driver, DriverOptions, FailureKind, Installation, Limits, Method, Progress,
        Runtime,
    };

    let rig = Rig::load();
    let host = rig.hosts.last().unwrap().clone();
    let d = Deployment::new(&[("cancel", &host)], None);
    let ns = json!({"id": unique("ns-cancel"), "name": "cancel"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let a = Agent::new(&ns);
    let rev = a.revision(&unique("rev"), 1, config(json!({})));
    d.ok("prepareRevision", a.params(&rev));

    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let driver = Driver::open(
        runtime,
        Installation::load(&d.installation).unwrap(),
        &DriverOptions {
            audit_log: Some(d.audit.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let steps = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut options = CallOptions::default();
    let cancel = options.cancel.clone();
    let seen = steps.clone();
    options.progress = Arc::new(move |p: &Progress| {
        if let Some(step) = &p.step {
            seen.lock().unwrap().push(step.clone());
            if step == "readiness" {
                cancel.cancel();
            }
        }
    });
    let err = tokio
        .block_on(driver.call_json(Method::ActivateRevision, &a.params(&rev), options))
        .unwrap_err();
    assert_eq!(err.code, "cancelled", "{err:?}");
    assert_eq!(err.failure, FailureKind::Retryable);
    assert!(
        steps.lock().unwrap().contains(&"restart".to_string()),
        "{:?}",
        steps.lock().unwrap()
    );

    let audit = std::fs::read_to_string(&d.audit).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"method\":\"activateRevision\"")
                && l.contains("\"error\":\"cancelled\"")),
        "no cancelled exec in the audit log:\n{audit}"
    );
    // Give a helper that missed its closed session time to (wrongly) finish.
    std::thread::sleep(std::time::Duration::from_secs(20));
    assert!(
        !rig.sh(&host, &format!("test -e {}/served.json", a.dir()))
            .status
            .success(),
        "served.json written after cancel"
    );

    // The retry establishes the exact revision and readiness.
    d.ok("activateRevision", a.params(&rev));
    assert_eq!(
        marker(&rig, &host, &format!("{}/served.json", a.dir()))["revisionId"],
        rev["id"]
    );
    d.ok("deleteNamespace", json!({"namespace": ns}));
}

/// A recording made against a real host replays with no host at all: the same
/// answers, deterministically, and a changed exec or recording fails by name.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn recorded_ssh_replays_without_any_host() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let live = Deployment::new(&[("rec", &host)], None);
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("rec.jsonl");
    let rec = recording.to_str().unwrap();
    let ns = json!({"namespace": {"id": unique("ns-rec"), "name": "rec"}});
    assert_eq!(
        live.call_with("preflight", json!({}), &["--ssh-record", rec])
            .0,
        0
    );
    let (code, recorded) = live.call_with("ensureNamespace", ns.clone(), &["--ssh-record", rec]);
    assert_eq!((code, &recorded["namespaceReady"]), (0, &json!(true)));
    assert_eq!(
        std::fs::read_to_string(&recording).unwrap().lines().count(),
        2
    );

    // The same Namespace name pointed at a port where nothing listens: a live call
    // would fail to connect, the replay never tries.
    let nowhere = Host {
        port: 2222,
        ..host.clone()
    };
    let offline = Deployment::new(&[("rec", &nowhere)], None);
    let text = std::fs::read_to_string(&recording).unwrap();
    let mut lines = text.lines();
    let first = dir.path().join("preflight.jsonl");
    std::fs::write(&first, lines.next().unwrap()).unwrap();
    let second = dir.path().join("ensure.jsonl");
    std::fs::write(&second, lines.next().unwrap()).unwrap();
    for _ in 0..2 {
        assert_eq!(
            offline
                .call_with(
                    "preflight",
                    json!({}),
                    &["--ssh-replay", first.to_str().unwrap()]
                )
                .0,
            0
        );
        let (code, replayed) = offline.call_with(
            "ensureNamespace",
            ns.clone(),
            &["--ssh-replay", second.to_str().unwrap()],
        );
        assert_eq!((code, &replayed), (0, &recorded));
    }
    // Another Namespace means another operation: the replay names the difference.
    let other = json!({"namespace": {"id": unique("ns-other"), "name": "rec"}});
    let (code, v) = offline.call_with(
        "ensureNamespace",
        other,
        &["--ssh-replay", second.to_str().unwrap()],
    );
    assert_eq!(code, 75, "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("argv differs"),
        "{v}"
    );
    // A recording that says the helper failed replays that failure.
    let failed = dir.path().join("failed.jsonl");
    let mut entry: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    entry["exitStatus"] = json!(255);
    entry["stdout"] = json!("");
    std::fs::write(&failed, entry.to_string()).unwrap();
    let (code, v) = offline.call_with(
        "ensureNamespace",
        ns.clone(),
        &["--ssh-replay", failed.to_str().unwrap()],
    );
    assert_eq!(
        (code, &v["namespaceReady"], &v["failure"]),
        (75, &json!(false), &json!("retryable")),
        "{v}"
    );
    live.ok("deleteNamespace", ns);
}

/// Preflight's verdicts on what only an operator can fix: each is permanent and
/// names the host alias and the key or path at fault.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn preflight_refusals_are_permanent_and_name_what_to_fix() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let base = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts, "connectTimeoutSeconds": 5},
        "hosts": {"edge": {"address": host.address, "port": host.port, "user": "root",
                           "nodePath": rig.node, "openclawPath": rig.openclaw}},
        "runtime": {"nodePath": rig.node, "openclawPath": rig.openclaw, "user": "openclaw", "root": ROOT},
        "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
    });
    let preflight = |name: &str, configuration: &Value| {
        let sub = dir.path().join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let inst = write_installation(&sub, &component("guest_ssh_driver"), configuration);
        let out = run_host(&[
            "call",
            "preflight",
            "--installation",
            inst.to_str().unwrap(),
            "--json",
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "preflight ({name}) printed no JSON ({e}); exit {:?}, stderr: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), v)
    };
    let (code, v) = preflight("good", &base);
    assert_eq!(code, 0, "{v}");

    // A nodePath that is not there: not a transient helper failure.
    let mut wrong_node = base.clone();
    wrong_node["hosts"]["edge"]["nodePath"] = json!("/opt/missing/bin/node");
    let (code, v) = preflight("node", &wrong_node);
    assert_eq!(code, 65, "{v}");
    assert_eq!(
        (&v["failure"], &v["code"], &v["host"]),
        (
            &json!("permanent"),
            &json!("node-not-found"),
            &json!("edge")
        )
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("/opt/missing/bin/node"),
        "{v}"
    );
    // The helper goes into a session whose remote command may already have
    // ended (there is no such node): the write fails, and the verdict is
    // still printed, every time. A SIGPIPE once ended the process there with
    // nothing said.
    for i in 0..5 {
        let (code, v) = preflight(&format!("node-{i}"), &wrong_node);
        assert_eq!(
            (code, &v["code"]),
            (65, &json!("node-not-found")),
            "run {i}: {v}"
        );
    }

    // A key the host never authorized: configuration, not transport.
    let key = dir.path().join("stranger");
    assert!(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap()
            .success()
    );
    let mut stranger = base.clone();
    stranger["ssh"]["identityFile"] = json!(key);
    let (code, v) = preflight("key", &stranger);
    assert_eq!(code, 65, "{v}");
    assert_eq!(
        (&v["failure"], &v["code"], &v["host"]),
        (&json!("permanent"), &json!("ssh-auth"), &json!("edge"))
    );
    assert!(
        v["message"].as_str().unwrap().contains("ssh.identityFile"),
        "{v}"
    );

    // A known-hosts file anyone may write is refused before any connection.
    let loose = dir.path().join("known_hosts");
    std::fs::copy(&rig.known_hosts, &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let mut open_known_hosts = base.clone();
    open_known_hosts["ssh"]["knownHostsFile"] = json!(loose);
    let (code, v) = preflight("known-hosts", &open_known_hosts);
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["failure"], "permanent", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("ssh.knownHostsFile") && message.contains("666"),
        "{v}"
    );
}

/// The largest native configuration admission lets through really deploys: it
/// travels on the helper's stdin, not on a command line (which Linux bounds at
/// 128 KiB in one argument), and one byte more than the host takes in an
/// exec's arguments is refused, permanent, before anything reaches the host.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn the_largest_admitted_configuration_prepares_on_a_real_host() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let d = Deployment::new(&[("large", &host)], None);
    let ns = json!({"id": unique("ns-large"), "name": "large"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let a = Agent::new(&ns);
    d.ok("bindAgent", a.binding());
    let mut tried = 0;
    let mut prepare = |note: usize| {
        tried += 1;
        let rev = a.revision(
            &unique("rev"),
            tried,
            config(json!({"agents": {"defaults": {"note": "x".repeat(note)}}})),
        );
        d.call("prepareRevision", a.params(&rev))
    };
    let (mut fits, mut over) = (1_000, 250_000);
    while over - fits > 1 {
        let mid = (fits + over) / 2;
        let (code, v) = prepare(mid);
        if code == 0 {
            assert_eq!(v["ready"], true, "{v}");
            fits = mid;
        } else {
            assert_eq!(
                (code, &v["code"], &v["failure"]),
                (65, &json!("configuration-too-large"), &json!("permanent")),
                "{mid} bytes: {v}"
            );
            over = mid;
        }
    }
    eprintln!("largest admitted native configuration note: {fits} bytes");
    let (code, v) = prepare(fits);
    assert_eq!((code, &v["ready"]), (0, &json!(true)), "{v}");
    d.ok("deleteNamespace", json!({"namespace": ns}));
}
