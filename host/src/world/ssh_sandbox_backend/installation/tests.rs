//! `drivers.sandbox` read as the host reads it: each key, its bounds, and
//! what is refused, naming the key.

use super::*;
use serde_json::json;

fn doc(ssh: Value) -> Value {
    json!({"agents": {"defaults": {"sandbox": {"ssh": ssh}}}})
}

#[test]
fn reads_the_grant_and_prefers_data_over_files() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id");
    std::fs::write(&key, "file key").unwrap();
    let g = sandbox_ssh_grant(
        &doc(
            json!({"target": "me@10.0.0.5:2222", "identityFile": key, "identityData": "inline key",
                     "knownHostsFile": key, "strictHostKeyChecking": false}),
        ),
        &BTreeMap::new(),
        Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
    )
    .unwrap();
    assert_eq!(g.bounds.operation, Duration::from_secs(86_400));
    assert_eq!(g.identity, Some(Credential::Inline("inline key".into())));
    assert_eq!(g.known_hosts, Some(Credential::File(key.clone())));
    assert_eq!(
        g.host_keys,
        HostKeys {
            strict: false,
            update: true
        }
    );
    let host = &g.hosts[TARGET_ALIAS];
    assert_eq!(
        (host.user.as_str(), host.address.as_str(), host.port),
        ("me", "10.0.0.5", 2222)
    );
    // The component never sees the inline key.
    let shown = redacted_configuration(&doc(json!({"target": "me@h", "identityData": "secret"})))
        .to_string();
    assert!(
        !shown.contains("secret") && shown.contains(HELD_BY_HOST),
        "{shown}"
    );
}

#[test]
fn refusals_name_the_key() {
    let cases = [
        (
            json!({"target": "me@h", "identityFile": "/nonexistent/key"}),
            "agents.defaults.sandbox.ssh.identityFile: /nonexistent/key",
        ),
        (
            json!({"target": "me@h", "identityData": {"source": "env", "provider": "default", "id": "OCC_TEST_UNSET_VARIABLE"}}),
            "agents.defaults.sandbox.ssh.identityData: the SecretRef names environment variable OCC_TEST_UNSET_VARIABLE",
        ),
        (
            json!({"target": "me@h", "knownHostsData": {"source": "file", "id": "x"}}),
            "agents.defaults.sandbox.ssh.knownHostsData: SecretRef source \"file\"",
        ),
        (
            json!({"target": "h"}),
            "agents.defaults.sandbox.ssh.target: \"h\" is not user@host[:port]",
        ),
        (json!({}), "agents.defaults.sandbox.ssh.target: required"),
    ];
    for (ssh, expected) in cases {
        let e = sandbox_ssh_grant(&doc(ssh.clone()), &BTreeMap::new(), Duration::from_secs(60))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(expected),
            "{ssh}: expected {expected:?}, got {e:?}"
        );
    }
}

/// `ssh.command` names an OpenSSH client or nothing runs: each
/// non-client is refused before any connection, naming the key and the
/// value; a copy of the system client and a link to it are accepted, and
/// the grant holds the resolved program.
#[test]
fn the_client_is_an_openssh_client_or_refused() {
    use std::os::unix::fs::PermissionsExt;
    let system = which_ssh();
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let script = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.to_string_lossy().into_owned()
    };
    let not_a_client = script("not-ssh", "#!/bin/sh\necho hello\n", 0o755);
    let fails = script(
        "fails",
        "#!/bin/sh\necho OpenSSH_9.2p1 >&2\nexit 1\n",
        0o755,
    );
    let old = script(
        "old",
        "#!/bin/sh\necho 'OpenSSH_7.2p2, OpenSSL' >&2\n",
        0o755,
    );
    let hangs = script("hangs", "#!/bin/sh\nsleep 60 &\nsleep 60\n", 0o755);
    let plain = script("plain", "not a program\n", 0o644);
    let writable = dir.path().join("writable-ssh");
    std::fs::copy(&system, &writable).unwrap();
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(dir.path().join("a-directory")).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            "myssh".into(),
            "\"myssh\": name `ssh` (from the host's PATH) or the absolute path",
        ),
        ("bin/ssh".into(), "\"bin/ssh\": name `ssh`"),
        (at("missing"), "missing\": No such file or directory"),
        (at("a-directory"), "a-directory\": is a directory"),
        (plain.clone(), "plain\": is not executable (mode 644)"),
        (
            "/bin/true".into(),
            "\"/bin/true\": is not an OpenSSH client: `/usr/bin/true -V` printed nothing",
        ),
        (
            not_a_client.clone(),
            "not-ssh\": is not an OpenSSH client: `",
        ),
        (fails.clone(), "fails\": is not an OpenSSH client: `"),
        (
            old.clone(),
            "old\": is OpenSSH 7.2; the transport needs OpenSSH 7.3 or later",
        ),
        (hangs.clone(), "hangs\": `-V` did not answer within 5 s"),
        (
            writable.to_string_lossy().into_owned(),
            "could be replaced by another user",
        ),
        ("/dev/null".into(), "\"/dev/null\": is not a regular file"),
    ];
    for (command, expected) in &cases {
        let e = sandbox_ssh_grant(
            &doc(json!({"target": "me@h", "command": command})),
            &BTreeMap::new(),
            Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("agents.defaults.sandbox.ssh.command: ") && e.contains(expected),
            "{command}: expected {expected:?}, got {e:?}"
        );
        if !command.starts_with("bin/") && command != "myssh" {
            assert!(e.contains(command.as_str()), "{command}: {e}");
        }
    }
    // The hanging script's children went with it.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &hangs])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&left.stdout)
    );
    // Not a string at all.
    let e = sandbox_ssh_grant(
        &doc(json!({"target": "me@h", "command": ["ssh"]})),
        &BTreeMap::new(),
        Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "agents.defaults.sandbox.ssh.command: must be a string");

    // The default is `ssh` from PATH, unchecked as before.
    for command in [None, Some(""), Some("ssh"), Some(" ssh ")] {
        let mut ssh = json!({"target": "me@h"});
        if let Some(c) = command {
            ssh["command"] = json!(c);
        }
        let g = sandbox_ssh_grant(
            &doc(ssh),
            &BTreeMap::new(),
            Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
        )
        .unwrap();
        assert_eq!(g.client, SshClient::system(), "{command:?}");
    }
    // A copy elsewhere runs as itself; a link runs what it points to.
    let copy = dir.path().join("bin-ssh");
    std::fs::copy(&system, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = dir.path().join("link-ssh");
    std::os::unix::fs::symlink(&system, &link).unwrap();
    for (given, runs) in [
        (&copy, copy.clone()),
        (&link, std::fs::canonicalize(&system).unwrap()),
    ] {
        let g = sandbox_ssh_grant(
            &doc(json!({"target": "me@h", "command": format!(" {} ", given.display())})),
            &BTreeMap::new(),
            Duration::from_secs(DEFAULT_MAX_RUN_SECONDS),
        )
        .unwrap();
        assert_eq!(g.client.program, runs);
        assert_eq!(g.client.configured, given.to_string_lossy());
        assert!(
            g.client.version.as_deref().unwrap().starts_with("OpenSSH_"),
            "{:?}",
            g.client
        );
    }
}

/// The system's ssh, as `PATH` finds it.
fn which_ssh() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("ssh"))
                .find(|p| p.is_file())
        })
        .expect("an ssh client on PATH")
}

#[test]
fn the_sandbox_selection() {
    let path = Path::new("/etc/occ/installation.yaml");
    let text = "drivers:\n  sandbox:\n    component: sbx.wasm\n    approvedScripts: {exec: abababababababababababababababababababababababababababababababab}\n    localWorkspaces: [/srv/ws]\n    configuration: {agents: {defaults: {sandbox: {}}}}\n";
    let doc = crate::installation::parse_yaml(text).unwrap();
    let i = SandboxInstallation::from_document(path, &doc, None).unwrap();
    assert_eq!(i.component, PathBuf::from("/etc/occ/sbx.wasm"));
    assert_eq!(i.id, DEFAULT_ID);
    let ab = Sha256::parse(&"ab".repeat(32)).unwrap();
    assert_eq!(i.approved_scripts["exec"], vec![ab.clone()]);
    // During a rollout a script is approved with the old release's hash and the new one's.
    let cd = Sha256::parse(&"cd".repeat(32)).unwrap();
    let both = text.replace(
        &format!("exec: {}", "ab".repeat(32)),
        &format!("exec: [{}, {}]", "ab".repeat(32), "cd".repeat(32)),
    );
    let doc_both = crate::installation::parse_yaml(&both).unwrap();
    let i_both = SandboxInstallation::from_document(path, &doc_both, None).unwrap();
    assert_eq!(i_both.approved_scripts["exec"], vec![ab, cd]);
    assert_eq!(i.local_workspaces, vec![PathBuf::from("/srv/ws")]);
    assert_eq!(i.max_run, Duration::from_secs(DEFAULT_MAX_RUN_SECONDS));
    assert_eq!(i.reconnect, Duration::from_secs(DEFAULT_RECONNECT_SECONDS));
    for (setting, expected) in [("0", 0), ("5", 5), ("3600", 3600)] {
        let set = text.replace(
            "    configuration:",
            &format!("    reconnectSeconds: {setting}\n    configuration:"),
        );
        let doc = crate::installation::parse_yaml(&set).unwrap();
        let i = SandboxInstallation::from_document(path, &doc, None).unwrap();
        assert_eq!(i.reconnect, Duration::from_secs(expected), "{setting}");
    }
    // An operator raises the host's bound of one run (or lowers it).
    let raised = text.replace(
        "    configuration:",
        "    maxRunSeconds: 604800\n    configuration:",
    );
    let doc2 = crate::installation::parse_yaml(&raised).unwrap();
    let i = SandboxInstallation::from_document(path, &doc2, None).unwrap();
    assert_eq!(i.max_run, Duration::from_secs(604_800));
    assert_eq!(
        i.worker,
        Some(Duration::from_secs(DEFAULT_WORKER_REQUEST_SECONDS))
    );
    for (setting, expected) in [
        ("false", None),
        ("true", Some(DEFAULT_WORKER_REQUEST_SECONDS)),
        ("{requestSeconds: 5}", Some(5)),
        ("{}", Some(DEFAULT_WORKER_REQUEST_SECONDS)),
    ] {
        let set = text.replace(
            "    configuration:",
            &format!("    workspaceWorker: {setting}\n    configuration:"),
        );
        let doc = crate::installation::parse_yaml(&set).unwrap();
        let i = SandboxInstallation::from_document(path, &doc, None).unwrap();
        assert_eq!(i.worker, expected.map(Duration::from_secs), "{setting}");
    }
    for (bad, expected) in [
        (
            "drivers: {sandbox: {component: c, configuration: {}, workspaceWorker: 1}}",
            "drivers.sandbox.workspaceWorker: must be true, false or {requestSeconds: n}, not 1",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, workspaceWorker: {idle: 3}}}",
            "drivers.sandbox.workspaceWorker.idle: unknown key",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, workspaceWorker: {requestSeconds: 0}}}",
            "drivers.sandbox.workspaceWorker.requestSeconds: must be a whole number of seconds from 1 to 3600, not 0",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, bogus: 1}}",
            "drivers.sandbox.bogus: unknown key",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, approvedScripts: {exec: abc}}}",
            "drivers.sandbox.approvedScripts.exec: must be a SHA-256",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, approvedScripts: {exec: []}}}",
            "drivers.sandbox.approvedScripts.exec: must be a SHA-256",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, maxRunSeconds: 4294968}}",
            "drivers.sandbox.maxRunSeconds: must be a whole number of seconds from 1 to 4294967, not 4294968",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, reconnectSeconds: 3601}}",
            "drivers.sandbox.reconnectSeconds: must be a whole number of seconds from 0 to 3600, not 3601",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, reconnectSeconds: -1}}",
            "drivers.sandbox.reconnectSeconds: must be a whole number of seconds from 0 to 3600, not -1",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, maxRunSeconds: \"1h\"}}",
            "drivers.sandbox.maxRunSeconds: must be a whole number",
        ),
        (
            "drivers: {sandbox: {component: c, configuration: {}, maxRunSeconds: 0}}",
            "drivers.sandbox.maxRunSeconds: must be a whole number",
        ),
        (
            "drivers: {sandbox: {component: c}}",
            "drivers.sandbox.configuration: missing",
        ),
        ("drivers: {compute: {}}", "drivers.sandbox: missing"),
    ] {
        let doc = crate::installation::parse_yaml(bad).unwrap();
        let e = SandboxInstallation::from_document(path, &doc, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{bad}: {e}");
    }
    // One bad hash in a list refuses the list.
    let bad = format!(
        "drivers: {{sandbox: {{component: c, configuration: {{}}, approvedScripts: {{exec: [{}, abc]}}}}}}",
        "ab".repeat(32)
    );
    let doc = crate::installation::parse_yaml(&bad).unwrap();
    let e = SandboxInstallation::from_document(path, &doc, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("drivers.sandbox.approvedScripts.exec: must be a SHA-256 in lowercase hex (64 characters), as `occ-driver-host inspect` prints it, or a list of them"),
        "{e}"
    );
}
