//! OpenClaw's SSH sandbox backend as a WebAssembly component.
//!
//! Everything the backend decides is pure Rust in the modules below, compiled
//! and unit-tested natively, failing with the one [`Error`] type:
//! - [`config`]: the `agents.defaults.sandbox` configuration, its keys and defaults;
//! - [`layout`]: where a scope's sandbox lives on the target, its mounts;
//! - [`paths`]: resolving and confining the paths callers name;
//! - [`scripts`]: the fixed remote scripts and how their answers are read;
//! - [`backend`]: every operation, seeding decided there, behind one
//!   [`backend::Effects`] seam; the runtime, exec and the fs bridge each in a file;
//! - [`edit`], [`patch`], [`media`]: edit, apply_patch and media reads as pure
//!   functions of file contents.
//!
//! The rules the host applies too (the scope's runtime id and layout, path
//! resolution, which script operations each method may run) are the shared
//! crate's, [`occ_ssh_target`], so that the two never disagree.
//!
//! Effects on the target are the remote scripts' (`scripts/`, shipped in the
//! component); the component layer only maps WIT values onto these types.

pub mod backend;
pub mod config;
pub mod edit;
pub mod error;
pub mod layout;
pub mod media;
pub mod model;
pub mod patch;
pub mod paths;
pub mod scripts;

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod component;

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod testing;

pub use backend::{Backend, Effects, preflight, validate_configuration};
pub use error::{Code, Error, ExecError, FailureKind};
