//! The operator CLI with the sandbox component; no test host needed.

use std::path::{Path, PathBuf};

use occ_e2e::sandbox::{approved_scripts, write_installation};
use occ_e2e::{component, run_host};
use serde_json::{Value, json};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An installation in `dir` of a sandbox on a documentation address (never
/// reached), with `dir` its one local workspace.
fn unreachable_installation(dir: &Path) -> PathBuf {
    write_installation(dir, json!({"target": "me@192.0.2.1:22"}), json!({}), &[dir])
}

#[test]
fn inspect_shows_the_world_and_each_script_it_ships() {
    let out = run_host(&[
        "inspect",
        component("guest_ssh_sandbox").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["world"], "occ:compute/ssh-sandbox-backend@0.3.0");
    assert_eq!(v["exports"], json!(["occ:compute/sandbox-backend@0.2.0"]));
    // The scripts it ships are the repository's, byte for byte.
    let shipped: Value = v["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["sha256"].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into();
    assert_eq!(shipped, serde_json::to_value(approved_scripts()).unwrap());
    for i in v["imports"].as_array().unwrap() {
        assert_eq!(i["granted"], true, "{i}");
        let name = i["name"].as_str().unwrap();
        assert!(
            !name.starts_with("wasi:filesystem") && !name.starts_with("wasi:sockets"),
            "{name}"
        );
    }
}

#[test]
fn check_names_unapproved_scripts_and_the_line_to_add() {
    let dir = tempfile::tempdir().unwrap();
    let inst = unreachable_installation(dir.path());
    let out = run_host(&["check", inst.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("sandbox backend occ-ssh on me@192.0.2.1:22"),
        "{stdout}"
    );
    for name in ["preflight", "workspace", "exec"] {
        assert!(
            stdout.contains(&format!("script {name} ")) && stdout.contains(": approved"),
            "{stdout}"
        );
    }
    // Unapproved: the line to add names every script.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
    doc["drivers"]["sandbox"]["approvedScripts"] = json!({});
    std::fs::write(&inst, doc.to_string()).unwrap();
    let stdout = text(&run_host(&["check", inst.to_str().unwrap()]).stdout);
    assert!(stdout.contains("NOT approved"), "{stdout}");
    assert!(stdout.contains("approvedScripts: {exec: \""), "{stdout}");
    // A configuration the component refuses: exit 65, naming the key path.
    doc["drivers"]["sandbox"]["configuration"]["agents"]["defaults"]["sandbox"]["bogus"] = json!(1);
    std::fs::write(&inst, doc.to_string()).unwrap();
    let out = run_host(&["check", inst.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65));
    assert!(
        text(&out.stderr).contains("agents.defaults.sandbox.bogus: unknown key"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn call_refuses_a_local_workspace_outside_the_installation() {
    let dir = tempfile::tempdir().unwrap();
    let inst = unreachable_installation(dir.path());
    let params = json!({"scope": {"workspaceDir": "/etc"}}).to_string();
    let out = run_host(&[
        "call",
        "ensureRuntime",
        "-i",
        inst.to_str().unwrap(),
        "--json",
        "-p",
        &params,
    ]);
    assert_eq!(out.status.code(), Some(65));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "invalid-params");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("/etc is outside the local workspaces"),
        "{v}"
    );
    // A method of no world is a usage error.
    let out = run_host(&["call", "ensureRuntim", "-i", inst.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("sandbox backends: validateConfiguration"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_sandbox_cannot_be_recorded_or_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let inst = unreachable_installation(dir.path());
    let replay = dir.path().join("replay.jsonl");
    std::fs::write(&replay, "").unwrap();
    let out = run_host(&[
        "--ssh-replay",
        replay.to_str().unwrap(),
        "call",
        "validateConfiguration",
        "-i",
        inst.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot hold"),
        "{}",
        text(&out.stderr)
    );
}

/// `resolveWorkdir` answers where a scope lives on the target from the
/// settings and the scope alone: a target nothing answers at is never asked,
/// the installation may come on stdin (it can carry key material), a scope
/// key names its runtime as OpenClaw's does, and a scope the layout refuses
/// is an error naming the scope.
#[test]
fn resolve_workdir_answers_without_the_target() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let inst = write_installation(
        dir.path(),
        json!({"target": "me@192.0.2.1:22", "workspaceRoot": "/srv/sandboxes/"}),
        json!({}),
        &[dir.path()],
    );
    // `call resolveWorkdir --json` with `args`, `input` on its stdin.
    let resolve = |args: &[&str], input: &[u8]| {
        let mut child = std::process::Command::new(occ_e2e::host_binary())
            .args(["call", "resolveWorkdir", "--json"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input).unwrap();
        drop(pipe);
        child.wait_with_output().unwrap()
    };
    let call = |installation: &str, params: &Value, stdin: Option<&[u8]>| {
        resolve(
            &["-i", installation, "-p", &params.to_string()],
            stdin.unwrap_or_default(),
        )
    };
    let workspace = dir.path().join("ws");
    let scope = json!({"scope": {"workspaceDir": workspace, "scopeKey": "agent:main:abc"}});
    let out = call(inst.to_str().unwrap(), &scope, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({
            "runtimeId": "openclaw-ssh-agent-main-abc-c2c3da17",
            "runtimeRoot": "/srv/sandboxes/openclaw-ssh-agent-main-abc-c2c3da17",
            "workdir": "/srv/sandboxes/openclaw-ssh-agent-main-abc-c2c3da17/workspace",
            "agentWorkdir": null,
            "configLabel": "me@192.0.2.1:22",
        })
    );
    // The same from an installation on stdin.
    let doc = std::fs::read(&inst).unwrap();
    let out = call("/dev/stdin", &scope, Some(&doc));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), v);
    // A local directory with a control character has no layout: refused,
    // naming the scope.
    let out = call(
        inst.to_str().unwrap(),
        &json!({"scope": {"workspaceDir": "/tmp/a\u{1}b"}}),
        None,
    );
    assert_eq!(out.status.code(), Some(65));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["code"], "invalid-params");
    assert!(
        e["message"].as_str().unwrap().contains("params.scope"),
        "{e}"
    );
    // Both on stdin, the installation and then the params: the same answer,
    // and nothing of the scope on the command line.
    let both = |input: &[u8]| resolve(&["-i", "/dev/stdin", "-p", "@-"], input);
    let installation: Value = serde_json::from_slice(&doc).unwrap();
    let out = both(format!("{installation}\n{scope}\n").as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), v);
    // Anything but exactly those two objects is refused, naming what is wrong.
    for (input, says) in [
        (format!("{installation}"), "params object must follow"),
        (
            format!("{installation}{scope}{scope}"),
            "more than the installation",
        ),
        (format!("{scope}"), "params object must follow"),
        (format!("[1] {scope}"), "comes first"),
        (format!("{installation} [2]"), "params object must follow"),
        (format!("{installation} {{"), "params are not JSON"),
    ] {
        let out = both(input.as_bytes());
        assert!(!out.status.success(), "{input}");
        assert!(
            text(&out.stderr).contains(says),
            "{input}: {}",
            text(&out.stderr)
        );
    }
}
