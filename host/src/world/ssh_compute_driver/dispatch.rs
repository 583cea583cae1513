//! A contract call with OCC's JSON: its params read, the component's export
//! run on a fresh instance, and the result in OCC's shape, a namespace
//! method's failure included ([`present`]). One helper per group of methods:
//! the configuration alone, namespaces, Agents, and revisions.

use serde_json::{Value, json};

use super::envelope::Subjects;
use super::params::{self, Binding, NamespaceParams, RevisionParams};
use super::runtime_shape;
use super::{CallGrant, CallOptions, Driver, Method};
use crate::capability::Scope;
use crate::capability::hooks::HookScope;
use crate::capability::hooks::bindings::occ::compute::types as wit;
use crate::error::{CallError, Code};
use crate::world::{warnings, within_result_bound};

impl Driver {
    /// Call one contract method with OCC-shaped JSON params. Success is the
    /// method's result in OCC's shape; namespace methods report failure inside
    /// their result only through [`present`].
    pub async fn call_json(
        &self,
        method: Method,
        params: &Value,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        if !params.is_object() {
            return Err(CallError::invalid_params(format!(
                "{method}: params must be an object: {}",
                method.params_shape()
            )));
        }
        let on = MethodCall {
            driver: self,
            method,
            scope: self.scope(method.name(), &options),
            selection: self.selection(),
            options: &options,
        };
        let result = match method {
            Method::ConfigurationSchema | Method::ValidateConfiguration | Method::Preflight => {
                on.call_configuration().await?
            }
            Method::EnsureNamespace | Method::DeleteNamespace => on.call_namespace(params).await?,
            Method::BindAgent
            | Method::DeleteAgentRuntimeCredentials
            | Method::ValidateHarnessAuth => on.call_agent(params).await?,
            Method::PrepareRevision
            | Method::ActivateRevision
            | Method::DeactivateRevision
            | Method::StopRevision
            | Method::RetireRevision => on.call_revision(params).await?,
            Method::DescribeAgentRuntime
            | Method::ReadAgentRuntimeLogs
            | Method::DiagnoseAgentDeployment => on.call_runtime(params).await?,
        };
        // A log read may carry OCC's 1 MiB of lines, each with its time and
        // escaped as JSON.
        let bound = match method {
            Method::ReadAgentRuntimeLogs => self.runtime.limits().max_result_bytes.max(4 << 20),
            _ => self.runtime.limits().max_result_bytes,
        };
        within_result_bound(result, bound, &format!("the driver's {method}"))
    }

    /// What bindAgent accepted for the Agent `agent_id` of Namespace `namespace_id`.
    fn accepted(&self, namespace_id: &str, agent_id: &str) -> Option<Binding> {
        self.bound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(namespace_id.to_string(), agent_id.to_string()))
            .cloned()
    }

    /// The binding a revision call runs with: what bindAgent accepted for its
    /// Agent, or (one-shot calls only) the one passed with it. A passed binding
    /// that differs from the accepted one is refused.
    fn binding_for(&self, p: &RevisionParams) -> Result<Option<Binding>, CallError> {
        let accepted = self.accepted(&p.revision.namespace_id, &p.revision.agent_id);
        match (accepted, &p.binding) {
            (Some(accepted), Some(passed)) if !accepted.same_identities(passed) => {
                Err(CallError::invalid_params(format!(
                    "binding: differs from what bindAgent accepted for agent {:?}; bind the Agent again instead",
                    p.revision.agent_id
                )))
            }
            (Some(accepted), _) => Ok(Some(accepted)),
            (None, Some(_)) if self.require_bind => Err(CallError::host(
                Code::UnboundAgent,
                format!(
                    "revision {:?}: its Agent {:?} was never bound; call bindAgent first (a binding passed with a revision call is not accepted here)",
                    p.revision.id, p.revision.agent_id
                ),
            )),
            (None, passed) => Ok(passed.clone()),
        }
    }

    /// The binding a runtime read runs with: the one passed, which must name
    /// the identities bindAgent accepted for its Agent when it accepted one.
    fn runtime_binding(&self, p: &params::RuntimeParams) -> Result<Binding, CallError> {
        let passed = p.binding();
        match self.accepted(&passed.namespace.id, &passed.agent.id) {
            Some(accepted) if !accepted.same_identities(&passed) => {
                Err(CallError::invalid_params(format!(
                    "namespace, agent: differ from what bindAgent accepted for agent {:?}",
                    passed.agent.id
                )))
            }
            _ => Ok(passed),
        }
    }

    fn forget(&self, f: impl Fn(&Binding) -> bool) {
        self.bound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, b| !f(b));
    }
}

/// A call of one method, its params an object: what each of its helpers runs
/// the component with.
struct MethodCall<'a> {
    driver: &'a Driver,
    method: Method,
    scope: Scope,
    /// The driver as the component takes it.
    selection: wit::Selection,
    options: &'a CallOptions,
}

/// Run an export of the component for `$on`, a [`MethodCall`] taken by value:
/// `$hooks` is the hooks it may call, `$subjects` whom it acts for, and `$d`
/// the driver as the component takes it (the configuration schema takes none).
macro_rules! guest {
    ($on:ident, $hooks:expr, $subjects:expr, |$g:ident, $s:ident| $call:expr) => {
        $on.driver
            .invoke(
                $on.scope.clone(),
                CallGrant::new($on.method, $hooks).acting_for($subjects),
                $on.options,
                move |$g, $s| Box::pin(async move { $call.await }),
            )
            .await
    };
    ($on:ident, $hooks:expr, $subjects:expr, |$g:ident, $s:ident, $d:ident| $call:expr) => {{
        let selection = $on.selection;
        $on.driver
            .invoke(
                $on.scope.clone(),
                CallGrant::new($on.method, $hooks).acting_for($subjects),
                $on.options,
                move |$g, $s| {
                    Box::pin(async move {
                        let $d = &selection;
                        $call.await
                    })
                },
            )
            .await
    }};
}

impl MethodCall<'_> {
    /// The configuration alone: its schema, its validation, or a preflight of
    /// the local SSH files and every configured host.
    async fn call_configuration(self) -> Result<Value, CallError> {
        let none = HookScope::default;
        Ok(match self.method {
            Method::ConfigurationSchema => {
                let text = guest!(self, none(), Subjects::default(), |g, s| async {
                    g.occ_compute_compute_driver()
                        .call_configuration_schema(s)
                        .await
                        .map(Ok)
                })?;
                serde_json::from_str(&text).map_err(|e| {
                    CallError::host(
                        Code::InvalidSchema,
                        format!("the driver's configuration schema is not JSON: {e}"),
                    )
                })?
            }
            Method::ValidateConfiguration => {
                let w = guest!(self, none(), Subjects::default(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_validate_configuration(s, d))?;
                json!({"warnings": warnings(w)})
            }
            Method::Preflight => {
                // A replay uses no identity or known-hosts file: nothing to verify.
                if !self.driver.ssh.is_offline() {
                    self.driver.ssh.grant().verify_local_files().map_err(|m| {
                        CallError::host(Code::LocalSshFiles, format!("preflight: {m}"))
                    })?;
                }
                let w = guest!(self, none(), Subjects::default(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_preflight(s, d))?;
                json!({"warnings": warnings(w)})
            }
            other => unreachable!("{other} is no configuration method"),
        })
    }

    /// A Namespace ensured or deleted, with the hooks its method may call.
    async fn call_namespace(self, params: &Value) -> Result<Value, CallError> {
        let p: NamespaceParams = params::read(params, "")?;
        let hooks = HookScope {
            allowed: self.method.hooks().to_vec(),
            namespace: params.get("namespace").cloned(),
            ..HookScope::default()
        };
        let ns = p.namespace.to_wit();
        let subjects = Subjects {
            namespace: Some(p.namespace.subject()),
            ..Subjects::default()
        };
        if self.method == Method::EnsureNamespace {
            guest!(self, hooks, subjects, |g, s, d| g
                .occ_compute_compute_driver()
                .call_ensure_namespace(s, d, &ns))?;
            Ok(json!({"namespaceId": p.namespace.id, "namespaceReady": true}))
        } else {
            guest!(self, hooks, subjects, |g, s, d| g
                .occ_compute_compute_driver()
                .call_delete_namespace(s, d, &ns))?;
            self.driver.forget(|b| b.namespace.id == p.namespace.id);
            Ok(json!({"namespaceId": p.namespace.id, "namespaceDeleted": true}))
        }
    }

    /// An Agent bound or its runtime credentials deleted, or the harness and
    /// authentication a revision would run with admitted or refused. No hooks.
    async fn call_agent(self, params: &Value) -> Result<Value, CallError> {
        let none = HookScope::default;
        Ok(match self.method {
            Method::BindAgent => {
                let b = params::binding_params(params)?;
                let accepted = b.to_wit();
                guest!(self, none(), Subjects::default(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_bind_agent(s, d, &accepted))?;
                let key = (b.namespace.id.clone(), b.agent.id.clone());
                self.driver
                    .bound
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, b);
                Value::Null
            }
            Method::DeleteAgentRuntimeCredentials => {
                let b = params::binding_params(params)?;
                let binding = b.to_wit();
                guest!(self, none(), b.subjects(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_delete_agent_runtime_credentials(s, d, &binding))?;
                self.driver
                    .forget(|k| k.namespace.id == b.namespace.id && k.agent.id == b.agent.id);
                Value::Null
            }
            Method::ValidateHarnessAuth => {
                let p: params::HarnessAuthParams = params::read(params, "")?;
                let (harness, auth, secrets) =
                    (p.harness.to_wit(), p.auth.to_string(), p.secret_bindings());
                guest!(self, none(), Subjects::default(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_validate_harness_auth(
                        s,
                        d,
                        &harness,
                        &auth,
                        secrets.as_deref()
                    ))?;
                Value::Null
            }
            other => unreachable!("{other} is no Agent method"),
        })
    }

    /// A revision prepared, activated, deactivated, stopped or retired, with
    /// the binding it runs with and the hooks its method may call.
    async fn call_revision(self, params: &Value) -> Result<Value, CallError> {
        let p: RevisionParams = params::read(params, "")?;
        let binding = self.driver.binding_for(&p)?;
        let hooks = HookScope {
            allowed: self.method.hooks().to_vec(),
            namespace: None,
            revision: params.get("revision").cloned(),
        };
        let bound = binding.as_ref().map(Binding::to_wit);
        let mut subjects = p.revision.subjects(binding.as_ref());
        if matches!(
            self.method,
            Method::PrepareRevision | Method::ActivateRevision
        ) && let Some(context) = &p.context
        {
            // Checked before the component runs: a refused setup touches no host.
            subjects.workspace_setup = context.workspace_setup(&p.revision)?;
        }
        let rev = p.revision.to_wit();
        let context = p.context.as_ref().map(params::RevisionContext::to_wit);
        macro_rules! plain {
            ($export:ident) => {{
                guest!(self, hooks, subjects.clone(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .$export(s, d, bound.as_ref(), &rev))?;
                Value::Null
            }};
        }
        Ok(match self.method {
            Method::PrepareRevision => {
                let r = guest!(self, hooks, subjects.clone(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_prepare_revision(s, d, bound.as_ref(), &rev, context.as_ref()))?;
                json!({
                    "namespaceId": p.revision.namespace_id,
                    "agentId": p.revision.agent_id,
                    "revisionId": p.revision.id,
                    "ready": r.ready,
                })
            }
            Method::ActivateRevision => {
                guest!(self, hooks, subjects.clone(), |g, s, d| g
                    .occ_compute_compute_driver()
                    .call_activate_revision(
                        s,
                        d,
                        bound.as_ref(),
                        &rev,
                        context.as_ref()
                    ))?;
                Value::Null
            }
            Method::DeactivateRevision => plain!(call_deactivate_revision),
            Method::StopRevision => plain!(call_stop_revision),
            Method::RetireRevision => plain!(call_retire_revision),
            other => unreachable!("{other} is no revision method"),
        })
    }
}

impl MethodCall<'_> {
    /// An Agent's runtime read for one exact revision: described, its log read
    /// within the controller's bounds, or diagnosed. Read-only; no hooks. A
    /// driver without the runtime export (WIT before 0.4.0) answers
    /// `not-implemented`, as OCC's driver without these methods does.
    async fn call_runtime(self, params: &Value) -> Result<Value, CallError> {
        let p: params::RuntimeParams = params::read(params, "")?;
        let binding = self.driver.runtime_binding(&p)?;
        if p.revision.namespace_id != p.namespace.id || p.revision.agent_id != p.agent.id {
            return Err(CallError::invalid_params(format!(
                "revision: {:?} is not a revision of agent {:?} in namespace {:?}",
                p.revision.id, p.agent.id, p.namespace.id
            )));
        }
        let source = p.options.as_ref().and_then(|o| o.source.clone());
        if let Some(source) = &source
            && !params::LOG_SOURCES.contains(&source.as_str())
        {
            return Err(CallError::invalid_params(format!(
                "options.source: {source:?} is not a runtime log source (gateway, agent)"
            )));
        }
        if let Some(request) = &p.request {
            request.check()?;
        }
        let mut subjects = p.revision.subjects(Some(&binding));
        let bound = Some(binding.to_wit());
        let rev = p.revision.to_wit();
        let revision_id = p.revision.id.clone();
        let observed_at = super::runtime_shape::now_rfc3339;
        let unimplemented = || {
            CallError::host(
                Code::NotImplemented,
                format!(
                    "{}: this driver component does not export {} (it targets WIT before 0.4.0)",
                    self.method,
                    super::RUNTIME_EXPORT
                ),
            )
        };
        if !self.driver.reads_runtime() {
            return Err(unimplemented());
        }
        let none = HookScope::default;
        Ok(match self.method {
            Method::DescribeAgentRuntime => {
                let events = p.options.as_ref().and_then(|o| o.events).unwrap_or(true);
                subjects.events = Some(events);
                // An embedded Agent's one source is its gateway; asked for the
                // agent's, there is nothing to describe.
                if source.as_deref() == Some("agent") {
                    return Ok(json!({
                        "revisionId": revision_id, "observedAt": observed_at(),
                        "pods": [], "sources": [],
                    }));
                }
                let d = guest!(self, none(), subjects, |g, s, d| async move {
                    let runtime = g.runtime.as_ref().expect("checked above");
                    runtime
                        .occ_compute0_4_0_agent_runtime()
                        .call_describe_agent_runtime(s, d, bound.as_ref(), &rev, events)
                        .await
                })?;
                runtime_shape::description(&revision_id, &observed_at(), d)?
            }
            Method::ReadAgentRuntimeLogs => {
                let request = p.request.as_ref().ok_or_else(|| {
                    CallError::invalid_params("request: missing (OCC's AgentRuntimeLogRequest)")
                })?;
                subjects.log_request = Some(request.envelope());
                let wit_request = runtime_shape::log_request(request);
                let chunk = guest!(self, none(), subjects, |g, s, d| async move {
                    let runtime = g.runtime.as_ref().expect("checked above");
                    runtime
                        .occ_compute0_4_0_agent_runtime()
                        .call_read_agent_runtime_logs(s, d, bound.as_ref(), &rev, &wit_request)
                        .await
                })?;
                runtime_shape::chunk(request, &observed_at(), chunk)?
            }
            Method::DiagnoseAgentDeployment => {
                subjects.harness_version = Some(p.revision.harness.version.clone());
                let checks = guest!(self, none(), subjects, |g, s, d| async move {
                    let runtime = g.runtime.as_ref().expect("checked above");
                    runtime
                        .occ_compute0_4_0_agent_runtime()
                        .call_diagnose_agent_deployment(s, d, bound.as_ref(), &rev)
                        .await
                })?;
                runtime_shape::diagnostics(&revision_id, &observed_at(), checks)?
            }
            other => unreachable!("{other} is no runtime method"),
        })
    }
}

/// The shape a controller sees for a finished call: namespace methods report
/// failure inside their result, exactly as OCC's `NamespaceEnsureResult` and
/// `NamespaceDeleteResult` do: `{namespaceId, namespaceReady: false, failure,
/// reason}`, the operator's text bounded in `reason`, and `{namespaceId,
/// namespaceDeleted: false, failure}` (OCC's deletion result has no `reason`). The others return their result or the error, whose JSON-RPC
/// `data` carries `failure`, `code` and `host`.
pub fn present(
    method: Method,
    params: &Value,
    result: Result<Value, CallError>,
) -> Result<Value, CallError> {
    let namespace_id = params
        .pointer("/namespace/id")
        .cloned()
        .unwrap_or(Value::Null);
    let flag = match method {
        Method::EnsureNamespace => "namespaceReady",
        Method::DeleteNamespace => "namespaceDeleted",
        _ => return result,
    };
    match result {
        // OCC's NamespaceDeleteResult has no `reason` (the audit log and the
        // host's log keep the whole failure).
        Err(e) if method == Method::DeleteNamespace => Ok(json!({
            "namespaceId": namespace_id,
            flag: false,
            "failure": e.failure,
        })),
        Err(e) => Ok(json!({
            "namespaceId": namespace_id,
            flag: false,
            "failure": e.failure,
            "reason": reason(&e),
        })),
        ok => ok,
    }
}

/// OCC's `reason`: at most 256 printable characters, and only those OCC's log
/// keeps (letters, digits, spaces and `. _ : / @ -`); it names the failure and
/// this Namespace's own placement, never a secret.
pub fn reason(e: &CallError) -> String {
    let text = format!("{}: {}", e.code, e.message);
    let mut out = String::with_capacity(text.len().min(256));
    let mut space = false;
    for c in text.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '@' | '-');
        if keep {
            out.push(c);
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
        if out.len() >= 256 {
            break;
        }
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FailureKind;

    #[test]
    fn namespace_failures_are_results_in_occs_shape() {
        let e = CallError::new(
            FailureKind::Retryable,
            "ssh-connect",
            "host stable: ensure-namespace: stable (root@203.0.113.10:22): Connection refused\n\u{1b}[31m",
        );
        let params = json!({"namespace": {"id": "ns-1", "name": "stable"}});
        let v = present(Method::EnsureNamespace, &params, Err(e.clone())).unwrap();
        assert_eq!(
            v,
            json!({
                "namespaceId": "ns-1", "namespaceReady": false, "failure": "retryable",
                "reason": "ssh-connect: host stable: ensure-namespace: stable root@203.0.113.10:22 : Connection refused 31m",
            })
        );
        let long = CallError::new(FailureKind::Permanent, "x", "y".repeat(1000));
        assert_eq!(super::reason(&long).len(), 256);
        let v = present(Method::DeleteNamespace, &params, Err(e.clone())).unwrap();
        assert_eq!(
            v.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["failure", "namespaceDeleted", "namespaceId"]
        );
        assert_eq!(v["namespaceDeleted"], json!(false));
        let ok = json!({"namespaceId": "ns-1", "namespaceReady": true});
        assert_eq!(
            present(Method::EnsureNamespace, &params, Ok(ok.clone())).unwrap(),
            ok
        );
        assert!(present(Method::ActivateRevision, &params, Err(e)).is_err());
    }
}
