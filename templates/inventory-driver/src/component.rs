//! The WIT layer: values in, the policy of `lib.rs`, values out.

// The WIT bindings of the `ssh-compute-driver` world, generated in this one
// place. Generated code uses `unsafe` for the canonical ABI.
#[allow(unsafe_code, unreachable_pub, missing_docs)]
mod bindings {
    wit_bindgen::generate!({
        world: "occ:compute/ssh-compute-driver@0.3.0",
        path: ["../../wit/0.2.0", "../../wit/0.3.0"],
        // The 0.2.0 interfaces whose types the 0.3.0 ones use.
        generate_all,
    });
    use super::Component;
    export!(Component);
}

use bindings::exports::occ::compute0_2_0::compute_driver::Guest;
use bindings::occ::compute0_2_0::types::{
    AgentBinding, DriverError, FailureKind, Harness, Namespace, Readiness, Revision,
    RevisionContext, Selection, Warning,
};
use bindings::occ::compute0_3_0::ssh_exec;

/// The helper the probe runs, shipped inside the component (one artifact per
/// version) where the host reads it without running anything (`inspect`
/// prints its SHA-256; the operator pins it in `approvedHelpers`), and the
/// text the host runs. A wasm custom section is neither executable nor
/// writable, and nothing in the guest reads this static.
#[allow(unsafe_code)]
#[unsafe(link_section = "occ:helper")]
#[used]
static HELPER_SECTION: [u8; include_bytes!("../../../helper/helper.js").len()] =
    *include_bytes!("../../../helper/helper.js");

/// The bound of one probe, under the host's own.
const PROBE_TIMEOUT_MS: u32 = 90_000;

struct Component;

fn error(kind: FailureKind, code: &str, message: String, host: Option<&str>) -> DriverError {
    DriverError {
        kind,
        code: code.into(),
        message,
        host: host.map(str::to_string),
    }
}

fn invalid(message: String) -> DriverError {
    error(
        FailureKind::Permanent,
        "invalid-configuration",
        message,
        None,
    )
}

fn unsupported(method: &str) -> Result<(), DriverError> {
    Err(error(
        FailureKind::Permanent,
        "unsupported",
        format!("the inventory driver only runs preflight, not {method}"),
        None,
    ))
}

impl Guest for Component {
    fn configuration_schema() -> String {
        serde_json::json!({
            "type": "object",
            "required": ["hosts"],
            "properties": {
                "hosts": {"type": "object", "additionalProperties": {"type": "object"}},
                "runtime": {"type": "object"},
            },
        })
        .to_string()
    }

    fn validate_configuration(driver: Selection) -> Result<Vec<Warning>, DriverError> {
        crate::hosts(&driver.configuration).map_err(invalid)?;
        Ok(Vec::new())
    }

    fn preflight(driver: Selection) -> Result<Vec<Warning>, DriverError> {
        let mut warnings = Vec::new();
        for target in crate::hosts(&driver.configuration).map_err(invalid)? {
            let alias = target.alias.as_str();
            let out = ssh_exec::run(alias, "helper", &crate::probe_args(), &[], PROBE_TIMEOUT_MS)
                .map_err(|e| {
                error(
                    FailureKind::Retryable,
                    "probe-failed",
                    format!("host {alias}: probe: {e:?}"),
                    Some(alias),
                )
            })?;
            let found = crate::report(alias, &out.stdout)
                .map_err(|m| error(FailureKind::Retryable, "probe-failed", m, Some(alias)))?;
            warnings.extend(
                found
                    .into_iter()
                    .map(|(code, message)| Warning { code, message }),
            );
        }
        Ok(warnings)
    }

    fn ensure_namespace(_: Selection, _: Namespace) -> Result<(), DriverError> {
        unsupported("ensureNamespace")
    }

    fn bind_agent(_: Selection, _: AgentBinding) -> Result<(), DriverError> {
        unsupported("bindAgent")
    }

    fn validate_harness_auth(
        _: Selection,
        _: Harness,
        _: String,
        _: Option<String>,
    ) -> Result<(), DriverError> {
        unsupported("validateHarnessAuth")
    }

    fn prepare_revision(
        _: Selection,
        _: Option<AgentBinding>,
        _: Revision,
        _: Option<RevisionContext>,
    ) -> Result<Readiness, DriverError> {
        unsupported("prepareRevision").map(|()| unreachable!())
    }

    fn activate_revision(
        _: Selection,
        _: Option<AgentBinding>,
        _: Revision,
        _: Option<RevisionContext>,
    ) -> Result<(), DriverError> {
        unsupported("activateRevision")
    }

    fn deactivate_revision(
        _: Selection,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<(), DriverError> {
        unsupported("deactivateRevision")
    }

    fn stop_revision(
        _: Selection,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<(), DriverError> {
        unsupported("stopRevision")
    }

    fn retire_revision(
        _: Selection,
        _: Option<AgentBinding>,
        _: Revision,
    ) -> Result<(), DriverError> {
        unsupported("retireRevision")
    }

    fn delete_agent_runtime_credentials(_: Selection, _: AgentBinding) -> Result<(), DriverError> {
        unsupported("deleteAgentRuntimeCredentials")
    }

    fn delete_namespace(_: Selection, _: Namespace) -> Result<(), DriverError> {
        unsupported("deleteNamespace")
    }
}
