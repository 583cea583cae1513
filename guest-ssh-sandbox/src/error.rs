//! The backend's one error type and how each failure is classified.
//!
//! Every error maps one-to-one onto the WIT `sandbox-error`: [`Error::kind`],
//! [`Error::code`], [`Error::path`] and `Display` (the message). Refused input,
//! policy and missing remote prerequisites are permanent: the same call cannot
//! succeed until someone changes something. Transport failures, timeouts,
//! cancellation and unexpected remote failures are retryable.

pub use occ_ssh_target::failure::FailureKind;

/// What failed, as a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
    /// The configuration is malformed; the message names the key path.
    InvalidConfiguration,
    /// A path is not one the bridge accepts (empty, NUL, a `.`/`..` leaf).
    InvalidPath,
    /// A path leaves the sandbox's mounts.
    EscapesWorkspace,
    /// The path is in a mount the configuration makes read-only.
    ReadOnly,
    /// A symbolic link is on the way or at the leaf.
    Symlink,
    /// A regular file with more than one link: it may be a file elsewhere.
    Hardlink,
    NotFound,
    Exists,
    NotADirectory,
    IsADirectory,
    NotEmpty,
    /// A file or output is over the bound.
    TooLarge,
    /// `edit`: the text to replace does not occur.
    NoMatch,
    /// `edit`: the text to replace occurs more than once.
    AmbiguousMatch,
    /// `apply-patch`: the patch is malformed or does not apply.
    InvalidPatch,
    /// `exec`: the command, its environment or its workdir is refused.
    InvalidCommand,
    /// A remote script refused an operation the envelope of the call does not
    /// allow, or an argument it does not take.
    InvalidOperation,
    /// `run-shell`: the script exited nonzero and failure was not allowed.
    CommandFailed,
    /// The target lacks part of the remote utility contract.
    MissingUtility,
    /// The target cannot publish a staged workspace atomically.
    MissingCapability,
    /// The local workspace cannot be sent as it is.
    LocalWorkspace,
    /// The connection could not be made or broke.
    Transport,
    /// The target's host key is not the one expected.
    HostKey,
    /// The target refused the identity.
    Auth,
    Timeout,
    Cancelled,
    /// The host's grant refused what the backend asked to run.
    Refused,
    /// The target's disk (or quota) had no room for a write.
    DiskFull,
    /// The scope's runtime was laid out by a later release than the
    /// scripts that ran: roll forward (nothing was changed).
    NewerFormat,
    /// The scope's runtime holds a layout record that is not one.
    InvalidLayout,
    /// A tree to remove is deeper than the scripts walk.
    TooDeep,
    /// An entry was replaced by someone else while the operation worked on
    /// it: the same call may find it settled.
    Changed,
    /// Anything else the target reported.
    Remote,
}

impl Code {
    /// The code as the WIT error carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidConfiguration => "invalid-configuration",
            Code::InvalidPath => "invalid-path",
            Code::EscapesWorkspace => "escapes-workspace",
            Code::ReadOnly => "read-only",
            Code::Symlink => "symlink",
            Code::Hardlink => "hardlink",
            Code::NotFound => "not-found",
            Code::Exists => "exists",
            Code::NotADirectory => "not-a-directory",
            Code::IsADirectory => "is-a-directory",
            Code::NotEmpty => "not-empty",
            Code::TooLarge => "too-large",
            Code::NoMatch => "no-match",
            Code::AmbiguousMatch => "ambiguous-match",
            Code::InvalidPatch => "invalid-patch",
            Code::InvalidCommand => "invalid-command",
            Code::InvalidOperation => "invalid-operation",
            Code::CommandFailed => "command-failed",
            Code::MissingUtility => "missing-utility",
            Code::MissingCapability => "missing-capability",
            Code::LocalWorkspace => "local-workspace",
            Code::Transport => "transport",
            Code::HostKey => "host-key",
            Code::Auth => "auth",
            Code::Timeout => "timeout",
            Code::Cancelled => "cancelled",
            Code::Refused => "refused",
            Code::DiskFull => "disk-full",
            Code::NewerFormat => "newer-format",
            Code::InvalidLayout => "invalid-layout",
            Code::TooDeep => "too-deep",
            Code::Changed => "changed",
            Code::Remote => "remote",
        }
    }

    /// The code a remote script names in its error line, if it is one of ours.
    pub fn from_remote(name: &str) -> Option<Code> {
        Some(match name {
            "invalid-path" => Code::InvalidPath,
            "escapes-workspace" => Code::EscapesWorkspace,
            "read-only" => Code::ReadOnly,
            "invalid-operation" => Code::InvalidOperation,
            "symlink" => Code::Symlink,
            "hardlink" => Code::Hardlink,
            "not-found" => Code::NotFound,
            "exists" => Code::Exists,
            "not-a-directory" => Code::NotADirectory,
            "is-a-directory" => Code::IsADirectory,
            "not-empty" => Code::NotEmpty,
            "too-large" => Code::TooLarge,
            "missing-capability" => Code::MissingCapability,
            "disk-full" => Code::DiskFull,
            "newer-format" => Code::NewerFormat,
            "invalid-layout" => Code::InvalidLayout,
            "invalid-command" => Code::InvalidCommand,
            "too-deep" => Code::TooDeep,
            "changed" => Code::Changed,
            "remote" => Code::Remote,
            _ => return None,
        })
    }

    /// Whether a failure with this code may go away by itself.
    pub fn kind(self) -> FailureKind {
        match self {
            Code::Transport
            | Code::Timeout
            | Code::Cancelled
            | Code::DiskFull
            | Code::Changed
            | Code::Remote => FailureKind::Retryable,
            _ => FailureKind::Permanent,
        }
    }
}

/// A failed operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub code: Code,
    pub message: String,
    /// The sandbox path involved, when there is one.
    pub path: Option<String>,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            path: None,
        }
    }

    /// The same error, naming `path`.
    pub fn at(mut self, path: impl Into<String>) -> Error {
        self.path = Some(path.into());
        self
    }

    /// A configuration error naming the key path.
    pub fn config(path: impl AsRef<str>, reason: impl AsRef<str>) -> Error {
        Error::new(
            Code::InvalidConfiguration,
            format!("{}: {}", path.as_ref(), reason.as_ref()),
        )
    }

    /// OpenClaw's wording for a path outside every mount.
    pub fn escapes(action: &str, path: &str) -> Error {
        Error::new(
            Code::EscapesWorkspace,
            format!("Sandbox path escapes allowed mounts; cannot {action}: {path}"),
        )
        .at(path)
    }

    /// OpenClaw's wording for a write into a read-only mount.
    pub fn read_only(action: &str, path: &str) -> Error {
        Error::new(
            Code::ReadOnly,
            format!("Sandbox path is read-only; cannot {action}: {path}"),
        )
        .at(path)
    }

    /// A `read-only` refusal the workspace script made (a path that lies in
    /// a protected skills directory once its links are resolved), in
    /// OpenClaw's wording for `action` on `path`; any other error as it is.
    pub fn or_read_only(self, action: &str, path: &str) -> Error {
        if self.code == Code::ReadOnly {
            Error::read_only(action, path)
        } else {
            self
        }
    }

    pub fn kind(&self) -> FailureKind {
        self.code.kind()
    }

    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
}

/// Why a host call produced no exit status (the WIT `ssh-exec.exec-error` and
/// `local-workspace.upload-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    UnknownHost(String),
    Refused(String),
    Connect(String),
    Auth(String),
    HostKey(String),
    Timeout,
    Cancelled,
    OutputTooLarge(u64),
    Io(String),
    /// `upload`: the root is not granted for this call.
    NotGranted(String),
    /// `upload`: the local tree cannot be sent.
    Local(String),
}

impl ExecError {
    /// The backend error for a failed host call while doing `what` on `target`.
    pub fn into_error(self, what: &str, target: &str) -> Error {
        match self {
            ExecError::UnknownHost(m) | ExecError::Refused(m) => Error::new(
                Code::Refused,
                format!("{what}: the host refused to run it on {target}: {m}"),
            ),
            ExecError::Connect(m) | ExecError::Io(m) => Error::new(
                Code::Transport,
                format!("{what}: ssh to {target} failed: {m}"),
            ),
            ExecError::Auth(m) => Error::new(
                Code::Auth,
                format!("{what}: {target} refused the configured identity: {m}"),
            ),
            ExecError::HostKey(m) => Error::new(
                Code::HostKey,
                format!(
                    "{what}: the host key of {target} does not match: {m}; fix the known hosts, never disable checking to get past this"
                ),
            ),
            ExecError::Timeout => Error::new(
                Code::Timeout,
                format!("{what}: {target} did not finish in time"),
            ),
            ExecError::Cancelled => Error::new(Code::Cancelled, format!("{what}: cancelled")),
            ExecError::OutputTooLarge(n) => Error::new(
                Code::TooLarge,
                format!("{what}: the output from {target} exceeded the host's bound of {n} bytes"),
            ),
            ExecError::NotGranted(m) => Error::new(
                Code::Refused,
                format!("{what}: the local workspace is not granted: {m}"),
            ),
            ExecError::Local(m) => Error::new(
                Code::LocalWorkspace,
                format!("{what}: the local workspace cannot be seeded as it is: {m}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_matches_the_wit_documentation() {
        let retryable = [
            Code::Transport,
            Code::Timeout,
            Code::Cancelled,
            Code::DiskFull,
            Code::Changed,
            Code::Remote,
        ];
        for code in retryable {
            assert_eq!(code.kind(), FailureKind::Retryable, "{code:?}");
        }
        for code in [
            Code::InvalidConfiguration,
            Code::EscapesWorkspace,
            Code::MissingCapability,
            Code::MissingUtility,
            Code::HostKey,
            Code::Refused,
            Code::LocalWorkspace,
            Code::InvalidCommand,
            Code::TooDeep,
        ] {
            assert_eq!(code.kind(), FailureKind::Permanent, "{code:?}");
        }
        // Every code a script may name round-trips.
        for name in [
            "symlink",
            "hardlink",
            "not-found",
            "missing-capability",
            "invalid-command",
            "too-deep",
            "changed",
        ] {
            assert_eq!(Code::from_remote(name).unwrap().as_str(), name);
        }
        assert_eq!(Code::from_remote("bogus"), None);
    }

    #[test]
    fn openclaw_wording_for_policy_refusals() {
        assert_eq!(
            Error::escapes("read files", "/etc/passwd").to_string(),
            "Sandbox path escapes allowed mounts; cannot read files: /etc/passwd"
        );
        assert_eq!(
            Error::read_only("write files", "/x/agent/a").to_string(),
            "Sandbox path is read-only; cannot write files: /x/agent/a"
        );
    }
}
