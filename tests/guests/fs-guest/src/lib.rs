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

struct ReadsFiles;

fn unsupported() -> DriverError {
    DriverError {
        kind: FailureKind::Permanent,
        code: "unsupported".into(),
        message: "the fault guest implements validate-configuration only".into(),
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
    fn preflight(_: String) -> Result<Vec<Warning>, DriverError> {
        Err(unsupported())
    }
    fn ensure_namespace(_: String, _: Namespace) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn bind_agent(_: String, _: AgentBinding) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn validate_harness_auth(
        _: String,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<Vec<Warning>, DriverError> {
        Err(unsupported())
    }
    fn prepare_revision(
        _: String,
        _: Option<AgentBinding>,
        _: Revision,
        _: RevisionContext,
    ) -> Result<PrepareResult, DriverError> {
        Err(unsupported())
    }
    fn activate_revision(
        _: String,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn deactivate_revision(
        _: String,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn stop_revision(_: String, _: Option<AgentBinding>, _: Revision) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn retire_revision(_: String, _: Option<AgentBinding>, _: Revision) -> Result<(), DriverError> {
        Err(unsupported())
    }
    fn delete_namespace(_: String, _: Namespace) -> Result<(), DriverError> {
        Err(unsupported())
    }
}

export!(ReadsFiles);
