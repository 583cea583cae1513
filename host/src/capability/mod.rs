//! The capabilities a host grants a component, one module each.
//!
//! Each capability follows the same shape (after wasmtime's `wasi-config` and
//! Spin's factors):
//! - a **grant**: a typed value read and validated from the trusted
//!   installation, usable alone (by `check` and preflight), holding the bounds
//!   the capability enforces;
//! - **per-call state**, built by the world for one call from the grant and the
//!   [`CallScope`];
//! - **`add_to_linker`**, which links the capability's WIT interface with a
//!   projection from the world's store data to that per-call state;
//! - the WIT `Host` implementation (`host.rs`), which checks the grant again
//!   right before every effect: an absent allowance means deny, and a refusal
//!   names what was refused.
//!
//! Capabilities write to the audit log ([`crate::audit`]); they know no world.
//! One capability may run through another's state for the same call:
//! `local_workspace` streams a seed through the call's `ssh_exec` state, so
//! the exec grant, its bounds and its audit records apply to uploads too.

pub mod hooks;
pub mod local_workspace;
pub mod log;
pub mod ssh_exec;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::audit::Audit;

/// What every capability knows about the call it serves.
#[derive(Debug, Clone)]
pub struct CallScope {
    /// The call's id: the controller's request id, or one the host made up.
    pub id: String,
    /// The contract method being called, as the controller names it.
    pub method: String,
    /// The driver's name in logs (its component file stem).
    pub driver: String,
    /// Cancels the call: capabilities answer `cancelled` from then on.
    pub cancel: CancellationToken,
    /// Where the call's audit records go.
    pub audit: Audit,
    /// The first thing the host refused the component during the call.
    pub refusal: Arc<std::sync::Mutex<Option<String>>>,
}

impl CallScope {
    /// Note that the host refused `what` (kept if it is the call's first).
    pub fn refused(&self, what: String) {
        let mut first = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(what);
    }

    /// The call's first refusal, if the host refused anything.
    pub fn refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A shared call scope.
pub type Scope = Arc<CallScope>;
