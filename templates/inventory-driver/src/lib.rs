//! A template Compute Driver: the smallest component the host loads in the
//! `ssh-compute-driver` world. It implements `preflight` only: on every host
//! of its configuration it runs the helper's `probe` (the one helper
//! operation the host admits from `preflight`) and reports each check the
//! probe made as a warning, so an operator sees what each host has. Every
//! other method is refused as unsupported.
//!
//! The shape to copy: policy as pure functions here ([`hosts`],
//! [`probe_args`], [`report`]) that test natively, and a thin WIT layer in
//! `component.rs` that only moves values across. `docs/driver-authors.md`
//! walks from a new crate to a passing test.

#[cfg(target_arch = "wasm32")]
mod component;

use base64::Engine as _;
use serde_json::Value;

/// The helper's protocol version, and the deadline the probe gets (the
/// host bounds it to 1000..175000 ms).
const PROTOCOL_VERSION: u64 = 2;
const PROBE_DEADLINE_MS: u64 = 60_000;

/// One host to probe: its alias and the Node.js that runs the helper there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host alias (the configuration's `hosts` key).
    pub alias: String,
    /// `hosts.<alias>.nodePath`, else `runtime.nodePath`.
    pub node_path: String,
}

/// The hosts of a configuration (the SSH driver's shape, which the host
/// also reads for its transport), in alias order. Names the key at fault.
pub fn hosts(configuration: &str) -> Result<Vec<Target>, String> {
    let v: Value =
        serde_json::from_str(configuration).map_err(|e| format!("configuration: not JSON: {e}"))?;
    let default_node = v.pointer("/runtime/nodePath").and_then(Value::as_str);
    let hosts = v
        .get("hosts")
        .and_then(Value::as_object)
        .ok_or("configuration.hosts: missing; name at least one host")?;
    if hosts.is_empty() {
        return Err("configuration.hosts: empty; name at least one host".into());
    }
    let mut targets = Vec::new();
    for (alias, host) in hosts {
        let node_path = host
            .get("nodePath")
            .and_then(Value::as_str)
            .or(default_node)
            .ok_or_else(|| {
                format!("configuration.hosts.{alias}.nodePath: missing, and no runtime.nodePath")
            })?;
        targets.push(Target {
            alias: alias.clone(),
            node_path: node_path.to_string(),
        });
    }
    Ok(targets)
}

/// The arguments of one probe: the base64 of its operation. The host runs
/// the helper the component ships by name (`run("helper", ...)`, WIT 0.3.0)
/// as `[<the alias's nodePath>, "-", <operation>]`, the helper on stdin, and
/// appends its envelope.
pub fn probe_args() -> Vec<String> {
    let operation = serde_json::json!({
        "version": PROTOCOL_VERSION,
        "op": "probe",
        "deadlineMs": PROBE_DEADLINE_MS,
    });
    vec![base64::engine::general_purpose::STANDARD.encode(operation.to_string())]
}

/// What one probe found, one line per check: `(code, message)`.
/// `Err` when the helper gave no result line at all (a retryable failure).
pub fn report(alias: &str, stdout: &[u8]) -> Result<Vec<(String, String)>, String> {
    let result = String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["event"] == "result")
        .ok_or_else(|| format!("host {alias}: the helper gave no result line"))?;
    let checks = result["checks"].as_array().cloned().unwrap_or_default();
    let mut lines: Vec<(String, String)> = checks
        .iter()
        .map(|c| {
            let ok = c["ok"].as_bool().unwrap_or(false);
            (
                if ok { "inventory" } else { "inventory-missing" }.to_string(),
                format!(
                    "host {alias}: {} {}: {}",
                    c["name"].as_str().unwrap_or("?"),
                    if ok { "ok" } else { "MISSING" },
                    c["detail"].as_str().unwrap_or("")
                ),
            )
        })
        .collect();
    if lines.is_empty() {
        let message = result["error"]["message"].as_str().unwrap_or("no checks");
        lines.push((
            "inventory-missing".into(),
            format!("host {alias}: {message}"),
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_take_their_own_node_or_the_default_and_name_what_is_missing() {
        let t = hosts(
            r#"{"runtime": {"nodePath": "/usr/bin/node"},
                "hosts": {"b": {}, "a": {"nodePath": "/opt/node24/bin/node"}}}"#,
        )
        .unwrap();
        assert_eq!(t[0].alias, "a");
        assert_eq!(t[0].node_path, "/opt/node24/bin/node");
        assert_eq!(t[1].node_path, "/usr/bin/node");
        assert!(
            hosts(r#"{"hosts": {"a": {}}}"#)
                .unwrap_err()
                .contains("hosts.a.nodePath")
        );
        assert!(
            hosts(r#"{"hosts": {}}"#)
                .unwrap_err()
                .contains("configuration.hosts")
        );
        assert!(hosts("[").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_probe_is_the_helpers_operation_and_nothing_more() {
        let args = probe_args();
        assert_eq!(args.len(), 1);
        let op: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(&args[0])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            op,
            serde_json::json!({"version": 2, "op": "probe", "deadlineMs": 60000})
        );
    }

    #[test]
    fn a_report_names_each_check_and_a_missing_result_fails() {
        let out = b"{\"event\":\"heartbeat\",\"elapsedMs\":1}\n\
            {\"event\":\"result\",\"ok\":false,\"checks\":[{\"name\":\"node\",\"ok\":true,\"detail\":\"v24.1.0\"},\
            {\"name\":\"flock\",\"ok\":false,\"detail\":\"not on PATH\"}]}\n";
        let r = report("stable", out).unwrap();
        assert_eq!(
            r,
            [
                (
                    "inventory".to_string(),
                    "host stable: node ok: v24.1.0".to_string()
                ),
                (
                    "inventory-missing".to_string(),
                    "host stable: flock MISSING: not on PATH".to_string()
                ),
            ]
        );
        assert!(
            report("stable", b"garbage\n")
                .unwrap_err()
                .contains("no result")
        );
    }
}
