//! The driver's one error type and how each failure is classified.
//!
//! Every variant maps one-to-one onto the WIT `driver-error`: [`Error::kind`],
//! [`Error::code`] and [`Error::host`] are its fields and `Display` is its message.
//! The classification follows the spec: refused input, foreign ownership and unmapped
//! names are permanent; transport, timeouts and unexpected helper failures are
//! retryable.

pub use occ_ssh_target::failure::FailureKind;

/// Why an exec produced no exit status (the WIT `ssh-exec.exec-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The alias is not granted to this driver.
    #[error("host alias is not granted to this driver: {0}")]
    UnknownHost(String),
    /// The host's grant does not allow the exec (program, arguments, helper).
    #[error("the host refused the exec: {0}")]
    Refused(String),
    /// The host refused the installation's identity.
    #[error(
        "the host refused the identity in ssh.identityFile ({0}); an operator must authorize its public key for root there"
    )]
    Auth(String),
    /// The connection could not be established.
    #[error("ssh connection failed: {0}")]
    Connect(String),
    /// The host's key did not match the known-hosts file.
    #[error(
        "host key does not match ssh.knownHostsFile ({0}); an operator must fix the known-hosts file, never disable host-key checking"
    )]
    HostKey(String),
    /// The operation bound passed and the client was killed.
    #[error("ssh operation timed out")]
    Timeout,
    /// The controller cancelled the operation.
    #[error("ssh operation cancelled")]
    Cancelled,
    /// The command wrote more than the host's cap on stdout.
    #[error("helper output exceeded the host's cap of {0} bytes")]
    OutputTooLarge(u64),
    /// Any other local failure running the client.
    #[error("ssh client failed: {0}")]
    Io(String),
}

/// Every failure a contract method can return.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver configuration is malformed or unsafe; `path` is the key at fault.
    #[error("{path}: {reason}")]
    Configuration { path: String, reason: String },
    /// A Namespace name has no `hosts.<name>` entry.
    #[error(
        "namespace name {} is not mapped to a host (configuration.hosts has no such key)",
        quoted(.name)
    )]
    UnmappedNamespace { name: String },
    /// A server-owned ID cannot be written into markers or the unit header.
    #[error("{field}: {reason}")]
    InvalidIdentity { field: &'static str, reason: String },
    /// The revision has no binding, or its binding owns another Agent: fail closed.
    #[error("{0}")]
    UnboundAgent(String),
    /// Admission refused the revision before any host effect; `path` names the key.
    #[error("{path}: {reason}")]
    Refused {
        code: &'static str,
        path: String,
        reason: String,
    },
    /// A lifecycle hook refused, so the effect it guards was not performed;
    /// `failure` is the controller's verdict.
    #[error("lifecycle hook {hook} refused: {message}")]
    HookRefused {
        hook: &'static str,
        message: String,
        failure: FailureKind,
    },
    /// The host would not run a hook for this call.
    #[error("lifecycle hook {hook} was not run: {message}")]
    HookNotAllowed { hook: &'static str, message: String },
    /// `beforeWorkloadStart` returned placeholders the unit must not carry.
    #[error("lifecycle hook beforeWorkloadStart returned {0}")]
    InvalidPlaceholder(String),
    /// The exec produced no exit status.
    #[error("host {host}: {op}: {error}")]
    Transport {
        host: String,
        op: &'static str,
        #[source]
        error: ExecError,
    },
    /// The helper ran and reported a failure.
    #[error("host {host}: {op} failed: {code}: {message}")]
    Helper {
        host: String,
        op: &'static str,
        code: String,
        message: String,
        failure: FailureKind,
    },
    /// The helper ended without a usable result (crash, signal, no result line).
    #[error("host {host}: {op}: helper ended without a result: {detail}")]
    HelperCrashed {
        host: String,
        op: &'static str,
        detail: String,
    },
    /// The helper's result line lacks a field this operation needs.
    #[error("host {host}: {op}: invalid helper result: {detail}")]
    HelperProtocol {
        host: String,
        op: &'static str,
        detail: String,
    },
}

impl Error {
    pub(crate) fn config(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Configuration {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn refused(
        code: &'static str,
        path: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Refused {
            code,
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// Whether retrying the same call can succeed without operator action.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Transport { error, .. } => match error {
                // An alias or exec the installation does not grant, a key an operator
                // must authorize, or a host key to fix in known_hosts: the same call
                // keeps failing until someone acts.
                ExecError::UnknownHost(_)
                | ExecError::Refused(_)
                | ExecError::Auth(_)
                | ExecError::HostKey(_) => FailureKind::Permanent,
                _ => FailureKind::Retryable,
            },
            // A hook is the controller's own call: its answer says whether the refusal
            // is for good; without one it may be waiting on something that settles.
            Self::Helper { failure, .. } | Self::HookRefused { failure, .. } => *failure,
            Self::HelperCrashed { .. } | Self::HelperProtocol { .. } => FailureKind::Retryable,
            Self::HookNotAllowed { .. } => FailureKind::Permanent,
            Self::Configuration { .. }
            | Self::UnmappedNamespace { .. }
            | Self::InvalidIdentity { .. }
            | Self::UnboundAgent(_)
            | Self::Refused { .. }
            | Self::InvalidPlaceholder(_) => FailureKind::Permanent,
        }
    }

    /// The stable, machine-readable code.
    pub fn code(&self) -> &str {
        match self {
            Self::Configuration { .. } => "invalid-configuration",
            Self::UnmappedNamespace { .. } => "unmapped-namespace",
            Self::InvalidIdentity { .. } => "invalid-identity",
            Self::UnboundAgent(_) => "unbound-agent",
            Self::Refused { code, .. } => code,
            Self::HookRefused { .. } => "hook-refused",
            Self::HookNotAllowed { .. } => "hook-not-allowed",
            Self::InvalidPlaceholder(_) => "invalid-placeholder",
            Self::Transport { error, .. } => match error {
                ExecError::UnknownHost(_) => "unknown-host",
                ExecError::Refused(_) => "exec-refused",
                ExecError::Auth(_) => "ssh-auth",
                ExecError::Connect(_) => "ssh-connect",
                ExecError::HostKey(_) => "host-key-mismatch",
                ExecError::Timeout => "ssh-timeout",
                ExecError::Cancelled => "cancelled",
                ExecError::OutputTooLarge(_) => "output-too-large",
                ExecError::Io(_) => "ssh-io",
            },
            Self::Helper { code, .. } => code,
            Self::HelperCrashed { .. } => "helper-failed",
            Self::HelperProtocol { .. } => "invalid-helper-result",
        }
    }

    /// The configured host alias (the Namespace name) when the failure concerns one host.
    pub fn host(&self) -> Option<&str> {
        match self {
            Self::Transport { host, .. }
            | Self::Helper { host, .. }
            | Self::HelperCrashed { host, .. }
            | Self::HelperProtocol { host, .. } => Some(host),
            _ => None,
        }
    }
}

pub use occ_ssh_target::text::{MAX_QUOTED, named, quoted};

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(error: ExecError) -> Error {
        Error::Transport {
            host: "stable".into(),
            op: "prepare",
            error,
        }
    }

    #[test]
    fn transport_failures_are_classified_and_name_the_host() {
        use FailureKind::{Permanent, Retryable};
        let cases = [
            (
                ExecError::UnknownHost("stable".into()),
                Permanent,
                "unknown-host",
            ),
            (
                ExecError::HostKey("mismatch".into()),
                Permanent,
                "host-key-mismatch",
            ),
            (
                ExecError::Auth("Permission denied (publickey)".into()),
                Permanent,
                "ssh-auth",
            ),
            (
                ExecError::Refused("argv is not the pinned helper's".into()),
                Permanent,
                "exec-refused",
            ),
            (
                ExecError::Connect("refused".into()),
                Retryable,
                "ssh-connect",
            ),
            (ExecError::Timeout, Retryable, "ssh-timeout"),
            (ExecError::Cancelled, Retryable, "cancelled"),
            (
                ExecError::OutputTooLarge(1024),
                Retryable,
                "output-too-large",
            ),
            (ExecError::Io("spawn".into()), Retryable, "ssh-io"),
        ];
        for (error, kind, code) in cases {
            let error = transport(error);
            assert_eq!(error.kind(), kind, "{error}");
            assert_eq!(error.code(), code);
            assert_eq!(error.host(), Some("stable"));
            assert!(
                error.to_string().starts_with("host stable: prepare: "),
                "{error}"
            );
        }
    }

    #[test]
    fn host_key_message_tells_the_operator_what_to_fix() {
        let error = transport(ExecError::HostKey("key changed".into()));
        assert_eq!(
            error.to_string(),
            "host stable: prepare: host key does not match ssh.knownHostsFile (key changed); \
             an operator must fix the known-hosts file, never disable host-key checking"
        );
        let error = transport(ExecError::Auth("Permission denied (publickey)".into()));
        assert_eq!(
            error.to_string(),
            "host stable: prepare: the host refused the identity in ssh.identityFile \
             (Permission denied (publickey)); an operator must authorize its public key for root there"
        );
    }

    #[test]
    fn policy_failures_are_permanent_and_hook_refusals_retryable() {
        let permanent = [
            Error::config("configuration.ssh", "required"),
            Error::UnmappedNamespace { name: "x".into() },
            Error::UnboundAgent("no binding".into()),
            Error::refused(
                "unsupported-plugins",
                "revision.requestedPlugins",
                "nonempty",
            ),
            Error::InvalidPlaceholder("too many".into()),
        ];
        for error in permanent {
            assert_eq!(error.kind(), FailureKind::Permanent, "{error}");
            assert_eq!(error.host(), None);
        }
        let hook = Error::HookRefused {
            hook: "beforeWorkloadStart",
            message: "denied".into(),
            failure: FailureKind::Retryable,
        };
        assert_eq!(hook.kind(), FailureKind::Retryable);
        let for_good = Error::HookRefused {
            hook: "beforeWorkloadStart",
            message: "denied".into(),
            failure: FailureKind::Permanent,
        };
        assert_eq!(for_good.kind(), FailureKind::Permanent);
        assert_eq!(hook.code(), "hook-refused");
        assert_eq!(
            hook.to_string(),
            "lifecycle hook beforeWorkloadStart refused: denied"
        );
    }
}
