//! A controller's call of one method: its name and params read, its roots
//! checked, the component's export run on a fresh instance, and the result in
//! the shape OpenClaw's handle and bridge return. One helper per group of
//! methods: the configuration alone, the runtime, commands, and files.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::admission::CallerCommand;
use super::bindings::exports::occ::compute::sandbox_backend as wit;
use super::{Method, SandboxBackend, SandboxCallOptions, params};
use crate::capability::Scope;
use crate::capability::local_workspace::CallRoots;
use crate::error::{CallError, Code};
use crate::world::{warnings, within_result_bound};

impl SandboxBackend {
    /// Call one method with a controller's JSON params; the result in the
    /// shape OpenClaw's handle and bridge return.
    pub async fn call_json(
        &self,
        method_name: &str,
        params: &Value,
        options: SandboxCallOptions,
    ) -> Result<Value, CallError> {
        let method = Method::from_name(method_name).ok_or_else(|| {
            CallError::host(
                Code::UnknownMethod,
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
            return self
                .call_unscoped(method, scope, configuration, &options)
                .await;
        }
        let (sandbox_scope, roots) = p.scope()?;
        if method == Method::ResolveWorkdir {
            // Nothing local is read and nothing runs: no roots to check.
            return self.resolve_workdir(&sandbox_scope);
        }
        self.check_roots(method, &roots)?;
        let call = wit::SandboxCall {
            configuration,
            scope: sandbox_scope,
        };
        let on = Scoped {
            backend: self,
            method,
            scope,
            roots,
            call,
            options: &options,
        };
        let result = match method {
            Method::DescribeRuntime
            | Method::EnsureRuntime
            | Method::RecreateRuntime
            | Method::RemoveRuntime
            | Method::ValidateWorkdir => on.call_runtime(&p).await?,
            Method::Exec | Method::RunShellCommand => on.call_command(&p).await?,
            Method::ResolvePath
            | Method::ReadFile
            | Method::ReadMedia
            | Method::WriteFile
            | Method::CreateFileExclusive
            | Method::Mkdirp
            | Method::Remove
            | Method::Rename
            | Method::Stat
            | Method::ReadDirectory
            | Method::Edit
            | Method::ApplyPatch => on.call_file(&p).await?,
            Method::ValidateConfiguration | Method::Preflight | Method::ResolveWorkdir => {
                unreachable!("handled above")
            }
        };
        within_result_bound(
            result,
            self.runtime.limits().max_result_bytes.max(16 << 20),
            &format!("the {method}"),
        )
    }

    /// Where `scope`'s sandbox is on the target, as `describeRuntime` names
    /// it but for `running`: the host's own layout of the installation's
    /// settings and the scope, which every call's envelope is written from.
    fn resolve_workdir(&self, scope: &wit::SandboxScope) -> Result<Value, CallError> {
        let settings = self
            .settings
            .as_ref()
            .map_err(|e| CallError::host(Code::InvalidConfiguration, e.to_string()))?;
        let layout = occ_ssh_target::layout::Layout::new(settings, &super::scope_ref(scope))
            .map_err(|why| {
                CallError::invalid_params(format!("resolveWorkdir: params.scope: {why}"))
            })?;
        let agent = layout
            .mount(occ_ssh_target::layout::Mount::Agent)
            .map(|m| m.container_root.clone());
        // The target as written (trimmed), as describeRuntime's label is.
        let label = self
            .installation
            .configuration
            .pointer("/agents/defaults/sandbox/ssh/target")
            .and_then(Value::as_str)
            .map(str::trim);
        Ok(json!({
            "runtimeId": layout.runtime_id,
            "runtimeRoot": layout.runtime_root,
            "workdir": layout.workspace().container_root,
            "agentWorkdir": agent,
            "configLabel": label,
        }))
    }

    /// The configuration alone: no scope, no local workspace, no command.
    async fn call_unscoped(
        &self,
        method: Method,
        scope: Scope,
        configuration: String,
        options: &SandboxCallOptions,
    ) -> Result<Value, CallError> {
        macro_rules! unscoped {
            (|$g:ident, $s:ident| $body:expr) => {
                self.invoke(
                    scope,
                    method,
                    CallRoots::default(),
                    self.rules(method, None, None),
                    options,
                    move |$g, $s| Box::pin(async move { $body.await }),
                )
                .await?
            };
        }
        Ok(match method {
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
        })
    }
}

/// A call of a scoped method, its local roots checked: what each of its
/// helpers runs the component with.
struct Scoped<'a> {
    backend: &'a SandboxBackend,
    method: Method,
    scope: Scope,
    roots: CallRoots,
    /// The configuration and scope as the component takes them.
    call: wit::SandboxCall,
    options: &'a SandboxCallOptions,
}

/// Run an export of the component for `$on`, a [`Scoped`] taken by value:
/// `$asked` is what the caller asked to run (none for a method that runs no
/// command of the caller's), and `$c` the call as the component takes it.
macro_rules! guest {
    ($on:ident, $asked:expr, |$g:ident, $s:ident, $c:ident| $body:expr) => {{
        let call = $on.call;
        $on.backend
            .invoke(
                $on.scope.clone(),
                $on.method,
                $on.roots.clone(),
                $on.backend.rules($on.method, Some(&call.scope), $asked),
                $on.options,
                move |$g, $s| {
                    Box::pin(async move {
                        let $c = &call;
                        $body.await
                    })
                },
            )
            .await?
    }};
}

impl Scoped<'_> {
    /// The scope's runtime: described, ensured, recreated or removed, or a
    /// workdir in it validated.
    async fn call_runtime(self, p: &params::Params<'_>) -> Result<Value, CallError> {
        Ok(match self.method {
            Method::DescribeRuntime => {
                let r = guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_describe_runtime(s, c));
                params::runtime_info(&r)
            }
            Method::EnsureRuntime => params::ensured(&guest!(self, None, |g, s, c| g
                .occ_compute_sandbox_backend()
                .call_ensure_runtime(s, c))),
            Method::RecreateRuntime => params::ensured(&guest!(self, None, |g, s, c| g
                .occ_compute_sandbox_backend()
                .call_recreate_runtime(s, c))),
            Method::RemoveRuntime => {
                let removed = guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_remove_runtime(s, c));
                json!({"removed": removed})
            }
            Method::ValidateWorkdir => {
                let workdir = p.string("workdir")?;
                let r = guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_validate_workdir(s, c, &workdir));
                json!({"workdir": r})
            }
            other => unreachable!("{other} is no runtime method"),
        })
    }

    /// A command the caller asks to run: `exec`'s command, or
    /// `runShellCommand`'s script with its args.
    async fn call_command(self, p: &params::Params<'_>) -> Result<Value, CallError> {
        Ok(match self.method {
            Method::Exec => {
                let request = wit::ExecRequest {
                    command: p.string("command")?,
                    workdir: p.opt_string("workdir")?,
                    env: p.env("env")?,
                    stdin: p.bytes("stdin", "stdinText")?,
                    timeout_ms: p.opt_u32("timeoutMs")?,
                };
                let asked = CallerCommand {
                    mode: occ_ssh_target::envelope::EXEC,
                    command: request.command.clone(),
                    env: request.env.iter().cloned().collect(),
                    args: Vec::new(),
                    stdin: request.stdin.clone().unwrap_or_default(),
                    workdir: request.workdir.clone(),
                    timeout_ms: request.timeout_ms,
                    tty: p.flag("pty", false)?,
                };
                params::exec_result(&guest!(self, Some(asked), |g, s, c| g
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
                let asked = CallerCommand {
                    mode: occ_ssh_target::envelope::SHELL,
                    command: request.script.clone(),
                    env: BTreeMap::new(),
                    args: request.args.clone(),
                    stdin: request.stdin.clone().unwrap_or_default(),
                    workdir: None,
                    timeout_ms: request.timeout_ms,
                    tty: false,
                };
                params::shell_result(&guest!(self, Some(asked), |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_run_shell(s, c, &request)))
            }
            other => unreachable!("{other} is no command method"),
        })
    }

    /// The file methods: a path resolved, read, written, created, made,
    /// removed, renamed, stat'ed or listed, an edit or a patch applied.
    async fn call_file(self, p: &params::Params<'_>) -> Result<Value, CallError> {
        let method = self.method;
        Ok(match method {
            Method::ResolvePath => {
                let f = p.file("filePath")?;
                params::resolved(&guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_resolve_path(s, c, &f)))
            }
            Method::ReadFile | Method::ReadMedia => {
                let f = p.file("filePath")?;
                let max = p.opt_u64("maxBytes")?;
                if method == Method::ReadFile {
                    params::data(&guest!(self, None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_read_file(s, c, &f, max)))
                } else {
                    params::media(&guest!(self, None, |g, s, c| g
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
                    guest!(self, None, |g, s, c| g
                        .occ_compute_sandbox_backend()
                        .call_write_file(s, c, &f, &data, mkdir));
                    Value::Null
                } else {
                    let r = guest!(self, None, |g, s, c| g
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
                guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_mkdirp(s, c, &f));
                Value::Null
            }
            Method::Remove => {
                let f = p.file("filePath")?;
                let (recursive, force) = (p.flag("recursive", false)?, p.flag("force", true)?);
                guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_remove(s, c, &f, recursive, force));
                Value::Null
            }
            Method::Rename => {
                let from = p.file("from")?;
                let to = p.file("to")?;
                guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_rename(s, c, &from, &to));
                Value::Null
            }
            Method::Stat => {
                let f = p.file("filePath")?;
                params::stat(&guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_stat(s, c, &f)))
            }
            Method::ReadDirectory => {
                let f = p.file("filePath")?;
                params::entries(&guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_read_directory(s, c, &f)))
            }
            Method::Edit => {
                let f = p.file("filePath")?;
                let edits = p.edits()?;
                let r = guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_edit(s, c, &f, &edits));
                json!({"replacements": r.replacements, "path": r.path})
            }
            Method::ApplyPatch => {
                let input = p.string("input")?;
                let cwd = p.opt_string("cwd")?;
                params::patch(&guest!(self, None, |g, s, c| g
                    .occ_compute_sandbox_backend()
                    .call_apply_patch(s, c, &input, cwd.as_deref())))
            }
            other => unreachable!("{other} is no file method"),
        })
    }
}
