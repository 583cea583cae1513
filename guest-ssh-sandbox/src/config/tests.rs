//! The sandbox configuration as OpenClaw and the installation give it: what
//! is read, and each key refused.

use super::*;
use serde_json::json;

fn doc(sandbox: Value) -> String {
    json!({"agents": {"defaults": {"sandbox": sandbox}}}).to_string()
}

/// The spec's example block, verbatim.
pub(crate) fn spec_example() -> Value {
    json!({
        "mode": "all",
        "backend": "ssh",
        "scope": "session",
        "workspaceAccess": "rw",
        "ssh": {
            "target": "user@gateway-host:22",
            "workspaceRoot": "/tmp/openclaw-sandboxes",
            "strictHostKeyChecking": true,
            "updateHostKeys": true,
            "identityFile": "~/.ssh/id_ed25519",
            "certificateFile": "~/.ssh/id_ed25519-cert.pub",
            "knownHostsFile": "~/.ssh/known_hosts"
        }
    })
}

#[test]
fn reads_the_spec_example() {
    let c = Config::parse(&doc(spec_example())).unwrap();
    assert_eq!(c.mode, Mode::All);
    assert_eq!(c.scope, Scope::Session);
    assert_eq!(c.workspace_access, Access::ReadWrite);
    assert_eq!(
        c.ssh.target,
        Target {
            user: "user".into(),
            host: "gateway-host".into(),
            port: 22
        }
    );
    assert_eq!(c.ssh.target_label, "user@gateway-host:22");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn applies_the_spec_defaults() {
    let c = Config::parse(&doc(json!({"ssh": {"target": "me@10.0.0.1"}}))).unwrap();
    assert_eq!(c.ssh.workspace_root, DEFAULT_WORKSPACE_ROOT);
    assert!(c.ssh.strict_host_key_checking);
    assert!(c.ssh.update_host_keys);
    assert_eq!(c.ssh.target.port, 22);
    // OpenClaw's own defaults.
    assert_eq!(c.scope, Scope::Agent);
    assert_eq!(c.workspace_access, Access::None);
    assert_eq!(c.mode, Mode::Off);
    assert_eq!(c.backend, "ssh");
    // `command: "ssh"` (and an empty one) is the default.
    for command in ["ssh", " ssh ", ""] {
        let c = Config::parse(&doc(json!({"ssh": {"target": "me@h", "command": command}})));
        assert_eq!(c.unwrap().ssh.command, SshCommand::Default, "{command:?}");
    }
    // An absolute path is the client the host runs, once it checked it.
    let c = Config::parse(&doc(
        json!({"ssh": {"target": "me@h", "command": " /opt/openssh/bin/ssh "}}),
    ))
    .unwrap();
    assert_eq!(
        c.ssh.command,
        SshCommand::Path("/opt/openssh/bin/ssh".into())
    );
    // The legacy switch still selects a scope.
    let c = Config::parse(&doc(json!({"perSession": true, "ssh": {"target": "me@h"}}))).unwrap();
    assert_eq!(c.scope, Scope::Session);
    // Repeated and trailing slashes and `.` name the same directory on the
    // target; OpenClaw's join drops them too.
    let c = Config::parse(&doc(
        json!({"ssh": {"target": "me@h", "workspaceRoot": "//srv//./sandboxes/"}}),
    ))
    .unwrap();
    assert_eq!(c.ssh.workspace_root, "/srv/sandboxes");
}

#[test]
fn refusals_name_the_key_path() {
    let cases: &[(Value, &str)] = &[
        (
            json!({"ssh": {"target": "me@h"}, "bogus": 1}),
            "agents.defaults.sandbox.bogus: unknown key",
        ),
        (
            json!({"ssh": {"target": "me@h", "port": 22}}),
            "agents.defaults.sandbox.ssh.port: unknown key",
        ),
        (json!({}), "agents.defaults.sandbox.ssh: required"),
        (
            json!({"ssh": {}}),
            "agents.defaults.sandbox.ssh.target: required",
        ),
        (
            json!({"ssh": {"target": "gateway-host:22"}}),
            "agents.defaults.sandbox.ssh.target: \"gateway-host:22\" is not user@host[:port]",
        ),
        (
            json!({"ssh": {"target": "-oProxyCommand=x@h"}}),
            "agents.defaults.sandbox.ssh.target: user",
        ),
        (
            json!({"ssh": {"target": "me@-oProxyCommand=x"}}),
            "agents.defaults.sandbox.ssh.target: host",
        ),
        (
            json!({"ssh": {"target": "me@h:0"}}),
            "agents.defaults.sandbox.ssh.target: port",
        ),
        (
            json!({"ssh": {"target": "me@h:99999"}}),
            "agents.defaults.sandbox.ssh.target: port",
        ),
        (
            json!({"ssh": {"target": "me@h", "workspaceRoot": "relative/dir"}}),
            "agents.defaults.sandbox.ssh.workspaceRoot: must be an absolute POSIX path",
        ),
        (
            json!({"ssh": {"target": "me@h", "workspaceRoot": "/tmp/../etc"}}),
            "agents.defaults.sandbox.ssh.workspaceRoot: must not contain `..`",
        ),
        (
            json!({"ssh": {"target": "me@h", "command": "myssh"}}),
            "agents.defaults.sandbox.ssh.command: \"myssh\": name `ssh` (from the host's PATH) or the absolute path",
        ),
        (
            json!({"ssh": {"target": "me@h", "command": "./bin/ssh"}}),
            "agents.defaults.sandbox.ssh.command: \"./bin/ssh\": name `ssh`",
        ),
        (
            json!({"ssh": {"target": "me@h", "command": "/usr/bin/ssh\n-oProxyCommand=x"}}),
            "agents.defaults.sandbox.ssh.command: \"/usr/bin/ssh\\n-oProxyCommand=x\": an OpenSSH client's path must not hold control characters",
        ),
        (
            json!({"ssh": {"target": "me@h", "command": 7}}),
            "agents.defaults.sandbox.ssh.command: must be a string",
        ),
        (
            json!({"ssh": {"target": "me@h", "identityFile": "a\"b"}}),
            "agents.defaults.sandbox.ssh.identityFile: must not contain",
        ),
        (
            json!({"ssh": {"target": "me@h", "strictHostKeyChecking": "yes"}}),
            "agents.defaults.sandbox.ssh.strictHostKeyChecking: must be true or false",
        ),
        (
            json!({"ssh": {"target": "me@h", "identityData": {"source": "vault", "id": "x"}}}),
            "agents.defaults.sandbox.ssh.identityData.source: must be one of",
        ),
        (
            json!({"ssh": {"target": "me@h", "identityData": 3}}),
            "agents.defaults.sandbox.ssh.identityData: must be a string or a SecretRef",
        ),
        (
            json!({"backend": "docker", "ssh": {"target": "me@h"}}),
            "agents.defaults.sandbox.backend: this component is the SSH backend",
        ),
        (
            json!({"scope": "global", "ssh": {"target": "me@h"}}),
            "agents.defaults.sandbox.scope: must be one of",
        ),
        (
            json!({"workspaceAccess": "write", "ssh": {"target": "me@h"}}),
            "agents.defaults.sandbox.workspaceAccess: must be one of",
        ),
        (
            json!({"browser": {"enabled": true}, "ssh": {"target": "me@h"}}),
            "agents.defaults.sandbox.browser.enabled: browser sandboxing is not supported on the ssh backend",
        ),
        (
            json!({"docker": {"binds": ["/a:/b"]}, "ssh": {"target": "me@h"}}),
            "agents.defaults.sandbox.docker.binds: the ssh backend mounts nothing",
        ),
    ];
    for (sandbox, expected) in cases {
        let err = Config::parse(&doc(sandbox.clone())).unwrap_err();
        assert!(
            err.to_string().starts_with(expected),
            "{sandbox}: expected {expected:?}, got {err}"
        );
        assert_eq!(err.code(), "invalid-configuration");
    }
    let err =
        Config::parse(r#"{"agents": {"defaults": {"sandbox": {}}, "list": []}}"#).unwrap_err();
    assert!(
        err.to_string().starts_with("agents.list: unknown key"),
        "{err}"
    );
}

/// A long or odd key or value is quoted, cut short: the refusal stays one
/// short line naming the key.
#[test]
fn long_keys_and_values_are_quoted_cut_short() {
    let long = "x".repeat(10_000);
    let cases: &[(Value, &str)] = &[
        (
            json!({"ssh": {"target": "me@h", &long: 1}}),
            "agents.defaults.sandbox.ssh.\"xxxx",
        ),
        (
            json!({"ssh": {"target": "me@h"}, "a\nb": 1}),
            "agents.defaults.sandbox.\"a\\nb\": unknown key",
        ),
        (
            json!({"ssh": {"target": "me@h"}, "a.b": 1}),
            "agents.defaults.sandbox.\"a.b\": unknown key",
        ),
        (
            json!({"ssh": {"target": "me@h"}, "scope": long}),
            "agents.defaults.sandbox.scope: must be one of",
        ),
        (
            json!({"ssh": {"target": "me@h"}, "backend": long}),
            "agents.defaults.sandbox.backend: this component is the SSH backend",
        ),
        (
            json!({"ssh": {"target": long}}),
            "agents.defaults.sandbox.ssh.target: \"xxxx",
        ),
        (
            json!({"ssh": {"target": "me@h", "command": long}}),
            "agents.defaults.sandbox.ssh.command: \"xxxx",
        ),
    ];
    for (sandbox, expected) in cases {
        let e = Config::parse(&doc(sandbox.clone()))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(expected) && e.len() < 400, "{e:.400}");
    }
}

#[test]
fn docker_settings_do_not_apply_and_say_so() {
    let c = Config::parse(&doc(json!({
        "docker": {"image": "x", "env": {"LANG": "C.UTF-8"}},
        "browser": {"enabled": false, "image": "y"},
        "prune": {"idleHours": 1},
        "ssh": {"target": "me@h"}
    })))
    .unwrap();
    let text: Vec<String> = c.warnings.iter().map(|w| w.message.clone()).collect();
    assert!(
        text.iter()
            .any(|m| m.contains("agents.defaults.sandbox.docker.* does not apply"))
    );
    assert!(
        text.iter()
            .any(|m| m.contains("agents.defaults.sandbox.browser.* does not apply"))
    );
    assert!(text.iter().any(|m| m.contains("prune does not apply")));
}
