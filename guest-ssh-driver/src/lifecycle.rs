//! The ComputeDriver contract: each method's checks, hooks and helper runs, in the
//! spec's order.
//!
//! The driver reaches the world only through [`Effects`]: the component implements
//! it with the WIT imports, and the unit tests with a script, which lets them check
//! the exact sequence of hook calls and helper runs.

use crate::admission::{self, Admission};
use crate::config::{Config, Placement};
use crate::error::{Error, ExecError, FailureKind};
use crate::ids::{AgentIds, RevisionIds, check_id};
use crate::model::{
    AgentBinding, ComputeRef, ExecOutput, Harness, HookError, Level, Namespace, Readiness,
    Revision, RevisionContext, Selection, Warning,
};
use crate::operation::{self, OPERATION_TIMEOUT_MS, Op, Operation};

use serde_json::{Map, Value};

/// Everything the driver can do outside its own memory.
pub trait Effects {
    /// Runs the helper this component ships on the host granted under `host`
    /// with one operation (the base64 of its JSON, [`Operation::encode`]). The
    /// host builds the exec, `[<the alias's nodePath>, "-", operation]` with the
    /// helper it approved at load on stdin, and appends its envelope; the
    /// driver neither builds an argument vector nor carries the helper's text.
    fn run_helper(
        &mut self,
        host: &str,
        operation: &str,
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError>;
    /// The `afterNamespacePrepared` hook.
    fn after_namespace_prepared(&mut self, namespace: &Namespace) -> Result<(), HookError>;
    /// The `beforeWorkloadStart` hook: the placeholders as `(name, value)`.
    fn before_workload_start(
        &mut self,
        revision: &Revision,
    ) -> Result<Vec<(String, String)>, HookError>;
    /// The `beforeWorkloadStop` hook; `cleanup` marks the compensation of a start.
    fn before_workload_stop(&mut self, revision: &Revision, cleanup: bool)
    -> Result<(), HookError>;
    /// The `beforeNamespaceDelete` hook.
    fn before_namespace_delete(&mut self, namespace: &Namespace) -> Result<(), HookError>;
    /// One line in the host's log.
    fn log(&mut self, level: Level, message: &str);
}

/// `validate-configuration`: parse only, no host touched.
pub fn validate_configuration(configuration: &str) -> Result<Vec<Warning>, Error> {
    Config::parse(configuration).map(|_| Vec::new())
}

/// OCC's `validateHarnessAuth`: admission of a harness and its auth alone.
pub fn validate_harness_auth(
    harness: &Harness,
    harness_auth: &str,
    secret_bindings: Option<&str>,
) -> Result<(), Error> {
    admission::check_harness_and_auth(harness, harness_auth, secret_bindings)
}

/// The failure a hook answer means for the method that called it.
fn hook_error(hook: &'static str, error: HookError) -> Error {
    match error {
        HookError::Refused { message, failure } => Error::HookRefused {
            hook,
            message,
            failure,
        },
        HookError::InvalidAnswer(message) => Error::InvalidPlaceholder(message),
        HookError::NotAllowed(message) => Error::HookNotAllowed { hook, message },
    }
}

/// What the host takes in one exec's arguments at most (its default
/// `ExecBounds::max_argv_bytes`). The operation, and with it the controller's
/// document, travels to the host in them (and from there on the helper's
/// stdin, never on a command line); the host refuses more, this only lets the
/// driver say why first.
pub const MAX_EXEC_ARGV: usize = 256 * 1024;

/// The bytes of the exec the host builds for `encoded` on a host whose node is
/// `node_path` (`[node_path, "-", encoded]`), as it counts them against
/// [`MAX_EXEC_ARGV`].
pub fn exec_bytes(node_path: &str, encoded: &str) -> usize {
    node_path.len() + "-".len() + encoded.len()
}

/// One contract call: the parsed configuration and the effects.
pub struct Driver<'a, E: Effects> {
    config: Config,
    /// `drivers.compute.id` and the implementation: revisions must name them.
    compute: ComputeRef,
    fx: &'a mut E,
}

/// A bound revision resolved to its binding, host and identities.
struct Target<'c> {
    placement: Placement<'c>,
    agent: AgentIds,
    revision: RevisionIds,
}

impl<'a, E: Effects> Driver<'a, E> {
    /// Parses the configuration.
    pub fn new(selection: &Selection, fx: &'a mut E) -> Result<Self, Error> {
        Ok(Self {
            config: Config::parse(&selection.configuration)?,
            compute: ComputeRef {
                id: selection.id.clone(),
                implementation: selection.implementation.clone(),
            },
            fx,
        })
    }

    /// Probes every configured host, in alias order, logging a result per host. All
    /// hosts are probed so that one run shows the operator every broken host; the
    /// first failure is returned.
    pub fn preflight(&mut self) -> Result<Vec<Warning>, Error> {
        let mut first_failure = None;
        let mut warnings = Vec::new();
        let placements: Vec<Placement<'_>> = self.config.placements().collect();
        for placement in placements {
            match run(self.fx, &placement, &Operation::new(Op::Probe)) {
                Ok(result) => {
                    self.fx.log(
                        Level::Info,
                        &format!("host {}: preflight probe passed", placement.alias),
                    );
                    // The helper's observations, each naming its host.
                    for w in result
                        .get("warnings")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let (Some(code), Some(message)) =
                            (w["code"].as_str(), w["message"].as_str())
                        {
                            warnings.push(Warning {
                                code: code.to_owned(),
                                message: format!("host {}: {message}", placement.alias),
                            });
                        }
                    }
                }
                Err(err) => {
                    self.fx
                        .log(Level::Error, &format!("preflight failed: {err}"));
                    first_failure.get_or_insert(err);
                }
            }
        }
        first_failure.map_or(Ok(warnings), Err)
    }

    /// Creates or verifies the Namespace marker, then runs `afterNamespacePrepared`.
    pub fn ensure_namespace(&mut self, namespace: &Namespace) -> Result<(), Error> {
        check_id("namespace.id", &namespace.id)?;
        admission::check_namespace(namespace)?;
        let placement = self.config.placement(&namespace.name)?;
        let operation = Operation::new(Op::EnsureNamespace);
        run(self.fx, &placement, &operation)?;
        self.fx
            .after_namespace_prepared(namespace)
            .map_err(|e| hook_error("afterNamespacePrepared", e))
    }

    /// Checks the server-owned identities and the Namespace's placement; no host effect.
    pub fn bind_agent(&self, binding: &AgentBinding) -> Result<(), Error> {
        admission::check_binding(binding)?;
        AgentIds::new(binding, &self.config.runtime.user)?;
        self.config.placement(&binding.namespace.name)?;
        Ok(())
    }

    /// Admits the revision, then prepares it on its host without touching the running
    /// gateway. Admission warnings go to the log.
    pub fn prepare_revision(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
        context: Option<&RevisionContext>,
    ) -> Result<Readiness, Error> {
        let target = target(&self.config, &self.compute, binding, revision)?;
        let Admission { warnings } = admission::admit(revision, context)?;
        log_warnings(self.fx, revision, &warnings);
        let operation = Operation::prepare(&revision.configuration);
        let encoded = operation.encode();
        let bytes = exec_bytes(target.placement.node_path, &encoded);
        if bytes > MAX_EXEC_ARGV {
            return Err(Error::refused(
                "configuration-too-large",
                "revision.configuration",
                format!(
                    "the document of {} bytes makes an operation of {bytes} bytes, over the \
                     {MAX_EXEC_ARGV} bytes the host takes in one exec's arguments; shrink the \
                     native configuration",
                    revision.configuration.len(),
                ),
            ));
        }
        let result = run_encoded(self.fx, &target.placement, &operation, &encoded)?;
        let ready = match result.get("ready") {
            Some(Value::Bool(ready)) => *ready,
            _ => {
                return Err(Error::HelperProtocol {
                    host: target.placement.alias.to_owned(),
                    op: Op::Prepare.name(),
                    detail: "`ready` is not a boolean".into(),
                });
            }
        };
        if !ready {
            self.fx.log(
                Level::Info,
                &format!(
                    "host {}: revision {:?} was superseded by a newer revision; nothing changed",
                    target.placement.alias, revision.id
                ),
            );
        }
        Ok(Readiness { ready })
    }

    /// Runs `beforeWorkloadStart`, renders the unit and activates it. A failure after
    /// the hook accepted runs `beforeWorkloadStop` (marked as cleanup) as compensation
    /// and returns the original error.
    pub fn activate_revision(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
        context: Option<&RevisionContext>,
    ) -> Result<(), Error> {
        let target = target(&self.config, &self.compute, binding, revision)?;
        admission::admit(revision, context)?;
        // Read (and verify ownership of) the Agent before the hook, so that an
        // unprepared Agent fails without hooks to undo.
        let inspect = Operation::new(Op::InspectAgent);
        let agent_state = run(self.fx, &target.placement, &inspect)?;
        if agent_state.get("exists") == Some(&Value::Bool(false)) {
            return Err(Error::Helper {
                host: target.placement.alias.to_owned(),
                op: Op::InspectAgent.name(),
                code: "missing-revision".into(),
                message: format!(
                    "agent {:?} has not been prepared on this host; prepare revision {:?} first",
                    target.agent.agent_id, revision.id
                ),
                failure: FailureKind::Permanent,
            });
        }
        let port = operation::result_port(
            target.placement.alias,
            Op::InspectAgent,
            &agent_state,
            "port",
        )?;
        check_account(&target, &agent_state)?;

        let result = match self.fx.before_workload_start(revision) {
            // The placeholders reach the unit through the host, which saw them on
            // their way here: the helper renders them from its envelope.
            Ok(_) => launch(self.fx, &target, port),
            // The controller never agreed: nothing to compensate.
            Err(e @ (HookError::Refused { .. } | HookError::NotAllowed(_))) => {
                return Err(hook_error("beforeWorkloadStart", e));
            }
            // The controller agreed with an answer the host refused: compensate.
            Err(e) => Err(hook_error("beforeWorkloadStart", e)),
        };
        // Compensation runs for every failure after the hook accepted (a cancelled
        // call included: the host lets a cleanup hook through for a short grace
        // period); its own failure is only logged, so that the controller sees why
        // activation failed.
        if let Err(err) = &result
            && let Err(hook) = self.fx.before_workload_stop(revision, true)
        {
            self.fx.log(
                Level::Warn,
                &format!(
                    "compensating beforeWorkloadStop for revision {:?} failed: {} \
                     (activation failed: {err})",
                    revision.id,
                    hook_error("beforeWorkloadStop", hook)
                ),
            );
        }
        result
    }

    /// Verifies ownership; nothing else to deactivate in this topology.
    pub fn deactivate_revision(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<(), Error> {
        let target = target(&self.config, &self.compute, binding, revision)?;
        teardown(self.fx, Op::Deactivate, &target)
    }

    /// Runs `beforeWorkloadStop`, then stops the gateway keeping its files.
    pub fn stop_revision(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<(), Error> {
        self.stop_then(Op::Stop, binding, revision)
    }

    /// Runs `beforeWorkloadStop`, then removes the revision's snapshot (stopping the
    /// gateway first when it is current).
    pub fn retire_revision(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<(), Error> {
        self.stop_then(Op::Retire, binding, revision)
    }

    fn stop_then(
        &mut self,
        op: Op,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<(), Error> {
        let target = target(&self.config, &self.compute, binding, revision)?;
        self.fx
            .before_workload_stop(revision, false)
            .map_err(|e| hook_error("beforeWorkloadStop", e))?;
        teardown(self.fx, op, &target)
    }

    /// OCC's `deleteAgentRuntimeCredentials`: removes the Agent's unit, tree and
    /// account. An Agent that is not there is success.
    pub fn delete_agent_runtime_credentials(
        &mut self,
        binding: &AgentBinding,
    ) -> Result<(), Error> {
        admission::check_binding(binding)?;
        AgentIds::new(binding, &self.config.runtime.user)?;
        let placement = self.config.placement(&binding.namespace.name)?;
        run(self.fx, &placement, &Operation::new(Op::DeleteAgent)).map(drop)
    }

    /// Runs `beforeNamespaceDelete`, then removes every owned unit, file and account.
    pub fn delete_namespace(&mut self, namespace: &Namespace) -> Result<(), Error> {
        check_id("namespace.id", &namespace.id)?;
        admission::check_namespace(namespace)?;
        let placement = self.config.placement(&namespace.name)?;
        self.fx
            .before_namespace_delete(namespace)
            .map_err(|e| hook_error("beforeNamespaceDelete", e))?;
        run(self.fx, &placement, &Operation::new(Op::DeleteNamespace)).map(drop)
    }
}

/// The helper's deadline for a runtime read: well within OCC's 10 s for a
/// runtime request, with room for a diagnosis's readiness probe.
pub const READ_DEADLINE_MS: u64 = 25_000;

impl<E: Effects> Driver<'_, E> {
    /// One read of the revision's runtime through the helper (`describe-runtime`,
    /// `read-logs` or `diagnose`): the same admission as every revision
    /// operation (a binding that owns the revision, a revision committed for
    /// this driver, a mapped Namespace), then the helper's result. What it reads
    /// (the unit, the invocation, the bounds) is in the host's envelope.
    pub fn read_runtime(
        &mut self,
        op: Op,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<Map<String, Value>, Error> {
        debug_assert!(matches!(
            op,
            Op::DescribeRuntime | Op::ReadLogs | Op::Diagnose
        ));
        let target = target(&self.config, &self.compute, binding, revision)?;
        run(
            self.fx,
            &target.placement,
            &Operation::new(op).with("deadlineMs", READ_DEADLINE_MS),
        )
    }

    /// The diagnosis of the revision's deployment: the helper's checks, or,
    /// when the host cannot be reached, the one check that says so (with the
    /// transport's code) and nothing it could not look at.
    pub fn diagnose(
        &mut self,
        binding: Option<&AgentBinding>,
        revision: &Revision,
    ) -> Result<Vec<Value>, Error> {
        let target = target(&self.config, &self.compute, binding, revision)?;
        let operation = Operation::new(Op::Diagnose).with("deadlineMs", READ_DEADLINE_MS);
        match run(self.fx, &target.placement, &operation) {
            Ok(result) => match result.get("checks") {
                Some(Value::Array(checks)) => Ok(checks.clone()),
                _ => Err(Error::HelperProtocol {
                    host: target.placement.alias.to_owned(),
                    op: Op::Diagnose.name(),
                    detail: "the result has no checks".into(),
                }),
            },
            Err(error @ Error::Transport { .. })
                if matches!(
                    &error,
                    Error::Transport {
                        error: ExecError::Connect(_)
                            | ExecError::Auth(_)
                            | ExecError::HostKey(_)
                            | ExecError::Timeout,
                        ..
                    }
                ) =>
            {
                let code = match error.code() {
                    "ssh-connect" => "HOST_UNREACHABLE",
                    "ssh-auth" => "SSH_AUTH_REFUSED",
                    "host-key-mismatch" => "HOST_KEY_MISMATCH",
                    _ => "SSH_TIMEOUT",
                };
                self.fx.log(Level::Warn, &format!("diagnosis: {error}"));
                Ok(vec![serde_json::json!({
                    "component": "host", "check": "reachable", "state": "failed",
                    "checkedAt": null, "code": code,
                })])
            }
            Err(other) => Err(other),
        }
    }
}

/// The checks every revision operation starts with: a binding that owns the
/// revision, a revision committed for this driver, valid IDs, and a mapped
/// Namespace name.
fn target<'c>(
    config: &'c Config,
    compute: &ComputeRef,
    binding: Option<&AgentBinding>,
    revision: &Revision,
) -> Result<Target<'c>, Error> {
    let binding = admission::bound(binding, revision)?;
    admission::check_compute(revision, compute)?;
    let agent = AgentIds::new(binding, &config.runtime.user)?;
    let revision = RevisionIds::new(revision)?;
    let placement = config.placement(&binding.namespace.name)?;
    Ok(Target {
        placement,
        agent,
        revision,
    })
}

fn log_warnings<E: Effects>(fx: &mut E, revision: &Revision, warnings: &[Warning]) {
    for w in warnings {
        fx.log(
            Level::Warn,
            &format!("revision {:?}: {}: {}", revision.id, w.code, w.message),
        );
    }
}

/// Runs `activate`: the helper renders the unit from the host's envelope (the
/// placeholders the controller returned included) and the Agent's own markers.
fn launch<E: Effects>(fx: &mut E, target: &Target<'_>, port: u16) -> Result<(), Error> {
    let result = run(fx, &target.placement, &Operation::new(Op::Activate))?;
    fx.log(
        Level::Info,
        &format!(
            "host {}: revision {:?} is serving on port {port} (ready after {} ms)",
            target.placement.alias,
            target.revision.id,
            result
                .get("readyAfterMs")
                .and_then(Value::as_u64)
                .unwrap_or_default()
        ),
    );
    Ok(())
}

/// Teardown must work for revisions that admission would refuse today (a refused
/// preparation, a policy change): it checks ownership, not admission. The helper
/// compares the revision marker with the call's revision (the host's envelope
/// names its document's hash), so a snapshot prepared from another document is
/// refused and an absent one is nothing to do.
fn teardown<E: Effects>(fx: &mut E, op: Op, target: &Target<'_>) -> Result<(), Error> {
    run(fx, &target.placement, &Operation::new(op)).map(drop)
}

/// The account the helper reports must be the one this driver derives: the unit's
/// `User=` is rendered from the derived name.
fn check_account(target: &Target<'_>, state: &Map<String, Value>) -> Result<(), Error> {
    let account = state.get("account").and_then(Value::as_str);
    if account != Some(target.agent.account.as_str()) {
        return Err(Error::HelperProtocol {
            host: target.placement.alias.to_owned(),
            op: Op::InspectAgent.name(),
            detail: format!(
                "account {account:?} differs from the derived account {:?}",
                target.agent.account
            ),
        });
    }
    Ok(())
}

/// One helper run: the operation to the host's `run_helper`, the result read
/// from stdout. A free function so that it can borrow the effects while
/// `Driver` lends its configuration.
fn run<E: Effects>(
    fx: &mut E,
    placement: &Placement<'_>,
    operation: &Operation,
) -> Result<Map<String, Value>, Error> {
    run_encoded(fx, placement, operation, &operation.encode())
}

/// [`run`] with the operation already encoded (prepare measures it first: the
/// document makes it up to [`MAX_EXEC_ARGV`], encoded once).
fn run_encoded<E: Effects>(
    fx: &mut E,
    placement: &Placement<'_>,
    operation: &Operation,
    encoded: &str,
) -> Result<Map<String, Value>, Error> {
    let host = placement.alias;
    let output = fx
        .run_helper(host, encoded, OPERATION_TIMEOUT_MS)
        .map_err(|error| Error::Transport {
            host: host.to_owned(),
            op: operation.op.name(),
            error,
        })?;
    for (step, message) in operation::progress(&output.stdout) {
        fx.log(
            Level::Debug,
            &format!("host {host}: {}: {step}: {message}", operation.op.name()),
        );
    }
    operation::read_result(host, operation.op, &output).map_err(|err| match err {
        // The remote shell could not find the program: a wrong nodePath is a
        // configuration error, not something a retry fixes.
        Error::HelperCrashed { .. } if output.exit_status == Some(127) => Error::Helper {
            host: host.to_owned(),
            op: operation.op.name(),
            code: "node-not-found".into(),
            message: format!(
                "{} is not an executable on this host (exit status 127): check nodePath",
                placement.node_path
            ),
            failure: FailureKind::Permanent,
        },
        other => other,
    })
}
