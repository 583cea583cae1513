//! The helper protocol of `helper/README.md`: the operation JSON each exec carries,
//! and how its output is read.
//!
//! An operation is the driver's policy and nothing else: which operation runs, its
//! deadline, and for `prepare` the controller's document. Everything the helper
//! acts on besides (the runtime root, the unit directory, the runtime user, the port
//! range, the host's paths, the Namespace, Agent and revision, the placeholders) is
//! in the envelope the host appends for the call; the driver never writes it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use crate::error::{Error, FailureKind};
use crate::model::ExecOutput;

/// The transport bound of every helper run (the spec's 180 s).
pub const OPERATION_TIMEOUT_MS: u32 = 180_000;
/// The helper's own deadline, below the transport's so that it stops mutating and
/// reports before the client is killed.
pub const HELPER_DEADLINE_MS: u64 = 170_000;
/// The spec's readiness bound.
pub const READINESS_TIMEOUT_MS: u64 = 120_000;
pub use occ_ssh_target::helper::PROTOCOL_VERSION;
/// Bound on the stderr excerpt quoted in an error message.
const STDERR_EXCERPT: usize = 400;

/// Helper error codes that are permanent whatever the result line says: foreign
/// ownership and refused input must never be retried into adoption. The helper
/// marks the same codes `permanent` (`tests/helper_protocol.rs` compares them).
pub const PERMANENT_CODES: &[&str] = &[
    "foreign-marker",
    "changed-snapshot",
    "unexpected-symlink",
    "foreign-unit",
    "foreign-account",
    "invalid-operation",
    "missing-namespace",
    "missing-revision",
    "no-free-port",
    "probe-failed",
    "superseded",
    "revision-conflict",
    "newer-format",
];

/// The helper operations, named once for the driver and the host.
pub use occ_ssh_target::helper::HelperOp as Op;

/// One helper operation, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub op: Op,
    pub body: Map<String, Value>,
}

impl Operation {
    /// An operation with no policy fields: every operation but `prepare`.
    pub fn new(op: Op) -> Self {
        let body = json!({
            "version": PROTOCOL_VERSION,
            "op": op.name(),
            "deadlineMs": HELPER_DEADLINE_MS,
        });
        Self {
            op,
            body: into_map(body),
        }
    }

    /// `prepare` of the controller's document, exactly as the driver received it:
    /// the host checks it against the hash it took and the helper renders the
    /// snapshot from it.
    pub fn prepare(configuration: &str) -> Self {
        Self::new(Op::Prepare).with("configuration", configuration)
    }

    /// Adds one policy field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.body.insert(key.to_owned(), value.into());
        self
    }

    /// What crosses to the host: the base64 of the operation's JSON, the one
    /// argument of the helper run (`[<nodePath>, "-", this]`, which the host
    /// builds, the helper on stdin and the host's envelope after).
    pub fn encode(&self) -> String {
        BASE64.encode(Value::Object(self.body.clone()).to_string())
    }
}

fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("built from an object literal"),
    }
}

/// The `progress` lines of a run, for the log: `(step, message)`.
pub fn progress(stdout: &[u8]) -> Vec<(String, String)> {
    events(stdout)
        .filter(|v| v["event"] == "progress")
        .map(|v| {
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (text("step"), text("message"))
        })
        .collect()
}

fn events(stdout: &[u8]) -> impl DoubleEndedIterator<Item = Value> + '_ {
    stdout
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(Value::is_object)
}

/// Reads a run's result: the last stdout line that is a result event. Heartbeat and
/// progress lines are skipped. Exit 0 with `ok:true` succeeds; `ok:false` is the
/// helper's error; anything else is an unexpected helper failure and retryable.
pub fn read_result(host: &str, op: Op, output: &ExecOutput) -> Result<Map<String, Value>, Error> {
    let crashed = |detail: String| Error::HelperCrashed {
        host: host.to_owned(),
        op: op.name(),
        detail,
    };
    let Some(Value::Object(result)) = events(&output.stdout)
        .rev()
        .find(|v| v["event"] == "result")
    else {
        return Err(crashed(format!(
            "{}{}",
            describe_exit(output.exit_status),
            stderr_excerpt(&output.stderr_tail)
        )));
    };
    match result.get("ok") {
        Some(Value::Bool(true)) if output.exit_status == Some(0) => Ok(result),
        Some(Value::Bool(true)) => Err(crashed(format!(
            "it reported success but {}{}",
            describe_exit(output.exit_status),
            stderr_excerpt(&output.stderr_tail)
        ))),
        Some(Value::Bool(false)) => {
            let error = &result["error"];
            let code = error["code"].as_str().unwrap_or("helper-error").to_owned();
            let message = error["message"].as_str().unwrap_or_default().to_owned();
            // The line's one flag, read here into the failure it means.
            let failure = FailureKind::permanent_if(
                error["permanent"] == true || PERMANENT_CODES.contains(&code.as_str()),
            );
            Err(Error::Helper {
                host: host.to_owned(),
                op: op.name(),
                code,
                message,
                failure,
            })
        }
        _ => Err(Error::HelperProtocol {
            host: host.to_owned(),
            op: op.name(),
            detail: "result line has no boolean `ok`".into(),
        }),
    }
}

fn describe_exit(status: Option<i32>) -> String {
    match status {
        Some(127) => "exit status 127 (node not found: check nodePath)".into(),
        Some(status) => format!("exit status {status}"),
        None => "ended by a signal".into(),
    }
}

fn stderr_excerpt(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    let text: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.is_empty() {
        return String::new();
    }
    // Keep the end: the last lines of stderr say why the process died.
    let skip = text.chars().count().saturating_sub(STDERR_EXCERPT);
    let excerpt: String = text.chars().skip(skip).collect();
    format!("; stderr: {}{excerpt}", if skip > 0 { "..." } else { "" })
}

/// A non-negative integer field of a result, checked.
pub fn result_u64(
    host: &str,
    op: Op,
    result: &Map<String, Value>,
    key: &str,
) -> Result<u64, Error> {
    result
        .get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::HelperProtocol {
            host: host.to_owned(),
            op: op.name(),
            detail: format!("`{key}` is not a non-negative integer"),
        })
}

/// A port field of a result, checked.
pub fn result_port(
    host: &str,
    op: Op,
    result: &Map<String, Value>,
    key: &str,
) -> Result<u16, Error> {
    let n = result_u64(host, op, result, key)?;
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| Error::HelperProtocol {
            host: host.to_owned(),
            op: op.name(),
            detail: format!("`{key}` {n} is not a port"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FailureKind;

    fn decode(encoded: &str) -> Value {
        serde_json::from_slice(&BASE64.decode(encoded).unwrap()).unwrap()
    }

    fn output(status: Option<i32>, stdout: &str) -> ExecOutput {
        ExecOutput {
            exit_status: status,
            stdout: stdout.as_bytes().to_vec(),
            stderr_tail: Vec::new(),
        }
    }

    #[test]
    fn operations_carry_only_policy() {
        assert_eq!(
            decode(&Operation::new(Op::Probe).encode()),
            json!({"version": 2, "op": "probe", "deadlineMs": 170000})
        );
        let document = r#"{"gateway":{"mode":"local"}}"#;
        assert_eq!(
            decode(&Operation::prepare(document).encode()),
            json!({"version": 2, "op": "prepare", "deadlineMs": 170000, "configuration": document})
        );
        for op in Op::ALL.into_iter().filter(|op| *op != Op::Prepare) {
            let body = decode(&Operation::new(op).encode());
            assert_eq!(
                body.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["deadlineMs", "op", "version"],
                "{op:?}"
            );
        }
    }

    #[test]
    fn the_last_result_line_wins_over_heartbeats_and_progress() {
        let stdout = "{\"event\":\"heartbeat\",\"elapsedMs\":1000}\n\
                      {\"event\":\"result\",\"ok\":false,\"error\":{\"code\":\"early\"}}\n\
                      {\"event\":\"progress\",\"step\":\"lock\",\"message\":\"lock acquired\"}\n\
                      not json\n\
                      {\"event\":\"result\",\"ok\":true,\"changed\":true,\"port\":18800}\n\
                      {\"event\":\"heartbeat\",\"elapsedMs\":2000}\n";
        let result = read_result("stable", Op::Prepare, &output(Some(0), stdout)).unwrap();
        assert_eq!(result["port"], 18800);
        assert_eq!(
            progress(stdout.as_bytes()),
            [("lock".to_owned(), "lock acquired".to_owned())]
        );
    }

    #[test]
    fn helper_failures_are_classified() {
        let fail = |code: &str, permanent: bool| {
            format!(
                "{{\"event\":\"result\",\"ok\":false,\"error\":{{\"code\":\"{code}\",\"message\":\"m\",\"permanent\":{permanent}}}}}\n"
            )
        };
        use FailureKind::{Permanent, Retryable};
        let cases: Vec<(ExecOutput, &str, FailureKind, String)> = vec![
            (output(Some(1), &fail("foreign-marker", true)), "foreign-marker", Permanent,
             "host stable: prepare failed: foreign-marker: m".into()),
            // Ownership codes stay permanent even when the line says otherwise.
            (output(Some(1), &fail("foreign-unit", false)), "foreign-unit", Permanent,
             "host stable: prepare failed: foreign-unit: m".into()),
            (output(Some(1), &fail("no-free-port", false)), "no-free-port", Permanent,
             "host stable: prepare failed: no-free-port: m".into()),
            (output(Some(1), &fail("lock-timeout", false)), "lock-timeout", Retryable,
             "host stable: prepare failed: lock-timeout: m".into()),
            (output(Some(1), &fail("readiness-timeout", false)), "readiness-timeout", Retryable,
             "host stable: prepare failed: readiness-timeout: m".into()),
            (output(Some(1), &fail("new-permanent-code", true)), "new-permanent-code", Permanent,
             "host stable: prepare failed: new-permanent-code: m".into()),
            (output(Some(1), "{\"event\":\"heartbeat\",\"elapsedMs\":1}\n"), "helper-failed", Retryable,
             "host stable: prepare: helper ended without a result: exit status 1".into()),
            (output(None, ""), "helper-failed", Retryable,
             "host stable: prepare: helper ended without a result: ended by a signal".into()),
            (output(Some(127), ""), "helper-failed", Retryable,
             "host stable: prepare: helper ended without a result: exit status 127 (node not found: check nodePath)".into()),
            (output(Some(2), "{\"event\":\"result\",\"ok\":true}\n"), "helper-failed", Retryable,
             "host stable: prepare: helper ended without a result: it reported success but exit status 2".into()),
            (output(Some(0), "{\"event\":\"result\"}\n"), "invalid-helper-result", Retryable,
             "host stable: prepare: invalid helper result: result line has no boolean `ok`".into()),
        ];
        for (output, code, kind, message) in cases {
            let err = read_result("stable", Op::Prepare, &output).unwrap_err();
            assert_eq!(
                (err.code(), err.kind(), err.to_string()),
                (code, kind, message)
            );
            assert_eq!(err.host(), Some("stable"));
        }
    }

    #[test]
    fn stderr_is_quoted_briefly() {
        let mut crash = output(Some(1), "");
        crash.stderr_tail = b"TypeError: boom\n    at x\n".to_vec();
        assert_eq!(
            read_result("stable", Op::Stop, &crash)
                .unwrap_err()
                .to_string(),
            "host stable: stop: helper ended without a result: exit status 1; stderr: \
             TypeError: boom     at x"
        );
        crash.stderr_tail = "e".repeat(1000).into_bytes();
        let message = read_result("stable", Op::Stop, &crash)
            .unwrap_err()
            .to_string();
        assert!(message.ends_with(&format!("; stderr: ...{}", "e".repeat(400))));
    }

    #[test]
    fn result_fields_are_checked() {
        let result = into_map(json!({"port": 18800, "zero": 0, "big": 70000, "s": "x"}));
        assert_eq!(
            result_port("h", Op::Prepare, &result, "port").unwrap(),
            18800
        );
        for key in ["zero", "big", "s", "missing"] {
            let err = result_port("h", Op::Prepare, &result, key).unwrap_err();
            assert_eq!(err.code(), "invalid-helper-result", "{key}");
        }
    }
}
