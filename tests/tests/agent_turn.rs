//! A deployed Agent does real work: a model turn through its gateway, inside
//! the unit the driver renders (`ProtectSystem=strict`, `ProtectHome`, the
//! system-call filter, the socket rules), with the model key provisioned the
//! way the spec has operators do it: a line in the operator-owned
//! `<agentDir>/env` (root:root 0600), referenced by a native environment
//! SecretRef in the revision's configuration.
//!
//! The model is `tests/model/scripted-model.mjs` on the test host; the turn is
//! the real `openclaw agent` CLI against the deployed gateway.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use occ_e2e::compute::{Agent, Deployment, Sweep, UNIT_DIR, marker, unique};
use occ_e2e::model::{self, KEY_VARIABLE, ScriptedModel, sha256_hex, turn};
use occ_e2e::rig::{Host, Rig};
use serde_json::{Value, json};

/// The scripted provider's port on the host, and the gateways' port range:
/// apart from every other suite's.
const MODEL_PORT: u16 = 19660;
const GATEWAYS: (u16, u16) = (19650, 19659);

/// What the Agent writes, and what it reads back.
const NOTE: &str = "written by the Agent's turn";

/// A root of the test's own (`/var/lib/occ-turn-*`, which [`Sweep`] clears),
/// its deployment, a Namespace, an Agent of it and the Agent's directory.
struct Fixture {
    d: Deployment,
    root: String,
    ns: Value,
    agent: Agent,
    dir: String,
}

fn fixture(host: &Host, name: &str) -> Fixture {
    let root = format!("/var/lib/{}", unique(&format!("occ-turn-{name}")));
    let d = Deployment::of("guest_ssh_driver", &[("turn", host)], None, &root, GATEWAYS);
    let ns = json!({"id": unique("ns-turn"), "name": "turn"});
    let agent = Agent::new(&ns);
    let dir = agent.dir_in(&root);
    Fixture {
        d,
        root,
        ns,
        agent,
        dir,
    }
}

impl Fixture {
    /// ensureNamespace and prepareRevision of a revision naming the scripted
    /// provider; then the operator's env file holds `env` (written as root,
    /// 0600, before activation: systemd reads it when the unit starts); then
    /// activateRevision. Returns the gateway's port.
    fn deploy(&self, rig: &Rig, host: &Host, env: &str) -> u64 {
        let rev = self.agent.revision(
            &unique("rev"),
            1,
            model::configuration(MODEL_PORT, json!({})),
        );
        self.d.ok("ensureNamespace", json!({"namespace": self.ns}));
        self.d.ok("prepareRevision", self.agent.params(&rev));
        let dir = &self.dir;
        rig.sh_input(host, &format!("umask 077; cat > {dir}/env"), env.as_bytes());
        assert_eq!(
            rig.sh_ok(host, &format!("stat -c '%U:%G %a' {dir}/env")),
            "root:root 600"
        );
        self.d.ok("activateRevision", self.agent.params(&rev));
        marker(rig, host, &format!("{dir}/agent.json"))["port"]
            .as_u64()
            .unwrap()
    }

    /// Every path under the root outside the Agent's home and state, with its
    /// mode, size, owner and modification time: what a tool must not change.
    fn tree(&self, rig: &Rig, host: &Host) -> String {
        rig.sh_ok(
            host,
            &format!(
                "find {} \\( -path '*/agents/*/home' -o -path '*/agents/*/state' \\) -prune -o \
                 -printf '%p %m %s %U:%G %T@\\n' | sort; sha256sum {}/current/openclaw.json",
                self.root, self.dir
            ),
        )
    }

    fn clean(&self, rig: &Rig, host: &Host) {
        self.d.ok("deleteNamespace", json!({"namespace": self.ns}));
        rig.sh_ok(host, &format!("rm -rf {}", self.root));
    }
}

/// The turn's `--json` result, insisting that the CLI succeeded.
fn completed(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the turn failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("turn result: {e}: {stdout}"))
}

/// The tool results of the last request the model answered.
fn tool_results(requests: &[Value]) -> Vec<String> {
    let last = requests.last().expect("the model saw a request");
    last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// A turn asks for write, exec and read: each runs as the Agent's account in
/// its own `state/workspace`, the model sees the operator's key, and the key
/// is in no file the driver wrote nor in the audit log. A second turn's tools
/// try to write outside the Agent's home and state, and into its admitted
/// snapshot: both fail and nothing changes.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_turn_runs_its_tools_as_the_agent_with_the_operators_key_and_cannot_leave_home_and_state() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-turn");
    let f = fixture(&host, "work");
    let (root, dir) = (&f.root, &f.dir);
    let key = unique("sk-occ-turn");
    let scripts = json!({
        "note": [
            {"tool": "write", "args": {"path": "turn-note.txt", "content": format!("{NOTE}\n")}},
            {"tool": "exec", "args": {"command": "id -un; id -u; pwd; cat turn-note.txt"}},
            {"tool": "read", "args": {"path": "turn-note.txt"}},
            {"text": "The note is written and reads back."},
        ],
        "escape": [
            {"tool": "write", "args": {"path": format!("{root}/other/escaped.txt"), "content": "escaped\n"}},
            {"tool": "exec", "args": {"command": format!(
                "mkdir -p {root}/other && echo escaped > {root}/other/escaped.txt; echo mkdir=$?; \
                 echo tampered >> {dir}/current/openclaw.json; echo snapshot=$?")}},
            {"text": "tried"},
        ],
    });
    let model = ScriptedModel::start(&rig, &host, MODEL_PORT, &key, &scripts);
    let port = f.deploy(&rig, &host, &format!("{KEY_VARIABLE}={key}\n"));

    let out = turn(
        &rig,
        &host,
        dir,
        port,
        "note",
        "[script:note] write a note, run a command, read the note back",
    );
    let result = completed(&out);
    assert_eq!(
        model::answer(&result),
        Some("The note is written and reads back."),
        "{result}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    for r in &requests {
        assert_eq!(r["authorized"], true, "{r}");
        assert_eq!(r["bearerSha256"], sha256_hex(&key), "{r}");
    }
    let tools = tool_results(&requests);
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools[0].contains("Successfully wrote"), "{tools:?}");
    let account = f.agent.account();
    let uid = rig.sh_ok(&host, &format!("id -u {account}"));
    let workspace = format!("{dir}/state/workspace");
    assert_eq!(
        tools[1].lines().collect::<Vec<_>>(),
        [account.as_str(), uid.as_str(), workspace.as_str(), NOTE],
        "exec ran as the Agent's account in its workspace"
    );
    assert_eq!(tools[2].trim_end(), NOTE);
    assert_eq!(
        rig.sh_ok(
            &host,
            &format!("stat -c '%U:%G' {workspace}/turn-note.txt; cat {workspace}/turn-note.txt")
        ),
        format!("{account}:{account}\n{NOTE}")
    );

    // The snapshot holds the SecretRef, never the key; the key is in the
    // operator's file alone, of everything under the root outside home and
    // state, the unit, and the audit log.
    let snapshot = marker(&rig, &host, &format!("{dir}/current/openclaw.json"));
    assert_eq!(
        snapshot["models"]["providers"]["scripted"]["apiKey"],
        json!({"source": "env", "provider": "default", "id": KEY_VARIABLE})
    );
    let holders = rig.sh_ok(
        &host,
        &format!(
            "grep -rlF --exclude-dir=home --exclude-dir=state -e '{key}' {root} {UNIT_DIR}/{} || true",
            f.agent.unit()
        ),
    );
    assert_eq!(holders, format!("{dir}/env"));
    let audit = std::fs::read_to_string(&f.d.audit).unwrap();
    assert!(audit.contains("activateRevision"), "the audit log is read");
    assert!(!audit.contains(&key), "the key is in the audit log");

    // Outside home and state: the write tool and a command both fail, and
    // nothing under the root changes.
    let before = f.tree(&rig, &host);
    model.clear();
    let out = turn(
        &rig,
        &host,
        dir,
        port,
        "escape",
        "[script:escape] write outside home and state",
    );
    let result = completed(&out);
    assert_eq!(model::answer(&result), Some("tried"), "{result}");
    let tools = tool_results(&model.requests());
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools[0].contains("\"status\": \"error\""), "{tools:?}");
    assert!(
        tools[1].contains("mkdir=") && !tools[1].contains("mkdir=0"),
        "{tools:?}"
    );
    assert!(
        tools[1].contains("snapshot=") && !tools[1].contains("snapshot=0"),
        "{tools:?}"
    );
    assert_eq!(f.tree(&rig, &host), before, "a tool changed the root");
    rig.sh_ok(&host, &format!("test ! -e {root}/other"));

    drop(model);
    f.clean(&rig, &host);
}

/// "A gateway can be ready while its model credentials are invalid": with no
/// key line in the operator's file, the gateway serves and the turn fails
/// naming the provider's unresolved SecretRef, no request reaching the model;
/// with a wrong key, the model refuses it and the turn fails with the
/// provider's authentication error. Nothing is written either time.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn without_the_right_key_the_gateway_is_ready_and_the_turn_fails_with_the_providers_error() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-turn");
    let f = fixture(&host, "nokey");
    let dir = &f.dir;
    let key = unique("sk-occ-turn");
    let scripts = json!({"note": [
        {"tool": "write", "args": {"path": "turn-note.txt", "content": format!("{NOTE}\n")}},
        {"text": "written"},
    ]});
    let model = ScriptedModel::start(&rig, &host, MODEL_PORT, &key, &scripts);
    let port = f.deploy(&rig, &host, "OTHER_PROVIDER_KEY=unrelated\n");
    let readyz = format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/readyz");
    assert_eq!(rig.sh_ok(&host, &readyz), "200");

    let message = "[script:note] write a note";
    let out = turn(&rig, &host, dir, port, "missing", message);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the turn succeeded without a key");
    assert!(
        stderr.contains("provider:scripted") && stderr.contains("unavailable"),
        "{stderr}"
    );
    assert_eq!(model.requests(), Vec::<Value>::new());

    // The operator writes a wrong key and restarts the gateway.
    let wrong = format!("{key}-wrong");
    rig.sh_input(
        &host,
        &format!("umask 077; cat > {dir}/env"),
        format!("{KEY_VARIABLE}={wrong}\n").as_bytes(),
    );
    rig.sh_ok(
        &host,
        &format!(
            "systemctl restart {}; for i in $(seq 180); do \
             [ \"$({readyz})\" = 200 ] && exit 0; sleep 1; done; exit 1",
            f.agent.unit()
        ),
    );
    let out = turn(&rig, &host, dir, port, "wrong", message);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the turn succeeded with a wrong key");
    assert!(
        stderr.contains("Authentication failed (provider returned HTTP 401)"),
        "{stderr}"
    );
    let requests = model.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r["authorized"], false, "{r}");
        assert_eq!(r["bearerSha256"], sha256_hex(&wrong), "{r}");
    }
    rig.sh_ok(
        &host,
        &format!("test ! -e {dir}/state/workspace/turn-note.txt"),
    );

    drop(model);
    f.clean(&rig, &host);
}
