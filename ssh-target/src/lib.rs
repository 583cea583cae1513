//! The rules the sandbox component and the host share, in one crate both
//! link, so that the two can never disagree:
//! - [`target`]: `user@host[:port]`, the way OpenClaw's `sandbox.ssh.target`
//!   names an SSH target;
//! - [`client`]: `sandbox.ssh.command`, the SSH client that runs the transport;
//! - [`scope`]: a scope's key and runtime id, OpenClaw's own algorithms;
//! - [`layout`]: the settings the layout takes from the configuration, where a
//!   scope's sandbox lives on the target and its mounts;
//! - [`paths`]: a caller's path as a mount and a relative path;
//! - [`envelope`]: what the host writes for every script run, which script
//!   operations each method may run, and what each argument may be;
//! - [`quoted`]: how a refusal quotes a caller's value.
//!
//! The component uses them to decide what to run; the host to check, before
//! any ssh process starts, that it runs only that, and to write the values
//! the remote scripts act on.

pub mod client;
pub mod envelope;
pub mod layout;
pub mod paths;
pub mod scope;
pub mod target;

pub use target::{Target, parse};

/// The most characters of a caller's value a refusal quotes.
pub const MAX_QUOTED: usize = 64;

/// A caller's value as a refusal quotes it: escaped like a Rust string, and
/// cut after [`MAX_QUOTED`] characters with its length, so that a refusal
/// stays one short line whatever the value holds (a 10 KB target, a root
/// full of control characters). The driver quotes its values the same way.
pub fn quoted(text: &str) -> String {
    if text.chars().count() <= MAX_QUOTED {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(MAX_QUOTED).collect();
    format!("{head:?}... ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_escaped_and_cut() {
        let long = "é".repeat(MAX_QUOTED + 1);
        let cut = format!("{:?}... (130 bytes)", "é".repeat(MAX_QUOTED));
        let cases: &[(&str, &str)] = &[
            ("", "\"\""),
            ("me@h", "\"me@h\""),
            ("a\nb\u{0}", "\"a\\nb\\0\""),
            (
                &long[..2 * MAX_QUOTED],
                &format!("{:?}", &long[..2 * MAX_QUOTED]),
            ),
            (&long, &cut),
        ];
        for (text, expected) in cases {
            assert_eq!(quoted(text), *expected, "{text:?}");
        }
    }
}
