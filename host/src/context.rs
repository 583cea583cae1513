//! What one contract call carries into its store: the grants and sinks of the
//! driver that is being called, and the call's own cancellation.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::hooks::LifecycleHooks;
use crate::ssh_exec::SshTransport;

/// Receives each stdout line of a running exec, with the host alias: the CLI and
/// `serve` turn the helper's progress lines into progress for people.
pub type ProgressSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// A stdout line of the remote helper that matters to people watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperLine {
    /// `{"event":"progress","step","message"}`: a step began or finished.
    Progress {
        /// A short machine name, e.g. `readiness`.
        step: Option<String>,
        /// The sentence for people.
        message: Option<String>,
    },
    /// `{"event":"heartbeat"}`: still working.
    Heartbeat,
}

impl HelperLine {
    /// Read one stdout line; `None` for results and anything else.
    pub fn parse(line: &str) -> Option<HelperLine> {
        let event: serde_json::Value = serde_json::from_str(line).ok()?;
        let text = |k: &str| event.get(k).and_then(|v| v.as_str()).map(str::to_string);
        match event.get("event")?.as_str()? {
            "progress" => Some(HelperLine::Progress {
                step: text("step"),
                message: text("message"),
            }),
            "heartbeat" => Some(HelperLine::Heartbeat),
            _ => None,
        }
    }
}

/// Per-call context shared with the host functions.
pub struct CallContext {
    /// The driver's name in logs.
    pub driver: String,
    /// SHA-256 of the driver component, for audit records.
    pub driver_sha256: String,
    /// The contract method being called, for audit records.
    pub method: String,
    /// The SSH grant.
    pub transport: Arc<SshTransport>,
    /// Where audit records go, when enabled.
    pub audit: Option<Arc<AuditLog>>,
    /// The controller's lifecycle hooks.
    pub hooks: Arc<dyn LifecycleHooks>,
    /// Cancels the call: its store is dropped and any ssh client killed.
    pub cancel: CancellationToken,
    /// Stdout lines of running execs.
    pub progress: ProgressSink,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_progress_and_heartbeats_and_nothing_else() {
        let cases = [
            (
                r#"{"event":"progress","step":"readiness","message":"waiting"}"#,
                Some(HelperLine::Progress {
                    step: Some("readiness".into()),
                    message: Some("waiting".into()),
                }),
            ),
            (
                r#"{"event":"heartbeat","elapsedMs":1000}"#,
                Some(HelperLine::Heartbeat),
            ),
            (r#"{"event":"result","ok":true}"#, None),
            ("not json", None),
            (r#"{"step":"x"}"#, None),
        ];
        for (line, expected) in cases {
            assert_eq!(HelperLine::parse(line), expected, "{line}");
        }
    }
}
