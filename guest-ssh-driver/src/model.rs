//! The values OCC passes to the driver, as plain Rust: the policy never sees the
//! generated WIT types, so it compiles and unit-tests natively. Field names follow
//! OCC's own (`packages/contracts/src/index.ts`), snake-cased.

use crate::error::FailureKind;

/// The driver as the installation selected it (`drivers.compute`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `drivers.compute.id`, e.g. `compute-ssh`.
    pub id: String,
    /// The implementation identity revisions record, e.g. `occ/ssh`.
    pub implementation: String,
    /// `drivers.compute.configuration`, as JSON.
    pub configuration: String,
}

/// An OCC Namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub id: String,
    /// The `hosts.<name>` key.
    pub name: String,
    /// `existingNamespace`: adoption is unsupported by SSH Compute.
    pub existing_namespace: Option<String>,
    pub status: String,
}

/// The fields of OCC's Agent the driver reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub id: String,
    pub namespace_id: String,
    pub service_principal_id: String,
}

/// `ComputeAgentBinding`: the server-owned Namespace and Agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBinding {
    pub namespace: Namespace,
    pub agent: Agent,
}

/// The Harness a revision runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Harness {
    pub id: String,
    pub version: String,
    pub mode: String,
}

/// `AgentRevision.compute`: the Compute Driver a revision was committed for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeRef {
    pub id: String,
    pub implementation: String,
}

/// An AgentRevision as OCC commits it; the JSON documents stay strings until admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub id: String,
    pub namespace_id: String,
    pub agent_id: String,
    /// OCC's `revision`: the number, positive and increasing per Agent.
    pub revision: u64,
    pub service_principal_id: String,
    pub compute: ComputeRef,
    pub configuration_kind: String,
    pub configuration_generation: u64,
    pub configuration: String,
    pub harness: Harness,
    pub harness_auth: String,
    pub plugins: Option<String>,
    pub plugin_approvers: Option<String>,
    pub secret_bindings: Option<String>,
    pub sandbox_driver_id: Option<String>,
    pub secret_driver_id: Option<String>,
}

/// What OCC resolved for a revision before the call.
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

/// What preparation observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// False when the candidate was superseded: nothing changed on the host.
    pub ready: bool,
}

/// What a finished remote command produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// None when the remote command was ended by a signal.
    pub exit_status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr_tail: Vec<u8>,
}

/// Why a lifecycle hook did not succeed (the WIT `hook-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookError {
    /// The controller refused; `failure` is its verdict.
    Refused {
        message: String,
        failure: FailureKind,
    },
    /// The controller accepted but its answer broke the rules: compensate.
    InvalidAnswer(String),
    /// The host refused to run the hook for this call.
    NotAllowed(String),
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
