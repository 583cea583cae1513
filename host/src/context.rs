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
