//! The SSH Compute Driver as a WebAssembly component.
//!
//! Everything the driver decides is pure Rust in the policy modules below, compiled
//! and unit-tested natively on the plain values of [`model`], failing with the one
//! [`Error`] type: the configuration ([`config`]), identities ([`ids`]), admission
//! ([`admission`]), the helper protocol ([`operation`]) and the orchestration of
//! each contract method ([`lifecycle`]). Effects on a host are the helper's
//! (`helper/helper.js`, embedded in the component and sent over one SSH exec per
//! step). The helper renders what it writes (the unit, the snapshot, the markers)
//! and takes placement and identities from the envelope the host writes for each
//! run, never from the driver: the driver decides which effect, in what order,
//! and admits or refuses. The component layer only maps WIT values onto these
//! types.

pub mod admission;
pub mod config;
pub mod error;
pub mod ids;
pub mod lifecycle;
pub mod model;
pub mod operation;

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod component;
#[cfg(target_arch = "wasm32")]
mod runtime_export;

#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod testing;

pub use error::{Error, ExecError, FailureKind};
pub use lifecycle::{Driver, Effects, validate_configuration};
