//! Cost per Agent as the count grows: N Agents prepared concurrently (account,
//! port, snapshot: one helper exec each) across the rig's hosts through one
//! loaded driver, for growing N. Gateways are not started: a real one holds
//! about 750 MB, which bounds activation on this machine, not the driver.
//!
//!   bash tests/rig/up.sh 2 && cargo guest && cargo bench -p occ-e2e --bench scale

use std::sync::Arc;
use std::time::Instant;

use occ_driver_host::{CallOptions, Driver, DriverOptions, Installation, Limits, Method, Runtime};
use occ_e2e::rig::Rig;
use occ_e2e::{component, write_installation};
use serde_json::json;

fn main() {
    let rig = Rig::load();
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..rig.hosts.len()).map(|i| format!("scale{i}")).collect();
    let mut hosts = serde_json::Map::new();
    for (name, host) in names.iter().zip(&rig.hosts) {
        hosts.insert(
            name.clone(),
            json!({"address": host.address, "port": host.port, "user": "root"}),
        );
    }
    let configuration = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts, "connectTimeoutSeconds": 5},
        "hosts": hosts,
        "runtime": {"nodePath": rig.node, "openclawPath": rig.openclaw, "user": "scale",
                    "root": "/var/lib/occ-scale", "systemdUnitDirectory": "/etc/systemd/system"},
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
    let call = |method: Method, params: serde_json::Value| {
        let driver = driver.clone();
        async move {
            driver
                .call_json(method, &params, CallOptions::default())
                .await
        }
    };

    println!(
        "{} hosts; Agents prepared concurrently per round",
        rig.hosts.len()
    );
    println!(
        "{:>7} {:>12} {:>16}",
        "agents", "wall (s)", "per agent (ms)"
    );
    for (round, n) in [1usize, 4, 16, 32].into_iter().enumerate() {
        let namespaces: Vec<_> = names
            .iter()
            .map(|name| json!({"id": format!("ns-scale-{round}-{name}-{}", std::process::id()), "name": name}))
            .collect();
        tokio.block_on(async {
            for ns in &namespaces {
                call(Method::EnsureNamespace, json!({"namespace": ns})).await.unwrap();
            }
            let started = Instant::now();
            let prepares = (0..n).map(|i| {
                let ns = namespaces[i % namespaces.len()].clone();
                let agent = format!("agent-scale-{round}-{i}");
                let sp = format!("sp-{i}");
                let params = json!({
                    "binding": {"namespace": ns, "agent": {"id": agent, "namespaceId": ns["id"], "servicePrincipalId": sp}},
                    "revision": {"id": format!("rev-scale-{round}-{i}"), "namespaceId": ns["id"], "agentId": agent,
                                 "revision": 1, "servicePrincipalId": sp, "configurationKind": "agent",
                                 "configurationGeneration": 1,
                                 "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
                                 "harness": {"id": "openclaw", "version": "2026.9.6", "mode": "embedded"},
                                 "harnessAuth": {"method": "runtime"}, "configuration": {"gateway": {"mode": "local"}}},
                });
                tokio::spawn(call(Method::PrepareRevision, params))
            });
            for p in prepares.collect::<Vec<_>>() {
                let r = p.await.unwrap().unwrap();
                assert_eq!(r["ready"], true);
            }
            let wall = started.elapsed();
            println!("{n:>7} {:>12.2} {:>16.1}", wall.as_secs_f64(), wall.as_secs_f64() * 1e3 / n as f64);
            for ns in &namespaces {
                call(Method::DeleteNamespace, json!({"namespace": ns})).await.unwrap();
            }
        });
    }
}
