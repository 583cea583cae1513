//! The rules the sandbox component and the host share, in one crate both
//! link, so that the two can never disagree:
//! - [`target`]: `user@host[:port]`, the way OpenClaw's `sandbox.ssh.target`
//!   names an SSH target;
//! - [`scope`]: a scope's key and runtime id, OpenClaw's own algorithms;
//! - [`layout`]: the settings the layout takes from the configuration, where a
//!   scope's sandbox lives on the target and its mounts;
//! - [`paths`]: a caller's path as a mount and a relative path.

pub mod layout;
pub mod paths;
pub mod scope;
pub mod target;

pub use target::{Target, parse};
