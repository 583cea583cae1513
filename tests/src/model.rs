//! A scripted model provider on a test host (`tests/model/scripted-model.mjs`)
//! and Agent turns through a deployed gateway with the real `openclaw` CLI.
//!
//! The provider requires a bearer key; the key reaches the gateway only through
//! the operator's `<agentDir>/env` file and a native environment SecretRef in
//! the revision's configuration, as the spec has operators provision model
//! credentials.

use std::process::Output;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::rig::{Host, Rig};

/// The server's source, put on the host by [`ScriptedModel::start`].
pub const SERVER: &str = include_str!("../model/scripted-model.mjs");

/// The environment variable the revision's SecretRef names.
pub const KEY_VARIABLE: &str = "SCRIPTED_MODEL_API_KEY";

/// The provider and model id a revision's configuration selects.
pub const MODEL: &str = "scripted/steps";

/// Hex SHA-256 of `bytes`: how the server logs the bearer token it was
/// shown, and how an installation pins a program.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    Sha256::digest(bytes.as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Native configuration naming the scripted provider on `port` of the Agent's
/// host, its key an environment SecretRef, the coding tools on, and `extra`
/// merged over the top level.
pub fn configuration(port: u16, extra: Value) -> Value {
    let mut c = json!({
        "gateway": {"mode": "local"},
        "models": {"mode": "merge", "providers": {"scripted": {
            "baseUrl": format!("http://127.0.0.1:{port}/v1"),
            "api": "openai-completions",
            "apiKey": {"source": "env", "provider": "default", "id": KEY_VARIABLE},
            "models": [{
                "id": "steps", "name": "Scripted steps", "reasoning": false, "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 128000, "maxTokens": 4096,
            }],
        }}},
        "tools": {"profile": "coding"},
        "agents": {"defaults": {"model": {"primary": MODEL}}},
    });
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

/// The scripted provider, running on a host as a transient systemd unit until
/// dropped.
pub struct ScriptedModel<'a> {
    rig: &'a Rig,
    host: &'a Host,
    unit: String,
    dir: String,
    /// Its port on the host's loopback.
    pub port: u16,
}

impl<'a> ScriptedModel<'a> {
    /// Start the server on `host`'s `127.0.0.1:port`, requiring `key`, with
    /// `scripts` (script name to steps). Its files live in a root-only
    /// directory of the host.
    pub fn start(
        rig: &'a Rig,
        host: &'a Host,
        port: u16,
        key: &str,
        scripts: &Value,
    ) -> ScriptedModel<'a> {
        let unit = format!("occ-scripted-model-{port}");
        let dir = format!("/root/{unit}");
        let model = ScriptedModel {
            rig,
            host,
            unit,
            dir,
            port,
        };
        model.stop();
        let dir = &model.dir;
        rig.sh_ok(host, &format!("install -d -m 0700 {dir}"));
        rig.sh_input(
            host,
            &format!("cat > {dir}/scripted-model.mjs"),
            SERVER.as_bytes(),
        );
        rig.sh_input(host, &format!("umask 077; cat > {dir}/key"), key.as_bytes());
        rig.sh_input(
            host,
            &format!("cat > {dir}/scripts.json"),
            scripts.to_string().as_bytes(),
        );
        rig.sh_ok(
            host,
            &format!(
                "systemd-run --quiet --unit {unit} --collect {node} {dir}/scripted-model.mjs \
                 --listen 127.0.0.1:{port} --key-file {dir}/key --scripts {dir}/scripts.json \
                 --log {dir}/requests.jsonl && \
                 for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:{port}/v1/models && exit 0; \
                 sleep 0.1; done; journalctl -u {unit} --no-pager | tail -5; exit 1",
                unit = model.unit,
                node = rig.node,
            ),
        );
        model
    }

    /// Every request the server answered since the last [`ScriptedModel::clear`],
    /// in order: `authorized`, `bearerSha256`, `script`, `step`, `tools` (the
    /// tool results the model was shown).
    pub fn requests(&self) -> Vec<Value> {
        let log = self.rig.sh_ok(
            self.host,
            &format!("cat {}/requests.jsonl 2>/dev/null || true", self.dir),
        );
        log.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Forget the requests logged so far.
    pub fn clear(&self) {
        self.rig
            .sh_ok(self.host, &format!(": > {}/requests.jsonl", self.dir));
    }

    fn stop(&self) {
        self.rig.sh(
            self.host,
            &format!(
                "systemctl stop {} >/dev/null 2>&1; rm -rf {}",
                self.unit, self.dir
            ),
        );
    }
}

impl Drop for ScriptedModel<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One Agent turn through the gateway of the Agent in `agent_dir`, listening on
/// `port`: the real `openclaw agent` CLI on the host, as root, authenticated
/// with the Agent's managed gateway password, in a fresh HOME. Returns the
/// CLI's output; `--json` makes stdout the turn's result.
pub fn turn(
    rig: &Rig,
    host: &Host,
    agent_dir: &str,
    port: u64,
    session: &str,
    message: &str,
) -> Output {
    assert!(
        !message.contains('\'') && !session.contains('\''),
        "a turn's message and session are quoted with '"
    );
    rig.sh(
        host,
        &format!(
            "set -a; . {agent_dir}/gateway-password.env; set +a; home=$(mktemp -d); \
             HOME=$home OPENCLAW_GATEWAY_URL=ws://127.0.0.1:{port} timeout 300 {node} {openclaw} \
             agent --session-key agent:main:{session} --message '{message}' --json; \
             code=$?; rm -rf \"$home\"; exit $code",
            node = rig.node,
            openclaw = rig.openclaw,
        ),
    )
}

/// The text the assistant answered in a turn's `--json` result.
pub fn answer(result: &Value) -> Option<&str> {
    result["result"]["payloads"][0]["text"].as_str()
}
