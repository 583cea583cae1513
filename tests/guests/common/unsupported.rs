// Shared by the test guests: `include!` this file at module level, then write
// `unsupported_methods!();` inside `impl Guest`. Every ComputeDriver method a test
// guest does not exercise then answers `unsupported()`. It is text, not a crate,
// because each guest runs its own bindings generator and the types it names are
// that guest's.

macro_rules! unsupported_methods {
    () => {
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
        fn stop_revision(
            _: String,
            _: Option<AgentBinding>,
            _: Revision,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn retire_revision(
            _: String,
            _: Option<AgentBinding>,
            _: Revision,
        ) -> Result<(), DriverError> {
            Err(unsupported())
        }
        fn delete_namespace(_: String, _: Namespace) -> Result<(), DriverError> {
            Err(unsupported())
        }
    };
}
