// Shared by the compute test guests: `include!` this file at the top of a
// guest's lib.rs. It generates the guest's own bindings of the world the real
// driver is built in (ssh-compute-driver, WIT 0.2.0), names the types every
// guest's `impl Guest` uses, and brings in `unsupported_methods!`. A guest
// that calls an import (ssh-exec, the lifecycle hooks) names it itself.

wit_bindgen::generate!({
    world: "ssh-compute-driver",
    path: "../../../wit/0.2.0",
});

use exports::occ::compute::compute_driver::Guest;
use occ::compute::types::{
    AgentBinding, DriverError, FailureKind, Harness, Namespace, Readiness, Revision,
    RevisionContext, Selection, Warning,
};

include!("unsupported.rs");
