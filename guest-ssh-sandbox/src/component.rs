//! The component layer: WIT values in, policy calls, WIT values out. Nothing here
//! decides anything; see [`crate::backend`].

use crate::backend::{self, Backend, Effects};
use crate::bindings::exports::occ::compute0_2_0::sandbox_backend as wit;
use crate::bindings::occ::compute0_2_0::types::{FailureKind as WitKind, Warning as WitWarning};

occ_ssh_target::failure_kind_wit!(WitKind);
use crate::bindings::occ::compute0_2_0::{
    local_workspace as workspace_types, log, ssh_exec as exec_types,
};
use crate::bindings::occ::compute0_3_0::{local_workspace, ssh_exec};
use crate::error::{Error, ExecError};
use crate::model;
use crate::scripts::Run;

/// Each remote script in a custom section `occ:script:<name>` of the core
/// module, where the host reads it without running anything: `inspect` shows
/// the SHA-256 of each and an operator approves them in the installation.
/// Placing a static in a named section is `unsafe` in general (it could land in
/// executable or writable memory); a wasm custom section is neither, and
/// nothing in the guest reads these statics. The texts sent to the host are the
/// same bytes ([`crate::scripts`] includes the same files).
#[allow(unsafe_code)]
mod sections {
    #[unsafe(link_section = "occ:script:preflight")]
    #[used]
    static PREFLIGHT: [u8; include_bytes!("../scripts/preflight.sh").len()] =
        *include_bytes!("../scripts/preflight.sh");
    #[unsafe(link_section = "occ:script:workspace")]
    #[used]
    static WORKSPACE: [u8; include_bytes!("../scripts/workspace.py").len()] =
        *include_bytes!("../scripts/workspace.py");
    #[unsafe(link_section = "occ:script:exec")]
    #[used]
    static EXEC: [u8; include_bytes!("../scripts/exec.py").len()] =
        *include_bytes!("../scripts/exec.py");
}

/// The one host alias the sandbox world grants: the configured target.
const TARGET: &str = occ_ssh_target::programs::TARGET_ALIAS;

struct Component;

/// The generated export glue uses `unsafe` for the canonical ABI.
#[allow(unsafe_code, unreachable_pub)]
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}

/// The real effects: the host's `ssh-exec`, `local-workspace` and `log` imports.
struct Host;

fn exec_error(e: exec_types::ExecError) -> ExecError {
    occ_ssh_target::exec_error_from_wit!(e, exec_types::ExecError => ExecError)
}

fn upload_error(e: workspace_types::UploadError) -> ExecError {
    match e {
        workspace_types::UploadError::NotGranted(m) => ExecError::NotGranted(m),
        workspace_types::UploadError::Local(m) => ExecError::Local(m),
        workspace_types::UploadError::Exec(e) => exec_error(e),
    }
}

fn output(out: exec_types::ExecOutput) -> model::ExecOutput {
    model::ExecOutput {
        exit_status: out.exit_status,
        stdout: out.stdout,
        stderr_tail: out.stderr_tail,
    }
}

fn root(r: model::Root) -> workspace_types::WorkspaceRoot {
    match r {
        model::Root::Workspace => workspace_types::WorkspaceRoot::Workspace,
        model::Root::Agent => workspace_types::WorkspaceRoot::Agent,
        model::Root::Skills => workspace_types::WorkspaceRoot::Skills,
        model::Root::Inputs => workspace_types::WorkspaceRoot::Inputs,
    }
}

impl Effects for Host {
    fn exec(
        &mut self,
        run: &Run,
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<model::ExecOutput, ExecError> {
        ssh_exec::run(TARGET, run.script.name, &run.args, stdin, timeout_ms)
            .map(output)
            .map_err(exec_error)
    }

    fn summary(&mut self, r: model::Root) -> Result<model::WorkspaceSummary, ExecError> {
        local_workspace::summary(root(r))
            .map(|s| model::WorkspaceSummary {
                files: s.files,
                directories: s.directories,
                symlinks: s.symlinks,
                bytes: s.bytes,
            })
            .map_err(upload_error)
    }

    fn upload(
        &mut self,
        r: model::Root,
        run: &Run,
        timeout_ms: u32,
    ) -> Result<model::ExecOutput, ExecError> {
        local_workspace::upload(root(r), TARGET, run.script.name, &run.args, timeout_ms)
            .map(output)
            .map_err(upload_error)
    }

    fn entries(&mut self, r: model::Root) -> Result<Vec<String>, ExecError> {
        local_workspace::entries(root(r)).map_err(upload_error)
    }

    fn upload_entries(
        &mut self,
        r: model::Root,
        names: &[String],
        run: &Run,
        timeout_ms: u32,
    ) -> Result<model::ExecOutput, ExecError> {
        local_workspace::upload_entries(
            root(r),
            names,
            TARGET,
            run.script.name,
            &run.args,
            timeout_ms,
        )
        .map(output)
        .map_err(upload_error)
    }

    fn random_hex(&mut self) -> String {
        // The standard library seeds its hash keys from the host
        // (`wasi:random/insecure-seed`, fresh for every instance) and steps
        // them for each new state: two give 128 bits that name one stage or
        // one exec apart from every other. A stage name needs to be unique;
        // a nonce also unknown to the command, so that it cannot print the
        // exec script's report: nothing on the target sees the seed, and the
        // nonce reaches the script on stdin, which the command cannot read
        // (the script is not dumpable).
        use std::hash::{BuildHasher, Hasher};
        let mut out = String::with_capacity(32);
        for _ in 0..2 {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u8(0);
            out.push_str(&format!("{:016x}", h.finish()));
        }
        out
    }

    fn log(&mut self, level: model::Level, message: &str) {
        let level = match level {
            model::Level::Debug => log::Level::Debug,
            model::Level::Info => log::Level::Info,
            model::Level::Warn => log::Level::Warn,
        };
        log::log(level, message);
    }
}

fn error_to_wit(e: Error) -> wit::SandboxError {
    wit::SandboxError {
        kind: e.kind().into(),
        code: e.code().to_string(),
        path: e.path().map(str::to_string),
        message: e.message,
    }
}

fn warnings(w: Vec<model::Warning>) -> Vec<WitWarning> {
    w.into_iter()
        .map(|w| WitWarning {
            code: w.code,
            message: w.message,
        })
        .collect()
}

fn scope(s: wit::SandboxScope) -> model::SandboxScope {
    model::SandboxScope {
        scope_key: s.scope_key,
        session_key: s.session_key,
        agent_id: s.agent_id,
        workspace_dir: s.workspace_dir,
        agent_workspace_dir: s.agent_workspace_dir,
        skills_workspace_dir: s.skills_workspace_dir,
    }
}

fn file(f: wit::FileRef) -> model::FileRef {
    model::FileRef {
        path: f.path,
        cwd: f.cwd,
    }
}

/// One call against a fresh backend over the real effects.
fn with_backend<T, R>(
    call: wit::SandboxCall,
    f: impl FnOnce(&mut Backend<'_, Host>) -> Result<T, Error>,
    map: impl FnOnce(T) -> R,
) -> Result<R, wit::SandboxError> {
    let mut host = Host;
    Backend::new(&call.configuration, &scope(call.scope), &mut host)
        .and_then(|mut b| f(&mut b))
        .map(map)
        .map_err(error_to_wit)
}

/// [`with_backend`] for an operation that acts in the workspace: the scope's
/// skills are refreshed first, as OpenClaw's own backend does, and the
/// inputs staged for its turns are brought over.
fn in_workspace<T, R>(
    call: wit::SandboxCall,
    f: impl FnOnce(&mut Backend<'_, Host>) -> Result<T, Error>,
    map: impl FnOnce(T) -> R,
) -> Result<R, wit::SandboxError> {
    with_backend(
        call,
        |b| {
            b.refresh_skills()?;
            b.refresh_inputs()?;
            f(b)
        },
        map,
    )
}

fn info(r: model::RuntimeInfo) -> wit::RuntimeInfo {
    wit::RuntimeInfo {
        runtime_id: r.runtime_id,
        runtime_root: r.runtime_root,
        workdir: r.workdir,
        agent_workdir: r.agent_workdir,
        config_label: r.config_label,
        running: r.running,
    }
}

fn ensured(e: model::Ensured) -> wit::Ensured {
    wit::Ensured {
        runtime: info(e.runtime),
        seeding: match e.seeding {
            model::Seeding::Existing => wit::Seeding::Existing,
            model::Seeding::Seeded => wit::Seeding::Seeded,
            model::Seeding::Adopted => wit::Seeding::Adopted,
        },
    }
}

fn kind(k: model::FileKind) -> wit::FileKind {
    match k {
        model::FileKind::File => wit::FileKind::File,
        model::FileKind::Directory => wit::FileKind::Directory,
        model::FileKind::Other => wit::FileKind::Other,
    }
}

impl wit::Guest for Component {
    fn validate_configuration(configuration: String) -> Result<Vec<WitWarning>, wit::SandboxError> {
        backend::validate_configuration(&configuration)
            .map(warnings)
            .map_err(error_to_wit)
    }

    fn preflight(configuration: String) -> Result<wit::PreflightReport, wit::SandboxError> {
        backend::preflight(&configuration, &mut Host)
            .map(|r| wit::PreflightReport {
                target: r.target,
                python: r.python,
                warnings: warnings(r.warnings),
            })
            .map_err(error_to_wit)
    }

    fn describe_runtime(call: wit::SandboxCall) -> Result<wit::RuntimeInfo, wit::SandboxError> {
        with_backend(call, |b| b.describe(), info)
    }

    fn ensure_runtime(call: wit::SandboxCall) -> Result<wit::Ensured, wit::SandboxError> {
        with_backend(call, |b| b.ensure(), ensured)
    }

    fn remove_runtime(call: wit::SandboxCall) -> Result<bool, wit::SandboxError> {
        with_backend(call, |b| b.remove_runtime(), |r| r)
    }

    fn recreate_runtime(call: wit::SandboxCall) -> Result<wit::Ensured, wit::SandboxError> {
        with_backend(call, |b| b.recreate(), ensured)
    }

    fn validate_workdir(
        call: wit::SandboxCall,
        workdir: String,
    ) -> Result<Option<String>, wit::SandboxError> {
        with_backend(call, |b| b.validate_workdir(&workdir), |r| r)
    }

    fn exec(
        call: wit::SandboxCall,
        request: wit::ExecRequest,
    ) -> Result<wit::ExecResult, wit::SandboxError> {
        let request = model::ExecRequest {
            command: request.command,
            workdir: request.workdir,
            env: request.env,
            stdin: request.stdin,
            timeout_ms: request.timeout_ms,
        };
        in_workspace(
            call,
            |b| b.exec(&request),
            |r| wit::ExecResult {
                exit_code: r.exit_code,
                timed_out: r.timed_out,
                stdout_tail: r.stdout_tail,
                stderr_tail: r.stderr_tail,
            },
        )
    }

    fn run_shell(
        call: wit::SandboxCall,
        request: wit::ShellRequest,
    ) -> Result<wit::ShellResult, wit::SandboxError> {
        let request = model::ShellRequest {
            script: request.script,
            args: request.args,
            stdin: request.stdin,
            allow_failure: request.allow_failure,
            timeout_ms: request.timeout_ms,
        };
        in_workspace(
            call,
            |b| b.run_shell(&request),
            |r| wit::ShellResult {
                code: r.code,
                stdout: r.stdout,
                stderr: r.stderr,
            },
        )
    }

    fn resolve_path(
        call: wit::SandboxCall,
        f: wit::FileRef,
    ) -> Result<wit::ResolvedPath, wit::SandboxError> {
        let f = file(f);
        with_backend(
            call,
            |b| b.resolve(&f),
            |r| wit::ResolvedPath {
                mount: match r.mount {
                    model::Mount::Workspace => wit::Mount::Workspace,
                    model::Mount::Agent => wit::Mount::Agent,
                },
                relative_path: r.relative_path,
                container_path: r.container_path,
                host_path: r.host_path,
                writable: r.writable,
            },
        )
    }

    fn read_file(
        call: wit::SandboxCall,
        f: wit::FileRef,
        max_bytes: Option<u64>,
    ) -> Result<Vec<u8>, wit::SandboxError> {
        let f = file(f);
        in_workspace(call, |b| b.read_file(&f, max_bytes), |r| r)
    }

    fn write_file(
        call: wit::SandboxCall,
        f: wit::FileRef,
        data: Vec<u8>,
        mkdir: bool,
    ) -> Result<(), wit::SandboxError> {
        let f = file(f);
        in_workspace(call, |b| b.write_file(&f, &data, mkdir), |r| r)
    }

    fn create_file_exclusive(
        call: wit::SandboxCall,
        f: wit::FileRef,
        data: Vec<u8>,
        mkdir: bool,
    ) -> Result<wit::CreateOutcome, wit::SandboxError> {
        let f = file(f);
        in_workspace(
            call,
            |b| b.create_file_exclusive(&f, &data, mkdir),
            |r| match r {
                model::CreateOutcome::Created => wit::CreateOutcome::Created,
                model::CreateOutcome::Exists => wit::CreateOutcome::Exists,
            },
        )
    }

    fn mkdirp(call: wit::SandboxCall, dir: wit::FileRef) -> Result<(), wit::SandboxError> {
        let dir = file(dir);
        in_workspace(call, |b| b.mkdirp(&dir), |r| r)
    }

    fn remove(
        call: wit::SandboxCall,
        f: wit::FileRef,
        recursive: bool,
        force: bool,
    ) -> Result<(), wit::SandboxError> {
        let f = file(f);
        in_workspace(call, |b| b.remove(&f, recursive, force), |r| r)
    }

    fn rename(
        call: wit::SandboxCall,
        from: wit::FileRef,
        to: wit::FileRef,
    ) -> Result<(), wit::SandboxError> {
        let (from, to) = (file(from), file(to));
        in_workspace(call, |b| b.rename(&from, &to), |r| r)
    }

    fn stat(
        call: wit::SandboxCall,
        f: wit::FileRef,
    ) -> Result<Option<wit::FileStat>, wit::SandboxError> {
        let f = file(f);
        in_workspace(
            call,
            |b| b.stat(&f),
            |r| {
                r.map(|s| wit::FileStat {
                    kind: kind(s.kind),
                    size: s.size,
                    mtime_ms: s.mtime_ms,
                    mode: s.mode,
                })
            },
        )
    }

    fn read_directory(
        call: wit::SandboxCall,
        dir: wit::FileRef,
    ) -> Result<Vec<wit::DirEntry>, wit::SandboxError> {
        let dir = file(dir);
        in_workspace(
            call,
            |b| b.read_directory(&dir),
            |r| {
                r.into_iter()
                    .map(|e| wit::DirEntry {
                        name: e.name,
                        kind: kind(e.kind),
                    })
                    .collect()
            },
        )
    }

    fn edit(
        call: wit::SandboxCall,
        f: wit::FileRef,
        edits: Vec<wit::TextEdit>,
    ) -> Result<wit::EditResult, wit::SandboxError> {
        let f = file(f);
        let edits: Vec<model::TextEdit> = edits
            .into_iter()
            .map(|e| model::TextEdit {
                old_text: e.old_text,
                new_text: e.new_text,
                replace_all: e.replace_all,
            })
            .collect();
        in_workspace(
            call,
            |b| b.edit(&f, &edits),
            |r| wit::EditResult {
                replacements: r.replacements,
                path: r.path,
            },
        )
    }

    fn apply_patch(
        call: wit::SandboxCall,
        patch: String,
        cwd: Option<String>,
    ) -> Result<wit::PatchResult, wit::SandboxError> {
        in_workspace(
            call,
            |b| b.apply_patch(&patch, cwd.as_deref()),
            |r| wit::PatchResult {
                added: r.added,
                modified: r.modified,
                deleted: r.deleted,
            },
        )
    }

    fn read_media(
        call: wit::SandboxCall,
        f: wit::FileRef,
        max_bytes: Option<u64>,
    ) -> Result<wit::Media, wit::SandboxError> {
        let f = file(f);
        in_workspace(
            call,
            |b| b.read_media(&f, max_bytes),
            |m| wit::Media {
                data: m.data,
                mime_type: m.mime_type,
                container_path: m.container_path,
            },
        )
    }
}
