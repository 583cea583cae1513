//! The host lock under load: N Agents on **one** host, split between two
//! controllers (two drivers loaded from the same installation, each with its own
//! connections, as two OCC workers are), deployed (prepare, then activate to
//! readiness), cut over to a second revision and deleted one by one, every
//! Agent's call at once. Each helper reports how long it held the host lock and
//! how long it waited for it; the benchmark prints, per operation, the median,
//! p99 and maximum of both, and how many calls waited out the lock's 30 s bound
//! (`lock-timeout`, retryable) and were retried, as OCC's worker retries them.
//!
//! The gateways are the stand-in of `tests/rig/stand-in-gateway.mjs`, as in the
//! `scale` benchmark.
//!
//!   bash tests/rig/up.sh occ-h1 && cargo guests && cargo bench -p occ-e2e --bench lock
//!
//! `OCC_LOCK_AGENTS=100` sets N (default 100).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use occ_driver_host::{Driver, DriverOptions, Installation, Limits, Method, Runtime};
use occ_e2e::compute::{Agent, Sweep, all_at_once, call_retrying, config, stand_in, unique};
use occ_e2e::rig::Rig;
use occ_e2e::{component, write_installation};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

/// Under `/var/lib/occ-scale-*`, which [`Sweep`] clears before and after.
const ROOT: &str = "/var/lib/occ-scale-lock";

/// Lock figures per operation name, in ms: (held, waited).
type Figures = Arc<Mutex<BTreeMap<String, (Vec<u64>, Vec<u64>)>>>;

/// Reads the helper's lock lines out of the driver's log (`host H: OP: lock:
/// host lock acquired after N ms`, `host H: OP: unlock: host lock released
/// after N ms held`).
struct LockLines(Figures);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for LockLines {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "driver" {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let Some((head, text)) = message
            .0
            .split_once(": lock: host lock ")
            .or_else(|| message.0.split_once(": unlock: host lock "))
        else {
            return;
        };
        let op = head.rsplit(": ").next().unwrap_or(head).to_owned();
        let number = |after: &str| -> Option<u64> {
            text.strip_prefix(after)?.split(' ').next()?.parse().ok()
        };
        let mut figures = self.0.lock().unwrap();
        let entry = figures.entry(op).or_default();
        if let Some(ms) = number("released after ") {
            entry.0.push(ms);
        } else if let Some(ms) = number("acquired after ") {
            entry.1.push(ms);
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let figures: Figures = Arc::default();
    tracing::subscriber::set_global_default(Registry::default().with(
        LockLines(figures.clone()).with_filter(
            tracing_subscriber::filter::Targets::new().with_target("driver", tracing::Level::DEBUG),
        ),
    ))
    .unwrap();
    let rig = Rig::load();
    let host = rig.hosts.first().expect("a rig host");
    let n: usize = std::env::var("OCC_LOCK_AGENTS")
        .unwrap_or_else(|_| "100".into())
        .parse()
        .expect("OCC_LOCK_AGENTS: a number");
    let dir = tempfile::tempdir().unwrap();
    let _sweep = Sweep::roots(&rig, host, "occ-scale");
    let entry = stand_in(&rig, host, "ready");
    let configuration = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts, "connectTimeoutSeconds": 5},
        "hosts": {"lock": {"address": host.address, "port": host.port, "user": "root", "openclawPath": entry}},
        "runtime": {"nodePath": rig.node, "openclawPath": "/opt/occ-stand-in/ready.mjs", "user": "lock",
                    "root": ROOT, "systemdUnitDirectory": "/etc/systemd/system"},
        "network": {"gatewayPortRange": {"start": 21000, "end": 21999}},
    });
    let path = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    // Two controllers: two drivers, each with its own masters to the host.
    let controllers: Vec<Arc<Driver>> = (0..2)
        .map(|_| {
            Arc::new(
                Driver::open(
                    runtime.clone(),
                    Installation::load(&path).unwrap(),
                    &DriverOptions::default(),
                )
                .unwrap(),
            )
        })
        .collect();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let retries = Arc::new(AtomicUsize::new(0));
    let timeouts = Arc::new(AtomicUsize::new(0));
    let call = |driver: Arc<Driver>, method: Method, params: Value| {
        let (retries, timeouts) = (retries.clone(), timeouts.clone());
        async move {
            call_retrying(&driver, method, &params, |e| {
                retries.fetch_add(1, Ordering::Relaxed);
                if e.code == "lock-timeout" || e.message.contains("lock-timeout") {
                    timeouts.fetch_add(1, Ordering::Relaxed);
                }
            })
            .await
        }
    };
    // Every Agent's call at once, Agent i through controller i % 2; the wall time.
    let all = |method: Method, params: Vec<Value>| {
        all_at_once(
            &tokio,
            params
                .into_iter()
                .enumerate()
                .map(|(i, p)| call(controllers[i % 2].clone(), method, p)),
        )
    };

    let namespace = json!({"id": unique("ns-lock"), "name": "lock"});
    tokio.block_on(call(
        controllers[0].clone(),
        Method::EnsureNamespace,
        json!({"namespace": namespace}),
    ));
    let agents: Vec<Agent> = (0..n).map(|_| Agent::new(&namespace)).collect();
    let revisions = |number: u64| -> Vec<Value> {
        agents
            .iter()
            .map(|a| a.params(&a.revision(&unique("rev"), number, config(json!({})))))
            .collect()
    };
    let first = revisions(1);
    let second = revisions(2);
    let mut walls = Vec::new();
    walls.push(("prepare", all(Method::PrepareRevision, first.clone())));
    walls.push(("activate", all(Method::ActivateRevision, first)));
    let serving = rig.sh_ok(
        host,
        &format!(
            "for f in {ROOT}/namespaces/*/agents/*/agent.json; do \
             p=$(grep -o '\"port\":[0-9]*' \"$f\" | cut -d: -f2); \
             curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:$p/readyz; done"
        ),
    );
    assert_eq!(
        serving.lines().filter(|l| *l == "200").count(),
        n,
        "Agents serving on {}: {serving}",
        host.name
    );
    walls.push((
        "prepare (2nd)",
        all(Method::PrepareRevision, second.clone()),
    ));
    walls.push(("activate (2nd)", all(Method::ActivateRevision, second)));
    walls.push((
        "delete",
        all(
            Method::DeleteAgentRuntimeCredentials,
            agents.iter().map(Agent::binding).collect(),
        ),
    ));
    let left = rig.sh_ok(
        host,
        &format!("ls {ROOT}/namespaces/*/agents 2>/dev/null | grep -c . || true"),
    );
    assert_eq!(left.trim(), "0", "Agents left on {}", host.name);

    println!(
        "{n} Agents on one host ({}), two controllers; stand-in gateways, not OpenClaw",
        host.name
    );
    for (step, wall) in &walls {
        println!(
            "  {step:<15} {:>8.2} s all, {:>7.1} ms per Agent",
            wall.as_secs_f64(),
            wall.as_secs_f64() * 1e3 / n as f64
        );
    }
    println!(
        "{:<32} {:>6} {:>11} {:>9} {:>9} {:>11} {:>9}",
        "host lock per operation (ms)",
        "holds",
        "held median",
        "held p99",
        "held max",
        "wait median",
        "wait p99"
    );
    let mut figures = figures.lock().unwrap();
    let every = figures
        .values()
        .fold((Vec::new(), Vec::new()), |mut all, (h, w)| {
            all.0.extend(h);
            all.1.extend(w);
            all
        });
    figures.insert("(every operation)".into(), every);
    for (op, (held, waited)) in figures.iter_mut() {
        held.sort_unstable();
        waited.sort_unstable();
        println!(
            "{op:<32} {:>6} {:>11} {:>9} {:>9} {:>11} {:>9}",
            held.len(),
            percentile(held, 50.0),
            percentile(held, 99.0),
            held.last().copied().unwrap_or(0),
            percentile(waited, 50.0),
            percentile(waited, 99.0),
        );
    }
    println!(
        "retried: {} calls, of which {} waited out the 30 s lock bound (lock-timeout)",
        retries.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed)
    );
}
