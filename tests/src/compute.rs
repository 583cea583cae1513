//! Deploying with a compute component through the host binary: an
//! installation on rig hosts, one-shot calls, and OCC-shaped Agents and
//! revisions. Shared by the end-to-end and hostile suites.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::rig::{Host, Rig};
use crate::{component, repo_root, run_host, spawn_serve, write_installation};

/// The runtime root the compute suites deploy under.
pub const ROOT: &str = "/var/lib/openclaw-enterprise";
/// The gateway port range of [`ROOT`].
pub const PORTS: (u16, u16) = (18800, 18899);
/// The unit directory the compute suites deploy into.
pub const UNIT_DIR: &str = "/etc/systemd/system";

/// The first 12 hex digits of SHA-256 of `s`: the spec's nsHash, agentHash, revHash.
pub fn hash12(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..12]
        .to_string()
}

/// `<prefix>-<pid>-<nanos>`: an ID no other run shares.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// An installation of a compute component on rig hosts, and its audit log.
pub struct Deployment {
    _dir: tempfile::TempDir,
    /// The installation file.
    pub installation: PathBuf,
    /// The audit log every call appends to.
    pub audit: PathBuf,
}

impl Deployment {
    /// An installation of the driver component mapping each `(namespace name,
    /// host)` pair.
    pub fn new(names: &[(&str, &Host)], known_hosts: Option<&Path>) -> Deployment {
        Deployment::of("guest_ssh_driver", names, known_hosts, ROOT, PORTS)
    }

    /// Like [`Deployment::new`], for the component built as `component_name`,
    /// the runtime root `root` and the gateway port range `ports`.
    pub fn of(
        component_name: &str,
        names: &[(&str, &Host)],
        known_hosts: Option<&Path>,
        root: &str,
        ports: (u16, u16),
    ) -> Deployment {
        let rig = Rig::load();
        let dir = tempfile::tempdir().unwrap();
        let mut hosts = serde_json::Map::new();
        for (name, host) in names {
            hosts.insert(
                name.to_string(),
                json!({"address": host.address, "port": host.port, "user": "root", "nodePath": rig.node, "openclawPath": rig.openclaw}),
            );
        }
        let configuration = json!({
            "ssh": {
                "identityFile": rig.identity,
                "knownHostsFile": known_hosts.unwrap_or(&rig.known_hosts),
                "connectTimeoutSeconds": 5,
            },
            "hosts": hosts,
            "runtime": {
                "nodePath": rig.node, "openclawPath": rig.openclaw, "user": "openclaw",
                "root": root, "systemdUnitDirectory": UNIT_DIR,
            },
            "network": {"gatewayPortRange": {"start": ports.0, "end": ports.1}},
        });
        let installation =
            write_installation(dir.path(), &component(component_name), &configuration);
        let audit = dir.path().join("audit.jsonl");
        Deployment {
            _dir: dir,
            installation,
            audit,
        }
    }

    /// One `occ-driver-host call`; returns the exit status and the JSON printed.
    pub fn call(&self, method: &str, params: Value) -> (i32, Value) {
        self.call_with(method, params, &[])
    }

    /// Like [`Deployment::call`] with extra command-line arguments.
    pub fn call_with(&self, method: &str, params: Value, extra: &[&str]) -> (i32, Value) {
        let mut params = params.to_string();
        // Linux takes at most 128 KiB in one argument: a larger document
        // goes by file, as `@<file>`.
        if params.len() > 64 << 10 {
            let file = self._dir.path().join("params.json");
            std::fs::write(&file, &params).unwrap();
            params = format!("@{}", file.display());
        }
        let mut args = vec![
            "call",
            method,
            "--installation",
            self.installation.to_str().unwrap(),
            "--audit-log",
            self.audit.to_str().unwrap(),
            "--json",
            "--params",
            &params,
        ];
        args.extend_from_slice(extra);
        let out = run_host(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(&stdout).unwrap_or_else(|_| {
            panic!(
                "{method}: not JSON: {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), v)
    }

    /// This installation with `runtime.openclawPath` (and each host's) set to
    /// `entrypoint`: how an operator points hosts at another gateway.
    pub fn with_entrypoint(&self, entrypoint: &str) -> Deployment {
        let text = std::fs::read_to_string(&self.installation).unwrap();
        let rig = Rig::load();
        let dir = tempfile::tempdir().unwrap();
        let installation = dir.path().join("installation.yaml");
        std::fs::write(&installation, text.replace(&rig.openclaw, entrypoint)).unwrap();
        let audit = dir.path().join("audit.jsonl");
        Deployment {
            _dir: dir,
            installation,
            audit,
        }
    }

    /// [`Deployment::call`], insisting on success.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let (code, v) = self.call(method, params);
        assert_eq!(code, 0, "{method} failed: {v}");
        v
    }
}

/// An Agent of one Namespace, as OCC would bind it.
pub struct Agent {
    /// Its Namespace, as OCC passes it.
    pub namespace: Value,
    /// Its id.
    pub id: String,
    /// Its ServicePrincipal.
    pub sp: String,
}

impl Agent {
    /// A new Agent of `namespace`.
    pub fn new(namespace: &Value) -> Agent {
        Agent {
            namespace: namespace.clone(),
            id: unique("agent"),
            sp: unique("sp"),
        }
    }
    /// OCC's `ComputeAgentBinding`.
    pub fn binding(&self) -> Value {
        json!({"namespace": self.namespace, "agent": {
            "id": self.id, "namespaceId": self.namespace["id"], "name": "agent",
            "servicePrincipalId": self.sp,
        }})
    }
    /// OCC's `AgentRevision` of this Agent.
    pub fn revision(&self, id: &str, number: u64, configuration: Value) -> Value {
        // OCC's AgentRevision, as its contracts type it.
        json!({
            "id": id, "namespaceId": self.namespace["id"], "agentId": self.id, "revision": number,
            "backendId": null, "configurationId": "cfg", "configurationKind": "agent",
            "configurationGeneration": number,
            "harness": {"id": "openclaw", "mode": "embedded", "version": "2026.9.6"},
            "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
            "harnessAuth": {"method": "runtime"},
            "configuration": configuration,
            "servicePrincipalId": self.sp, "createdAt": "2026-11-30T00:00:00.000Z",
        })
    }
    /// The params of a one-shot revision call.
    pub fn params(&self, revision: &Value) -> Value {
        json!({"revision": revision, "binding": self.binding()})
    }
    /// Its directory on the host.
    pub fn dir(&self) -> String {
        self.dir_in(ROOT)
    }
    /// Its directory on a host whose data root is `root`.
    pub fn dir_in(&self, root: &str) -> String {
        format!(
            "{root}/namespaces/{}/agents/{}",
            hash12(self.namespace["id"].as_str().unwrap()),
            hash12(&self.id)
        )
    }
    /// Its unit's name.
    pub fn unit(&self) -> String {
        format!("openclaw-enterprise-gateway-{}.service", hash12(&self.id))
    }
    /// Its account's name.
    pub fn account(&self) -> String {
        format!(
            "openclaw-{}",
            hash12(&format!(
                "{}:{}",
                self.namespace["id"].as_str().unwrap(),
                self.id
            ))
        )
    }
}

/// A JSON marker on `host`.
pub fn marker(rig: &Rig, host: &Host, path: &str) -> Value {
    serde_json::from_str(&rig.sh_ok(host, &format!("cat {path}"))).unwrap()
}

/// A native configuration: local gateway mode plus `extra`.
pub fn config(extra: Value) -> Value {
    let mut c = json!({"gateway": {"mode": "local"}});
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

/// Removes what runs of a test left under `/var/lib/<prefix>-*` on a host
/// (units, accounts, roots), when created and again when dropped, however the
/// test ends: a gateway left by a failed run would otherwise keep serving (or
/// restarting) and hold ports of later runs.
pub struct Sweep<'a> {
    rig: &'a Rig,
    host: &'a Host,
    prefix: &'a str,
}

impl<'a> Sweep<'a> {
    /// Sweep now, and when the value is dropped.
    pub fn roots(rig: &'a Rig, host: &'a Host, prefix: &'a str) -> Sweep<'a> {
        let sweep = Sweep { rig, host, prefix };
        sweep.run();
        sweep
    }

    fn run(&self) {
        let prefix = self.prefix;
        self.rig.sh_ok(
            self.host,
            &format!(
                "for root in /var/lib/{prefix}-*; do [ -d \"$root\" ] || continue; \
                   for dir in \"$root\"/namespaces/*/agents/*; do [ -d \"$dir\" ] || continue; \
                     unit=openclaw-enterprise-gateway-$(basename \"$dir\").service; \
                     systemctl disable --now \"$unit\" >/dev/null 2>&1; rm -f {UNIT_DIR}/\"$unit\"; done; \
                   for marker in \"$root\"/accounts/*.json; do [ -e \"$marker\" ] || continue; \
                     acct=$(basename \"$marker\" .json); pkill -KILL -u \"$acct\"; userdel \"$acct\"; \
                     groupdel \"$acct\"; sed -i \"/^$acct\\$/d\" /etc/cron.deny; done 2>/dev/null; \
                   rm -rf \"$root\"; done; systemctl daemon-reload; rm -f /root/occ-hostile"
            ),
        );
    }
}

impl Drop for Sweep<'_> {
    fn drop(&mut self) {
        self.run();
    }
}

/// Installs the stand-in gateway (`tests/rig/stand-in-gateway.mjs`) on `host` as
/// `mode` (`ready`, `unavailable` or `exits`) and returns its path there: an
/// entrypoint the unit runs as it runs OpenClaw's.
pub fn stand_in(rig: &Rig, host: &Host, mode: &str) -> String {
    let source = std::fs::read(repo_root().join("tests/rig/stand-in-gateway.mjs")).unwrap();
    let path = format!("/opt/occ-stand-in/{mode}.mjs");
    rig.sh_input(
        host,
        &format!(
            "mkdir -p /opt/occ-stand-in && cat > {path}.new && chmod 0644 {path}.new && mv {path}.new {path}"
        ),
        &source,
    );
    path
}

type Waiters = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Value, Value>>>>>;

/// A controller of one `occ-driver-host serve` process, as OCC's worker is: it
/// sends concurrent JSON-RPC calls from any thread, answers every hook request
/// `hooks/*` as "not selected", and sees each `$/progress` notification.
pub struct Controller {
    /// The host process.
    pub child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    waiters: Waiters,
    next: AtomicU64,
}

/// Sees `(call id, progress params)` for each `$/progress` notification.
pub type OnProgress = Box<dyn Fn(u64, &Value) + Send>;

impl Controller {
    /// Start `serve` for `installation`, appending to `audit`.
    pub fn start(installation: &Path, audit: &Path, on_progress: Option<OnProgress>) -> Controller {
        let mut child = spawn_serve(installation, &["--audit-log".as_ref(), audit.as_os_str()]);
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let stdout = child.stdout.take().unwrap();
        let waiters: Waiters = Arc::default();
        let (answers, hooks) = (waiters.clone(), stdin.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(method) = v["method"].as_str() {
                    if method == "$/progress"
                        && let (Some(f), Some(id)) = (&on_progress, v["params"]["id"].as_u64())
                    {
                        f(id, &v["params"]);
                    }
                    if method.starts_with("hooks/") {
                        let answer = json!({"jsonrpc": "2.0", "id": v["id"],
                            "error": {"code": -32601, "message": "no hook selected"}});
                        if let Some(stdin) = hooks.lock().unwrap().as_mut() {
                            let _ = writeln!(stdin, "{answer}").and_then(|_| stdin.flush());
                        }
                    }
                    continue;
                }
                let Some(id) = v["id"].as_u64() else { continue };
                if let Some(tx) = answers.lock().unwrap().remove(&id) {
                    let outcome = match v.get("error") {
                        Some(e) => Err(e.clone()),
                        None => Ok(v["result"].clone()),
                    };
                    let _ = tx.send(outcome);
                }
            }
            // The host is gone: every call still waiting ends.
            answers.lock().unwrap().clear();
        });
        Controller {
            child,
            stdin,
            waiters,
            next: AtomicU64::new(1),
        }
    }

    /// Send `method` and return its id without waiting, and the receiver of its answer.
    pub fn send(&self, method: &str, params: Value) -> (u64, mpsc::Receiver<Result<Value, Value>>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.waiters.lock().unwrap().insert(id, tx);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // A host that died answers nothing; the receiver then ends empty.
        if let Some(stdin) = self.stdin.lock().unwrap().as_mut() {
            let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
        }
        (id, rx)
    }

    /// One call and its answer (`Err` with the JSON-RPC error, or `null` when the
    /// host died first).
    pub fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let (_, rx) = self.send(method, params);
        rx.recv_timeout(Duration::from_secs(600))
            .unwrap_or(Err(Value::Null))
    }

    /// [`Controller::call`], insisting on success.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        self.call(method, params)
            .unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    /// Close stdin and wait for the host process to exit.
    pub fn close(mut self) {
        self.stdin.lock().unwrap().take();
        let _ = self.child.wait();
    }
}

/// Every one of `calls` spawned at once on `tokio` and each awaited: the wall
/// time, from the first spawn to the last answer.
pub fn all_at_once<F>(
    tokio: &tokio::runtime::Runtime,
    calls: impl IntoIterator<Item = F>,
) -> Duration
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let started = std::time::Instant::now();
    tokio.block_on(async {
        let calls: Vec<_> = calls.into_iter().map(tokio::spawn).collect();
        for c in calls {
            c.await.unwrap();
        }
    });
    started.elapsed()
}

/// One call of a benchmark, made again (after 1 s, at most five times) while it
/// fails retryable, as OCC's worker retries such failures (a lock wait past its
/// 30 s bound, when many Agents of one host queue for its lock); `retried` sees
/// each failure that is retried. A permanent failure, or a sixth, panics.
pub async fn call_retrying(
    driver: &occ_driver_host::Driver,
    method: occ_driver_host::Method,
    params: &Value,
    retried: impl Fn(&occ_driver_host::CallError),
) -> Value {
    let mut attempts = 0;
    loop {
        match driver
            .call_json(method, params, occ_driver_host::CallOptions::default())
            .await
        {
            Ok(v) => return v,
            Err(e) if e.failure == occ_driver_host::FailureKind::Retryable && attempts < 5 => {
                attempts += 1;
                retried(&e);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!("{method}: {e:?}"),
        }
    }
}
