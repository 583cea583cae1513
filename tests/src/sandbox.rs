//! The sandbox backend as a test drives it: an installation for a target, and
//! `occ-driver-host serve` spoken to over JSON-RPC on stdio, with each
//! request's `$/output` notifications collected in the order they came.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;

use serde_json::{Value, json};

use crate::{component, repo_root};

/// SHA-256 of each remote script in the repository: what an operator approves
/// after auditing `guest-ssh-sandbox/scripts/`.
pub fn approved_scripts() -> BTreeMap<String, String> {
    use sha2::{Digest, Sha256};
    [
        ("preflight", "preflight.sh"),
        ("workspace", "workspace.py"),
        ("exec", "exec.py"),
    ]
    .into_iter()
    .map(|(name, file)| {
        let bytes =
            std::fs::read(repo_root().join("guest-ssh-sandbox/scripts").join(file)).unwrap();
        let sha = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (name.to_string(), sha)
    })
    .collect()
}

/// Whether the suites run with the long-lived workspace worker (the default)
/// or, with `OCC_TEST_WORKSPACE_WORKER=0`, with a run of its own for every
/// operation: `tests/run.sh` runs the sandbox suites both ways.
pub fn workspace_worker() -> bool {
    std::env::var("OCC_TEST_WORKSPACE_WORKER").map_or(true, |v| v != "0")
}

/// Write `dir/installation.yaml` selecting the sandbox component for `ssh`
/// (OpenClaw's `ssh` block), seeds allowed from `local_workspaces`.
pub fn write_installation(
    dir: &Path,
    ssh: Value,
    sandbox: Value,
    local_workspaces: &[&Path],
) -> PathBuf {
    let mut block =
        json!({"mode": "all", "backend": "ssh", "scope": "session", "workspaceAccess": "rw"});
    for (k, v) in sandbox.as_object().into_iter().flatten() {
        block[k] = v.clone();
    }
    block["ssh"] = ssh;
    let mut doc = json!({"drivers": {"sandbox": {
        "component": component("guest_ssh_sandbox"),
        "approvedScripts": approved_scripts(),
        "localWorkspaces": local_workspaces,
        "configuration": {"agents": {"defaults": {"sandbox": block}}},
    }}});
    if !workspace_worker() {
        doc["drivers"]["sandbox"]["workspaceWorker"] = json!(false);
    }
    let path = dir.join("installation.yaml");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// What came back for one request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The result, or the JSON-RPC error object.
    pub outcome: Result<Value, Value>,
    /// `$/output` chunks of the request, in order: (stream, bytes).
    pub output: Vec<(String, Vec<u8>)>,
}

impl Reply {
    /// The result, panicking with the error.
    pub fn ok(self) -> Value {
        self.outcome
            .unwrap_or_else(|e| panic!("expected a result, got {e}"))
    }

    /// The error's `data.code` (the backend's code), panicking on a result.
    pub fn code(&self) -> String {
        match &self.outcome {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e
                .pointer("/data/code")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// The error's message.
    pub fn message(&self) -> String {
        match &self.outcome {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e["message"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// One stream's output, concatenated.
    pub fn stream(&self, name: &str) -> String {
        let bytes: Vec<u8> = self
            .output
            .iter()
            .filter(|(s, _)| s == name)
            .flat_map(|(_, b)| b.clone())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// One `occ-driver-host serve` on stdio.
pub struct Serve {
    /// The host process.
    pub child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    pending: Vec<Value>,
    next_id: u64,
}

impl Serve {
    /// Start serving `installation`, with extra command-line arguments.
    pub fn start(installation: &Path, extra: &[&str]) -> Serve {
        Serve::start_with(installation, extra, &[])
    }

    /// [`Serve::start`] with `env` added to the host's environment.
    pub fn start_with(installation: &Path, extra: &[&str], env: &[(&str, &OsStr)]) -> Serve {
        let extra: Vec<&OsStr> = extra.iter().map(OsStr::new).collect();
        let mut child = crate::spawn_serve_with(installation, &extra, env);
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Serve {
            child,
            stdin,
            lines,
            pending: Vec::new(),
            next_id: 1,
        }
    }

    /// Send a request without waiting; its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").expect("write to serve");
        self.stdin.flush().unwrap();
        id
    }

    /// Ask the host to cancel request `id`.
    pub fn cancel(&mut self, id: u64) {
        let line = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}});
        writeln!(self.stdin, "{line}").expect("write to serve");
        self.stdin.flush().unwrap();
    }

    /// The next message about request `id` (an `$/output` notification or
    /// the answer), keeping the others for later.
    pub fn next_for(&mut self, id: u64) -> Value {
        let about = |v: &Value| v["id"] == json!(id) || v.pointer("/params/id") == Some(&json!(id));
        if let Some(i) = self.pending.iter().position(about) {
            return self.pending.remove(i);
        }
        loop {
            let v = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(600))
                .expect("serve answered within ten minutes");
            if about(&v) {
                return v;
            }
            self.pending.push(v);
        }
    }

    /// Wait for the answer to `id`, collecting its output.
    pub fn wait(&mut self, id: u64) -> Reply {
        let mut output = Vec::new();
        loop {
            let v = self.next_for(id);
            if v["method"] == "$/output" {
                use base64::Engine;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(v["params"]["data"].as_str().unwrap_or_default())
                    .unwrap();
                output.push((
                    v["params"]["stream"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    data,
                ));
                continue;
            }
            if v["method"].is_string() {
                continue;
            }
            let outcome = match v.get("error") {
                Some(e) => Err(e.clone()),
                None => Ok(v["result"].clone()),
            };
            return Reply { outcome, output };
        }
    }

    /// One request and its answer.
    pub fn call(&mut self, method: &str, params: Value) -> Reply {
        let id = self.send(method, params);
        self.wait(id)
    }

    /// Close stdin and wait for the host to exit.
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        self.child.wait().unwrap()
    }
}
