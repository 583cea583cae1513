//! A driver that reads a file: it imports `wasi:filesystem`, which the host must
//! refuse when it loads the component, before anything runs.

#![allow(unsafe_code, unreachable_pub)]

wit_bindgen::generate!({
    world: "ssh-compute-driver",
    path: "../../../wit",
});

use exports::occ::compute::compute_driver::Guest;
use occ::compute::types::{
    AgentBinding, DriverError, FailureKind, Namespace, PrepareResult, Revision, RevisionContext,
    Warning,
};

include!("../../common/unsupported.rs");

struct ReadsFiles;

fn unsupported() -> DriverError {
    DriverError {
        kind: FailureKind::Permanent,
        code: "unsupported".into(),
        message: "this test guest implements validate-configuration only".into(),
        host: None,
    }
}

impl Guest for ReadsFiles {
    fn validate_configuration(_: String) -> Result<Vec<Warning>, DriverError> {
        let key = std::fs::read_to_string("/etc/openclaw/ssh/id_ed25519").unwrap_or_default();
        Ok(vec![Warning {
            code: "read".into(),
            message: format!("read {} bytes", key.len()),
        }])
    }
    unsupported_methods!();
}

export!(ReadsFiles);
