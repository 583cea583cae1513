//! Cost per Agent as the count grows: N Agents deployed concurrently (prepare,
//! then activate to readiness) across the rig's hosts through one host process
//! (one loaded driver), for N = 1, 10, 50, 100; then one cutover of every Agent
//! to a second revision, then deletion. Each round reports the wall time, the
//! time per Agent and this process's peak RSS (VmHWM, reset before the round).
//!
//! The gateways are the stand-in of `tests/rig/stand-in-gateway.mjs` (it answers
//! `/readyz`), run by each unit exactly as OpenClaw is: a real gateway holds
//! about 750 MB, so a hundred would measure this machine's memory, not the
//! driver. The report names it.
//!
//!   bash tests/rig/up.sh occ-h1 occ-h2 occ-h3 occ-h4 && cargo guests \
//!     && cargo bench -p occ-e2e --bench scale
//!
//! `OCC_SCALE_COUNTS=1,10` picks other counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use occ_driver_host::{Driver, DriverOptions, Installation, Limits, Method, Runtime};
use occ_e2e::compute::{Agent, Sweep, all_at_once, call_retrying, config, stand_in, unique};
use occ_e2e::rig::Rig;
use occ_e2e::{component, write_installation};
use serde_json::{Value, json};

/// Under `/var/lib/occ-scale-*`, which [`Sweep`] clears before and after.
const ROOT: &str = "/var/lib/occ-scale-bench";

/// This process's VmHWM or VmRSS, in MiB.
fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

/// Resets VmHWM to the current RSS (Linux 4.0 and later).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

fn main() {
    let rig = Rig::load();
    let counts: Vec<usize> = std::env::var("OCC_SCALE_COUNTS")
        .unwrap_or_else(|_| "1,10,50,100".into())
        .split(',')
        .map(|n| n.trim().parse().expect("OCC_SCALE_COUNTS: numbers"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..rig.hosts.len()).map(|i| format!("scale{i}")).collect();
    let _sweeps: Vec<Sweep> = rig
        .hosts
        .iter()
        .map(|h| Sweep::roots(&rig, h, "occ-scale"))
        .collect();
    let mut hosts = serde_json::Map::new();
    for (name, host) in names.iter().zip(&rig.hosts) {
        let entry = stand_in(&rig, host, "ready");
        hosts.insert(
            name.clone(),
            json!({"address": host.address, "port": host.port, "user": "root", "openclawPath": entry}),
        );
    }
    let configuration = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts, "connectTimeoutSeconds": 5},
        "hosts": hosts,
        "runtime": {"nodePath": rig.node, "openclawPath": "/opt/occ-stand-in/ready.mjs", "user": "scale",
                    "root": ROOT, "systemdUnitDirectory": "/etc/systemd/system"},
        "network": {"gatewayPortRange": {"start": 20000, "end": 20999}},
    });
    let path = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let driver = Arc::new(
        Driver::open(
            runtime,
            Installation::load(&path).unwrap(),
            &DriverOptions::default(),
        )
        .unwrap(),
    );
    let tokio = tokio::runtime::Runtime::new().unwrap();
    // Retryable failures are retried, counted and reported.
    let retries = Arc::new(AtomicUsize::new(0));
    let call = |method: Method, params: Value| {
        let (driver, retries) = (driver.clone(), retries.clone());
        async move {
            call_retrying(&driver, method, &params, |_| {
                retries.fetch_add(1, Ordering::Relaxed);
            })
            .await
        }
    };
    // Every Agent's call at once; the wall time.
    let all = |method: Method, params: Vec<Value>| {
        all_at_once(&tokio, params.into_iter().map(|p| call(method, p)))
    };

    println!(
        "{} hosts, one host process; stand-in gateways (tests/rig/stand-in-gateway.mjs), not OpenClaw",
        rig.hosts.len()
    );
    println!(
        "{:>7} {:>10} {:>14} {:>13} {:>14} {:>11} {:>10} {:>10} {:>8}",
        "agents",
        "deploy (s)",
        "per agent (ms)",
        "cutover (s)",
        "per agent (ms)",
        "delete (s)",
        "peak MiB",
        "base MiB",
        "retries"
    );
    let per = |d: Duration, n: usize| d.as_secs_f64() * 1e3 / n as f64;
    for (round, n) in counts.into_iter().enumerate() {
        let namespaces: Vec<Value> = names
            .iter()
            .map(|name| json!({"id": unique(&format!("ns-scale-{round}-{name}")), "name": name}))
            .collect();
        tokio.block_on(async {
            for ns in &namespaces {
                call(Method::EnsureNamespace, json!({"namespace": ns})).await;
            }
        });
        let agents: Vec<Agent> = (0..n)
            .map(|i| Agent::new(&namespaces[i % namespaces.len()]))
            .collect();
        let revisions = |number: u64| -> Vec<Value> {
            agents
                .iter()
                .map(|a| a.params(&a.revision(&unique("rev"), number, config(json!({})))))
                .collect()
        };
        let base = status_mib("VmRSS");
        retries.store(0, Ordering::Relaxed);
        reset_peak();
        let first = revisions(1);
        let deploy =
            all(Method::PrepareRevision, first.clone()) + all(Method::ActivateRevision, first);
        // Every Agent serves, on a port of its own on its host.
        let mut serving = 0;
        for host in &rig.hosts {
            let answers = rig.sh_ok(
                host,
                &format!(
                    "for f in {ROOT}/namespaces/*/agents/*/agent.json; do [ -e \"$f\" ] || continue; \
                     p=$(grep -o '\"port\":[0-9]*' \"$f\" | cut -d: -f2); \
                     echo \"$p $(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:$p/readyz)\"; done"
                ),
            );
            let ports: Vec<&str> = answers.lines().collect();
            let distinct: std::collections::BTreeSet<&str> =
                ports.iter().map(|l| l.split(' ').next().unwrap()).collect();
            assert_eq!(
                distinct.len(),
                ports.len(),
                "a port twice on {}: {ports:?}",
                host.name
            );
            assert!(
                ports.iter().all(|l| l.ends_with(" 200")),
                "not serving on {}: {ports:?}",
                host.name
            );
            serving += ports.len();
        }
        assert_eq!(serving, n, "Agents on the hosts");
        let second = revisions(2);
        let cutover =
            all(Method::PrepareRevision, second.clone()) + all(Method::ActivateRevision, second);
        let peak = status_mib("VmHWM");
        let delete = all(
            Method::DeleteNamespace,
            namespaces
                .iter()
                .map(|ns| json!({"namespace": ns}))
                .collect(),
        );
        println!(
            "{n:>7} {:>10.2} {:>14.1} {:>13.2} {:>14.1} {:>11.2} {peak:>10.1} {base:>10.1} {:>8}",
            deploy.as_secs_f64(),
            per(deploy, n),
            cutover.as_secs_f64(),
            per(cutover, n),
            delete.as_secs_f64(),
            retries.load(Ordering::Relaxed),
        );
    }
}
