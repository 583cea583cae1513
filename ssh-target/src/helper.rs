//! The compute helper's operations (`helper/README.md`), named once: the
//! driver sends them by these names and the host admits them by the same
//! table. The helper keeps its own table (`OPERATIONS`); a host test reads it
//! with `node` and compares it with this one.

/// The helper protocol's version: the `version` of every operation the
/// driver sends and of every envelope the host writes.
pub const PROTOCOL_VERSION: u64 = 2;

/// The most an operation's own deadline (`deadlineMs`) may be: below the
/// transport's 180 s bound, so that the helper stops and reports first.
pub const MAX_DEADLINE_MS: u64 = 175_000;

/// An operation of the remote helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HelperOp {
    /// Probe the host for what the driver needs.
    Probe,
    /// Create or verify the Namespace marker.
    EnsureNamespace,
    /// Read the Agent's marker (its port and account); no lock, no change.
    InspectAgent,
    /// Account, port and the admitted snapshot.
    Prepare,
    /// Unit, current, restart, readiness, served.json.
    Activate,
    /// Verify ownership.
    Deactivate,
    /// Stop and disable the gateway of the current revision.
    Stop,
    /// Remove one revision's snapshot.
    Retire,
    /// Remove one Agent's unit, tree and account.
    DeleteAgent,
    /// Remove every owned unit, file and account of the Namespace.
    DeleteNamespace,
    /// Describe the Agent's gateway unit for one revision; no change.
    DescribeRuntime,
    /// Read one invocation of the Agent's gateway output within the
    /// controller's bounds; no change.
    ReadLogs,
    /// Check the revision's deployment; no change.
    Diagnose,
}

impl HelperOp {
    /// Every operation.
    pub const ALL: [HelperOp; 13] = [
        HelperOp::Probe,
        HelperOp::EnsureNamespace,
        HelperOp::InspectAgent,
        HelperOp::Prepare,
        HelperOp::Activate,
        HelperOp::Deactivate,
        HelperOp::Stop,
        HelperOp::Retire,
        HelperOp::DeleteAgent,
        HelperOp::DeleteNamespace,
        HelperOp::DescribeRuntime,
        HelperOp::ReadLogs,
        HelperOp::Diagnose,
    ];

    /// The operation's `op` field.
    pub fn name(self) -> &'static str {
        match self {
            HelperOp::Probe => "probe",
            HelperOp::EnsureNamespace => "ensure-namespace",
            HelperOp::InspectAgent => "inspect-agent",
            HelperOp::Prepare => "prepare",
            HelperOp::Activate => "activate",
            HelperOp::Deactivate => "deactivate",
            HelperOp::Stop => "stop",
            HelperOp::Retire => "retire",
            HelperOp::DeleteAgent => "delete-agent",
            HelperOp::DeleteNamespace => "delete-namespace",
            HelperOp::DescribeRuntime => "describe-runtime",
            HelperOp::ReadLogs => "read-logs",
            HelperOp::Diagnose => "diagnose",
        }
    }

    /// The operation an `op` field names.
    pub fn from_name(name: &str) -> Option<HelperOp> {
        HelperOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The fields an operation of this kind may carry besides `version`, `op`
    /// and `deadlineMs`: the driver's policy, nothing the host supplies.
    pub fn policy_fields(self) -> &'static [&'static str] {
        match self {
            // The controller's document, checked against the hash the host
            // took of it.
            HelperOp::Prepare => &["configuration"],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for op in HelperOp::ALL {
            assert!(seen.insert(op.name()), "{} twice", op.name());
            assert_eq!(HelperOp::from_name(op.name()), Some(op));
        }
        assert_eq!(HelperOp::from_name("Prepare"), None);
        assert_eq!(HelperOp::from_name(""), None);
    }
}
