//! The values OCC passes to the driver, as plain Rust: the policy never sees the
//! generated WIT types, so it compiles and unit-tests natively.

/// An OCC Namespace: its server-owned ID and its name (the `hosts.<name>` key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub id: String,
    pub name: String,
}

/// The server-owned identities OCC binds before any revision operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBinding {
    pub namespace: Namespace,
    pub agent_id: String,
    pub service_principal_id: String,
}

/// The Harness a revision runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Harness {
    pub id: String,
    pub mode: String,
    pub version: Option<String>,
}

/// One OCC Secret binding on a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretBinding {
    pub name: String,
    pub secret_id: String,
}

/// An AgentRevision as OCC commits it; the JSON documents stay strings until admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub id: String,
    pub namespace_id: String,
    pub agent_id: String,
    pub number: u64,
    pub harness: Harness,
    pub harness_auth: String,
    pub configuration: String,
    pub requested_plugins: String,
    pub default_plugin_approver_policy: Option<String>,
    pub secret_bindings: Vec<SecretBinding>,
}

/// What OCC resolved for a revision before preparation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevisionContext {
    pub secret_environment: Vec<String>,
}

/// A non-fatal observation for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub code: String,
    pub message: String,
}

impl Warning {
    pub(crate) fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// The outcome of preparing a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareResult {
    /// False when the candidate was superseded: nothing changed on the host.
    pub ready: bool,
    pub warnings: Vec<Warning>,
}

/// What a finished remote command produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// None when the remote command was ended by a signal.
    pub exit_status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr_tail: Vec<u8>,
}

/// Log levels of the host's `log` interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}
