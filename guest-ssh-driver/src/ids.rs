//! Identities: the hashes, account names and server-owned IDs the host layout and the
//! ownership markers are built from.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::model::{AgentBinding, Revision};

/// Server-owned IDs land in JSON markers and in the unit's ownership header; a bound
/// keeps both small.
pub const MAX_ID_LEN: usize = 256;
/// How many characters of `runtime.user` begin an account name: 19 + `-` + 12 hex
/// characters is 32, the Linux limit on user names.
const ACCOUNT_PREFIX_LEN: usize = 19;
/// The helper compares revision numbers as JavaScript numbers; above
/// `Number.MAX_SAFE_INTEGER` two numbers could compare equal.
pub const MAX_REVISION_NUMBER: u64 = (1 << 53) - 1;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The first 12 hex characters of SHA-256 of the exact ID: nsHash, agentHash, revHash.
pub fn short_hash(id: &str) -> String {
    let mut hash = sha256_hex(id.as_bytes());
    hash.truncate(12);
    hash
}

/// The Agent's private account (and group) name: the first 19 characters of
/// `runtime.user`, `-`, and the short hash of `<namespaceId>:<agentId>`.
pub fn account_name(runtime_user: &str, namespace_id: &str, agent_id: &str) -> String {
    let prefix: String = runtime_user.chars().take(ACCOUNT_PREFIX_LEN).collect();
    format!(
        "{prefix}-{}",
        short_hash(&format!("{namespace_id}:{agent_id}"))
    )
}

/// Checks a server-owned ID before it is written anywhere. Besides the length and
/// control characters, the characters systemd would interpret in a unit line
/// (`%`, `$`, `"`, `\`) are refused here, at bind time, rather than after a revision
/// was already prepared: the IDs are rendered into the unit's ownership header.
pub fn check_id(field: &'static str, value: &str) -> Result<(), Error> {
    let reason = if value.is_empty() {
        "must not be empty".to_owned()
    } else if value.len() > MAX_ID_LEN {
        format!("must be at most {MAX_ID_LEN} bytes")
    } else if let Some(c) = value.chars().find(|c| c.is_control()) {
        format!("must not contain control character {c:?}")
    } else if let Some(c) = value.chars().find(|c| matches!(c, '%' | '$' | '"' | '\\')) {
        format!("must not contain {c:?}, which systemd would interpret in the unit header")
    } else {
        return Ok(());
    };
    Err(Error::InvalidIdentity { field, reason })
}

/// The identities of one bound Agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIds {
    pub namespace_id: String,
    pub namespace_hash: String,
    pub agent_id: String,
    pub agent_hash: String,
    pub service_principal_id: String,
    pub account: String,
}

impl AgentIds {
    /// Validates the binding's IDs and derives the hashes and account name.
    pub fn new(binding: &AgentBinding, runtime_user: &str) -> Result<Self, Error> {
        let agent = &binding.agent;
        check_id("namespace.id", &binding.namespace.id)?;
        check_id("agent.id", &agent.id)?;
        check_id("agent.servicePrincipalId", &agent.service_principal_id)?;
        Ok(Self {
            namespace_id: binding.namespace.id.clone(),
            namespace_hash: short_hash(&binding.namespace.id),
            agent_id: agent.id.clone(),
            agent_hash: short_hash(&agent.id),
            service_principal_id: agent.service_principal_id.clone(),
            account: account_name(runtime_user, &binding.namespace.id, &agent.id),
        })
    }
}

/// The identities of one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionIds {
    pub id: String,
    pub hash: String,
    pub number: u64,
    /// `<harness id>/<harness mode>`, as recorded in the revision marker.
    pub harness: String,
}

impl RevisionIds {
    pub fn new(revision: &Revision) -> Result<Self, Error> {
        check_id("revision.id", &revision.id)?;
        if !(1..=MAX_REVISION_NUMBER).contains(&revision.revision) {
            return Err(Error::InvalidIdentity {
                field: "revision.revision",
                reason: format!(
                    "must be from 1 to {MAX_REVISION_NUMBER} (the helper compares it as a \
                     JavaScript number)"
                ),
            });
        }
        Ok(Self {
            id: revision.id.clone(),
            hash: short_hash(&revision.id),
            number: revision.revision,
            harness: format!("{}/{}", revision.harness.id, revision.harness.mode),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values computed independently in a shell, e.g.
    // `printf %s ns-1 | sha256sum`, and pasted here.
    const SHA256_NS_1: &str = "7a6379f31660b9ad559f91b92fdb2c754c0857a67da9bd514c43ebd691f538c5";

    #[test]
    fn hashes_match_sha256sum() {
        let cases = [
            // printf %s ns-1 | sha256sum
            ("ns-1", "7a6379f31660"),
            // printf %s agent-1 | sha256sum
            ("agent-1", "6ff3b3bd11c4"),
            // printf %s rev-1 | sha256sum
            ("rev-1", "a6d1d4ea8e5a"),
            // printf %s 'ns-1:agent-1' | sha256sum
            ("ns-1:agent-1", "cd338df39c47"),
            // printf %s '' | sha256sum
            ("", "e3b0c44298fc"),
            // printf %s 'é' | sha256sum  (UTF-8 bytes c3 a9)
            ("é", "4a99557e4033"),
        ];
        for (id, expected) in cases {
            assert_eq!(short_hash(id), expected, "{id:?}");
        }
        assert_eq!(sha256_hex(b"ns-1"), SHA256_NS_1);
    }

    #[test]
    fn account_names_truncate_the_runtime_user() {
        let cases = [
            ("openclaw", "openclaw-cd338df39c47"),
            // Exactly 19 characters are kept.
            ("abcdefghijklmnopqrs", "abcdefghijklmnopqrs-cd338df39c47"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "abcdefghijklmnopqrs-cd338df39c47",
            ),
            ("_svc", "_svc-cd338df39c47"),
        ];
        for (user, expected) in cases {
            let account = account_name(user, "ns-1", "agent-1");
            assert_eq!(account, expected);
            assert!(account.len() <= 32);
        }
    }

    #[test]
    fn server_owned_ids_are_checked() {
        let long = "x".repeat(MAX_ID_LEN + 1);
        let cases: &[(&str, Option<&str>)] = &[
            ("ns-1", None),
            ("0b6f1c1e-6a53-4c1b-9a0f-5b7d7f0e9a11", None),
            (&long[..MAX_ID_LEN], None),
            ("", Some("agentId: must not be empty")),
            (&long, Some("agentId: must be at most 256 bytes")),
            (
                "a\nb",
                Some("agentId: must not contain control character '\\n'"),
            ),
            (
                "a\u{7f}",
                Some("agentId: must not contain control character '\\u{7f}'"),
            ),
            (
                "a%n",
                Some(
                    "agentId: must not contain '%', which systemd would interpret in the unit header",
                ),
            ),
            (
                "a$b",
                Some(
                    "agentId: must not contain '$', which systemd would interpret in the unit header",
                ),
            ),
            (
                "a\"b",
                Some(
                    "agentId: must not contain '\"', which systemd would interpret in the unit header",
                ),
            ),
            (
                "a\\",
                Some(
                    "agentId: must not contain '\\\\', which systemd would interpret in the unit header",
                ),
            ),
        ];
        for (id, expected) in cases {
            let result = check_id("agentId", id).map_err(|e| {
                assert_eq!(e.code(), "invalid-identity");
                e.to_string()
            });
            assert_eq!(result.err().as_deref(), *expected, "{id:?}");
        }
    }
}
