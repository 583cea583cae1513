//! A hostile sandbox component against the sandbox world's grants: every
//! attack is refused before any connection, and what the grant allows gets as
//! far as connecting to a target that is not there. Also the caller's side:
//! a local workspace outside the installation's list is refused before the
//! component runs.
//!
//! Needs `cargo guests` (the hostile guest) and python3 (none: nothing runs).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use occ_driver_host::world::ssh_sandbox_backend::installation::SandboxInstallation;
use occ_driver_host::{BackendOptions, Limits, Runtime, SandboxBackend, SandboxCallOptions};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn component(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `cargo guests` first",
        path.display()
    );
    path
}

fn sha(path: &Path) -> String {
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

struct Setup {
    _dir: tempfile::TempDir,
    backend: SandboxBackend,
    workspace: PathBuf,
    audit: PathBuf,
}

/// The hostile guest, its target a closed port, the real scripts approved.
fn setup(tokio: &tokio::runtime::Runtime) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("a.txt"), "a").unwrap();
    let scripts =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../guest-ssh-sandbox/scripts");
    let doc = json!({"drivers": {"sandbox": {
        "component": component("sandbox_hostile_guest"),
        "approvedScripts": {
            "preflight": sha(&scripts.join("preflight.sh")),
            "workspace": sha(&scripts.join("workspace.py")),
            "exec": sha(&scripts.join("exec.py")),
        },
        "localWorkspaces": [dir.path()],
        "configuration": {"agents": {"defaults": {"sandbox": {"ssh": {
            // Port 1 on loopback: nothing listens, so an allowed exec fails to connect.
            "target": "root@127.0.0.1:1",
            "strictHostKeyChecking": false,
        }}}}},
    }}});
    let path = dir.path().join("installation.yaml");
    std::fs::write(&path, doc.to_string()).unwrap();
    let installation = SandboxInstallation::load(&path, None).unwrap();
    let audit = dir.path().join("audit.jsonl");
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let backend = tokio
        .block_on(async {
            SandboxBackend::open(
                runtime,
                installation,
                &BackendOptions {
                    audit_log: Some(audit.clone()),
                    ..BackendOptions::default()
                },
            )
        })
        .unwrap();
    Setup {
        _dir: dir,
        backend,
        workspace,
        audit,
    }
}

impl Setup {
    fn call(
        &self,
        tokio: &tokio::runtime::Runtime,
        method: &str,
        params: Value,
    ) -> Result<Value, occ_driver_host::CallError> {
        let mut p = params;
        p["scope"] = json!({"workspaceDir": self.workspace, "sessionKey": "agent:main:main"});
        tokio.block_on(
            self.backend
                .call_json(method, &p, SandboxCallOptions::default()),
        )
    }

    /// What the guest's attack came back with.
    fn attack(&self, tokio: &tokio::runtime::Runtime, name: &str) -> String {
        let v = self
            .call(tokio, "runShellCommand", json!({"script": name}))
            .unwrap();
        use base64::Engine;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(v["stdout"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    }
}

#[test]
fn every_attack_on_the_grant_is_refused_before_any_connection() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let s = setup(&tokio);
    let refused: &[(&str, &str)] = &[
        (
            "unapproved-script",
            "refused: script \"evil\" is not approved",
        ),
        (
            "tampered-script",
            "refused: script \"workspace\" has SHA-256",
        ),
        (
            "wrong-interpreter",
            "refused: script \"workspace\" runs with python3",
        ),
        (
            "bare-command",
            "refused: on target only [<interpreter>, \"-c\", <approved script>",
        ),
        ("nul-argument", "refused: an argument holds NUL"),
        ("huge-arguments", "refused: 5 arguments of"),
        (
            "huge-stdin",
            "refused: 20971520 bytes of stdin exceed the bound",
        ),
        (
            "other-command",
            "refused: runShellCommand runs the caller's command and nothing else",
        ),
        (
            "exec-mode",
            "refused: runShellCommand may not run exec exec",
        ),
        ("other-alias", "unknown-host: elsewhere"),
        (
            "upload-agent",
            "not-granted: the caller named no agent workspace for this call",
        ),
        (
            "upload-into-exec",
            "refused: a local workspace streams into workspace unpack only, not exec shell",
        ),
        (
            "upload-unapproved",
            "refused: script \"steal\" is not approved",
        ),
    ];
    for (attack, expected) in refused {
        let got = s.attack(&tokio, attack);
        assert!(
            got.starts_with(expected),
            "{attack}: expected {expected:?}, got {got:?}"
        );
    }
    // What the grant allows gets as far as the (absent) target.
    let got = s.attack(&tokio, "approved");
    assert!(got.starts_with("connect: "), "{got}");
    // In an exec call, only the caller's command runs; elsewhere none does.
    let v = s
        .call(&tokio, "exec", json!({"command": "echo hi"}))
        .unwrap();
    assert_eq!(
        v["stdoutTail"],
        "refused: exec runs the caller's command and nothing else: the exec header's command is not the caller's"
    );
    let v = s
        .call(&tokio, "readFile", json!({"filePath": "a.txt"}))
        .unwrap();
    use base64::Engine;
    let got = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(v["data"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        got,
        "refused: readFile may not run exec exec (it may run: describe, stage, unpack, publish, discard, read)"
    );
    // Every refusal is audited, and only the allowed exec reached the transport.
    let audit = std::fs::read_to_string(&s.audit).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refusals = records.iter().filter(|r| r["event"] == "refused").count();
    let begun: Vec<&Value> = records.iter().filter(|r| r["event"] == "begin").collect();
    assert!(refusals > refused.len(), "{refusals} refusals in {audit}");
    assert_eq!(begun.len(), 1, "{begun:?}");
    assert_eq!(begun[0]["argv"][3], "workspace");
    // It ran with the host's envelope (long: audited as its length and
    // SHA-256) before the component's arguments.
    assert!(begun[0]["argv"][4]["sha256"].is_string(), "{}", begun[0]);
    assert_eq!(begun[0]["argv"][5], "describe");
}

#[test]
fn a_local_workspace_outside_the_installation_is_refused() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let s = setup(&tokio);
    for outside in ["/etc", "/tmp", "/"] {
        let p = json!({"script": "approved", "scope": {"workspaceDir": outside}});
        let e = tokio
            .block_on(
                s.backend
                    .call_json("runShellCommand", &p, SandboxCallOptions::default()),
            )
            .unwrap_err();
        assert_eq!(e.code, "invalid-params", "{outside}");
        assert!(
            e.message
                .contains("is outside the local workspaces the installation lists"),
            "{}",
            e.message
        );
    }
    // A link inside an allowed directory that leads out is judged by where it leads.
    let link = s.workspace.parent().unwrap().join("escape");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    let p = json!({"script": "approved", "scope": {"workspaceDir": link}});
    let e = tokio
        .block_on(
            s.backend
                .call_json("runShellCommand", &p, SandboxCallOptions::default()),
        )
        .unwrap_err();
    assert!(e.message.contains("/etc is outside"), "{}", e.message);
}

#[test]
fn record_and_replay_are_refused_for_the_sandbox() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let s = setup(&tokio);
    let inst = SandboxInstallation::load(&s.backend.installation().path, None).unwrap();
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let options = BackendOptions {
        ssh: occ_driver_host::capability::ssh_exec::SshMode::Replay(PathBuf::from("/nonexistent")),
        ..BackendOptions::default()
    };
    let e = SandboxBackend::open(runtime, inst, &options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot hold"), "{e}");
}
