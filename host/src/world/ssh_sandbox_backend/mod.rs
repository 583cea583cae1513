//! The `ssh-sandbox-backend` world: OpenClaw's SSH sandbox backend. A
//! component of this world may run the scripts the operator approved on its one
//! target ([`crate::capability::ssh_exec`], policy
//! [`ExecPolicy::PinnedScripts`]), stream the call's granted local workspace
//! into one of them ([`crate::capability::local_workspace`]) and log
//! ([`crate::capability::log`]); nothing else.
//!
//! [`SandboxBackend`] opens a component of this world from an installation
//! ([`installation`]) and calls it with a controller's JSON, one fresh
//! instance per call. Per call the host also admits what may run
//! (`admission.rs`): each script operation only from its own method, each
//! argument of the kind the operation takes, the exec script only with the
//! caller's own request; and every script runs with the envelope the host
//! writes (the workspace root, the scope's runtime id and mounts). It streams
//! a command's output to the caller while the component gets the end of it.

mod admission;
mod bindings;
pub mod installation;
mod method;
mod params;
pub mod stdin;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

pub use method::Method;

use crate::capability::Scope;
use crate::capability::local_workspace::{
    self, CallRoots, LocalWorkspaceGrant, LocalWorkspaceState,
};
use crate::capability::log::{self, LogGrant, LogState};
use crate::capability::ssh_exec::{
    self, ExecAsk, ExecPolicy, OutputSink, OutputStream, SshExec, SshExecState, SshMode,
};
use crate::error::{CallError, FailureKind, LoadError};
use crate::runtime::cache::sha256_hex;
use crate::runtime::{CallData, CallFuture, CompiledComponent, ComponentCache, Runtime, Sandbox};
use crate::world::{Calls, Linked, World, WorldInfo, warnings};
use admission::{Asked, CallAdmission};
use bindings::exports::occ::compute::sandbox_backend as wit;
use bindings::{SshSandboxBackend, SshSandboxBackendPre};
use installation::{SandboxInstallation, TARGET_ALIAS, redacted_configuration, sandbox_ssh_grant};
use occ_ssh_target::layout::{ScopeRef, Settings};

/// The world as the host knows it before loading anything.
pub const WORLD: WorldInfo = WorldInfo {
    name: "occ:compute/ssh-sandbox-backend@0.2.0",
    export: "occ:compute/sandbox-backend@0.2.0",
    imports: &[
        "occ:compute/types@0.2.0",
        "occ:compute/ssh-exec@0.2.0",
        "occ:compute/local-workspace@0.2.0",
        "occ:compute/log@0.2.0",
    ],
};

/// Custom sections named `occ:script:<name>` hold the component's scripts.
pub const SCRIPT_SECTION_PREFIX: &str = "occ:script:";

/// `sink`, without the exec script's own report lines (`occ-sandbox-exec
/// <nonce> <json>\n` on stderr): they are for the component, which reads them
/// in the stderr tail. The nonce is the exec's own random one, from the header
/// on its stdin, so a command's output cannot be taken for a report. A
/// partial line that may still become a report is held back until it is
/// decided, or until the stream ends (an empty chunk).
fn without_reports(sink: OutputSink, nonce: &str) -> OutputSink {
    let marker = format!("occ-sandbox-exec {nonce} ").into_bytes();
    let held = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    Arc::new(move |stream, chunk| {
        if stream == OutputStream::Stdout {
            return sink(stream, chunk);
        }
        let end = chunk.is_empty();
        let pass = {
            let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
            held.extend_from_slice(&chunk);
            let mut pass = Vec::new();
            loop {
                match find(&held, &marker) {
                    Some(at) => match held[at..].iter().position(|b| *b == b'\n') {
                        // A whole report: drop it.
                        Some(nl) => {
                            pass.extend_from_slice(&held[..at]);
                            held.drain(..at + nl + 1);
                        }
                        // A report still arriving.
                        None => {
                            pass.extend_from_slice(&held[..at]);
                            held.drain(..at);
                            break;
                        }
                    },
                    None => {
                        // Keep only a tail that may be the start of a report.
                        let keep = (1..=held.len().min(marker.len() - 1))
                            .rev()
                            .find(|&n| marker.starts_with(&held[held.len() - n..]))
                            .unwrap_or(0);
                        let cut = held.len() - keep;
                        pass.extend_from_slice(&held[..cut]);
                        held.drain(..cut);
                        break;
                    }
                }
            }
            if end {
                // Whatever is held was not a report after all (or a cut one).
                if !held.starts_with(&marker) {
                    pass.append(&mut held);
                }
                held.clear();
            }
            pass
        };
        let sink = sink.clone();
        Box::pin(async move {
            if !pass.is_empty() {
                sink(OutputStream::Stderr, pass).await;
            }
            if end {
                sink(OutputStream::Stderr, Vec::new()).await;
            }
        })
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One remote script a component ships.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedScript {
    /// Its name, as the installation approves it.
    pub name: String,
    /// SHA-256 of its text.
    pub sha256: String,
    /// Its size in bytes.
    pub size: usize,
    /// The interpreter its first line names, if it names one the host knows.
    pub interpreter: Option<&'static str>,
}

/// The scripts a component ships, by name (a name shipped twice is listed once,
/// with the first text: the host then refuses to load it).
pub fn scripts_of(component: &CompiledComponent) -> Vec<ShippedScript> {
    let mut seen = BTreeMap::new();
    for (section, bytes) in &component.sections {
        if let Some(name) = section.strip_prefix(SCRIPT_SECTION_PREFIX) {
            seen.entry(name.to_string())
                .or_insert_with(|| ShippedScript {
                    name: name.to_string(),
                    sha256: sha256_hex(bytes),
                    size: bytes.len(),
                    interpreter: std::str::from_utf8(bytes)
                        .ok()
                        .and_then(ssh_exec::interpreter_of),
                });
        }
    }
    seen.into_values().collect()
}

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

    fn prepare(pre: InstancePre<SandboxCallData>) -> wasmtime::Result<Self::Pre> {
        SshSandboxBackendPre::new(pre)
    }

    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<SandboxCallData>,
    ) -> CallFuture<'a, SshSandboxBackend> {
        Box::pin(pre.instantiate_async(store))
    }
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
    settings: Result<Settings, String>,
    ssh: Arc<SshExec>,
    local: Arc<LocalWorkspaceGrant>,
    log_grant: LogGrant,
    calls: Calls,
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
        .map_err(|e| LoadError::Configuration {
            path: installation.path.clone(),
            error: Box::new(CallError::new(
                FailureKind::Permanent,
                "invalid-configuration",
                e.to_string(),
            )),
        })?;
        let local = LocalWorkspaceGrant::new(&installation.local_workspaces)
            .map_err(|m| refuse(format!("drivers.sandbox.localWorkspaces: {m}")))?;
        let path = &installation.component;
        let linked = Linked::<SandboxWorld>::load(
            &runtime,
            path,
            bytes,
            options.cache.as_ref(),
            |component| {
                let shipped = component
                    .sections
                    .iter()
                    .filter(|(n, _)| n.starts_with(SCRIPT_SECTION_PREFIX))
                    .count();
                if shipped != scripts_of(component).len() {
                    return Err(LoadError::InvalidComponent {
                        path: path.clone(),
                        message: "it ships a script name twice; the host cannot tell which text an approval means".into(),
                    });
                }
                Ok(())
            },
        )?;
        let scripts = scripts_of(&linked.component);
        let wall = grant.bounds.operation + CALL_SLACK;
        let ssh = SshExec::open(grant, &options.ssh)
            .map_err(|e| refuse(e.to_string()))?
            .with_shipped(
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
        };
        backend.calls.audit_load(
            json!({
                    "component": backend.linked.component.path,
                    "world": WORLD.name,
                    "installation": backend.installation.path,
                    "scripts": scripts.iter().map(|s| json!({"name": s.name, "sha256": s.sha256})).collect::<Vec<_>>(),
                    "target": backend.target_label(),
                    "sshClient": backend.ssh_client(),
                }),
            options.audit_log.as_ref(),
        )?;
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

    /// The scripts the component ships, and whether the installation approves each.
    pub fn scripts(&self) -> Vec<(ShippedScript, bool)> {
        let ExecPolicy::PinnedScripts { approved } = &self.ssh.grant().policy else {
            return Vec::new();
        };
        scripts_of(&self.linked.component)
            .into_iter()
            .map(|s| {
                let ok = approved.get(&s.name) == Some(&s.sha256);
                (s, ok)
            })
            .collect()
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

    /// The say of a `method` call over its execs: the installation's
    /// settings, the call's scope (none for a call without one) and, for a
    /// command, what the caller asked.
    fn admission(
        &self,
        method: Method,
        scope: Option<&wit::SandboxScope>,
        asked: Option<Asked>,
    ) -> Arc<CallAdmission> {
        let operation_ms =
            u64::try_from(self.ssh.grant().bounds.operation.as_millis()).unwrap_or(u64::MAX);
        let scope = scope.map(|s| ScopeRef {
            scope_key: s.scope_key.as_deref(),
            session_key: s.session_key.as_deref(),
            agent_id: s.agent_id.as_deref(),
            workspace_dir: &s.workspace_dir,
            agent_workspace_dir: s.agent_workspace_dir.as_deref(),
        });
        Arc::new(CallAdmission::new(
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
        admission: Arc<CallAdmission>,
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
        let admit = admission.clone();
        let mut ssh = SshExecState::new(self.ssh.clone(), scope.clone(), no_lines.clone())
            .with_admission(Arc::new(move |ask: ExecAsk<'_>| {
                admit.admit(ask.argv, ask.stdin, None)
            }))
            .with_describe(admission::describe());
        if let Some(bound) = self.installation.worker {
            // The worker is started from this call's envelope, already
            // written: nothing is parsed again per operation.
            let admitted = admission.clone();
            ssh = ssh.with_serve(Arc::new(move |argv: &[String]| {
                admitted.served(argv, bound)
            }));
        }
        if method == Method::Exec
            && let Some(output) = &options.output
        {
            // Only the command's output is the caller's: not seeding on the
            // way, nor the exec script's reports about itself.
            let output = output.clone();
            ssh = ssh.with_output(Arc::new(move |argv: &[String], stdin: &[u8]| {
                let nonce = admission::exec_nonce(argv, stdin)?;
                Some(without_reports(output.clone(), &nonce))
            }));
            // The caller's open stdin goes to the exec script's run of the
            // caller's command (admitted: its header is the caller's request,
            // its envelope this call's scope), and to nothing else.
            if let Some(input) = &options.input {
                let input = input.clone();
                ssh = ssh.with_input(Arc::new(move |argv: &[String], stdin: &[u8]| {
                    admission::exec_nonce(argv, stdin)?;
                    (argv.get(5).map(String::as_str) == Some(occ_ssh_target::envelope::EXEC))
                        .then(|| input.reader())
                }));
            }
        }
        // Uploads run through an exec state of their own, admitted the same
        // way: a root streams only into the operation that takes it (a
        // workspace into unpack, the skills into the skills refresh, staged
        // inputs into theirs).
        let upload_exec = SshExecState::new(self.ssh.clone(), scope.clone(), no_lines)
            .with_admission(Arc::new(move |ask: ExecAsk<'_>| {
                admission.admit(ask.argv, ask.stdin, ask.streamed)
            }))
            .with_describe(admission::describe());
        let data = SandboxCallData {
            sandbox: Sandbox::new(&self.runtime.limits()),
            ssh,
            local: LocalWorkspaceState::new(self.local.clone(), roots, upload_exec, scope.clone()),
            log: LogState::new(self.log_grant.clone(), scope.clone()),
        };
        self.linked
            .invoke(&self.runtime, data, &scope.cancel, f)
            .await
            .and_then(|result| result.map_err(sandbox_error))
            .map_err(|e| e.with_refusal(scope.refusal()))
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

    /// Call one method with a controller's JSON params; the result in the
    /// shape OpenClaw's handle and bridge return.
    pub async fn call_json(
        &self,
        method_name: &str,
        params: &Value,
        options: SandboxCallOptions,
    ) -> Result<Value, CallError> {
        let method = Method::from_name(method_name).ok_or_else(|| {
            CallError::new(
                FailureKind::Permanent,
                "unknown-method",
                format!(
                    "unknown method {method_name:?}; one of: {}",
                    Method::names()
                ),
            )
        })?;
        let p = params::Params::new(method, params)?;
        // An open stdin only for a caller that asks for one (the relay,
        // `openStdin`); otherwise the request's `stdin` is written and closed.
        let mut options = options;
        if method != Method::Exec || !p.flag("openStdin", false)? {
            options.input = None;
        }
        let scope = self.scope(method.name(), &options);
        let configuration = self.configuration.clone();
        if !method.scoped() {
            // The configuration alone: no scope, no local workspace, no command.
            macro_rules! unscoped {
                (|$g:ident, $s:ident| $body:expr) => {
                    self.invoke(
                        scope,
                        method,
                        CallRoots::default(),
                        self.admission(method, None, None),
                        &options,
                        move |$g, $s| Box::pin(async move { $body.await }),
                    )
                    .await?
                };
            }
            return Ok(match method {
                Method::ValidateConfiguration => {
                    let w = unscoped!(|g, s| g
                        .occ_compute_sandbox_backend()
                        .call_validate_configuration(s, &configuration));
                    json!({"warnings": warnings(w)})
                }
                Method::Preflight => {
                    let r = unscoped!(|g, s| g
                        .occ_compute_sandbox_backend()
                        .call_preflight(s, &configuration));
                    json!({"target": r.target, "python": r.python, "warnings": warnings(r.warnings)})
                }
                other => unreachable!("{other} is scoped"),
            });
        }
        let (sandbox_scope, roots) = p.scope()?;
        self.check_roots(method, &roots)?;
        let call = wit::SandboxCall {
            configuration,
            scope: sandbox_scope,
        };
        macro_rules! guest {
            ($asked:expr, |$g:ident, $s:ident, $c:ident| $body:expr) => {
                self.invoke(
                    scope.clone(),
                    method,
                    roots.clone(),
                    self.admission(method, Some(&call.scope), $asked),
                    &options,
                    move |$g, $s| {
                        Box::pin(async move {
                            let $c = &call;
                            $body.await
                        })
                    },
                )
                .await?
            };
        }
        let result = match method {
            Method::DescribeRuntime => {
                let r = guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_describe_runtime(s, c));
                params::runtime_info(&r)
            }
            Method::EnsureRuntime => params::ensured(&guest!(None, |g, s, c| g
                .occ_compute_sandbox_backend()
                .call_ensure_runtime(s, c))),
            Method::RecreateRuntime => params::ensured(&guest!(None, |g, s, c| g
                .occ_compute_sandbox_backend()
                .call_recreate_runtime(s, c))),
            Method::RemoveRuntime => {
                let removed = guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_remove_runtime(s, c));
                json!({"removed": removed})
            }
            Method::ValidateWorkdir => {
                let workdir = p.string("workdir")?;
                let r = guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_validate_workdir(s, c, &workdir));
                json!({"workdir": r})
            }
            Method::Exec => {
                let request = wit::ExecRequest {
                    command: p.string("command")?,
                    workdir: p.opt_string("workdir")?,
                    env: p.env("env")?,
                    stdin: p.bytes("stdin", "stdinText")?,
                    timeout_ms: p.opt_u32("timeoutMs")?,
                };
                let asked = Asked {
                    mode: occ_ssh_target::envelope::EXEC,
                    command: request.command.clone(),
                    env: request.env.iter().cloned().collect(),
                    args: Vec::new(),
                    stdin: request.stdin.clone().unwrap_or_default(),
                    workdir: request.workdir.clone(),
                    timeout_ms: request.timeout_ms,
                    tty: p.flag("pty", false)?,
                };
                params::exec_result(&guest!(Some(asked), |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_exec(s, c, &request)))
            }
            Method::RunShellCommand => {
                let request = wit::ShellRequest {
                    script: p.string("script")?,
                    args: p.strings("args")?,
                    stdin: p.bytes("stdin", "stdinText")?,
                    allow_failure: p.flag("allowFailure", false)?,
                    timeout_ms: p.opt_u32("timeoutMs")?,
                };
                let asked = Asked {
                    mode: occ_ssh_target::envelope::SHELL,
                    command: request.script.clone(),
                    env: BTreeMap::new(),
                    args: request.args.clone(),
                    stdin: request.stdin.clone().unwrap_or_default(),
                    workdir: None,
                    timeout_ms: request.timeout_ms,
                    tty: false,
                };
                params::shell_result(&guest!(Some(asked), |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_run_shell(s, c, &request)))
            }
            Method::ResolvePath => {
                let f = p.file("filePath")?;
                params::resolved(&guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_resolve_path(s, c, &f)))
            }
            Method::ReadFile | Method::ReadMedia => {
                let f = p.file("filePath")?;
                let max = p.opt_u64("maxBytes")?;
                if method == Method::ReadFile {
                    params::data(&guest!(None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_read_file(s, c, &f, max)))
                } else {
                    params::media(&guest!(None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_read_media(s, c, &f, max)))
                }
            }
            Method::WriteFile | Method::CreateFileExclusive => {
                let f = p.file("filePath")?;
                let data = p.bytes("data", "text")?.ok_or_else(|| {
                    CallError::invalid_params(format!(
                        "{method}: params.data (base64) or params.text is required"
                    ))
                })?;
                let mkdir = p.flag("mkdir", true)?;
                if method == Method::WriteFile {
                    guest!(None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_write_file(s, c, &f, &data, mkdir));
                    Value::Null
                } else {
                    let r = guest!(None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_create_file_exclusive(s, c, &f, &data, mkdir));
                    json!(match r {
                        wit::CreateOutcome::Created => "created",
                        wit::CreateOutcome::Exists => "exists",
                    })
                }
            }
            Method::Mkdirp => {
                let f = p.file("filePath")?;
                guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_mkdirp(s, c, &f));
                Value::Null
            }
            Method::Remove => {
                let f = p.file("filePath")?;
                let (recursive, force) = (p.flag("recursive", false)?, p.flag("force", true)?);
                guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_remove(s, c, &f, recursive, force));
                Value::Null
            }
            Method::Rename => {
                let from = p.file("from")?;
                let to = p.file("to")?;
                guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_rename(s, c, &from, &to));
                Value::Null
            }
            Method::Stat => {
                let f = p.file("filePath")?;
                params::stat(&guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_stat(s, c, &f)))
            }
            Method::ReadDirectory => {
                let f = p.file("filePath")?;
                params::entries(&guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_read_directory(s, c, &f)))
            }
            Method::Edit => {
                let f = p.file("filePath")?;
                let edits = p.edits()?;
                let r = guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_edit(s, c, &f, &edits));
                json!({"replacements": r.replacements, "path": r.path})
            }
            Method::ApplyPatch => {
                let input = p.string("input")?;
                let cwd = p.opt_string("cwd")?;
                params::patch(&guest!(None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_apply_patch(s, c, &input, cwd.as_deref())))
            }
            Method::ValidateConfiguration | Method::Preflight => unreachable!("handled above"),
        };
        let size = result.to_string().len();
        let max = self.runtime.limits().max_result_bytes.max(16 << 20);
        if size > max {
            return Err(CallError::new(
                FailureKind::Permanent,
                "result-too-large",
                format!("the {method} result is {size} bytes, over the bound of {max}"),
            ));
        }
        Ok(result)
    }
}

fn sandbox_error(e: wit::SandboxError) -> CallError {
    CallError {
        failure: e.kind.into(),
        code: e.code,
        // The message names the path; the one target needs no naming.
        message: crate::runtime::escape_control(&e.message),
        host: None,
        refusal: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Feed `chunks` of stderr through the filter; what came out.
    fn filtered(chunks: &[&str]) -> String {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        let sink: OutputSink = Arc::new(move |_, chunk| {
            seen.lock().unwrap().extend(chunk);
            Box::pin(async {})
        });
        let f = without_reports(sink, "n0nce");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for c in chunks {
            rt.block_on(f(OutputStream::Stderr, c.as_bytes().to_vec()));
        }
        rt.block_on(f(OutputStream::Stderr, Vec::new()));
        String::from_utf8(got.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn reports_are_kept_from_the_caller_and_nothing_else_is() {
        let report = "occ-sandbox-exec n0nce {\"timedOut\": true}\n";
        assert_eq!(filtered(&["err\n", report]), "err\n");
        // Glued to the command's last partial line, and cut across chunks.
        assert_eq!(
            filtered(&["partial", "occ-sandbox-", "exec n0nce {\"x\": 1}", "\n"]),
            "partial"
        );
        // A command's own lines, even ones that look alike, pass.
        assert_eq!(
            filtered(&["occ-sandbox-exec other {}\n"]),
            "occ-sandbox-exec other {}\n"
        );
        // A tail that might have begun a report, when the stream ends there.
        assert_eq!(filtered(&["hello o"]), "hello o");
        assert_eq!(filtered(&["occ"]), "occ");
    }
}
