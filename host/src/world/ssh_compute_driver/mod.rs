//! The `ssh-compute-driver` world: an OCC Compute Driver that reaches its hosts
//! over SSH. It may run commands on the hosts the installation grants
//! ([`crate::capability::ssh_exec`]), call the controller's lifecycle hooks
//! ([`crate::capability::hooks`]) and log ([`crate::capability::log`]); nothing
//! else.
//!
//! [`Driver`] opens a component of this world from an installation and calls
//! its contract with OCC's JSON, one fresh instance per call.

mod bindings;
mod method;
mod params;
pub mod progress;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use wasmtime::Store;

pub use method::Method;

use crate::audit::{Audit, AuditLog};
use crate::capability::hooks::bindings::occ::compute::types as wit;
use crate::capability::hooks::{self, HookScope, HooksGrant, HooksState, LifecycleHooks, NoHooks};
use crate::capability::log::{self, LogGrant, LogState};
use crate::capability::ssh_exec::{self, LineSink, SshExec, SshExecState, SshGrant, SshMode};
use crate::capability::{CallScope, Scope};
use crate::error::{CallError, FailureKind, LoadError};
use crate::installation::Installation;
use crate::runtime::{CallData, CallFuture, CompiledComponent, ComponentCache, Runtime, Sandbox};
use crate::world::{ProgressSink, WorldInfo};
use bindings::{SshComputeDriver, SshComputeDriverPre};
use params::{Binding, NamespaceParams, RevisionParams};

/// The world as the host knows it before loading anything.
pub const WORLD: WorldInfo = WorldInfo {
    name: "occ:compute/ssh-compute-driver@0.1.0",
    export: "occ:compute/compute-driver@0.1.0",
    imports: &[
        "occ:compute/types@0.1.0",
        "occ:compute/ssh-exec@0.1.0",
        "occ:compute/lifecycle-hooks@0.1.0",
        "occ:compute/log@0.1.0",
    ],
};

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
    /// The call's id (the controller's request id); the host makes one up when
    /// there is none.
    pub id: Option<String>,
    /// The controller's hooks.
    pub hooks: Arc<dyn LifecycleHooks>,
    /// Cancels the call.
    pub cancel: CancellationToken,
    /// Sees the remote helper's progress.
    pub progress: ProgressSink,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            id: None,
            hooks: Arc::new(NoHooks),
            cancel: CancellationToken::new(),
            progress: Arc::new(|_| {}),
        }
    }
}

/// A store's data for one call: the runtime's sandbox and each capability's state.
struct ComputeCall {
    sandbox: Sandbox,
    ssh: SshExecState,
    hooks: HooksState,
    log: LogState,
}

impl CallData for ComputeCall {
    fn sandbox(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }
}

/// A driver component loaded from an installation, with its grants.
pub struct Driver {
    runtime: Arc<Runtime>,
    component: CompiledComponent,
    pre: SshComputeDriverPre<ComputeCall>,
    installation: Installation,
    configuration: String,
    ssh: Arc<SshExec>,
    hooks_grant: HooksGrant,
    log_grant: LogGrant,
    audit: Option<Arc<AuditLog>>,
    bound: std::sync::Mutex<HashMap<(String, String), Binding>>,
    next_call: AtomicU64,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("component", &self.component.path)
            .field("ssh", &self.ssh)
            .finish()
    }
}

type GuestResult<T> = Result<T, wit::DriverError>;

impl Driver {
    /// Read the grants from the installation, load its component, check the
    /// component's imports and exports against the world, and prepare
    /// instantiation.
    pub fn open(
        runtime: Arc<Runtime>,
        installation: Installation,
        options: &DriverOptions,
    ) -> Result<Driver, LoadError> {
        let grant = SshGrant::from_configuration(&installation.configuration).map_err(|e| {
            LoadError::Configuration {
                path: installation.path.clone(),
                error: CallError::new(
                    FailureKind::Permanent,
                    "invalid-configuration",
                    e.to_string(),
                ),
            }
        })?;
        let path = &installation.component;
        let component = runtime.compile(path, options.cache.as_ref())?;
        let refused = WORLD.refused(component.imports.iter().map(String::as_str));
        if !refused.is_empty() {
            return Err(LoadError::RefusedImports {
                path: path.clone(),
                world: WORLD.name.into(),
                refused,
            });
        }
        if !component.exports.iter().any(|e| e == WORLD.export) {
            return Err(LoadError::MissingExport {
                path: path.clone(),
                expected: WORLD.export.into(),
                found: component.exports.clone(),
            });
        }
        let engine_error = |e: wasmtime::Error| LoadError::Engine(format!("{e:#}"));
        let mut linker = runtime.linker::<ComputeCall>()?;
        ssh_exec::add_to_linker(&mut linker, |c| &mut c.ssh).map_err(engine_error)?;
        hooks::add_to_linker(&mut linker, |c| &mut c.hooks).map_err(engine_error)?;
        log::add_to_linker(&mut linker, |c| &mut c.log).map_err(engine_error)?;
        let invalid = |e: wasmtime::Error| LoadError::InvalidComponent {
            path: path.clone(),
            message: format!("{e:#}"),
        };
        let pre = linker
            .instantiate_pre(&component.component)
            .map_err(invalid)?;
        let pre = SshComputeDriverPre::new(pre).map_err(invalid)?;
        let ssh =
            SshExec::open(grant, &options.ssh).map_err(|message| LoadError::Installation {
                path: installation.path.clone(),
                message,
            })?;
        let audit = match &options.audit_log {
            Some(path) => Some(Arc::new(AuditLog::open(path).map_err(|message| {
                LoadError::LocalFile {
                    path: path.clone(),
                    message,
                }
            })?)),
            None => None,
        };
        let driver = Driver {
            runtime,
            configuration: installation.configuration.to_string(),
            installation,
            component,
            pre,
            ssh: Arc::new(ssh),
            hooks_grant: HooksGrant::default(),
            log_grant: LogGrant::default(),
            audit,
            bound: Default::default(),
            next_call: AtomicU64::new(1),
        };
        driver
            .audit_base("load", None)
            .event(
                "load",
                json!({
                    "component": driver.component.path,
                    "world": WORLD.name,
                    "installation": driver.installation.path,
                    "sshBackend": driver.ssh.backend_kind(),
                    "hosts": driver.ssh.grant().hosts.keys().collect::<Vec<_>>(),
                }),
            )
            .map_err(|e| LoadError::LocalFile {
                path: options.audit_log.clone().unwrap_or_default(),
                message: e.to_string(),
            })?;
        Ok(driver)
    }

    /// The loaded component.
    pub fn component(&self) -> &CompiledComponent {
        &self.component
    }

    /// The installation it was opened from.
    pub fn installation(&self) -> &Installation {
        &self.installation
    }

    /// The SSH capability as granted.
    pub fn ssh(&self) -> &SshExec {
        &self.ssh
    }

    fn audit_base(&self, method: &str, call_id: Option<&str>) -> Audit {
        let mut base = Map::new();
        base.insert("driver".into(), json!(self.component.name()));
        base.insert("driverSha256".into(), json!(self.component.sha256));
        if let Some(id) = call_id {
            base.insert("callId".into(), json!(id));
        }
        base.insert("method".into(), json!(method));
        Audit::new(self.audit.clone(), base)
    }

    fn scope(&self, method: &str, options: &CallOptions) -> Scope {
        let id = options.id.clone().unwrap_or_else(|| {
            format!(
                "host-{}-{}",
                std::process::id(),
                self.next_call.fetch_add(1, Ordering::Relaxed)
            )
        });
        Arc::new(CallScope {
            audit: self.audit_base(method, Some(&id)),
            id,
            method: method.to_string(),
            driver: self.component.name(),
            cancel: options.cancel.clone(),
        })
    }

    /// Run `f` against a fresh instance in a fresh store.
    async fn invoke<R, F>(
        &self,
        scope: Scope,
        hook_scope: HookScope,
        options: &CallOptions,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(
                &'a SshComputeDriver,
                &'a mut Store<ComputeCall>,
            ) -> CallFuture<'a, GuestResult<R>>
            + Send
            + 'static,
    {
        let sink = options.progress.clone();
        let lines: LineSink = Arc::new(move |host, line| {
            if let Some(p) = progress::parse(host, line) {
                sink(&p);
            }
        });
        let data = ComputeCall {
            sandbox: Sandbox::new(&self.runtime.limits()),
            ssh: SshExecState::new(self.ssh.clone(), scope.clone(), lines),
            hooks: HooksState::new(
                self.hooks_grant.clone(),
                options.hooks.clone(),
                scope.clone(),
                hook_scope,
            ),
            log: LogState::new(self.log_grant.clone(), scope.clone()),
        };
        let pre = self.pre.clone();
        let name = self.component.name();
        let result = self
            .runtime
            .call(&name, data, &scope.cancel, move |store| {
                Box::pin(async move {
                    let guest = pre.instantiate_async(&mut *store).await?;
                    f(&guest, store).await
                })
            })
            .await?;
        result.map_err(driver_error)
    }

    /// Create a fresh store and instance and drop them: what every call pays
    /// before the driver runs. For benchmarks and health checks.
    pub async fn instantiate_only(&self) -> Result<(), CallError> {
        let options = CallOptions::default();
        let scope = self.scope("instantiate", &options);
        self.invoke(scope, HookScope::default(), &options, |_, _| {
            Box::pin(async { Ok(Ok(())) })
        })
        .await
    }

    /// Call one contract method with OCC-shaped JSON params. Success is the
    /// method's result; namespace methods report failure inside their result
    /// only through [`present`].
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
        let scope = self.scope(method.name(), &options);
        let cfg = self.configuration.clone();
        let allowed = method.hooks().to_vec();
        macro_rules! guest {
            ($hooks:expr, |$g:ident, $s:ident| $call:expr) => {
                self.invoke(scope.clone(), $hooks, &options, move |$g, $s| {
                    Box::pin(async move { $call.await })
                })
                .await
            };
        }
        let result = match method {
            Method::ValidateConfiguration => {
                let w = guest!(HookScope::default(), |g, s| g
                    .occ_compute_compute_driver()
                    .call_validate_configuration(s, &cfg))?;
                json!({"ok": true, "warnings": warnings(w)})
            }
            Method::Preflight => {
                // A replay uses no identity or known-hosts file: nothing to verify.
                if !self.ssh.is_offline() {
                    self.ssh
                        .grant()
                        .verify_local_files()
                        .map_err(|m| CallError {
                            failure: FailureKind::Permanent,
                            code: "local-ssh-files".into(),
                            message: format!("preflight: {m}"),
                            host: None,
                        })?;
                }
                let w = guest!(HookScope::default(), |g, s| g
                    .occ_compute_compute_driver()
                    .call_preflight(s, &cfg))?;
                json!({"ok": true, "warnings": warnings(w)})
            }
            Method::EnsureNamespace | Method::DeleteNamespace => {
                let p: NamespaceParams = params::read(params, "")?;
                let hooks = HookScope {
                    allowed,
                    namespace: Some(json!({"id": p.namespace.id, "name": p.namespace.name})),
                    ..HookScope::default()
                };
                let ns = p.namespace.to_wit();
                if method == Method::EnsureNamespace {
                    guest!(hooks, |g, s| g
                        .occ_compute_compute_driver()
                        .call_ensure_namespace(s, &cfg, &ns))?;
                    json!({"namespaceReady": true})
                } else {
                    guest!(hooks, |g, s| g
                        .occ_compute_compute_driver()
                        .call_delete_namespace(s, &cfg, &ns))?;
                    json!({"namespaceDeleted": true})
                }
            }
            Method::BindAgent => {
                let b = params::binding_params(params)?;
                let accepted = b.to_wit();
                guest!(HookScope::default(), |g, s| g
                    .occ_compute_compute_driver()
                    .call_bind_agent(s, &cfg, &accepted))?;
                let key = (b.namespace.id.clone(), b.agent.id.clone());
                self.bound
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, b);
                json!({"ok": true})
            }
            Method::ValidateHarnessAuth
            | Method::PrepareRevision
            | Method::ActivateRevision
            | Method::DeactivateRevision
            | Method::StopRevision
            | Method::RetireRevision => {
                let p: RevisionParams = params::read(params, "")?;
                let binding = match p.binding {
                    Some(b) => Some(b),
                    None => self
                        .bound
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&(p.revision.namespace_id.clone(), p.revision.agent_id.clone()))
                        .cloned(),
                };
                let hooks = HookScope {
                    allowed,
                    namespace: binding
                        .as_ref()
                        .map(|b| json!({"id": b.namespace.id, "name": b.namespace.name})),
                    binding: binding.as_ref().map(Binding::to_json),
                    revision_id: Some(p.revision.id.clone()),
                };
                let bound = binding.as_ref().map(Binding::to_wit);
                let rev = p.revision.to_wit();
                self.revision_call(method, hooks, bound, rev, p.context, &options, &cfg, &scope)
                    .await?
            }
        };
        let size = result.to_string().len();
        let max = self.runtime.limits().max_result_bytes;
        if size > max {
            return Err(CallError::new(
                FailureKind::Permanent,
                "result-too-large",
                format!("the driver's {method} result is {size} bytes, over the bound of {max}"),
            ));
        }
        Ok(result)
    }

    /// The revision methods: the same shape, one guest export each.
    #[allow(clippy::too_many_arguments)]
    async fn revision_call(
        &self,
        method: Method,
        hooks: HookScope,
        bound: Option<wit::AgentBinding>,
        rev: wit::Revision,
        context: Option<params::RevisionContext>,
        options: &CallOptions,
        cfg: &str,
        scope: &Scope,
    ) -> Result<Value, CallError> {
        let cfg = cfg.to_string();
        let options = options.clone();
        macro_rules! guest {
            (|$g:ident, $s:ident| $call:expr) => {
                self.invoke(scope.clone(), hooks, &options, move |$g, $s| {
                    Box::pin(async move { $call.await })
                })
                .await
            };
        }
        macro_rules! plain {
            ($export:ident) => {{
                guest!(|g, s| g
                    .occ_compute_compute_driver()
                    .$export(s, &cfg, bound.as_ref(), &rev))?;
                json!({"ok": true})
            }};
        }
        Ok(match method {
            Method::ValidateHarnessAuth => {
                let w = guest!(
                    |g, s| g.occ_compute_compute_driver().call_validate_harness_auth(
                        s,
                        &cfg,
                        bound.as_ref(),
                        &rev
                    )
                )?;
                json!({"ok": true, "warnings": warnings(w)})
            }
            Method::PrepareRevision => {
                let context = context.unwrap_or_default().to_wit();
                let r = guest!(|g, s| g.occ_compute_compute_driver().call_prepare_revision(
                    s,
                    &cfg,
                    bound.as_ref(),
                    &rev,
                    &context
                ))?;
                json!({"ready": r.ready, "warnings": warnings(r.warnings)})
            }
            Method::ActivateRevision => plain!(call_activate_revision),
            Method::DeactivateRevision => plain!(call_deactivate_revision),
            Method::StopRevision => plain!(call_stop_revision),
            Method::RetireRevision => plain!(call_retire_revision),
            other => unreachable!("{other} is not a revision method"),
        })
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

fn driver_error(e: wit::DriverError) -> CallError {
    CallError {
        failure: match e.kind {
            wit::FailureKind::Retryable => FailureKind::Retryable,
            wit::FailureKind::Permanent => FailureKind::Permanent,
        },
        code: e.code,
        message: crate::runtime::escape_control(&e.message),
        host: e.host,
    }
}

fn warnings(w: Vec<wit::Warning>) -> Value {
    Value::Array(
        w.into_iter()
            .map(|w| json!({"code": w.code, "message": w.message}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
