//! The ComputeDriver contract as controllers see it: methods named as in OCC
//! (camelCase), taking and returning OCC's JSON shapes, mapped onto the WIT
//! exports of a loaded driver component.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::bindings::occ::compute::types::{
    AgentBinding, DriverError, FailureKind as WitFailure, Harness, Namespace, Revision,
    RevisionContext, SecretBinding, Warning,
};
use crate::cache::ComponentCache;
use crate::context::{CallContext, ProgressSink};
use crate::error::{CallError, FailureKind, LoadError};
use crate::hooks::{LifecycleHooks, NoHooks};
use crate::installation::Installation;
use crate::runtime::{LoadedDriver, Runtime};
use crate::ssh_exec::{SshGrant, SshMode, SshTransport};

/// The contract's methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `validateConfiguration`
    ValidateConfiguration,
    /// `preflight`
    Preflight,
    /// `ensureNamespace`
    EnsureNamespace,
    /// `bindAgent`
    BindAgent,
    /// `validateHarnessAuth`
    ValidateHarnessAuth,
    /// `prepareRevision`
    PrepareRevision,
    /// `activateRevision`
    ActivateRevision,
    /// `deactivateRevision`
    DeactivateRevision,
    /// `stopRevision`
    StopRevision,
    /// `retireRevision`
    RetireRevision,
    /// `deleteNamespace`
    DeleteNamespace,
}

impl Method {
    /// Every method, in lifecycle order.
    pub const ALL: [Method; 11] = [
        Method::ValidateConfiguration,
        Method::Preflight,
        Method::EnsureNamespace,
        Method::BindAgent,
        Method::ValidateHarnessAuth,
        Method::PrepareRevision,
        Method::ActivateRevision,
        Method::DeactivateRevision,
        Method::StopRevision,
        Method::RetireRevision,
        Method::DeleteNamespace,
    ];

    /// The OCC name.
    pub fn name(self) -> &'static str {
        match self {
            Method::ValidateConfiguration => "validateConfiguration",
            Method::Preflight => "preflight",
            Method::EnsureNamespace => "ensureNamespace",
            Method::BindAgent => "bindAgent",
            Method::ValidateHarnessAuth => "validateHarnessAuth",
            Method::PrepareRevision => "prepareRevision",
            Method::ActivateRevision => "activateRevision",
            Method::DeactivateRevision => "deactivateRevision",
            Method::StopRevision => "stopRevision",
            Method::RetireRevision => "retireRevision",
            Method::DeleteNamespace => "deleteNamespace",
        }
    }

    /// Look a method up by its OCC name.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// What the params object holds, for `--help` and error messages.
    pub fn params_shape(self) -> &'static str {
        match self {
            Method::ValidateConfiguration | Method::Preflight => "{}",
            Method::EnsureNamespace | Method::DeleteNamespace => {
                "{\"namespace\": {\"id\", \"name\"}}"
            }
            Method::BindAgent => {
                "{\"namespace\": {\"id\", \"name\"}, \"agent\": {\"id\", \"servicePrincipalId\"}}"
            }
            Method::PrepareRevision => {
                "{\"revision\": {...}, \"context\"?: {\"secretEnvironment\": []}, \"binding\"?: {...}}"
            }
            _ => "{\"revision\": {...}, \"binding\"?: {...}}",
        }
    }
}

/// How a driver is opened.
#[derive(Debug, Default, Clone)]
pub struct DriverOptions {
    /// The precompiled-component cache; none compiles every time.
    pub cache: Option<ComponentCache>,
    /// Where to append audit records; none disables them.
    pub audit_log: Option<PathBuf>,
    /// Live SSH, live with a recording, or a recording alone.
    pub ssh: SshMode,
}

/// What one call may use besides the driver's own grants.
#[derive(Clone)]
pub struct CallOptions {
    /// The controller's hooks.
    pub hooks: Arc<dyn LifecycleHooks>,
    /// Cancels the call.
    pub cancel: CancellationToken,
    /// Sees stdout lines of running execs.
    pub progress: ProgressSink,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            hooks: Arc::new(NoHooks),
            cancel: CancellationToken::new(),
            progress: Arc::new(|_, _| {}),
        }
    }
}

/// A driver component loaded from an installation, with its grants.
pub struct Driver {
    runtime: Arc<Runtime>,
    loaded: Arc<LoadedDriver>,
    installation: Installation,
    configuration: String,
    transport: Arc<SshTransport>,
    /// Why the installation's SSH inputs cannot be granted, if they cannot: the
    /// driver validates its configuration first and names the key itself; this
    /// is reported when the driver accepts what the transport cannot use.
    grant_error: Option<String>,
    audit: Option<Arc<AuditLog>>,
    bindings: Mutex<HashMap<(String, String), AgentBinding>>,
}

impl Driver {
    /// Load the installation's component and grant it the installation's hosts.
    pub fn open(
        runtime: Arc<Runtime>,
        installation: Installation,
        options: &DriverOptions,
    ) -> Result<Driver, LoadError> {
        let (grant, grant_error) = match SshGrant::from_configuration(&installation.configuration) {
            Ok(grant) => (grant, None),
            Err(message) => (SshGrant::none(), Some(message)),
        };
        let loaded = runtime.load(&installation.component, options.cache.as_ref())?;
        let transport = SshTransport::with_mode(grant, &options.ssh).map_err(|message| {
            LoadError::Installation {
                path: installation.path.clone(),
                message,
            }
        })?;
        let audit = match &options.audit_log {
            Some(path) => Some(Arc::new(AuditLog::open(path).map_err(|e| {
                LoadError::Installation {
                    path: path.clone(),
                    message: format!("cannot open the audit log: {e}"),
                }
            })?)),
            None => None,
        };
        Ok(Driver {
            runtime,
            loaded: Arc::new(loaded),
            configuration: installation.configuration.to_string(),
            installation,
            transport: Arc::new(transport),
            grant_error,
            audit,
            bindings: Mutex::new(HashMap::new()),
        })
    }

    /// The loaded component.
    pub fn component(&self) -> &LoadedDriver {
        &self.loaded
    }

    /// The installation it was opened from.
    pub fn installation(&self) -> &Installation {
        &self.installation
    }

    fn context(&self, method: &str, options: &CallOptions) -> Arc<CallContext> {
        Arc::new(CallContext {
            driver: self.loaded.name.clone(),
            driver_sha256: self.loaded.compiled.sha256.clone(),
            method: method.to_string(),
            transport: self.transport.clone(),
            audit: self.audit.clone(),
            hooks: options.hooks.clone(),
            cancel: options.cancel.clone(),
            progress: options.progress.clone(),
        })
    }

    /// Create a fresh store and instance and drop them: what every call pays
    /// before the driver runs. For benchmarks and health checks.
    pub async fn instantiate_only(&self) -> Result<(), CallError> {
        let ctx = self.context("instantiate", &CallOptions::default());
        self.runtime
            .call(&self.loaded, ctx, |_, _| Box::pin(async { Ok(()) }))
            .await
    }

    /// Call one contract method with OCC-shaped JSON params.
    pub async fn call_json(
        &self,
        method: Method,
        params: &Value,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let ctx = self.context(method.name(), &options);
        let cfg = self.configuration.clone();
        let rt = &self.runtime;
        let d = &self.loaded;
        macro_rules! call {
            (|$g:ident, $s:ident| $body:expr) => {
                rt.call(d, ctx.clone(), move |$g, $s| {
                    Box::pin(async move { $body.await })
                })
                .await?
                .map_err(driver_error)
            };
        }
        let grant_error = || CallError {
            failure: FailureKind::Permanent,
            code: "invalid-configuration".into(),
            message: self.grant_error.clone().unwrap_or_default(),
            host: None,
        };
        if self.grant_error.is_some() && method != Method::ValidateConfiguration {
            return Err(grant_error());
        }
        match method {
            Method::ValidateConfiguration => {
                let w = call!(|g, s| g
                    .occ_compute_compute_driver()
                    .call_validate_configuration(s, &cfg))?;
                if self.grant_error.is_some() {
                    return Err(grant_error());
                }
                Ok(json!({"ok": true, "warnings": warnings(w)}))
            }
            Method::Preflight => {
                // A replay uses no identity or known-hosts file: nothing to verify.
                if !self.transport.is_replay() {
                    self.transport
                        .grant()
                        .verify_local_files()
                        .map_err(|m| CallError {
                            failure: FailureKind::Permanent,
                            code: "local-ssh-files".into(),
                            message: format!("preflight: {m}"),
                            host: None,
                        })?;
                }
                let w = call!(|g, s| g.occ_compute_compute_driver().call_preflight(s, &cfg))?;
                Ok(json!({"ok": true, "warnings": warnings(w)}))
            }
            Method::EnsureNamespace => {
                let ns = namespace(params.get("namespace").unwrap_or(params), "namespace")?;
                call!(|g, s| g
                    .occ_compute_compute_driver()
                    .call_ensure_namespace(s, &cfg, &ns))?;
                Ok(json!({"namespaceReady": true}))
            }
            Method::DeleteNamespace => {
                let ns = namespace(params.get("namespace").unwrap_or(params), "namespace")?;
                call!(|g, s| g
                    .occ_compute_compute_driver()
                    .call_delete_namespace(s, &cfg, &ns))?;
                Ok(json!({"namespaceDeleted": true}))
            }
            Method::BindAgent => {
                let b = binding(params.get("binding").unwrap_or(params))?;
                let accepted = b.clone();
                call!(|g, s| g
                    .occ_compute_compute_driver()
                    .call_bind_agent(s, &cfg, &accepted))?;
                let key = (b.namespace.id.clone(), b.agent_id.clone());
                self.bindings
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, b);
                Ok(json!({"ok": true}))
            }
            Method::ValidateHarnessAuth
            | Method::PrepareRevision
            | Method::ActivateRevision
            | Method::DeactivateRevision
            | Method::StopRevision
            | Method::RetireRevision => {
                let rev = revision(params.get("revision").ok_or_else(|| {
                    CallError::invalid_params(format!(
                        "{}: params.revision is missing",
                        method.name()
                    ))
                })?)?;
                let bound = match params.get("binding") {
                    Some(b) if !b.is_null() => Some(binding(b)?),
                    _ => self
                        .bindings
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&(rev.namespace_id.clone(), rev.agent_id.clone()))
                        .cloned(),
                };
                match method {
                    Method::ValidateHarnessAuth => {
                        let w = call!(|g, s| g
                            .occ_compute_compute_driver()
                            .call_validate_harness_auth(s, &cfg, bound.as_ref(), &rev))?;
                        Ok(json!({"ok": true, "warnings": warnings(w)}))
                    }
                    Method::PrepareRevision => {
                        let context = revision_context(params.get("context"))?;
                        let r = call!(|g, s| g
                            .occ_compute_compute_driver()
                            .call_prepare_revision(s, &cfg, bound.as_ref(), &rev, &context))?;
                        Ok(json!({"ready": r.ready, "warnings": warnings(r.warnings)}))
                    }
                    Method::ActivateRevision => {
                        call!(
                            |g, s| g.occ_compute_compute_driver().call_activate_revision(
                                s,
                                &cfg,
                                bound.as_ref(),
                                &rev
                            )
                        )?;
                        Ok(json!({"ok": true}))
                    }
                    Method::DeactivateRevision => {
                        call!(
                            |g, s| g.occ_compute_compute_driver().call_deactivate_revision(
                                s,
                                &cfg,
                                bound.as_ref(),
                                &rev
                            )
                        )?;
                        Ok(json!({"ok": true}))
                    }
                    Method::StopRevision => {
                        call!(|g, s| g.occ_compute_compute_driver().call_stop_revision(
                            s,
                            &cfg,
                            bound.as_ref(),
                            &rev
                        ))?;
                        Ok(json!({"ok": true}))
                    }
                    _ => {
                        call!(|g, s| g.occ_compute_compute_driver().call_retire_revision(
                            s,
                            &cfg,
                            bound.as_ref(),
                            &rev
                        ))?;
                        Ok(json!({"ok": true}))
                    }
                }
            }
        }
    }
}

/// The shape a controller sees for a finished call: namespace methods report
/// failure inside their result (`namespaceReady: false`, `failure`), as OCC's
/// contract does; the others return their result or the error.
pub fn present(method: Method, result: Result<Value, CallError>) -> Result<Value, CallError> {
    match (method, result) {
        (Method::EnsureNamespace, Err(e)) => Ok(failed_namespace("namespaceReady", e)),
        (Method::DeleteNamespace, Err(e)) => Ok(failed_namespace("namespaceDeleted", e)),
        (_, r) => r,
    }
}

fn failed_namespace(flag: &str, e: CallError) -> Value {
    let mut v = serde_json::to_value(&e).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(flag.into(), json!(false));
    }
    v
}

fn driver_error(e: DriverError) -> CallError {
    CallError {
        failure: match e.kind {
            WitFailure::Retryable => FailureKind::Retryable,
            WitFailure::Permanent => FailureKind::Permanent,
        },
        code: e.code,
        message: e.message,
        host: e.host,
    }
}

fn warnings(w: Vec<Warning>) -> Value {
    Value::Array(
        w.into_iter()
            .map(|w| json!({"code": w.code, "message": w.message}))
            .collect(),
    )
}

fn string(v: &Value, key: &str, at: &str) -> Result<String, CallError> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(CallError::invalid_params(format!(
            "{at}.{key}: must be a string"
        ))),
        None => Err(CallError::invalid_params(format!("{at}.{key}: missing"))),
    }
}

fn namespace(v: &Value, at: &str) -> Result<Namespace, CallError> {
    if !v.is_object() {
        return Err(CallError::invalid_params(format!(
            "{at}: must be an object with id and name"
        )));
    }
    Ok(Namespace {
        id: string(v, "id", at)?,
        name: string(v, "name", at)?,
    })
}

/// OCC's binding: `{namespace, agent: {id, servicePrincipalId, ...}}`.
fn binding(v: &Value) -> Result<AgentBinding, CallError> {
    let ns = namespace(
        v.get("namespace").unwrap_or(&Value::Null),
        "binding.namespace",
    )?;
    let agent = v.get("agent").filter(|a| a.is_object()).ok_or_else(|| {
        CallError::invalid_params("binding.agent: must be an object with id and servicePrincipalId")
    })?;
    Ok(AgentBinding {
        namespace: ns,
        agent_id: string(agent, "id", "binding.agent")?,
        service_principal_id: string(agent, "servicePrincipalId", "binding.agent")?,
    })
}

fn json_text(v: Option<&Value>, default: &str) -> String {
    match v {
        None | Some(Value::Null) => default.to_string(),
        Some(v) => v.to_string(),
    }
}

/// OCC's AgentRevision. Fields the SSH contract does not use (configurationId,
/// createdAt, compute, ...) are ignored.
fn revision(v: &Value) -> Result<Revision, CallError> {
    let at = "revision";
    if !v.is_object() {
        return Err(CallError::invalid_params("revision: must be an object"));
    }
    let harness = v.get("harness").filter(|h| h.is_object()).ok_or_else(|| {
        CallError::invalid_params("revision.harness: must be an object with id and mode")
    })?;
    let number = v.get("revision").and_then(Value::as_u64).ok_or_else(|| {
        CallError::invalid_params("revision.revision: must be the revision number")
    })?;
    let secret_bindings = match v.get("secretBindings") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let at = format!("revision.secretBindings[{i}]");
                Ok(SecretBinding {
                    name: string(b, "name", &at)?,
                    secret_id: string(b, "secretId", &at)?,
                })
            })
            .collect::<Result<_, CallError>>()?,
        Some(_) => {
            return Err(CallError::invalid_params(
                "revision.secretBindings: must be an array",
            ));
        }
    };
    Ok(Revision {
        id: string(v, "id", at)?,
        namespace_id: string(v, "namespaceId", at)?,
        agent_id: string(v, "agentId", at)?,
        number,
        harness: Harness {
            id: string(harness, "id", "revision.harness")?,
            mode: string(harness, "mode", "revision.harness")?,
            version: harness
                .get("version")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        harness_auth: json_text(v.get("harnessAuth"), "null"),
        configuration: json_text(v.get("configuration"), "null"),
        requested_plugins: json_text(v.get("requestedPlugins"), "{}"),
        default_plugin_approver_policy: match v.get("defaultPluginApproverPolicy") {
            None | Some(Value::Null) => None,
            Some(p) => Some(p.to_string()),
        },
        secret_bindings,
    })
}

fn revision_context(v: Option<&Value>) -> Result<RevisionContext, CallError> {
    let entries = match v.and_then(|c| c.get("secretEnvironment")) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| other.to_string()),
            })
            .collect(),
        Some(_) => {
            return Err(CallError::invalid_params(
                "context.secretEnvironment: must be an array",
            ));
        }
    };
    Ok(RevisionContext {
        secret_environment: entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
        assert_eq!(Method::from_name("prepare"), None);
    }

    #[test]
    fn reads_occ_revision_shape() {
        let r = revision(&json!({
            "id": "rev-1", "namespaceId": "ns-1", "agentId": "agent-1", "revision": 2,
            "harness": {"id": "openclaw", "mode": "embedded", "version": "2026.9.6"},
            "harnessAuth": {"method": "runtime"},
            "configuration": {"gateway": {"mode": "local"}},
            "configurationId": "ignored",
        }))
        .unwrap();
        assert_eq!(r.number, 2);
        assert_eq!(r.harness_auth, r#"{"method":"runtime"}"#);
        assert_eq!(r.requested_plugins, "{}");
        assert_eq!(r.default_plugin_approver_policy, None);
        let empty_policy = revision(&json!({
            "id": "r", "namespaceId": "n", "agentId": "a", "revision": 1,
            "harness": {"id": "openclaw", "mode": "embedded"},
            "defaultPluginApproverPolicy": {"approvers": []},
        }))
        .unwrap();
        assert_eq!(
            empty_policy.default_plugin_approver_policy.as_deref(),
            Some(r#"{"approvers":[]}"#)
        );
    }

    #[test]
    fn param_errors_name_the_field() {
        let cases = [
            (
                revision(&json!({"id": "r"})).unwrap_err(),
                "revision.harness",
            ),
            (
                binding(&json!({"namespace": {"id": "n", "name": "x"}})).unwrap_err(),
                "binding.agent",
            ),
            (
                namespace(&json!({"id": "n"}), "namespace").unwrap_err(),
                "namespace.name: missing",
            ),
            (
                revision_context(Some(&json!({"secretEnvironment": 3}))).unwrap_err(),
                "context.secretEnvironment",
            ),
        ];
        for (err, expected) in cases {
            assert!(
                err.message.contains(expected),
                "{expected} in {}",
                err.message
            );
            assert_eq!(err.failure, FailureKind::Permanent);
        }
    }

    #[test]
    fn namespace_failures_are_results() {
        let e = CallError::new(FailureKind::Retryable, "connect", "stable: refused");
        let v = present(Method::EnsureNamespace, Err(e.clone())).unwrap();
        assert_eq!(v["namespaceReady"], json!(false));
        assert_eq!(v["failure"], json!("retryable"));
        let v = present(Method::DeleteNamespace, Err(e.clone())).unwrap();
        assert_eq!(v["namespaceDeleted"], json!(false));
        assert!(present(Method::ActivateRevision, Err(e)).is_err());
    }
}
