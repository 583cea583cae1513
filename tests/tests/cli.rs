//! The operator CLI against the real built components; no test host needed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use occ_e2e::{
    component, host_binary, repo_root, run_host, spawn_serve, target_dir, write_installation,
};
use serde_json::{Value, json};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `serve --installation <inst> <extra>` with nothing on its stdin: it runs
/// until its input ends (or it refuses to start); what it wrote and its exit.
fn serve_to_the_end(inst: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(host_binary())
        .args(["serve", "--installation", inst.to_str().unwrap()])
        .args(extra)
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `serve --installation <inst> --listen <socket>`, its stdio the test's own.
fn serve_on(inst: &Path, socket: &Path) -> Child {
    Command::new(host_binary())
        .args([
            "serve",
            "--installation",
            inst.to_str().unwrap(),
            "--listen",
            socket.to_str().unwrap(),
        ])
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .spawn()
        .unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The spec's example configuration, from the driver's own fixtures.
fn spec_configuration() -> Value {
    let path = repo_root().join("guest-ssh-driver/tests/fixtures/valid-spec-example.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn inspect_shows_only_granted_imports_for_the_ssh_driver() {
    let out = run_host(&[
        "inspect",
        component("guest_ssh_driver").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The driver runs its helper by name (WIT 0.3.0) and reads an Agent's
    // runtime (0.4.0); the contract it exports is 0.2.0's.
    assert_eq!(v["world"], "occ:compute/ssh-compute-driver@0.4.0");
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
    // The helper the component ships is the repository's, byte for byte.
    let helper = std::fs::read(repo_root().join("helper/helper.js")).unwrap();
    assert_eq!(v["helper"]["sha256"], sha256(&helper));
    assert_eq!(v["helper"]["size"], helper.len());
    let imports = v["imports"].as_array().unwrap();
    assert!(
        imports
            .iter()
            .any(|i| i["name"] == "occ:compute/ssh-exec@0.3.0")
    );
    for i in imports {
        assert_eq!(i["granted"], true, "{i}");
        let name = i["name"].as_str().unwrap();
        assert!(
            !name.starts_with("wasi:filesystem") && !name.starts_with("wasi:sockets"),
            "{name}"
        );
    }
    assert_eq!(
        v["exports"],
        json!([
            "occ:compute/compute-driver@0.2.0",
            "occ:compute/agent-runtime@0.4.0"
        ])
    );

    // A component built for 0.2.0 (it sends the helper itself) is served too.
    let out = run_host(&[
        "inspect",
        component("fault_guest").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["world"], "occ:compute/ssh-compute-driver@0.2.0");
    assert_eq!(v["loadable"], true);
}

#[test]
fn inspect_refuses_the_filesystem_guest_naming_the_import() {
    let out = run_host(&["inspect", component("fs_guest").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("REFUSED wasi:filesystem/types@0.2."),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("refuses to load"),
        "{}",
        text(&out.stderr)
    );
}

/// `check` on the spec's example configuration passes; each invalid fixture of
/// the driver's own suite is refused with its key path, exit status 65.
#[test]
fn check_validates_installations_without_touching_hosts() {
    let fixtures = repo_root().join("guest-ssh-driver/tests/fixtures");
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("cases.json")).unwrap())
            .unwrap();
    let driver = component("guest_ssh_driver");
    let mut refused = 0;
    for case in cases.as_array().unwrap() {
        let file = case["file"].as_str().unwrap();
        let configuration: Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures.join(file)).unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let inst = write_installation(dir.path(), &driver, &configuration);
        let out = run_host(&["check", inst.to_str().unwrap(), "--json"]);
        if case["valid"] == true {
            assert!(out.status.success(), "{file}: {}", text(&out.stderr));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["warnings"], json!([]), "{file}");
        } else {
            assert_eq!(out.status.code(), Some(65), "{file}: {}", text(&out.stderr));
            let stderr = text(&out.stderr);
            let path = case["path"].as_str().unwrap();
            assert!(
                stderr.contains(path),
                "{file}: {path} not named in {stderr}"
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["failure"], "permanent", "{file}");
            refused += 1;
        }
    }
    assert!(refused >= 10, "only {refused} invalid fixtures checked");
}

#[test]
fn check_names_the_installation_key_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("installation.yaml");
    std::fs::write(
        &path,
        "drivers:\n  compute:\n    id: compute-ssh\n    configuration: {}\n",
    )
    .unwrap();
    let out = run_host(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("installation.yaml: drivers.compute.component: missing"),
        "{stderr}"
    );
}

#[test]
fn help_teaches_with_examples() {
    let out = run_host(&["--help"]);
    let help = text(&out.stdout);
    for needle in [
        "inspect",
        "check",
        "call",
        "serve",
        "Examples:",
        "Exit status",
        "75",
        "65",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
    // An unknown method is a usage error, and the message lists the methods.
    let out = run_host(&["call", "prepare", "--installation", "/nonexistent.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("prepareRevision"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn version_names_the_release_the_wit_packages_served_and_the_commit() {
    let out = run_host(&["--version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    let workspace = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let version = workspace
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    assert!(
        said.starts_with(&format!("occ-driver-host {version}\n")),
        "{said}"
    );
    let head = Command::new("git")
        .current_dir(repo_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    // The commit the binary was built from; a test built from a checkout
    // names that checkout's HEAD.
    let commit = said
        .lines()
        .find_map(|l| l.strip_prefix("commit: "))
        .unwrap_or_else(|| panic!("no commit line: {said}"));
    assert!(
        commit.len() >= 40 && commit.chars().take(40).all(|c| c.is_ascii_hexdigit()),
        "{said}"
    );
    if head.status.success() {
        assert_eq!(&commit[..40], text(&head.stdout).trim(), "{said}");
    }
    for world in [
        "occ:compute@0.2.0",
        "occ:compute@0.3.0",
        "ssh-compute-driver",
        "ssh-sandbox-backend",
    ] {
        assert!(said.contains(world), "--version lacks {world}: {said}");
    }
    // The npm packages carry the same version (cargo xtask dist refuses others).
    for package in [
        "host/node/compute/package.json",
        "host/node/openclaw-plugin/package.json",
    ] {
        let p: Value =
            serde_json::from_str(&std::fs::read_to_string(repo_root().join(package)).unwrap())
                .unwrap();
        assert_eq!(p["version"], version, "{package}");
        assert_eq!(
            p["optionalDependencies"]["occ-driver-host-linux-x64-gnu"], version,
            "{package}"
        );
        assert_eq!(
            p["dependencies"]["occ-driver-host-rpc"], version,
            "{package}"
        );
    }
    let rpc: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("host/node/rpc/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rpc["version"], version, "host/node/rpc/package.json");
}

#[test]
fn inspect_checks_a_component_against_a_release_manifest() {
    let driver = component("guest_ssh_driver");
    let bytes = std::fs::read(&driver).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("manifest.json");
    let write = |sha: &str| {
        std::fs::write(
            &manifest,
            json!({
                "version": "9.9.9", "commit": "abc",
                "binary": {"sha256": "0".repeat(64)},
                "components": [{"file": "guest_ssh_driver.wasm", "sha256": sha}],
            })
            .to_string(),
        )
        .unwrap()
    };
    write(&sha256(&bytes));
    let args = [
        "inspect",
        "--release-manifest",
        manifest.to_str().unwrap(),
        driver.to_str().unwrap(),
    ];
    let out = run_host(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("release    guest_ssh_driver.wasm of occ-driver-host 9.9.9, commit abc"),
        "{said}"
    );
    assert!(
        said.contains("is NOT the release's occ-driver-host"),
        "{said}"
    );
    // One byte of difference: refused, naming the manifest and what it lists.
    write(&"1".repeat(64));
    let out = run_host(&args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "is none of the components of occ-driver-host 9.9.9, commit abc in {}",
            manifest.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("guest_ssh_driver.wasm {}", "1".repeat(64))),
        "{err}"
    );
}

/// A malformed, oversized or unknown message gets a JSON-RPC error and the
/// server goes on answering.
#[test]
fn serve_answers_errors_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let configuration = spec_configuration();
    let inst = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let mut child = spawn_serve(&inst, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |line: &str| -> Value {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    assert_eq!(ask("{not json")["error"]["code"], -32700);
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"preflight\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(17 << 20)
    );
    let v = ask(&huge);
    assert_eq!(v["error"]["code"], -32600);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("exceeds"),
        "{v}"
    );
    let v = ask(r#"{"jsonrpc":"2.0","id":2,"method":"launchMissiles","params":{}}"#);
    assert_eq!(v["error"]["code"], -32601);
    let v = ask(
        r#"{"jsonrpc":"2.0","id":3,"method":"ensureNamespace","params":{"namespace":{"id":"ns"}}}"#,
    );
    assert_eq!(v["result"]["namespaceReady"], false, "{v}");
    assert!(
        v["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("namespace.name: missing"),
        "{v}"
    );
    let v = ask(r#"{"jsonrpc":"2.0","id":4,"method":"validateConfiguration","params":{}}"#);
    assert_eq!(v["id"], 4);
    assert_eq!(v["result"], json!({"warnings": []}), "{v}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `serve --listen` answers on a Unix socket that only its owner can open.
#[test]
fn serve_listens_on_a_private_unix_socket() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let configuration = spec_configuration();
    let inst = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let socket = dir.path().join("driver.sock");
    let mut child = serve_on(&inst, &socket);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "socket never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let ask = |line: &str| -> Value {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    let v = ask(r#"{"jsonrpc":"2.0","id":"a","method":"validateConfiguration","params":{}}"#);
    assert_eq!(v["result"], json!({"warnings": []}), "{v}");
    // A second connection is served independently.
    let v = ask(r#"{"jsonrpc":"2.0","id":"b","method":"validateConfiguration","params":[]}"#);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `check` says whether the component's helper is approved and prints the line
/// an operator adds once it is audited; with the line added, it is approved.
#[test]
fn check_prints_the_pin_line_until_the_helper_is_approved() {
    let dir = tempfile::tempdir().unwrap();
    let inst = write_installation(
        dir.path(),
        &component("guest_ssh_driver"),
        &spec_configuration(),
    );
    // An installation that has not approved any helper yet.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
    doc["drivers"]["compute"]
        .as_object_mut()
        .unwrap()
        .remove("approvedHelpers");
    std::fs::write(&inst, doc.to_string()).unwrap();
    let out = run_host(&["check", inst.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let helper = sha256(&std::fs::read(repo_root().join("helper/helper.js")).unwrap());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("NOT approved"), "{stdout}");
    assert!(
        stdout.contains(&format!("approvedHelpers: [\"{helper}\"]")),
        "{stdout}"
    );
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
    doc["drivers"]["compute"]["approvedHelpers"] = json!([helper]);
    std::fs::write(&inst, doc.to_string()).unwrap();
    let out = run_host(&["check", inst.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&v["helperSha256"], &v["helperApproved"]),
        (&json!(helper), &json!(true))
    );
}

/// The spec's document as written (no `component` key) works with the component
/// from the environment and the document from $OCC_CONFIG_PATH.
#[test]
fn the_installation_and_component_can_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("occ.yaml");
    let doc = json!({"drivers": {"compute": {"id": "compute-ssh", "configuration": spec_configuration()}}});
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = Command::new(host_binary())
        .args(["call", "validateConfiguration"])
        .env("OCC_CONFIG_PATH", &path)
        .env("OCC_DRIVER_COMPONENT", component("guest_ssh_driver"))
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["warnings"], json!([]));
}

/// A component cache under a directory another user can write is refused,
/// naming the directory: an artifact planted there would run as native code.
#[test]
fn a_cache_under_a_writable_parent_is_refused_by_name() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cache = shared.join("cache");
    let out = Command::new(host_binary())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["inspect", component("guest_ssh_driver").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&shared.display().to_string())
            && stderr.contains("another user can change"),
        "{stderr}"
    );
}

/// `serve` validates the whole configuration before it answers anything: an
/// unknown key stops it, naming the key, and nothing is written to stdout (the
/// JSON-RPC channel).
#[test]
fn serve_refuses_to_start_on_an_unknown_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut configuration = spec_configuration();
    configuration["runtime"]["nodepath"] = json!("/usr/bin/node");
    let inst = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let out = serve_to_the_end(&inst, &[]);
    assert_eq!(out.status.code(), Some(65), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("configuration.runtime.nodepath: unknown key"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    // A replay served to a controller would fake effects: refused without --test-mode.
    let out = Command::new(host_binary())
        .args([
            "--ssh-replay",
            "/dev/null",
            "serve",
            "--installation",
            inst.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--test-mode"),
        "{}",
        text(&out.stderr)
    );
}

/// `serve --preflight` probes before it answers anything: a host the installation
/// cannot reach (here its identity file is missing) stops it, naming the file,
/// with nothing written to the JSON-RPC channel. Without the flag the same
/// installation serves.
#[test]
fn serve_with_preflight_refuses_to_start_when_preflight_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut configuration = spec_configuration();
    let missing = dir.path().join("no-such-key");
    configuration["ssh"]["identityFile"] = json!(missing);
    let inst = write_installation(dir.path(), &component("guest_ssh_driver"), &configuration);
    let serve = |extra: &[&str]| serve_to_the_end(&inst, extra);
    let out = serve(&["--preflight"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&missing.display().to_string()),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    // Without --preflight it starts, and ends cleanly when its input does.
    let out = serve(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The Unix socket is never connectable by another user: the socket is 0600
/// from the moment it exists, and even opened up, the server drops a peer of
/// another uid without answering.
#[test]
fn the_unix_socket_serves_no_other_uid() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A directory every user can traverse, so that only the socket's own mode
    // and the peer check stand in the way.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let inst = write_installation(
        dir.path(),
        &component("guest_ssh_driver"),
        &spec_configuration(),
    );
    let socket = dir.path().join("driver.sock");
    let _server = KillOnDrop(serve_on(&inst, &socket));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "socket never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let as_nobody = || {
        // Connect as `nobody`, send a request, print whatever comes back.
        Command::new("runuser")
            .args(["-u", "nobody", "--", "python3", "-c"])
            .arg(
                "import socket,sys\n\
                 s=socket.socket(socket.AF_UNIX)\n\
                 s.connect(sys.argv[1])\n\
                 s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"validateConfiguration\",\"params\":{}}\\n')\n\
                 s.settimeout(20)\n\
                 print(repr(s.recv(4096)))",
            )
            .arg(&socket)
            .output()
            .unwrap()
    };
    let out = as_nobody();
    assert!(
        !out.status.success(),
        "nobody connected: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    // Opened up by hand, the socket still serves only its owner's uid.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // Dropped: an empty read, or a reset or broken pipe, depending on timing;
    // never an answer.
    assert!(
        stdout.trim() == "b''"
            || stderr.contains("ConnectionResetError")
            || stderr.contains("BrokenPipeError"),
        "another uid was answered: {stdout} {stderr}"
    );
}

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn schema_prints_the_components_closed_schema_which_the_node_package_ships() {
    let out = run_host(&["schema", component("guest_ssh_driver").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    // OCC refuses a driver package whose schema is open at the top level.
    assert_eq!(schema["additionalProperties"], false);
    for key in ["ssh", "runtime", "network"] {
        assert_eq!(
            schema["properties"][key]["additionalProperties"], false,
            "{key} is open"
        );
    }
    // hosts maps Namespace names to hosts; each host is closed.
    assert_eq!(
        schema["properties"]["hosts"]["additionalProperties"]["additionalProperties"],
        false
    );
    // The Node package ships a copy; it must be this component's.
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("host/node/compute/schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        shipped, schema,
        "host/node/compute/schema.json is stale: regenerate it with `occ-driver-host schema`"
    );

    // A file that is no component is refused by name, not printed.
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus.wasm");
    std::fs::write(&bogus, b"not wasm").unwrap();
    let out = run_host(&["schema", bogus.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("bogus.wasm"),
        "{}",
        text(&out.stderr)
    );
}

/// In `serve`, a revision call uses what bindAgent accepted: a binding passed
/// with it that names other identities is refused, and so is a binding for an
/// Agent never bound. Neither reaches a host (the spec's hosts do not exist).
#[test]
fn serve_holds_revision_calls_to_what_bind_agent_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let inst = write_installation(
        dir.path(),
        &component("guest_ssh_driver"),
        &spec_configuration(),
    );
    let mut child = spawn_serve(&inst, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let namespace = json!({"id": "ns-1", "name": "stable", "status": "ready", "createdAt": "2026-11-30T00:00:00Z"});
    let agent = |id: &str, sp: &str| json!({"id": id, "namespaceId": "ns-1", "name": "bot", "servicePrincipalId": sp});
    let revision = |agent: &str, sp: &str| {
        json!({
            "id": format!("rev-{agent}"), "namespaceId": "ns-1", "agentId": agent, "revision": 1,
            "backendId": null, "configurationId": "cfg", "configurationKind": "agent",
            "configurationGeneration": 1, "configuration": {"gateway": {"mode": "local"}},
            "harness": {"id": "openclaw", "version": "2026.9.6", "mode": "embedded"},
            "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
            "harnessAuth": {"method": "runtime"}, "servicePrincipalId": sp,
            "createdAt": "2026-11-30T00:00:00Z",
        })
    };
    let v = ask(
        1,
        "bindAgent",
        json!({"namespace": namespace, "agent": agent("agent-1", "sp-1")}),
    );
    assert_eq!(v["result"], Value::Null, "{v}");

    // The same Agent under another ServicePrincipal, passed with the call.
    let v = ask(
        2,
        "prepareRevision",
        json!({
            "revision": revision("agent-1", "sp-2"),
            "binding": {"namespace": namespace, "agent": agent("agent-1", "sp-2")},
            "context": {"secretEnvironment": []},
        }),
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("binding: differs from what bindAgent accepted"),
        "{v}"
    );

    // An Agent never bound, with a binding of its own.
    let v = ask(
        3,
        "prepareRevision",
        json!({
            "revision": revision("agent-9", "sp-9"),
            "binding": {"namespace": namespace, "agent": agent("agent-9", "sp-9")},
            "context": {"secretEnvironment": []},
        }),
    );
    assert_eq!(v["error"]["data"]["code"], "unbound-agent", "{v}");
    assert_eq!(v["error"]["data"]["failure"], "permanent", "{v}");

    // The accepted binding, under the revision's own ServicePrincipal mismatch,
    // is refused by the driver's policy by OCC's field name.
    let v = ask(
        4,
        "prepareRevision",
        json!({"revision": revision("agent-1", "sp-2"), "context": {"secretEnvironment": []}}),
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("revision.servicePrincipalId:"),
        "{v}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
