//! The `ssh-compute-driver` world: an OCC Compute Driver that reaches its hosts
//! over SSH. It may run commands on the hosts the installation grants
//! ([`crate::capability::ssh_exec`]), call the controller's lifecycle hooks
//! ([`crate::capability::hooks`]) and log ([`crate::capability::log`]); nothing
//! else.
//!
//! [`Driver`] opens a component of this world from an installation and calls
//! its contract with OCC's JSON (`dispatch.rs`), one fresh instance per call.

mod bindings;
mod dispatch;
pub mod envelope;
pub mod installation;
mod method;
mod params;
pub mod progress;
mod runtime_shape;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

pub use dispatch::{present, reason};
pub use method::{HelperOp, Method};

use crate::capability::Scope;
use crate::capability::hooks::bindings::occ::compute::types as wit;
use crate::capability::hooks::{
    self, AcceptedHooks, HookScope, HooksGrant, HooksState, LifecycleHooks, NoHooks,
};
use crate::capability::log::{self, LogGrant, LogState};
use crate::capability::ssh_exec::{
    self, LineSink, SHIPPED_HELPER, SshExec, SshExecState, SshGrant, SshMode,
};
use crate::error::{CallError, LoadError};
use crate::runtime::{CallData, CallFuture, CompiledComponent, ComponentCache, Runtime, Sandbox};
use crate::world::{Calls, Linked, ProgressSink, World, WorldInfo};
use bindings::runtime::{AgentRuntimeExport, AgentRuntimeExportIndices};
use bindings::{SshComputeDriver, SshComputeDriverIndices};
use envelope::{Subjects, TrustedRuntime};
use installation::Installation;
use params::Binding;

/// The world as the host knows it before loading anything.
pub const WORLD: WorldInfo = WorldInfo {
    name: "occ:compute/ssh-compute-driver",
    versions: &["0.2.0", "0.3.0", "0.4.0"],
    export: "occ:compute/compute-driver@0.2.0",
    imports: &[
        "occ:compute/types@0.2.0",
        "occ:compute/ssh-exec@0.2.0",
        "occ:compute/lifecycle-hooks@0.2.0",
        "occ:compute/log@0.2.0",
        // 0.3.0 changes only the capabilities that carried program text.
        "occ:compute/ssh-exec@0.3.0",
    ],
};

/// The custom section a driver ships its host helper in.
pub const HELPER_SECTION: &str = "occ:helper";

/// The helper a component ships, if it ships one (exactly one).
fn helper_section(component: &CompiledComponent) -> Option<&[u8]> {
    let mut sections = component.section(HELPER_SECTION);
    let helper = sections.next()?;
    sections.next().is_none().then_some(helper)
}

/// The helper a component ships and its SHA-256, if it ships one (exactly
/// one): what `inspect` shows. A loaded driver hashes it once, at load
/// ([`Driver::helper`]).
pub fn helper_of(component: &CompiledComponent) -> Option<(&[u8], String)> {
    helper_section(component).map(|h| (h, occ_ssh_target::digest::sha256_hex(h)))
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
    /// Revision calls use only what bindAgent accepted, and a binding passed with
    /// a revision call is refused unless it names the same identities (a
    /// long-running `serve`). Without it, a one-shot call passes its binding.
    pub require_bind: bool,
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

/// What one call may do on hosts and with the controller's hooks: its
/// method (which helper operations it may run), the hooks it may call, and
/// whom it acts for (what the helper's envelope names).
struct CallGrant {
    method: Method,
    hooks: HookScope,
    subjects: Subjects,
}

impl CallGrant {
    fn new(method: Method, hooks: HookScope) -> CallGrant {
        CallGrant {
            method,
            hooks,
            subjects: Subjects::default(),
        }
    }

    fn acting_for(mut self, subjects: Subjects) -> CallGrant {
        self.subjects = subjects;
        self
    }
}

/// This world's linking and instantiation.
pub(crate) struct ComputeWorld;

impl World for ComputeWorld {
    const INFO: &'static WorldInfo = &WORLD;
    type Data = ComputeCall;
    type Guest = ComputeGuest;
    type Pre = ComputePre;

    fn link(linker: &mut Linker<ComputeCall>) -> wasmtime::Result<()> {
        ssh_exec::add_to_linker(linker, |c| &mut c.ssh)?;
        hooks::add_to_linker(linker, |c| &mut c.hooks)?;
        log::add_to_linker(linker, |c| &mut c.log)
    }

    fn prepare(pre: InstancePre<ComputeCall>) -> wasmtime::Result<ComputePre> {
        let driver = SshComputeDriverIndices::new(&pre)?;
        // A component that exports the runtime interface must export it whole
        // and well typed; one without it is a driver of 0.2.0 or 0.3.0.
        let runtime = match pre.component().get_export_index(None, RUNTIME_EXPORT) {
            Some(_) => Some(AgentRuntimeExportIndices::new(&pre)?),
            None => None,
        };
        Ok(ComputePre {
            pre,
            driver,
            runtime,
        })
    }

    fn instantiate<'a>(
        pre: &'a ComputePre,
        store: &'a mut Store<ComputeCall>,
    ) -> CallFuture<'a, ComputeGuest> {
        Box::pin(async move {
            let instance = pre.pre.instantiate_async(&mut *store).await?;
            let driver = pre.driver.load(&mut *store, &instance)?;
            let runtime = match &pre.runtime {
                Some(indices) => Some(indices.load(&mut *store, &instance)?),
                None => None,
            };
            Ok(ComputeGuest { driver, runtime })
        })
    }
}

/// The export a driver reads an Agent's runtime through (WIT 0.4.0).
pub const RUNTIME_EXPORT: &str = "occ:compute/agent-runtime@0.4.0";

/// A driver's exports, looked up once per component.
#[derive(Clone)]
pub(crate) struct ComputePre {
    pre: InstancePre<ComputeCall>,
    driver: SshComputeDriverIndices,
    runtime: Option<AgentRuntimeExportIndices>,
}

/// One instance of a driver: its contract, and its runtime export when the
/// component has one.
pub(crate) struct ComputeGuest {
    driver: SshComputeDriver,
    runtime: Option<AgentRuntimeExport>,
}

impl std::ops::Deref for ComputeGuest {
    type Target = SshComputeDriver;

    fn deref(&self) -> &SshComputeDriver {
        &self.driver
    }
}

/// A store's data for one call: the runtime's sandbox and each capability's state.
pub(crate) struct ComputeCall {
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
    linked: Linked<ComputeWorld>,
    installation: Installation,
    configuration: String,
    ssh: Arc<SshExec>,
    trusted: Arc<TrustedRuntime>,
    hooks_grant: HooksGrant,
    log_grant: LogGrant,
    calls: Calls,
    require_bind: bool,
    bound: std::sync::Mutex<HashMap<(String, String), Binding>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("component", &self.linked.component.path)
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
        let bytes = crate::runtime::component::read(&installation.component)?;
        Driver::open_read(runtime, installation, &bytes, options)
    }

    /// [`Driver::open`] for a component file already read: `bytes` are
    /// `installation.component`'s.
    pub fn open_read(
        runtime: Arc<Runtime>,
        installation: Installation,
        bytes: &[u8],
        options: &DriverOptions,
    ) -> Result<Driver, LoadError> {
        let grant = SshGrant::from_configuration(
            &installation.configuration,
            &installation.approved_helpers,
        )
        .map(|mut grant| {
            grant.bounds.max_sessions = installation.max_sessions;
            grant
        })
        .and_then(|grant| {
            let mut trusted = TrustedRuntime::from_configuration(
                &installation.configuration,
                &installation.driver_id,
                &installation.implementation,
            )?;
            trusted.max_sessions = installation.max_sessions;
            Ok((grant, trusted))
        })
        .map_err(|e| super::invalid_configuration(&installation.path, e))?;
        let (grant, trusted) = grant;
        Driver::with_grant(runtime, installation, bytes, grant, trusted, options)
    }

    /// Open a component with no installation and nothing granted: no host to
    /// reach, no helper approved. Enough to ask it for its configuration schema
    /// (`occ-driver-host schema`) before any installation exists.
    pub fn open_ungranted(
        runtime: Arc<Runtime>,
        component: &std::path::Path,
        options: &DriverOptions,
    ) -> Result<Driver, LoadError> {
        let installation = Installation {
            path: PathBuf::from("(no installation)"),
            driver_id: String::new(),
            implementation: installation::DEFAULT_IMPLEMENTATION.into(),
            approved_helpers: Vec::new(),
            component: component.to_path_buf(),
            max_sessions: crate::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
            configuration: json!({}),
        };
        let bytes = crate::runtime::component::read(component)?;
        Driver::with_grant(
            runtime,
            installation,
            &bytes,
            SshGrant::none(),
            TrustedRuntime::none(),
            options,
        )
    }

    fn with_grant(
        runtime: Arc<Runtime>,
        installation: Installation,
        bytes: &[u8],
        grant: SshGrant,
        trusted: TrustedRuntime,
        options: &DriverOptions,
    ) -> Result<Driver, LoadError> {
        let linked = Linked::<ComputeWorld>::load(
            &runtime,
            &installation.component,
            bytes,
            options.cache.as_ref(),
            |_| Ok(()),
        )?;
        let ssh = super::open_ssh(&installation.path, grant, &options.ssh)?
            .with_shipped(helper_section(&linked.component).map(|text| (SHIPPED_HELPER, text)));
        let calls = Calls::open(&linked.component, options.audit_log.as_ref())?;
        let world = WORLD.named(&linked.component);
        let driver = Driver {
            runtime,
            configuration: installation.configuration.to_string(),
            installation,
            linked,
            ssh: Arc::new(ssh),
            trusted: Arc::new(trusted),
            hooks_grant: HooksGrant::default(),
            log_grant: LogGrant::default(),
            calls,
            require_bind: options.require_bind,
            bound: Default::default(),
        };
        driver.calls.audit_load(json!({
            "component": driver.linked.component.path,
            "helperSha256": driver.helper().map(|(_, sha)| sha),
            "world": world,
            "installation": driver.installation.path,
            "sshBackend": driver.ssh.backend_kind(),
            "hosts": driver.ssh.grant().hosts.keys().collect::<Vec<_>>(),
        }))?;
        Ok(driver)
    }

    /// The loaded component.
    pub fn component(&self) -> &CompiledComponent {
        &self.linked.component
    }

    /// Whether the component exports [`RUNTIME_EXPORT`]: an Agent's runtime
    /// can be described, its log read and its deployment diagnosed.
    pub fn reads_runtime(&self) -> bool {
        self.linked.pre().runtime.is_some()
    }

    /// The installation it was opened from.
    pub fn installation(&self) -> &Installation {
        &self.installation
    }

    /// The SSH capability as granted.
    pub fn ssh(&self) -> &SshExec {
        &self.ssh
    }

    /// The helper the component ships and its SHA-256, taken at load.
    pub fn helper(&self) -> Option<(&[u8], &str)> {
        self.ssh
            .shipped(SHIPPED_HELPER)
            .map(|(text, sha)| (text, sha.as_str()))
    }

    /// The driver as the guest sees it.
    fn selection(&self) -> wit::Selection {
        wit::Selection {
            id: self.installation.driver_id.clone(),
            implementation: self.installation.implementation.clone(),
            configuration: self.configuration.clone(),
        }
    }

    fn scope(&self, method: &str, options: &CallOptions) -> Scope {
        self.calls
            .scope(method, options.id.clone(), options.cancel.clone())
    }

    /// Run `f` against a fresh instance in a fresh store.
    async fn invoke<R, F>(
        &self,
        scope: Scope,
        call: CallGrant,
        options: &CallOptions,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(
                &'a ComputeGuest,
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
        let accepted = AcceptedHooks::default();
        let data = ComputeCall {
            sandbox: Sandbox::new(&self.runtime.limits()),
            ssh: SshExecState::new(
                self.ssh.clone(),
                scope.clone(),
                lines,
                envelope::admission(
                    call.method,
                    self.trusted.clone(),
                    call.subjects,
                    accepted.clone(),
                ),
            ),
            hooks: HooksState::new(
                self.hooks_grant.clone(),
                options.hooks.clone(),
                scope.clone(),
                call.hooks,
            )
            .with_accepted(accepted),
            log: LogState::new(self.log_grant.clone(), scope.clone()),
        };
        self.linked
            .invoke(&self.runtime, data, &scope, driver_error, f)
            .await
    }

    /// Create a fresh store and instance and drop them: what every call pays
    /// before the driver runs. For benchmarks and health checks.
    pub async fn instantiate_only(&self) -> Result<(), CallError> {
        let options = CallOptions::default();
        let scope = self.scope("instantiate", &options);
        let call = CallGrant::new(Method::ConfigurationSchema, HookScope::default());
        self.invoke(scope, call, &options, |_, _| Box::pin(async { Ok(Ok(())) }))
            .await
    }
}

fn driver_error(e: wit::DriverError) -> CallError {
    super::guest_error(e.kind, e.code, &e.message, e.host)
}
