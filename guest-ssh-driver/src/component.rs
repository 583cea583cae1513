//! The component layer: WIT values in, policy calls, WIT values out. Nothing here
//! decides anything; see [`crate::lifecycle`].

use crate::bindings::exports::occ::compute0_2_0::compute_driver::Guest;
use crate::bindings::occ::compute0_2_0::lifecycle_hooks::{self, HookError};
use crate::bindings::occ::compute0_2_0::types as wit;
use crate::bindings::occ::compute0_2_0::{log, ssh_exec as exec_types};
use crate::bindings::occ::compute0_3_0::ssh_exec;
use crate::error::{Error, ExecError};
use crate::lifecycle::{self, Driver, Effects};
use crate::model;

/// The name the host runs the helper by.
const SHIPPED_HELPER: &str = occ_ssh_target::programs::HELPER;

/// The helper ships inside the component, so that a driver version and its
/// helper version are one artifact: its bytes in a custom section of the core
/// module, where the host reads them without running anything. `inspect`
/// shows their SHA-256, an operator pins it in the installation, and the host
/// runs that text (approved once, at load) for every [`Effects::run_helper`];
/// the driver never sends it. Placing a static in a named section is `unsafe`
/// in general (it could land in executable or writable memory); a wasm custom
/// section is neither, and nothing in the guest reads this static.
#[allow(unsafe_code)]
#[unsafe(link_section = "occ:helper")]
#[used]
static HELPER_SECTION: [u8; include_bytes!("../../helper/helper.js").len()] =
    *include_bytes!("../../helper/helper.js");

pub(crate) struct Component;

/// The generated export glue uses `unsafe` for the canonical ABI.
#[allow(unsafe_code, unreachable_pub)]
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}

/// The real effects: the host's `ssh-exec`, `lifecycle-hooks` and `log` imports.
pub(crate) struct Host;

occ_ssh_target::failure_kind_wit!(wit::FailureKind);

fn hook_error(e: HookError) -> model::HookError {
    match e {
        HookError::Refused(r) => model::HookError::Refused {
            message: r.message,
            failure: r.kind.into(),
        },
        HookError::InvalidAnswer(m) => model::HookError::InvalidAnswer(m),
        HookError::NotAllowed(m) => model::HookError::NotAllowed(m),
    }
}

impl Effects for Host {
    fn run_helper(
        &mut self,
        host: &str,
        operation: &str,
        timeout_ms: u32,
    ) -> Result<model::ExecOutput, ExecError> {
        // The helper runs by name (WIT 0.3.0): only the operation crosses.
        ssh_exec::run(
            host,
            SHIPPED_HELPER,
            &[operation.to_owned()],
            &[],
            timeout_ms,
        )
        .map(|out| model::ExecOutput {
            exit_status: out.exit_status,
            stdout: out.stdout,
            stderr_tail: out.stderr_tail,
        })
        .map_err(
            |err| occ_ssh_target::exec_error_from_wit!(err, exec_types::ExecError => ExecError),
        )
    }

    fn after_namespace_prepared(
        &mut self,
        namespace: &model::Namespace,
    ) -> Result<(), model::HookError> {
        lifecycle_hooks::after_namespace_prepared(&namespace_to_wit(namespace)).map_err(hook_error)
    }

    fn before_workload_start(
        &mut self,
        revision: &model::Revision,
    ) -> Result<Vec<(String, String)>, model::HookError> {
        lifecycle_hooks::before_workload_start(&revision_to_wit(revision))
            .map(|list| list.into_iter().map(|p| (p.name, p.value)).collect())
            .map_err(hook_error)
    }

    fn before_workload_stop(
        &mut self,
        revision: &model::Revision,
        cleanup: bool,
    ) -> Result<(), model::HookError> {
        lifecycle_hooks::before_workload_stop(&revision_to_wit(revision), cleanup)
            .map_err(hook_error)
    }

    fn before_namespace_delete(
        &mut self,
        namespace: &model::Namespace,
    ) -> Result<(), model::HookError> {
        lifecycle_hooks::before_namespace_delete(&namespace_to_wit(namespace)).map_err(hook_error)
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
    selection: wit::Selection,
    f: impl FnOnce(&mut Driver<'_, Host>) -> Result<T, Error>,
) -> Result<T, wit::DriverError> {
    let mut host = Host;
    Driver::new(&selection_from_wit(selection), &mut host)
        .and_then(|mut driver| f(&mut driver))
        .map_err(error_to_wit)
}

/// Every revision method goes through here: the binding and revision mapped from
/// WIT once, then `f` on the driver.
pub(crate) fn with_revision<T>(
    selection: wit::Selection,
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
    with_driver(selection, |d| f(d, binding.as_ref(), &revision))
}

impl Guest for Component {
    fn configuration_schema() -> String {
        crate::config::schema().to_string()
    }

    fn validate_configuration(
        driver: wit::Selection,
    ) -> Result<Vec<wit::Warning>, wit::DriverError> {
        lifecycle::validate_configuration(&driver.configuration)
            .map(warnings_to_wit)
            .map_err(error_to_wit)
    }

    fn preflight(driver: wit::Selection) -> Result<Vec<wit::Warning>, wit::DriverError> {
        with_driver(driver, |d| d.preflight()).map(warnings_to_wit)
    }

    fn ensure_namespace(
        driver: wit::Selection,
        namespace: wit::Namespace,
    ) -> Result<(), wit::DriverError> {
        with_driver(driver, |d| {
            d.ensure_namespace(&namespace_from_wit(namespace))
        })
    }

    fn bind_agent(
        driver: wit::Selection,
        binding: wit::AgentBinding,
    ) -> Result<(), wit::DriverError> {
        with_driver(driver, |d| d.bind_agent(&binding_from_wit(binding)))
    }

    fn validate_harness_auth(
        driver: wit::Selection,
        harness: wit::Harness,
        auth: String,
        secret_bindings: Option<String>,
    ) -> Result<(), wit::DriverError> {
        // Admission needs no configuration, but a driver refusing its own
        // configuration refuses everything.
        lifecycle::validate_configuration(&driver.configuration)
            .and_then(|_| {
                lifecycle::validate_harness_auth(
                    &harness_from_wit(harness),
                    &auth,
                    secret_bindings.as_deref(),
                )
            })
            .map_err(error_to_wit)
    }

    fn prepare_revision(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
        context: Option<wit::RevisionContext>,
    ) -> Result<wit::Readiness, wit::DriverError> {
        let context = context.map(context_from_wit);
        with_revision(driver, binding, revision, |d, b, r| {
            d.prepare_revision(b, r, context.as_ref())
        })
        .map(|r| wit::Readiness { ready: r.ready })
    }

    fn activate_revision(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
        context: Option<wit::RevisionContext>,
    ) -> Result<(), wit::DriverError> {
        let context = context.map(context_from_wit);
        with_revision(driver, binding, revision, |d, b, r| {
            d.activate_revision(b, r, context.as_ref())
        })
    }

    fn deactivate_revision(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| {
            d.deactivate_revision(b, r)
        })
    }

    fn stop_revision(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| d.stop_revision(b, r))
    }

    fn retire_revision(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<(), wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| d.retire_revision(b, r))
    }

    fn delete_agent_runtime_credentials(
        driver: wit::Selection,
        binding: wit::AgentBinding,
    ) -> Result<(), wit::DriverError> {
        with_driver(driver, |d| {
            d.delete_agent_runtime_credentials(&binding_from_wit(binding))
        })
    }

    fn delete_namespace(
        driver: wit::Selection,
        namespace: wit::Namespace,
    ) -> Result<(), wit::DriverError> {
        with_driver(driver, |d| {
            d.delete_namespace(&namespace_from_wit(namespace))
        })
    }
}

fn error_to_wit(error: Error) -> wit::DriverError {
    wit::DriverError {
        kind: error.kind().into(),
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

fn selection_from_wit(s: wit::Selection) -> model::Selection {
    model::Selection {
        id: s.id,
        implementation: s.implementation,
        configuration: s.configuration,
    }
}

fn namespace_from_wit(namespace: wit::Namespace) -> model::Namespace {
    model::Namespace {
        id: namespace.id,
        name: namespace.name,
        existing_namespace: namespace.existing_namespace,
        status: namespace.status,
    }
}

fn namespace_to_wit(namespace: &model::Namespace) -> wit::Namespace {
    wit::Namespace {
        id: namespace.id.clone(),
        name: namespace.name.clone(),
        existing_namespace: namespace.existing_namespace.clone(),
        status: namespace.status.clone(),
    }
}

fn binding_from_wit(binding: wit::AgentBinding) -> model::AgentBinding {
    model::AgentBinding {
        namespace: namespace_from_wit(binding.namespace),
        agent: model::Agent {
            id: binding.agent.id,
            namespace_id: binding.agent.namespace_id,
            service_principal_id: binding.agent.service_principal_id,
        },
    }
}

fn harness_from_wit(h: wit::Harness) -> model::Harness {
    model::Harness {
        id: h.id,
        version: h.version,
        mode: h.mode,
    }
}

fn context_from_wit(c: wit::RevisionContext) -> model::RevisionContext {
    model::RevisionContext {
        secret_environment: c.secret_environment,
    }
}

fn revision_from_wit(r: wit::Revision) -> model::Revision {
    model::Revision {
        id: r.id,
        namespace_id: r.namespace_id,
        agent_id: r.agent_id,
        revision: r.revision,
        service_principal_id: r.service_principal_id,
        compute: model::ComputeRef {
            id: r.compute.id,
            implementation: r.compute.implementation,
        },
        configuration_kind: r.configuration_kind,
        configuration_generation: r.configuration_generation,
        configuration: r.configuration,
        harness: harness_from_wit(r.harness),
        harness_auth: r.harness_auth,
        plugins: r.plugins,
        plugin_approvers: r.plugin_approvers,
        secret_bindings: r.secret_bindings,
        sandbox_driver_id: r.sandbox_driver_id,
        secret_driver_id: r.secret_driver_id,
    }
}

/// The hooks receive the revision as the controller committed it; the host
/// forwards the call's own revision, this copy only names it.
fn revision_to_wit(r: &model::Revision) -> wit::Revision {
    wit::Revision {
        id: r.id.clone(),
        namespace_id: r.namespace_id.clone(),
        agent_id: r.agent_id.clone(),
        revision: r.revision,
        service_principal_id: r.service_principal_id.clone(),
        compute: wit::ComputeRef {
            id: r.compute.id.clone(),
            implementation: r.compute.implementation.clone(),
        },
        configuration_kind: r.configuration_kind.clone(),
        configuration_generation: r.configuration_generation,
        configuration: r.configuration.clone(),
        harness: wit::Harness {
            id: r.harness.id.clone(),
            version: r.harness.version.clone(),
            mode: r.harness.mode.clone(),
        },
        harness_auth: r.harness_auth.clone(),
        plugins: r.plugins.clone(),
        plugin_approvers: r.plugin_approvers.clone(),
        secret_bindings: r.secret_bindings.clone(),
        sandbox_driver_id: r.sandbox_driver_id.clone(),
        secret_driver_id: r.secret_driver_id.clone(),
    }
}
