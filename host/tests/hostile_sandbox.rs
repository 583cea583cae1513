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

mod support;
use support::component;

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
/// A directory OpenClaw staged a turn's inbound file into.
const STAGED: &str = "openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-1234567890ab";

fn setup(tokio: &tokio::runtime::Runtime) -> Setup {
    setup_with(tokio, json!({}))
}

/// The same, with `sandbox` merged into `agents.defaults.sandbox`.
fn setup_with(tokio: &tokio::runtime::Runtime, sandbox: Value) -> Setup {
    setup_approving(tokio, sandbox, json!({}))
}

/// The same, with `approvals` replacing entries of `approvedScripts`.
fn setup_approving(tokio: &tokio::runtime::Runtime, sandbox: Value, approvals: Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("a.txt"), "a").unwrap();
    let staged = workspace.join("media/inbound").join(STAGED);
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::write(staged.join("input-photo.png"), "png").unwrap();
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
        // Nothing listens there for good: no reconnecting.
        "reconnectSeconds": 0,
        "configuration": {"agents": {"defaults": {"sandbox": {"ssh": {
            // Port 1 on loopback: nothing listens, so an allowed exec fails to connect.
            "target": "root@127.0.0.1:1",
            "strictHostKeyChecking": false,
        }}}}},
    }}});
    let mut doc = doc;
    for (name, hashes) in approvals.as_object().into_iter().flatten() {
        doc["drivers"]["sandbox"]["approvedScripts"][name] = hashes.clone();
    }
    for (k, v) in sandbox.as_object().into_iter().flatten() {
        doc["drivers"]["sandbox"]["configuration"]["agents"]["defaults"]["sandbox"][k] = v.clone();
    }
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
        self.call_as(tokio, method, "agent:main:main", params)
    }

    /// A call whose scope's session key is `session` (the attack's name).
    fn call_as(
        &self,
        tokio: &tokio::runtime::Runtime,
        method: &str,
        session: &str,
        params: Value,
    ) -> Result<Value, occ_driver_host::CallError> {
        let mut p = params;
        p["scope"] = json!({"workspaceDir": self.workspace, "sessionKey": session});
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
        (
            "shell-args",
            "refused: runShellCommand runs the caller's command and nothing else: the exec header's args",
        ),
        ("other-alias", "unknown-host: elsewhere"),
        (
            "upload-agent",
            "not-granted: the caller named no agent workspace for this call",
        ),
        (
            "upload-skills",
            "not-granted: the caller named no skills workspace for this call",
        ),
        (
            "forged-skills",
            "refused: workspace skills takes its archive from the local skills workspace the host streams, or nothing",
        ),
        (
            "upload-into-exec",
            "refused: the local workspace root streams into workspace unpack, not exec shell",
        ),
        (
            "workspace-into-inputs",
            "refused: the local workspace root streams into workspace unpack, not workspace inputs",
        ),
        (
            "inputs-into-unpack",
            "refused: the local inputs root streams into workspace inputs, not workspace unpack",
        ),
        (
            "forged-inputs",
            "refused: workspace inputs takes its archive from the scope's staged inputs the host streams",
        ),
        (
            "inputs-names",
            "local: ../.. is not the name of an entry of the inputs root",
        ),
        (
            "inputs-unstaged",
            "local: the inputs root holds no entry passwd",
        ),
        (
            "inputs-absent-names",
            "refused: argument 1 of workspace inputs-absent: \"../etc\" is not a list of at most 256 staged-input directory names",
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
        "refused: readFile may not run exec exec (it may run: describe, stage, unpack, publish, discard, skills, inputs-absent, inputs, read)"
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
    // A local-workspace refusal names the root as the WIT spells it.
    let mut roots: Vec<&str> = records
        .iter()
        .filter(|r| r["event"] == "refused" && r["capability"] == "local-workspace")
        .filter_map(|r| r["root"].as_str())
        .collect();
    roots.sort_unstable();
    roots.dedup();
    assert_eq!(roots, ["agent", "inputs", "skills"], "{audit}");
    assert_eq!(begun.len(), 1, "{begun:?}");
    assert_eq!(begun[0]["argv"][3], "workspace");
    // It ran with the host's envelope (long: audited as its length and
    // SHA-256) before the component's arguments.
    assert!(begun[0]["argv"][4]["sha256"].is_string(), "{}", begun[0]);
    assert_eq!(begun[0]["argv"][5], "describe");
}

/// `approvedScripts` may name several hashes of one script (a rollout); a
/// list in which neither is the script's approves nothing: its run is
/// refused before any connection, naming the script.
#[test]
fn a_list_of_hashes_without_the_shipped_ones_approves_nothing() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let hash = |text: &str| -> String {
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let s = setup_approving(
        &tokio,
        json!({}),
        json!({"workspace": [hash("an older workspace.py"), hash("a newer workspace.py")]}),
    );
    // The honest run of the workspace script the attack guest makes.
    let got = s.attack(&tokio, "approved");
    assert!(
        got.starts_with("refused: ") && got.contains("workspace"),
        "{got}"
    );
    let audit = std::fs::read_to_string(&s.audit).unwrap();
    assert!(
        !audit.lines().any(|l| l.contains("\"event\":\"begin\"")),
        "a run began: {audit}"
    );
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

/// One attack per field and per operation, each from a method of the
/// caller's choosing: refused before any connection, and audited with the
/// reason. The component carries the approved scripts byte for byte; what it
/// asks them to do is the attack.
#[test]
fn every_field_and_operation_is_refused_before_any_connection() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let file = json!({"filePath": "a.txt"});
    let write = json!({"filePath": "a.txt", "text": "x"});
    let echo = json!({"command": "echo hi"});
    // (workspaceAccess, method, params, attack, the refusal)
    let cases: &[(&str, &str, &Value, &str, &str)] = &[
        (
            "rw",
            "removeRuntime",
            &json!({}),
            "root-in-argv",
            "workspace remove-runtime takes 0 arguments, not 2: the workspace root, the runtime and the mounts are the host's",
        ),
        (
            "rw",
            "describeRuntime",
            &json!({}),
            "other-runtime",
            "workspace describe takes 0 arguments, not 2",
        ),
        (
            "rw",
            "ensureRuntime",
            &json!({}),
            "other-stage",
            "argument 1 of workspace stage: \"openclaw-ssh-victim-1.bootstrap-00000000000000000000000000000000\" is not a stage of this scope's runtime",
        ),
        (
            "rw",
            "readFile",
            &file,
            "agent-mount",
            "argument 1 of workspace read: \"agent\" is not a mount of this scope (it has workspace)",
        ),
        (
            "ro",
            "writeFile",
            &write,
            "write",
            "workspace write would change the workspace mount, which workspaceAccess makes read-only",
        ),
        (
            "rw",
            "readFile",
            &file,
            "write",
            "readFile may not run workspace write",
        ),
        (
            "rw",
            "writeFile",
            &write,
            "remove-runtime",
            "writeFile may not run workspace remove-runtime",
        ),
        (
            "rw",
            "stat",
            &file,
            "remove-runtime",
            "stat may not run workspace remove-runtime",
        ),
        (
            "rw",
            "describeRuntime",
            &json!({}),
            "stage",
            "describeRuntime may not run workspace stage",
        ),
        (
            "rw",
            "removeRuntime",
            &json!({}),
            "stage",
            "removeRuntime may not run workspace stage",
        ),
        (
            "rw",
            "ensureRuntime",
            &json!({}),
            "unpack-unstreamed",
            "workspace unpack takes its archive from the local workspace the host streams",
        ),
        (
            "rw",
            "readFile",
            &file,
            "preflight",
            "readFile may not run preflight preflight",
        ),
        (
            "rw",
            "ensureRuntime",
            &json!({}),
            "preflight",
            "ensureRuntime may not run preflight preflight",
        ),
        (
            "rw",
            "describeRuntime",
            &json!({}),
            "forged-envelope",
            "is not an operation of the workspace script",
        ),
        (
            "rw",
            "stat",
            &file,
            "serve",
            "\"--serve\" is not an operation of the workspace script",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-env",
            "exec runs the caller's command and nothing else: the exec header's env is not the caller's",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-workdir",
            "exec runs the caller's command in the caller's workdir (workspace/), not in \"workspace\"/\"src\"",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-args",
            "the exec header's args is not the caller's",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-command",
            "the exec header's command is not the caller's",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-stdin",
            "the exec header's stdin is not the caller's",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-timeout",
            "the exec script's time limit \"4294967295\" ms is not within the host's bound of 86400000 ms",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-nonce",
            "the exec header's nonce must be 32 lowercase hex digits",
        ),
        (
            "rw",
            "exec",
            &echo,
            "exec-tty",
            "the exec header carries \"tty\", which the caller did not ask for",
        ),
    ];
    for access in ["rw", "ro"] {
        let s = setup_with(
            &tokio,
            json!({"scope": "session", "workspaceAccess": access}),
        );
        let mut refusals = 0;
        for (_, method, params, attack, expected) in cases.iter().filter(|c| c.0 == access) {
            let e = s
                .call_as(&tokio, method, attack, (*params).clone())
                .unwrap_err();
            assert_eq!(e.code, "attack", "{method} {attack}: {e:?}");
            assert!(
                e.message.starts_with("refused: ") && e.message.contains(expected),
                "{method} {attack}: expected {expected:?}, got {:?}",
                e.message
            );
            refusals += 1;
            // The refusal is audited, with the reason, and nothing began.
            let audit = std::fs::read_to_string(&s.audit).unwrap();
            let records: Vec<Value> = audit
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let last = records
                .iter()
                .rev()
                .find(|r| r["event"] == "refused")
                .unwrap();
            assert_eq!(last["method"], *method, "{last}");
            assert!(
                last["message"].as_str().unwrap().contains(expected),
                "{method} {attack}: {last}"
            );
            assert_eq!(
                records.iter().filter(|r| r["event"] == "begin").count(),
                0,
                "{method} {attack} reached the transport"
            );
            assert_eq!(
                records.iter().filter(|r| r["event"] == "refused").count(),
                refusals
            );
        }
    }
    // What the method may run, with its own arguments, gets as far as the
    // (absent) target: a stage of the scope's own runtime, the caller's own
    // command, the caller's own script with its arguments.
    let s = setup_with(&tokio, json!({"scope": "session", "workspaceAccess": "rw"}));
    for (method, params, attack) in [
        ("ensureRuntime", json!({}), "stage"),
        (
            "exec",
            json!({"command": "echo hi", "env": {"A": "b"}, "stdinText": "in"}),
            "exec-honest",
        ),
    ] {
        let e = s.call_as(&tokio, method, attack, params).unwrap_err();
        assert!(
            e.message.starts_with("connect: "),
            "{method} {attack}: {}",
            e.message
        );
    }
    let audit = std::fs::read_to_string(&s.audit).unwrap();
    let begun: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["event"] == "begin")
        .collect();
    assert_eq!(begun.len(), 2, "{audit}");
    for (b, (script, op)) in begun.iter().zip([("workspace", "stage"), ("exec", "exec")]) {
        assert_eq!(
            (&b["argv"][3], &b["argv"][5]),
            (&json!(script), &json!(op)),
            "{b}"
        );
    }
}

/// The hostile guest opened with `ssh.command` set to `command`.
fn open_with_command(
    dir: &Path,
    command: &str,
) -> Result<SandboxBackend, occ_driver_host::LoadError> {
    let doc = json!({"drivers": {"sandbox": {
        "component": component("sandbox_hostile_guest"),
        "localWorkspaces": [dir],
        "configuration": {"agents": {"defaults": {"sandbox": {"ssh": {
            "target": "root@127.0.0.1:1",
            "strictHostKeyChecking": false,
            "command": command,
        }}}}},
    }}});
    let path = dir.join("installation.yaml");
    std::fs::write(&path, doc.to_string()).unwrap();
    let installation = SandboxInstallation::load(&path, None).unwrap();
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    SandboxBackend::open(
        runtime,
        installation,
        &BackendOptions {
            audit_log: Some(dir.join("audit.jsonl")),
            ..BackendOptions::default()
        },
    )
}

/// The client is the host's to choose: a component that accepts any
/// `ssh.command` (the hostile guest validates nothing) still gets a backend
/// only when the host found an OpenSSH client there, and the program that
/// runs is the one the host checked and audited, never one the component
/// names (it names only the target's alias).
#[test]
fn the_host_alone_picks_the_ssh_client() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let _guard = tokio.enter();
    let dir = tempfile::tempdir().unwrap();
    for command in ["/bin/true", "/bin/sh", "/nonexistent/ssh", "sh"] {
        let e = open_with_command(dir.path(), command)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("agents.defaults.sandbox.ssh.command: ") && e.contains(command),
            "{command}: {e}"
        );
        // Refused before anything was loaded or audited.
        assert!(!dir.path().join("audit.jsonl").exists(), "{command}");
    }
    let system = std::process::Command::new("sh")
        .args(["-c", "command -v ssh"])
        .output()
        .unwrap();
    let copy = dir.path().join("named-ssh");
    std::fs::copy(String::from_utf8(system.stdout).unwrap().trim(), &copy).unwrap();
    let backend = open_with_command(dir.path(), copy.to_str().unwrap()).unwrap();
    assert_eq!(backend.ssh().grant().client.program, copy);
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let load: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["event"] == "load")
        .expect("a load record");
    let client = &load["sshClient"];
    assert_eq!(client["command"], json!(copy));
    assert_eq!(client["program"], json!(copy));
    assert!(
        client["version"].as_str().unwrap().starts_with("OpenSSH_"),
        "{client}"
    );
}
