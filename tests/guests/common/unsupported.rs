// Shared by the test guests: `world.rs` includes this file at module level;
// write `unsupported_methods!();` inside `impl Guest`. Every ComputeDriver method a test
// guest does not exercise then answers `unsupported()`; each guest writes
// `configuration-schema`, `validate-configuration` and `ensure-namespace` itself
// (`unsupported_methods!(but_preflight);` leaves `preflight` to the guest too).
// It is text, not a crate, because each guest runs its own bindings generator and
// the types it names are that guest's.

macro_rules! unsupported_methods {
    () => {
        fn preflight(_: Selection) -> Result<Vec<Warning>, DriverError> {
            Err(unsupported())
        }
        unsupported_methods!(but_preflight);
    };
    (but_preflight) => {
        fn bind_agent(_: Selection, _: AgentBinding) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn validate_harness_auth(
            _: Selection,
            _: Harness,
            _: String,
            _: Option<String>,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn prepare_revision(
            _: Selection,
            _: Option<AgentBinding>,
            _: Revision,
            _: Option<RevisionContext>,
        ) -> Result<Readiness, DriverError> {
            Err(unsupported())
        }
        fn activate_revision(
            _: Selection,
            _: Option<AgentBinding>,
            _: Revision,
            _: Option<RevisionContext>,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn deactivate_revision(
            _: Selection,
            _: Option<AgentBinding>,
            _: Revision,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn stop_revision(
            _: Selection,
            _: Option<AgentBinding>,
            _: Revision,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn retire_revision(
            _: Selection,
            _: Option<AgentBinding>,
            _: Revision,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn delete_agent_runtime_credentials(
            _: Selection,
            _: AgentBinding,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn delete_namespace(_: Selection, _: Namespace) -> Result<(), DriverError> {
            Err(unsupported())
        }
    };
}

fn unsupported() -> DriverError {
    DriverError {
        kind: FailureKind::Permanent,
        code: "unsupported".into(),
        message: "this test guest does not implement this method".into(),
        host: None,
    }
}
