//! The one list of the codes the host and its Node packages fail with, each
//! with whether a call that failed with it is worth retrying.
//!
//! The host builds its own errors from [`Code`] ([`CallError::host`]); the
//! Node packages import the same list from `host/node/rpc/codes.mjs`, which
//! is written from this one ([`Code::node_module`]) and held to it by a test.
//! `docs/errors.md` says what each means, and `tests/docs/drift.test.mjs`
//! holds that page to this list. A component's codes are its own: the host
//! passes them through as the component wrote them.
//!
//! [`CallError::host`]: super::CallError::host

use super::FailureKind;

/// Declares the codes: a variant, its spelling, its failure, and who raises
/// it, once each.
macro_rules! codes {
    ($( $(#[doc = $doc:literal])* $variant:ident = $code:literal, $failure:ident, $raised:ident; )+) => {
        /// A code the host or its Node packages fail with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $( $(#[doc = $doc])* $variant, )+
        }

        impl Code {
            /// Every code, in the order of the list.
            pub const ALL: &'static [Code] = &[$(Code::$variant),+];

            /// Its spelling on the wire, in the audit log and in `docs/errors.md`.
            pub const fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)+ }
            }

            /// Whether a call that failed with it is worth retrying unchanged.
            /// Where the case decides (a host that exited with a permanent
            /// verdict), the error says so itself: this is the kind it has
            /// otherwise.
            pub fn failure(self) -> FailureKind {
                match self { $(Code::$variant => FailureKind::$failure,)+ }
            }

            /// Who fails with it: the host binary, or only the Node packages
            /// around it.
            pub fn raised_by(self) -> RaisedBy {
                match self { $(Code::$variant => RaisedBy::$raised,)+ }
            }
        }
    };
}

/// Who fails with a [`Code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaisedBy {
    /// The host binary (and the Node packages, for a host that answered it).
    Host,
    /// Only the Node packages, before or around the host binary.
    Packages,
}

codes! {
    /// The params are not the method's shape; the message names the field.
    InvalidParams = "invalid-params", Permanent, Host;
    /// The host's own reading of the installation (or a package's of its
    /// configuration) failed; the message names the key.
    InvalidConfiguration = "invalid-configuration", Permanent, Host;
    /// The caller cancelled the call; its ssh client was killed.
    Cancelled = "cancelled", Retryable, Host;
    /// The component did not finish within the host's wall-clock bound.
    CallTimeout = "call-timeout", Retryable, Host;
    /// The component used up its CPU budget (fuel) in one call.
    CpuLimit = "cpu-limit", Permanent, Host;
    /// The component went over its memory budget.
    MemoryLimit = "memory-limit", Permanent, Host;
    /// The component went over another store bound (tables, instances).
    ResourceLimit = "resource-limit", Permanent, Host;
    /// The component panicked.
    DriverPanic = "driver-panic", Permanent, Host;
    /// The component trapped otherwise.
    DriverTrap = "driver-trap", Permanent, Host;
    /// The engine could not set up the call's store.
    Engine = "engine", Retryable, Host;
    /// The component's result is over the host's bound.
    ResultTooLarge = "result-too-large", Permanent, Host;
    /// An audit record could not be written, so the call did not run
    /// unaudited (or, for a lost end record, its effect is not recorded).
    AuditUnavailable = "audit-unavailable", Retryable, Host;
    /// A revision call names an Agent `bindAgent` never accepted.
    UnboundAgent = "unbound-agent", Permanent, Host;
    /// A compute method called on a sandbox installation.
    UnknownMethod = "unknown-method", Permanent, Host;
    /// The component's `configurationSchema` is not JSON.
    InvalidSchema = "invalid-schema", Permanent, Host;
    /// Preflight: the identity or known-hosts file cannot be read, or the
    /// identity is readable by others.
    LocalSshFiles = "local-ssh-files", Permanent, Host;
    /// A runtime read of a component built for an older WIT.
    NotImplemented = "not-implemented", Permanent, Host;
    /// The component's runtime description, log chunk or check broke OCC's
    /// shapes.
    InvalidRuntimeRecord = "invalid-runtime-record", Retryable, Host;
    /// No gateway unit runs the revision now.
    NoPod = "no-pod", Retryable, Host;
    /// No host binary for this machine, or it could not be started.
    HostMissing = "host-missing", Permanent, Packages;
    /// The host binary exited or closed its connection during a call.
    HostExited = "host-exited", Retryable, Packages;
    /// The driver was closed by its caller.
    Closed = "closed", Permanent, Packages;
    /// A message over the host's bound, refused before it was sent.
    TooLarge = "too-large", Permanent, Packages;
    /// The plugin could not map a workdir through the host.
    ResolveWorkdir = "resolve-workdir", Permanent, Packages;
    /// A path outside the sandbox's mounts, refused before the host is asked.
    EscapesWorkspace = "escapes-workspace", Permanent, Packages;
    /// A gateway setting the compute driver refuses, refused by the package
    /// before the host starts.
    UnsupportedGatewaySetting = "unsupported-gateway-setting", Permanent, Packages;
    /// A host answer that named no code.
    DriverError = "driver-error", Retryable, Packages;
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Code {
    /// The Node packages' copy of the list: the text of
    /// `host/node/rpc/codes.mjs`.
    pub fn node_module() -> String {
        let mut out = String::from(
            "// The codes the host and these packages fail with, and whether a call that\n\
             // failed with one is worth retrying. Written from host/src/error/code.rs, the\n\
             // one list: do not edit here. After a change there, write it again with\n\
             //   OCC_WRITE_CODES=1 cargo test --release -p occ-driver-host --lib error::code\n\
             \n\
             /** Each code's failure: \"retryable\" or \"permanent\". */\n\
             export const CODES = Object.freeze({\n",
        );
        for code in Code::ALL {
            out.push_str(&format!("  \"{code}\": \"{}\",\n", code.failure()));
        }
        out.push_str("});\n\n/** The host binary's exit status for each failure (sysexits). */\n");
        out.push_str("export const EXIT_STATUS = Object.freeze({\n");
        for failure in [FailureKind::Retryable, FailureKind::Permanent] {
            out.push_str(&format!("  \"{failure}\": {},\n", failure.exit_code()));
        }
        out.push_str(
            "});\n\
             \n\
             /** The failure `code` has; throws on a code the list does not hold. */\n\
             export function failureOf(code) {\n\
             \x20 const failure = CODES[code];\n\
             \x20 if (failure === undefined) throw new Error(`${code} is not in the list of codes (host/src/error/code.rs)`);\n\
             \x20 return failure;\n\
             }\n",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_is_spelled_once_in_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "{s} is listed twice");
            assert!(
                !s.is_empty()
                    && s.split('-').all(|w| !w.is_empty()
                        && w.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())),
                "{s} is not kebab-case"
            );
        }
    }

    /// The Node packages' `codes.mjs` is this list, as [`Code::node_module`]
    /// writes it; `OCC_WRITE_CODES=1` writes it again.
    #[test]
    fn the_node_packages_list_is_this_one() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("node/rpc/codes.mjs");
        let want = Code::node_module();
        if std::env::var_os("OCC_WRITE_CODES").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is not host/src/error/code.rs's list: write it again with \
             OCC_WRITE_CODES=1 cargo test --release -p occ-driver-host --lib error::code",
            path.display()
        );
    }
}
