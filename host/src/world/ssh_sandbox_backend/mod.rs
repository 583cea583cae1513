//! The `ssh-sandbox-backend` world: OpenClaw's SSH sandbox backend. A
//! component of this world may run the scripts the operator approved on its one
//! target ([`crate::capability::ssh_exec`], policy
//! [`ExecPolicy::PinnedScripts`]), stream the call's granted local workspace
//! into one of them ([`crate::capability::local_workspace`]) and log
//! ([`crate::capability::log`]); nothing else.
//!
//! [`SandboxBackend`] opens a component of this world from an installation
//! ([`installation`]) and calls it with a controller's JSON (`dispatch.rs`),
//! one fresh instance per call. Per call the host also admits what may run
//! (`admission.rs`): each script operation only from its own method, each
//! argument of the kind the operation takes, the exec script only with the
//! caller's own request; and every script runs with the envelope the host
//! writes (the workspace root, the scope's runtime id and mounts). It streams
//! a command's output to the caller while the component gets the end of it
//! (`output.rs`).
//!
//! [`ExecPolicy::PinnedScripts`]: crate::capability::ssh_exec::ExecPolicy::PinnedScripts

mod admission;
mod bindings;
mod dispatch;
pub mod installation;
mod method;
mod output;
mod params;
mod scripts;
pub mod stdin;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::Linker;

pub use method::Method;
pub use scripts::{SCRIPT_SECTION_PREFIX, ShippedScript, scripts_of};

use crate::capability::Scope;
use crate::capability::local_workspace::{
    self, CallRoots, LocalWorkspaceGrant, LocalWorkspaceState,
};
use crate::capability::log::{self, LogGrant, LogState};
use crate::capability::ssh_exec::{
    self, Admission, Admitted, ExecAsk, OutputSink, SshExec, SshExecState, SshMode,
};
use crate::error::{CallError, LoadError};
use crate::runtime::{CallData, CallFuture, CompiledComponent, ComponentCache, Runtime, Sandbox};
use crate::world::{Calls, Linked, World, WorldInfo};
use admission::{CallRules, CallerCommand, WorkerPrograms};
use bindings::exports::occ::compute::sandbox_backend as wit;
use bindings::{SshSandboxBackend, SshSandboxBackendPre};
use installation::{
    SandboxInstallation, SandboxSettingsError, TARGET_ALIAS, redacted_configuration,
    sandbox_ssh_grant,
};
use occ_ssh_target::layout::{ScopeRef, Settings};
use output::without_reports;

/// The world as the host knows it before loading anything.
pub const WORLD: WorldInfo = WorldInfo {
    name: "occ:compute/ssh-sandbox-backend",
    versions: &["0.2.0", "0.3.0"],
    export: "occ:compute/sandbox-backend@0.2.0",
    imports: &[
        "occ:compute/types@0.2.0",
        "occ:compute/ssh-exec@0.2.0",
        "occ:compute/local-workspace@0.2.0",
        "occ:compute/log@0.2.0",
        // 0.3.0 changes only the capabilities that carried program text.
        "occ:compute/ssh-exec@0.3.0",
        "occ:compute/local-workspace@0.3.0",
    ],
};

/// How a sandbox backend is opened.
#[derive(Debug, Default, Clone)]
pub struct BackendOptions {
    /// The precompiled-component cache; none compiles every time.
    pub cache: Option<ComponentCache>,
    /// Where to append audit records; none disables them.
    pub audit_log: Option<PathBuf>,
    /// Must be live: a sandbox streams workspaces and output, which a recording
    /// cannot hold.
    pub ssh: SshMode,
}

/// What one call may use.
#[derive(Clone, Default)]
pub struct SandboxCallOptions {
    /// The call's id (the controller's request id); made up when absent.
    pub id: Option<String>,
    /// Cancels the call: its ssh channel closes and the remote command is killed.
    pub cancel: CancellationToken,
    /// Receives an `exec` call's output as it arrives.
    pub output: Option<OutputSink>,
    /// An `exec` call's open stdin: what the caller writes while the command
    /// runs reaches it, after the request's own `stdin`; closing it closes
    /// the command's. Only with `output` (an open stdin ends with the output).
    pub input: Option<stdin::CommandInput>,
}

/// This world's linking and instantiation.
pub(crate) struct SandboxWorld;

impl World for SandboxWorld {
    const INFO: &'static WorldInfo = &WORLD;
    type Data = SandboxCallData;
    type Guest = SshSandboxBackend;
    type Pre = SshSandboxBackendPre<SandboxCallData>;

    fn link(linker: &mut Linker<SandboxCallData>) -> wasmtime::Result<()> {
        ssh_exec::add_to_linker(linker, |c| &mut c.ssh)?;
        local_workspace::add_to_linker(linker, |c| &mut c.local)?;
        log::add_to_linker(linker, |c| &mut c.log)
    }

    generated_instance!();
}

/// A store's data for one call.
pub(crate) struct SandboxCallData {
    sandbox: Sandbox,
    ssh: SshExecState,
    local: LocalWorkspaceState,
    log: LogState,
}

impl CallData for SandboxCallData {
    fn sandbox(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }
}

/// A sandbox component loaded from an installation, with its grants.
pub struct SandboxBackend {
    runtime: Arc<Runtime>,
    linked: Linked<SandboxWorld>,
    installation: SandboxInstallation,
    configuration: String,
    /// What the envelopes carry from the installation; the reason when the
    /// configuration gives none (then nothing runs, and the component says
    /// why the configuration is invalid).
    settings: Result<Settings, SandboxSettingsError>,
    ssh: Arc<SshExec>,
    local: Arc<LocalWorkspaceGrant>,
    log_grant: LogGrant,
    calls: Calls,
    /// What the target's long-lived worker starts from, when the
    /// installation wants one and approves the workspace script.
    worker_programs: Option<Arc<WorkerPrograms>>,
}

impl std::fmt::Debug for SandboxBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxBackend")
            .field("component", &self.linked.component.path)
            .field("ssh", &self.ssh)
            .finish()
    }
}

type GuestResult<T> = Result<T, wit::SandboxError>;

/// A call's wall-clock bound beyond its longest exec (the grant's operation
/// bound): connecting, seeding on first use, and the guest's own work.
const CALL_SLACK: Duration = Duration::from_secs(10 * 60);

impl SandboxBackend {
    /// Read the grants from the installation, load its component, check its
    /// imports, exports and scripts against the world, and prepare instantiation.
    pub fn open(
        runtime: Arc<Runtime>,
        installation: SandboxInstallation,
        options: &BackendOptions,
    ) -> Result<SandboxBackend, LoadError> {
        let bytes = crate::runtime::component::read(&installation.component)?;
        SandboxBackend::open_read(runtime, installation, &bytes, options)
    }

    /// [`SandboxBackend::open`] for a component file already read: `bytes`
    /// are `installation.component`'s.
    pub fn open_read(
        runtime: Arc<Runtime>,
        installation: SandboxInstallation,
        bytes: &[u8],
        options: &BackendOptions,
    ) -> Result<SandboxBackend, LoadError> {
        let refuse = |message: String| LoadError::Installation {
            path: installation.path.clone(),
            message,
        };
        if !matches!(options.ssh, SshMode::Live) {
            return Err(refuse(
                "the sandbox backend streams workspaces and command output, which --ssh-record and --ssh-replay cannot hold; run it live".into(),
            ));
        }
        let grant = sandbox_ssh_grant(
            &installation.configuration,
            &installation.approved_scripts,
            installation.max_run,
        )
        .map(|mut grant| {
            grant.bounds.max_sessions = installation.max_sessions;
            grant.bounds.reconnect_budget = installation.reconnect;
            grant
        })
        .map_err(|e| super::invalid_configuration(&installation.path, e))?;
        let local = LocalWorkspaceGrant::new(&installation.local_workspaces)
            .map_err(|m| refuse(format!("drivers.sandbox.localWorkspaces: {m}")))?;
        let path = &installation.component;
        let linked = Linked::<SandboxWorld>::load(
            &runtime,
            path,
            bytes,
            options.cache.as_ref(),
            |component| {
                let names: Vec<&str> = component
                    .sections
                    .iter()
                    .filter_map(|(n, _)| n.strip_prefix(SCRIPT_SECTION_PREFIX))
                    .collect();
                let distinct: std::collections::BTreeSet<&str> = names.iter().copied().collect();
                if names.len() != distinct.len() {
                    return Err(LoadError::InvalidComponent {
                        path: path.clone(),
                        message: "it ships a script name twice; the host cannot tell which text an approval means".into(),
                    });
                }
                Ok(())
            },
        )?;
        let wall = grant.bounds.operation + CALL_SLACK;
        let ssh = super::open_ssh(&installation.path, grant, &options.ssh)?.with_shipped(
            linked
                .component
                .sections
                .iter()
                .filter_map(|(section, text)| {
                    Some((
                        section.strip_prefix(SCRIPT_SECTION_PREFIX)?,
                        text.as_slice(),
                    ))
                }),
        );
        let calls = Calls::open(&linked.component, options.audit_log.as_ref())?;
        let settings = installation::sandbox_settings(&installation.configuration);
        let world = WORLD.named(&linked.component);
        let text = |name: &str| {
            ssh.approved_text(name)
                .and_then(|t| std::str::from_utf8(t).ok())
        };
        let worker_programs = installation
            .worker
            .and_then(|_| {
                let root = &settings.as_ref().ok()?.workspace_root;
                WorkerPrograms::new(text("workspace")?, text("exec"), root)
            })
            .map(Arc::new);
        let backend = SandboxBackend {
            runtime: Arc::new(runtime.with_wall(wall)),
            configuration: redacted_configuration(&installation.configuration).to_string(),
            settings,
            installation,
            linked,
            ssh: Arc::new(ssh),
            local: Arc::new(local),
            log_grant: LogGrant::default(),
            calls,
            worker_programs,
        };
        backend.calls.audit_load(json!({
            "component": backend.linked.component.path,
            "world": world,
            "installation": backend.installation.path,
            // Hashed once, when the capability took them.
            "scripts": backend.ssh.shipped_names().into_iter().filter_map(|name| {
                let (_, sha256) = backend.ssh.shipped(name)?;
                Some(json!({"name": name, "sha256": sha256.as_str()}))
            }).collect::<Vec<_>>(),
            "target": backend.target_label(),
            "sshClient": backend.ssh_client(),
        }))?;
        Ok(backend)
    }

    /// The loaded component.
    pub fn component(&self) -> &CompiledComponent {
        &self.linked.component
    }

    /// The installation it was opened from.
    pub fn installation(&self) -> &SandboxInstallation {
        &self.installation
    }

    /// The SSH capability as granted.
    pub fn ssh(&self) -> &SshExec {
        &self.ssh
    }

    /// The OpenSSH client the transport runs, for the audit log: what the
    /// configuration named, the program that runs, and its version.
    pub fn ssh_client(&self) -> Value {
        let client = &self.ssh.grant().client;
        json!({
            "command": client.configured,
            "program": client.program,
            "version": client.version,
        })
    }

    /// The target as `user@host:port`.
    pub fn target_label(&self) -> String {
        let h = &self.ssh.grant().hosts[TARGET_ALIAS];
        format!("{}@{}:{}", h.user, h.address, h.port)
    }

    fn scope(&self, method: &str, options: &SandboxCallOptions) -> Scope {
        self.calls
            .scope(method, options.id.clone(), options.cancel.clone())
    }

    /// The rules of a `method` call's execs: the installation's settings,
    /// the call's scope (none for a call without one) and, for a command,
    /// what the caller asked.
    fn rules(
        &self,
        method: Method,
        scope: Option<&wit::SandboxScope>,
        asked: Option<CallerCommand>,
    ) -> Arc<CallRules> {
        let operation_ms =
            u64::try_from(self.ssh.grant().bounds.operation.as_millis()).unwrap_or(u64::MAX);
        let scope = scope.map(scope_ref);
        Arc::new(CallRules::new(
            method,
            &self.settings,
            scope,
            asked,
            operation_ms,
        ))
    }

    /// Run `f` against a fresh instance in a fresh store.
    async fn invoke<R, F>(
        &self,
        scope: Scope,
        method: Method,
        roots: CallRoots,
        rules: Arc<CallRules>,
        options: &SandboxCallOptions,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(
                &'a SshSandboxBackend,
                &'a mut Store<SandboxCallData>,
            ) -> CallFuture<'a, GuestResult<R>>
            + Send
            + 'static,
    {
        let no_lines: ssh_exec::LineSink = Arc::new(|_, _| {});
        // The worker is started from this call's envelope, already written:
        // nothing is parsed again per operation.
        let worker = self.installation.worker.zip(self.worker_programs.clone());
        // Only the command's output is the caller's: not seeding on the way,
        // nor the exec script's reports about itself; and the caller's open
        // stdin goes with it.
        let (output, input) = match &options.output {
            Some(output) if method == Method::Exec => (Some(output.clone()), options.input.clone()),
            _ => (None, None),
        };
        let ssh = SshExecState::new(
            self.ssh.clone(),
            scope.clone(),
            no_lines.clone(),
            Arc::new(CallExecs {
                rules: rules.clone(),
                worker,
                output,
                input,
            }),
        );
        // Uploads run through an exec state of their own, admitted the same
        // way: a root streams only into the operation that takes it (a
        // workspace into unpack, the skills into the skills refresh, staged
        // inputs into theirs).
        let upload_exec = SshExecState::new(
            self.ssh.clone(),
            scope.clone(),
            no_lines,
            Arc::new(UploadExecs(rules)),
        );
        let data = SandboxCallData {
            sandbox: Sandbox::new(&self.runtime.limits()),
            ssh,
            local: LocalWorkspaceState::new(self.local.clone(), roots, upload_exec, scope.clone()),
            log: LogState::new(self.log_grant.clone(), scope.clone()),
        };
        self.linked
            .invoke(&self.runtime, data, &scope, sandbox_error, f)
            .await
    }

    /// The scope's local directories must lie inside the installation's
    /// `localWorkspaces`: refused here, before the component runs, and checked
    /// again before anything is read.
    fn check_roots(&self, method: Method, roots: &CallRoots) -> Result<(), CallError> {
        for (key, root) in [
            ("scope.workspaceDir", &roots.workspace),
            ("scope.agentWorkspaceDir", &roots.agent),
        ] {
            let Some(root) = root else { continue };
            let admitted = if root.exists() {
                self.local
                    .admit(root)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            } else if self.local.allowed.iter().any(|a| root.starts_with(a)) {
                Ok(())
            } else {
                Err(format!(
                    "{} is outside the local workspaces the installation lists",
                    root.display()
                ))
            };
            admitted.map_err(|why| {
                CallError::invalid_params(format!("{method}: params.{key}: {why}"))
            })?;
        }
        Ok(())
    }
}

/// The execs a call's component runs itself: admitted against the call, and
/// each told where its output goes, whether the caller's open stdin follows
/// its own and whether the target's worker answers it.
struct CallExecs {
    rules: Arc<CallRules>,
    /// The installation's bound of a worker's request, and what the worker
    /// starts from, when the installation wants one.
    worker: Option<(Duration, Arc<WorkerPrograms>)>,
    /// The caller's sink of an `exec` call's output.
    output: Option<OutputSink>,
    /// The caller's open stdin of an `exec` call, with `output` only.
    input: Option<stdin::CommandInput>,
}

impl Admission for CallExecs {
    fn admit(&self, ask: ExecAsk<'_>) -> Result<Admitted, String> {
        let run = self.rules.admit(ask.argv, ask.stdin, None)?;
        let output = self
            .output
            .as_ref()
            .zip(run.nonce.as_ref())
            .map(|(output, nonce)| without_reports(output.clone(), nonce));
        // The caller's open stdin goes to the exec script's run of the
        // caller's command (admitted: its header is the caller's request,
        // its envelope this call's scope), and to nothing else.
        let input = self
            .input
            .as_ref()
            .filter(|_| run.is_exec_mode())
            .map(stdin::CommandInput::reader);
        let serve = self
            .worker
            .as_ref()
            .and_then(|(bound, programs)| self.rules.served(&run, *bound, programs));
        Ok(Admitted {
            output,
            input,
            serve,
            ..run.into_admitted()
        })
    }
}

/// The execs an upload runs (`local-workspace`): admitted against the call
/// with the root that streams into them; their output is the component's.
struct UploadExecs(Arc<CallRules>);

impl Admission for UploadExecs {
    fn admit(&self, ask: ExecAsk<'_>) -> Result<Admitted, String> {
        self.0
            .admit(ask.argv, ask.stdin, ask.streamed)
            .map(admission::ScriptRun::into_admitted)
    }
}

fn sandbox_error(e: wit::SandboxError) -> CallError {
    // The message names the path; the one target needs no naming.
    super::guest_error(e.kind, e.code, &e.message, None)
}

/// A call's scope as the layout takes it: what admission and
/// `resolveWorkdir` compute a scope's paths from.
fn scope_ref(s: &wit::SandboxScope) -> ScopeRef<'_> {
    ScopeRef {
        scope_key: s.scope_key.as_deref(),
        session_key: s.session_key.as_deref(),
        agent_id: s.agent_id.as_deref(),
        workspace_dir: &s.workspace_dir,
        agent_workspace_dir: s.agent_workspace_dir.as_deref(),
    }
}
