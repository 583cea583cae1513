//! The host's error types: one for a call that failed, one for a driver that
//! could not be opened.

use std::path::PathBuf;

use serde::Serialize;

mod code;

pub use code::{Code, RaisedBy};

/// Whether a failed call is worth retrying unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// The same call may succeed later without operator action.
    Retryable,
    /// An operator must change something first.
    Permanent,
}

impl FailureKind {
    /// The process exit code the CLI uses for this kind of failure: sysexits'
    /// `EX_TEMPFAIL` (try again later) and `EX_DATAERR` (fix the input first).
    pub fn exit_code(self) -> u8 {
        match self {
            FailureKind::Retryable => 75,
            FailureKind::Permanent => 65,
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailureKind::Retryable => "retryable",
            FailureKind::Permanent => "permanent",
        })
    }
}

/// A contract call that did not succeed: the driver's own error, or the host's
/// verdict on a driver that misbehaved or was stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
#[serde(rename_all = "camelCase")]
pub struct CallError {
    /// Whether the controller should retry.
    pub failure: FailureKind,
    /// A stable code: the driver's own, or one of the host's
    /// (`docs/errors.md`, "The host's codes", lists each with its kind, and
    /// `tests/docs/drift.test.mjs` holds that page to the code).
    pub code: String,
    /// A message for the operator.
    pub message: String,
    /// The configured host alias involved, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The host's own refusal, in the host's words, when the host refused
    /// something the component asked for during the call (an exec, a
    /// workspace): beside the component's verdict, which may describe it
    /// in its own words or not at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

impl CallError {
    /// An error with no host.
    pub fn new(failure: FailureKind, code: &str, message: impl Into<String>) -> Self {
        CallError {
            failure,
            code: code.to_string(),
            message: message.into(),
            host: None,
            refusal: None,
        }
    }

    /// The same error, carrying the host's first refusal of the call, if any.
    pub fn with_refusal(mut self, refusal: Option<String>) -> Self {
        if self.refusal.is_none() {
            self.refusal = refusal;
        }
        self
    }

    /// The host's own error: `code` with the failure the list gives it.
    pub fn host(code: Code, message: impl Into<String>) -> Self {
        CallError::new(code.failure(), code.as_str(), message)
    }

    /// An error in the parameters the controller passed.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        CallError::host(Code::InvalidParams, message)
    }

    /// The controller cancelled the call.
    pub fn cancelled() -> Self {
        CallError::host(
            Code::Cancelled,
            "the operation was cancelled; its ssh client was killed",
        )
    }
}

/// Failures loading a driver component or reading an installation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The component file could not be read.
    #[error("cannot read component {path}: {source}")]
    ReadComponent {
        /// The file named in the installation or on the command line.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid component for this engine.
    #[error("{path} is not a loadable WebAssembly component: {message}")]
    InvalidComponent {
        /// The component file.
        path: PathBuf,
        /// What the engine said.
        message: String,
    },
    /// The component imports something outside the granted world.
    #[error(
        "{path} imports {}, which this host does not grant (granted: the {world} world plus sealed wasi:io, wasi:cli, wasi:random and wasi:clocks)",
        refused.join(", ")
    )]
    RefusedImports {
        /// The component file.
        path: PathBuf,
        /// The world it was checked against.
        world: String,
        /// Every refused import name.
        refused: Vec<String>,
    },
    /// The component was built against a version of the WIT package this
    /// host does not serve.
    #[error(
        "{path} was built for occ:compute@{found} (it names {name}); this host serves occ:compute@{}: \
         rebuild the component against this host's wit/, or run a host that serves {found}",
        served.join(", @")
    )]
    UnservedVersion {
        /// The component file.
        path: PathBuf,
        /// The package version the component names.
        found: String,
        /// The import or export that names it.
        name: String,
        /// Every version this host serves.
        served: Vec<String>,
    },
    /// The component does not export the world's contract.
    #[error("{path} does not export {expected}; it exports: {}", found.join(", "))]
    MissingExport {
        /// The component file.
        path: PathBuf,
        /// The export the host needs.
        expected: String,
        /// What it exports instead.
        found: Vec<String>,
    },
    /// The installation document is invalid.
    #[error("{path}: {message}")]
    Installation {
        /// The installation file.
        path: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The driver refused its own configuration when it was opened.
    #[error("{path}: the driver refused its configuration: {error}")]
    Configuration {
        /// The installation file.
        path: PathBuf,
        /// The driver's error, naming the key path.
        error: Box<CallError>,
    },
    /// A local file the host needs (the audit log, the cache) is unusable.
    #[error("{path}: {message}")]
    LocalFile {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The audit log could not be written (a full disk): nothing was loaded
    /// unaudited, and a later try may succeed.
    #[error("{0}")]
    AuditLog(String),
    /// Any other engine failure.
    #[error("{0}")]
    Engine(String),
}
