//! The rules the components and the host share, in one crate all of
//! them link, so that they can never disagree:
//! - [`target`]: `user@host[:port]`, the way OpenClaw's `sandbox.ssh.target`
//!   names an SSH target;
//! - [`client`]: `sandbox.ssh.command`, the SSH client that runs the transport;
//! - [`scope`]: a scope's key and runtime id, OpenClaw's own algorithms;
//! - [`layout`]: the settings the layout takes from the configuration, where a
//!   scope's sandbox lives on the target and its mounts;
//! - [`paths`]: a caller's path as a mount and a relative path;
//! - [`envelope`]: what the host writes for every script run, which script
//!   operations each method may run, and what each argument may be;
//! - [`text`]: how a refusal quotes a caller's value;
//! - [`digest`]: a SHA-256 as lowercase hex, the one spelling approvals use;
//! - [`failure`]: whether a failure is worth retrying, and the host's exec
//!   error as a component's own, each written once for both components;
//! - [`programs`]: the names shipped programs run by, the sandbox's one
//!   alias, and the interpreter a script's first line names;
//! - [`settings`]: the compute driver's addresses, Namespace names and
//!   paths, which its validator and the host's grant both read.
//!
//! The component uses them to decide what to run; the host to check, before
//! any ssh process starts, that it runs only that, and to write the values
//! the remote scripts act on.

pub mod client;
pub mod digest;
pub mod envelope;
pub mod failure;
pub mod helper;
pub mod layout;
pub mod paths;
pub mod programs;
pub mod scope;
pub mod settings;
pub mod target;
pub mod text;

pub use target::{Target, parse};

pub use text::{MAX_QUOTED, quoted};
