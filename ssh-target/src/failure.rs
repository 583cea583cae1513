//! What both components say about a failure, written once: whether it is
//! worth retrying ([`FailureKind`], the WIT `failure-kind` and the host's
//! `failure`, as one another by [`failure_kind_wit!`](crate::failure_kind_wit)),
//! and how the host's `ssh-exec.exec-error` becomes a component's own exec
//! error ([`exec_error_from_wit!`](crate::exec_error_from_wit)).
//!
//! One spelling runs through the layers: a failure is `failure`, retryable or
//! permanent. The one exception is the compute helper's result line, which
//! says `"permanent": true|false` as OCC's own remote helper does; the
//! compute driver reads it into a [`FailureKind`] where it reads the line.

/// Whether the caller should try the same call again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The same call may succeed later without anyone acting.
    Retryable,
    /// Someone must change something first.
    Permanent,
}

impl FailureKind {
    /// `Permanent` where `permanent` holds, else `Retryable`: a verdict that
    /// arrived as a flag (the helper's result line).
    pub fn permanent_if(permanent: bool) -> FailureKind {
        if permanent {
            FailureKind::Permanent
        } else {
            FailureKind::Retryable
        }
    }
}

/// The WIT `failure-kind` and [`FailureKind`] as one another, both ways: a
/// component's bindings generate a type of their own for the WIT one, so the
/// two conversions are written here once.
///
/// `failure_kind_wit!(bindings::...::FailureKind)`
#[macro_export]
macro_rules! failure_kind_wit {
    ($wit:ty) => {
        impl From<$wit> for $crate::failure::FailureKind {
            fn from(kind: $wit) -> Self {
                type Wit = $wit;
                match kind {
                    Wit::Retryable => $crate::failure::FailureKind::Retryable,
                    Wit::Permanent => $crate::failure::FailureKind::Permanent,
                }
            }
        }

        impl From<$crate::failure::FailureKind> for $wit {
            fn from(kind: $crate::failure::FailureKind) -> Self {
                type Wit = $wit;
                match kind {
                    $crate::failure::FailureKind::Retryable => Wit::Retryable,
                    $crate::failure::FailureKind::Permanent => Wit::Permanent,
                }
            }
        }
    };
}

/// The host's `ssh-exec.exec-error` as a component's own exec error: the two
/// name the same nine variants, and each component's bindings generate a type
/// of their own for the WIT one, so the mapping is written here once.
///
/// `exec_error_from_wit!(error, bindings::...::ExecError => crate::ExecError)`
#[macro_export]
macro_rules! exec_error_from_wit {
    ($error:expr, $wit:ty => $ours:ty) => {{
        type Wit = $wit;
        type Ours = $ours;
        match $error {
            Wit::UnknownHost(m) => Ours::UnknownHost(m),
            Wit::Refused(m) => Ours::Refused(m),
            Wit::Connect(m) => Ours::Connect(m),
            Wit::Auth(m) => Ours::Auth(m),
            Wit::HostKey(m) => Ours::HostKey(m),
            Wit::Timeout => Ours::Timeout,
            Wit::Cancelled => Ours::Cancelled,
            Wit::OutputTooLarge(n) => Ours::OutputTooLarge(n),
            Wit::Io(m) => Ours::Io(m),
        }
    }};
}
