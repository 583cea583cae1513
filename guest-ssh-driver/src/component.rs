//! The component layer: WIT values in, policy calls, WIT values out. Nothing here
//! decides anything; see [`crate::lifecycle`].

use crate::bindings::exports::occ::compute::compute_driver::Guest;
use crate::bindings::occ::compute::types as wit;
use crate::bindings::occ::compute::{lifecycle_hooks, log, ssh_exec};
use crate::error::{Error, ExecError, FailureKind};
use crate::lifecycle::{self, Driver, Effects};
use crate::model;

/// The helper ships inside the component, so that a driver version and its helper
/// version are one artifact; it is sent as the stdin of every helper exec.
const HELPER: &str = include_str!("../../helper/helper.js");

struct Component;

/// The generated export glue uses `unsafe` for the canonical ABI.
#[allow(unsafe_code, unreachable_pub)]
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}

/// The real effects: the host's `ssh-exec`, `lifecycle-hooks` and `log` imports.
struct Host;

impl Effects for Host {
    fn exec(
        &mut self,
        host: &str,
        argv: &[String],
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<model::ExecOutput, ExecError> {
        ssh_exec::exec(host, argv, stdin, timeout_ms)
            .map(|out| model::ExecOutput {
                exit_status: out.exit_status,
                stdout: out.stdout,
                stderr_tail: out.stderr_tail,
            })
            .map_err(|err| match err {
                ssh_exec::ExecError::UnknownHost(m) => ExecError::UnknownHost(m),
                ssh_exec::ExecError::Connect(m) => ExecError::Connect(m),
                ssh_exec::ExecError::HostKey(m) => ExecError::HostKey(m),
                ssh_exec::ExecError::Timeout => ExecError::Timeout,
                ssh_exec::ExecError::Cancelled => ExecError::Cancelled,
                ssh_exec::ExecError::OutputTooLarge(n) => ExecError::OutputTooLarge(n),
                ssh_exec::ExecError::Io(m) => ExecError::Io(m),
            })
    }

    fn after_namespace_prepared(&mut self, namespace: &model::Namespace) -> Result<(), String> {
        lifecycle_hooks::after_namespace_prepared(&namespace_to_wit(namespace))
    }

    fn before_workload_start(
        &mut self,
        binding: &model::AgentBinding,
        revision_id: &str,
    ) -> Result<Vec<(String, String)>, String> {
        lifecycle_hooks::before_workload_start(&binding_to_wit(binding), revision_id)
            .map(|list| list.into_iter().map(|p| (p.name, p.value)).collect())
    }

    fn before_workload_stop(
        &mut self,
        binding: &model::AgentBinding,
        revision_id: &str,
    ) -> Result<(), String> {
        lifecycle_hooks::before_workload_stop(&binding_to_wit(binding), revision_id)
    }

    fn before_namespace_delete(&mut self, namespace: &model::Namespace) -> Result<(), String> {
        lifecycle_hooks::before_namespace_delete(&namespace_to_wit(namespace))
    }

    fn log(&mut self, level: model::Level, message: &str) {
        let level = match level {
            model::Level::Trace => log::Level::Trace,
            model::Level::Debug => log::Level::Debug,
            model::Level::Info => log::Level::Info,
            model::Level::Warn => log::Level::Warn,
            model::Level::Error => log::Level::Error,
        };
        log::log(level, message);
    }
}

/// Runs one contract method against a fresh driver over the real effects.
fn with_driver<T>(
    configuration: &str,
    f: impl FnOnce(&mut Driver<'_, Host>) -> Result<T, Error>,
) -> Result<T, wit::DriverError> {
    let mut host = Host;
    Driver::new(configuration, HELPER.as_bytes(), &mut host)
        .and_then(|mut driver| f(&mut driver))
        .map_err(error_to_wit)
}

/// Every revision method goes through here: the binding and revision mapped from
/// WIT once, then `f` on the driver.
fn with_revision<T>(
    configuration: &str,
    binding: Option<wit::AgentBinding>,
    revision: wit::Revision,
    f: impl FnOnce(
        &mut Driver<'_, Host>,
        Option<&model::AgentBinding>,
        &model::Revision,
    ) -> Result<T, Error>,
) -> Result<T, wit::DriverError> {
    let binding = binding.map(binding_from_wit);
    let revision = revision_from_wit(revision);
    with_driver(configuration, |d| f(d, binding.as_ref(), &revision))
}

impl Guest for Component {
    fn validate_configuration(
        configuration: String,
    ) -> Result<Vec<wit::Warning>, wit::DriverError> {
        lifecycle::validate_configuration(&configuration)
            .map(warnings_to_wit)
            .map_err(error_to_wit)
    }

    fn preflight(configuration: String) -> Result<Vec<wit::Warning>, wit::DriverError> {
        with_driver(&configuration, |d| d.preflight()).map(warnings_to_wit)
    }

    fn ensure_namespace(
        configuration: String,
        namespace: wit::Namespace,
    ) -> Result<(), wit::DriverError> {
        with_driver(&configuration, |d| {
            d.ensure_namespace(&namespace_from_wit(namespace))
        })
    }

    fn bind_agent(
        configuration: String,
        binding: wit::AgentBinding,
    ) -> Result<(), wit::DriverError> {
        with_driver(&configuration, |d| d.bind_agent(&binding_from_wit(binding)))
    }

    fn validate_harness_auth(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<Vec<wit::Warning>, wit::DriverError> {
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.validate_harness_auth(b, r)
        })
        .map(warnings_to_wit)
    }

    fn prepare_revision(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
        context: wit::RevisionContext,
    ) -> Result<wit::PrepareResult, wit::DriverError> {
        let context = model::RevisionContext {
            secret_environment: context.secret_environment,
        };
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.prepare_revision(b, r, &context)
        })
        .map(|result| wit::PrepareResult {
            ready: result.ready,
            warnings: warnings_to_wit(result.warnings),
        })
    }

    fn activate_revision(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.activate_revision(b, r)
        })
    }

    fn deactivate_revision(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.deactivate_revision(b, r)
        })
    }

    fn stop_revision(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.stop_revision(b, r)
        })
    }

    fn retire_revision(
        configuration: String,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(&configuration, binding, revision, |d, b, r| {
            d.retire_revision(b, r)
        })
    }

    fn delete_namespace(
        configuration: String,
        namespace: wit::Namespace,
    ) -> Result<(), wit::DriverError> {
        with_driver(&configuration, |d| {
            d.delete_namespace(&namespace_from_wit(namespace))
        })
    }
}

fn error_to_wit(error: Error) -> wit::DriverError {
    wit::DriverError {
        kind: match error.kind() {
            FailureKind::Retryable => wit::FailureKind::Retryable,
            FailureKind::Permanent => wit::FailureKind::Permanent,
        },
        code: error.code().to_owned(),
        host: error.host().map(str::to_owned),
        message: error.to_string(),
    }
}

fn warnings_to_wit(warnings: Vec<model::Warning>) -> Vec<wit::Warning> {
    warnings
        .into_iter()
        .map(|w| wit::Warning {
            code: w.code,
            message: w.message,
        })
        .collect()
}

fn namespace_from_wit(namespace: wit::Namespace) -> model::Namespace {
    model::Namespace {
        id: namespace.id,
        name: namespace.name,
    }
}

fn namespace_to_wit(namespace: &model::Namespace) -> wit::Namespace {
    wit::Namespace {
        id: namespace.id.clone(),
        name: namespace.name.clone(),
    }
}

fn binding_from_wit(binding: wit::AgentBinding) -> model::AgentBinding {
    model::AgentBinding {
        namespace: namespace_from_wit(binding.namespace),
        agent_id: binding.agent_id,
        service_principal_id: binding.service_principal_id,
    }
}

fn binding_to_wit(binding: &model::AgentBinding) -> wit::AgentBinding {
    wit::AgentBinding {
        namespace: namespace_to_wit(&binding.namespace),
        agent_id: binding.agent_id.clone(),
        service_principal_id: binding.service_principal_id.clone(),
    }
}

fn revision_from_wit(revision: wit::Revision) -> model::Revision {
    model::Revision {
        id: revision.id,
        namespace_id: revision.namespace_id,
        agent_id: revision.agent_id,
        number: revision.number,
        harness: model::Harness {
            id: revision.harness.id,
            mode: revision.harness.mode,
            version: revision.harness.version,
        },
        harness_auth: revision.harness_auth,
        configuration: revision.configuration,
        requested_plugins: revision.requested_plugins,
        default_plugin_approver_policy: revision.default_plugin_approver_policy,
        secret_bindings: revision
            .secret_bindings
            .into_iter()
            .map(|b| model::SecretBinding {
                name: b.name,
                secret_id: b.secret_id,
            })
            .collect(),
    }
}
