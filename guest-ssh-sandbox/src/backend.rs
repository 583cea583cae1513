//! The backend's operations, orchestrated behind one [`Effects`] seam so that
//! they run natively in tests against a scripted target.
//!
//! Seeding is decided here: a runtime root that exists is adopted as it is
//! (never reseeded); one that does not is staged beside its destination, filled
//! from the local workspace by the host (the archive never passes through the
//! component) and published with the atomic no-replace rename; a publish that
//! loses to a concurrent first use adopts the winner. Every operation seeds on
//! first use: the workspace script reports a missing runtime root, the backend
//! seeds, then runs the operation again, once.

use serde_json::Value;

use crate::config::{Access, Config};
use crate::edit;
use crate::error::{Code, Error, ExecError};
use crate::layout::Layout;
use crate::media;
use crate::model::{
    CreateOutcome, DirEntry, EditResult, Ensured, ExecOutput, ExecRequest, ExecResult, FileKind,
    FileRef, FileStat, Level, Media, Mount, PatchResult, PreflightReport, ResolvedPath, Root,
    SandboxScope, Seeding, ShellRequest, ShellResult, TextEdit, Warning, WorkspaceSummary,
};
use crate::patch::{self, Hunk};
use crate::paths::{exec_workdir, resolve, resolve_writable};
use crate::scripts::{self, EXEC, Failure, PREFLIGHT, Script, WORKSPACE};
use occ_ssh_target::envelope::{INPUTS, INPUTS_ABSENT, MAX_STAGED_NAMES, SKILLS, is_staged_input};

/// What the backend may do besides computing: the host's imports.
pub trait Effects {
    /// Run an approved script on the target (`ssh-exec.exec` to `target`).
    fn exec(
        &mut self,
        argv: &[String],
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError>;
    /// Count a granted local root, refusing what cannot be sent.
    fn summary(&mut self, root: Root) -> Result<WorkspaceSummary, ExecError>;
    /// Stream a granted local root into an approved script's stdin.
    fn upload(
        &mut self,
        root: Root,
        argv: &[String],
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError>;
    /// The names of a granted local root's top-level entries, sorted.
    fn entries(&mut self, root: Root) -> Result<Vec<String>, ExecError>;
    /// [`Effects::upload`] of the named top-level entries of the root only.
    fn upload_entries(
        &mut self,
        root: Root,
        names: &[String],
        argv: &[String],
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError>;
    /// 32 random lowercase hex digits (names of stages, exec nonces).
    fn random_hex(&mut self) -> String;
    fn log(&mut self, level: Level, message: &str);
}

/// Bound of one filesystem operation, connecting excluded.
pub const FS_TIMEOUT_MS: u32 = 120_000;
/// Seeding may move a large workspace; the host's operation bound caps it.
pub const SEED_TIMEOUT_MS: u32 = 3_600_000;
/// The exec script's time limit for a command that has none of its own: none.
/// OpenClaw enforces its exec timeout by killing what it spawned (the relay),
/// which ends the remote command; the host's bound of one run backs it up.
pub const NO_TIME_LIMIT: u32 = 0;
/// The host's bound of an exec is the exec's own limit plus this: the exec
/// script enforces the limit itself and reports it, the host only backs it up.
pub const EXEC_SLACK_MS: u32 = 15_000;
/// The largest file the bridge reads or writes in one call. It bounds what
/// crosses the component in one call (the host's own bounds are the same), and
/// is larger than any prompt medium.
pub const MAX_FILE_BYTES: u64 = 8 << 20;
/// Prompt media default to OpenClaw's image bound.
pub const DEFAULT_MEDIA_BYTES: u64 = 6 << 20;

fn exec_error(e: ExecError, what: &str, target: &str) -> Error {
    e.into_error(what, target)
}

/// Validate the configuration alone (WIT `validate-configuration`).
pub fn validate_configuration(configuration: &str) -> Result<Vec<Warning>, Error> {
    Config::parse(configuration).map(|c| c.warnings)
}

/// The remote utility contract on the target (WIT `preflight`).
pub fn preflight<E: Effects>(
    configuration: &str,
    effects: &mut E,
) -> Result<PreflightReport, Error> {
    let config = Config::parse(configuration)?;
    let target = config.ssh.target_label.clone();
    let out = effects
        .exec(&PREFLIGHT.argv::<&str>(&[]), &[], FS_TIMEOUT_MS)
        .map_err(|e| exec_error(e, "preflight", &target))?;
    let stdout = scripts::outcome(out, PREFLIGHT.interpreter(), "preflight", &target).map_err(
        |f| match f {
            Failure::Error(e) => e,
            Failure::NoRuntime => Error::new(Code::Remote, "preflight: unexpected answer"),
        },
    )?;
    let text = String::from_utf8_lossy(&stdout);
    let mut missing = Vec::new();
    let mut warnings = config.warnings.clone();
    let mut python = String::new();
    for line in text.lines() {
        match line.split_once('=') {
            Some(("missing", what)) => missing.push(what.to_string()),
            Some(("warning", what)) => warnings.push(Warning::new("remote-capability", what)),
            Some(("python", version)) => python = version.to_string(),
            _ => {}
        }
    }
    if !missing.is_empty() {
        return Err(Error::new(
            Code::MissingUtility,
            format!(
                "{target} lacks what the SSH sandbox needs from its non-interactive SSH command: {}",
                missing.join(", ")
            ),
        ));
    }
    Ok(PreflightReport {
        target,
        python,
        warnings,
    })
}

/// One call's backend: the configuration, the scope's layout and the effects.
pub struct Backend<'e, E: Effects> {
    pub config: Config,
    pub layout: Layout,
    /// Whether the scope's materialized skills are refreshed before each
    /// operation (workspaceAccess `rw` and a skills workspace named).
    skills: bool,
    effects: &'e mut E,
}

impl<'e, E: Effects> Backend<'e, E> {
    pub fn new(
        configuration: &str,
        scope: &SandboxScope,
        effects: &'e mut E,
    ) -> Result<Self, Error> {
        let config = Config::parse(configuration)?;
        let layout = Layout::new(&config, scope)?;
        let skills =
            config.workspace_access == Access::ReadWrite && scope.skills_workspace_dir.is_some();
        Ok(Backend {
            config,
            layout,
            skills,
            effects,
        })
    }

    /// OpenClaw's refresh of the scope's materialized skills, as its SSH
    /// backend runs it before a command, a shell script and each filesystem
    /// operation (with workspaceAccess `rw`): the remote
    /// `<workspace>/.openclaw/sandbox-skills` becomes a copy of the local
    /// skills workspace, or empty while there is none. The workspace is
    /// seeded first if it does not exist.
    pub fn refresh_skills(&mut self) -> Result<(), Error> {
        if !self.skills {
            return Ok(());
        }
        const WHAT: &str = "refresh skills";
        let target = self.target().to_string();
        let summary = self
            .effects
            .summary(Root::Skills)
            .map_err(|e| exec_error(e, WHAT, &target))?;
        let argv = WORKSPACE.argv(&self.workspace_args(SKILLS, &[]));
        self.seeded(WHAT, |b| {
            if summary.directories == 0 {
                b.effects.exec(&argv, &[], FS_TIMEOUT_MS)
            } else {
                b.effects.upload(Root::Skills, &argv, SEED_TIMEOUT_MS)
            }
        })?;
        Ok(())
    }

    /// The files OpenClaw staged for the scope's turns since the workspace
    /// was seeded (a user's inbound media, in the local workspace's
    /// `media/inbound/openclaw-staged-<id>/`, which the agent is told to
    /// read at that relative path) reach the remote workspace before each
    /// operation: each staged directory the remote lacks is sent whole and
    /// put in place; one the remote has is left as it is. Without staged
    /// inputs nothing runs on the target.
    pub fn refresh_inputs(&mut self) -> Result<(), Error> {
        const WHAT: &str = "refresh staged inputs";
        let target = self.target().to_string();
        let local: Vec<String> = self
            .effects
            .entries(Root::Inputs)
            .map_err(|e| exec_error(e, WHAT, &target))?
            .into_iter()
            .filter(|n| is_staged_input(n))
            .collect();
        let mut absent = Vec::new();
        for asked in local.chunks(MAX_STAGED_NAMES) {
            let list = asked.join(",");
            let argv = WORKSPACE.argv(&self.workspace_args(INPUTS_ABSENT, &[&list]));
            let out = self.seeded(WHAT, |b| b.effects.exec(&argv, &[], FS_TIMEOUT_MS))?;
            let answer = scripts::json(&out, WHAT)?;
            let names = answer["absent"].as_array().ok_or_else(|| {
                Error::new(
                    Code::Remote,
                    format!("{WHAT}: {target} answered no list of absent directories"),
                )
            })?;
            // Only what was asked about is sent, whatever the answer holds.
            absent.extend(
                asked
                    .iter()
                    .filter(|n| names.iter().any(|a| a.as_str() == Some(n.as_str())))
                    .cloned(),
            );
        }
        if absent.is_empty() {
            return Ok(());
        }
        let argv = WORKSPACE.argv(&self.workspace_args(INPUTS, &[]));
        self.seeded(WHAT, |b| {
            b.effects
                .upload_entries(Root::Inputs, &absent, &argv, SEED_TIMEOUT_MS)
        })?;
        Ok(())
    }

    /// Run a workspace script `attempt` once, and once again after seeding
    /// when the runtime does not exist yet; its stdout.
    fn seeded(
        &mut self,
        what: &str,
        mut attempt: impl FnMut(&mut Self) -> Result<ExecOutput, ExecError>,
    ) -> Result<Vec<u8>, Error> {
        let target = self.target().to_string();
        for first in [true, false] {
            let out = attempt(self).map_err(|e| exec_error(e, what, &target))?;
            match scripts::outcome(out, WORKSPACE.interpreter(), what, &target) {
                Ok(stdout) => return Ok(stdout),
                Err(Failure::NoRuntime) if first => {
                    self.ensure()?;
                }
                Err(Failure::NoRuntime) => break,
                Err(Failure::Error(e)) => return Err(e),
            }
        }
        Err(Error::new(
            Code::Remote,
            format!("{what}: the runtime root disappeared right after it was ensured"),
        ))
    }

    fn target(&self) -> &str {
        &self.config.ssh.target_label
    }

    /// Run `script` and read its outcome.
    fn run(
        &mut self,
        script: &Script,
        args: &[String],
        stdin: &[u8],
        timeout_ms: u32,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let target = self.target().to_string();
        let out = self
            .effects
            .exec(&script.argv(args), stdin, timeout_ms)
            .map_err(|e| exec_error(e, what, &target))?;
        scripts::outcome(out, script.interpreter(), what, &target)
    }

    /// `workspace <op> <args...>`: the host puts its envelope (the workspace
    /// root, the runtime id, the mounts) before the operation.
    fn workspace_args(&self, op: &str, args: &[&str]) -> Vec<String> {
        let mut all = vec![op.to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }

    /// A runtime operation (no seeding), answered with JSON.
    fn runtime_op(
        &mut self,
        op: &str,
        args: &[&str],
        stdin: &[u8],
        timeout_ms: u32,
        what: &str,
    ) -> Result<Value, Error> {
        let argv = self.workspace_args(op, args);
        match self.run(&WORKSPACE, &argv, stdin, timeout_ms, what) {
            Ok(stdout) => scripts::json(&stdout, what),
            Err(Failure::Error(e)) => Err(e),
            Err(Failure::NoRuntime) => Err(Error::new(
                Code::Remote,
                format!("{what}: the runtime root is gone"),
            )),
        }
    }

    /// A workspace operation; seeds the runtime on first use and runs it again.
    fn workspace_op(
        &mut self,
        op: &str,
        args: &[&str],
        stdin: &[u8],
        what: &str,
    ) -> Result<Vec<u8>, Error> {
        let argv = WORKSPACE.argv(&self.workspace_args(op, args));
        self.seeded(what, |b| b.effects.exec(&argv, stdin, FS_TIMEOUT_MS))
    }

    fn workspace_json(
        &mut self,
        op: &str,
        args: &[&str],
        stdin: &[u8],
        what: &str,
    ) -> Result<Value, Error> {
        let out = self.workspace_op(op, args, stdin, what)?;
        scripts::json(&out, what)
    }

    // --- the runtime --------------------------------------------------------------

    /// Whether the runtime root exists as a directory.
    fn exists(&mut self) -> Result<bool, Error> {
        let v = self.runtime_op("describe", &[], &[], FS_TIMEOUT_MS, "describe runtime")?;
        if v["exists"] != Value::Bool(true) {
            return Ok(false);
        }
        match v["kind"].as_str() {
            Some("directory") => Ok(true),
            kind => Err(Error::new(
                Code::Exists,
                format!(
                    "the runtime root {} on {} is a {}, not a directory; remove it or recreate the sandbox",
                    self.layout.runtime_root,
                    self.target(),
                    kind.unwrap_or("file")
                ),
            )),
        }
    }

    pub fn describe(&mut self) -> Result<crate::model::RuntimeInfo, Error> {
        let running = self.exists()?;
        Ok(self.layout.info(running))
    }

    /// Adopt the runtime root, or seed it.
    pub fn ensure(&mut self) -> Result<Ensured, Error> {
        if self.exists()? {
            return Ok(Ensured {
                runtime: self.layout.info(true),
                seeding: Seeding::Existing,
            });
        }
        let seeding = self.seed()?;
        Ok(Ensured {
            runtime: self.layout.info(true),
            seeding,
        })
    }

    /// Stage every mount from its local root and publish the stage.
    fn seed(&mut self) -> Result<Seeding, Error> {
        let target = self.target().to_string();
        // A local tree that cannot be sent is refused before anything changes
        // on the target.
        for (_, root) in self.layout.seeds() {
            let summary = self
                .effects
                .summary(root)
                .map_err(|e| exec_error(e, "seed", &target))?;
            self.effects.log(
                Level::Info,
                &format!(
                    "seeding {} on {target} from {} files, {} bytes",
                    self.layout.runtime_root, summary.files, summary.bytes
                ),
            );
        }
        let random = self.effects.random_hex();
        let stage = self.layout.stage_name(&random);
        self.runtime_op(
            "stage",
            &[&stage],
            &[],
            FS_TIMEOUT_MS,
            "stage the workspace",
        )?;
        let published = self.fill_and_publish(&stage);
        if published.is_err() {
            // The publish removes its own stage; an upload that failed leaves it.
            if let Err(e) = self.runtime_op(
                "discard",
                &[&stage],
                &[],
                FS_TIMEOUT_MS,
                "discard the stage",
            ) {
                self.effects.log(
                    Level::Warn,
                    &format!("could not remove the stage {stage}: {e}"),
                );
            }
        }
        published
    }

    fn fill_and_publish(&mut self, stage: &str) -> Result<Seeding, Error> {
        let target = self.target().to_string();
        for (mount, root) in self.layout.seeds() {
            let argv = WORKSPACE.argv(&self.workspace_args("unpack", &[stage, mount.name()]));
            let out = self
                .effects
                .upload(root, &argv, SEED_TIMEOUT_MS)
                .map_err(|e| exec_error(e, "seed", &target))?;
            scripts::outcome(out, WORKSPACE.interpreter(), "seed", &target).map_err(
                |f| match f {
                    Failure::Error(e) => e,
                    Failure::NoRuntime => Error::new(Code::Remote, "seed: the stage is gone"),
                },
            )?;
        }
        let v = self.runtime_op(
            "publish",
            &[stage],
            &[],
            FS_TIMEOUT_MS,
            "publish the workspace",
        )?;
        match v["result"].as_str() {
            Some("published") => Ok(Seeding::Seeded),
            Some("adopted") => Ok(Seeding::Adopted),
            other => Err(Error::new(
                Code::Remote,
                format!("publish: unexpected answer {other:?}"),
            )),
        }
    }

    /// Delete the runtime root; false when there was none.
    pub fn remove_runtime(&mut self) -> Result<bool, Error> {
        let v = self.runtime_op(
            "remove-runtime",
            &[],
            &[],
            SEED_TIMEOUT_MS,
            "remove runtime",
        )?;
        Ok(v["removed"] == Value::Bool(true))
    }

    /// Delete the runtime root and seed it again.
    pub fn recreate(&mut self) -> Result<Ensured, Error> {
        self.remove_runtime()?;
        self.ensure()
    }

    // --- exec -----------------------------------------------------------------------

    /// A directory for commands: `None` when it is not a real directory inside
    /// a mount.
    pub fn validate_workdir(&mut self, workdir: &str) -> Result<Option<String>, Error> {
        let resolved = match resolve(
            &self.layout,
            &FileRef::new(workdir),
            "use as working directory",
        ) {
            Ok(r) => r,
            Err(e) if matches!(e.code, Code::EscapesWorkspace | Code::InvalidPath) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        // OpenClaw refreshes the skills before validating a directory in them.
        if resolved.mount == Mount::Workspace
            && (resolved.relative_path == SKILLS_DIR
                || resolved
                    .relative_path
                    .starts_with(&format!("{SKILLS_DIR}/")))
        {
            self.refresh_skills()?;
        }
        match self.workspace_op(
            "workdir",
            &[resolved.mount.name(), &resolved.relative_path],
            &[],
            "validate workdir",
        ) {
            Ok(_) => Ok(Some(resolved.container_path)),
            Err(e)
                if matches!(
                    e.code,
                    Code::Symlink | Code::NotFound | Code::NotADirectory | Code::InvalidPath
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn check_env(env: &[(String, String)]) -> Result<Value, Error> {
        let mut map = serde_json::Map::new();
        for (name, value) in env {
            let mut chars = name.chars();
            let portable = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !portable {
                return Err(Error::new(
                    Code::InvalidCommand,
                    format!(
                        "Invalid sandbox environment variable name {name:?}: a portable name is letters, digits and _, not starting with a digit"
                    ),
                ));
            }
            if value.contains('\0') {
                return Err(Error::new(
                    Code::InvalidCommand,
                    format!("environment variable {name} holds NUL"),
                ));
            }
            map.insert(name.clone(), Value::String(value.clone()));
        }
        Ok(Value::Object(map))
    }

    /// Run the exec script in `mode` and read what it reports about itself:
    /// the command's output, or none when its time limit passed.
    /// The command, its environment and arguments, and the nonce that marks
    /// the script's own reports, travel in a header on stdin (not in the
    /// argument vector, which every process on the target can read).
    #[allow(clippy::too_many_arguments)]
    fn run_command(
        &mut self,
        mode: &str,
        command: &str,
        workdir: &ResolvedPath,
        env: Value,
        args: &[String],
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<Option<ExecOutput>, Error> {
        if command.contains('\0') {
            return Err(Error::new(Code::InvalidCommand, "the command holds NUL"));
        }
        let target = self.target().to_string();
        let mut retried = false;
        loop {
            let nonce = self.effects.random_hex();
            let header =
                serde_json::json!({"command": command, "env": &env, "args": args, "nonce": nonce})
                    .to_string();
            let mut input = header.clone().into_bytes();
            input.extend_from_slice(stdin);
            let argv = EXEC.argv(&[
                mode,
                workdir.mount.name(),
                &workdir.relative_path,
                &timeout_ms.to_string(),
                &header.len().to_string(),
            ]);
            // Without a limit of its own, the run lasts as long as the host's
            // bound of one run (the host caps every exec at it).
            let bound = if timeout_ms == NO_TIME_LIMIT {
                u32::MAX
            } else {
                timeout_ms.saturating_add(EXEC_SLACK_MS)
            };
            let out = match self.effects.exec(&argv, &input, bound) {
                Ok(out) => out,
                // The host's backstop: the script did not report in time either.
                Err(ExecError::Timeout) => return Ok(None),
                Err(e) => return Err(exec_error(e, mode, &target)),
            };
            if scripts::missing_program(&out, "python3") {
                return Err(scripts::missing_python(mode, &target));
            }
            let marker = format!("occ-sandbox-exec {nonce} ");
            let report = matches!(out.exit_status, Some(124) | Some(125))
                .then(|| scripts::last_line(&out.stderr_tail))
                .and_then(|line| line.strip_prefix(&marker).map(str::to_string));
            let Some(report) = report else {
                return Ok(Some(out));
            };
            let v: Value = serde_json::from_str(&report).unwrap_or(Value::Null);
            if v["timedOut"] == Value::Bool(true) {
                return Ok(None);
            }
            if v["exitCode"].as_i64() == out.exit_status.map(i64::from) {
                // The command's own 124 or 125: the report only says so.
                return Ok(Some(without_last_line(out)));
            }
            match scripts::error_line(&report, mode) {
                Some(Failure::NoRuntime) if !retried => {
                    retried = true;
                    self.ensure()?;
                }
                Some(Failure::Error(e)) => {
                    return Err(Error::new(
                        e.code,
                        format!("{} (workdir {})", e.message, workdir.container_path),
                    ));
                }
                _ => return Err(Error::new(Code::Remote, format!("{mode}: {report}"))),
            }
        }
    }

    pub fn exec(&mut self, req: &ExecRequest) -> Result<ExecResult, Error> {
        let workdir = exec_workdir(&self.layout, req.workdir.as_deref())?;
        let env = Self::check_env(&req.env)?;
        let timeout = req.timeout_ms.filter(|t| *t > 0).unwrap_or(NO_TIME_LIMIT);
        let stdin = req.stdin.as_deref().unwrap_or_default();
        match self.run_command("exec", &req.command, &workdir, env, &[], stdin, timeout)? {
            None => Ok(ExecResult {
                exit_code: None,
                timed_out: true,
                ..ExecResult::default()
            }),
            Some(out) => match out.exit_status {
                Some(code) => Ok(ExecResult {
                    exit_code: Some(code),
                    timed_out: false,
                    stdout_tail: out.stdout,
                    stderr_tail: out.stderr_tail,
                }),
                None => Err(Error::new(
                    Code::Remote,
                    "exec: the command runner on the target was killed",
                )),
            },
        }
    }

    pub fn run_shell(&mut self, req: &ShellRequest) -> Result<ShellResult, Error> {
        let workdir = exec_workdir(&self.layout, None)?;
        if req.args.iter().any(|a| a.contains('\0')) {
            return Err(Error::new(
                Code::InvalidCommand,
                "a shell argument holds NUL",
            ));
        }
        let timeout = req.timeout_ms.filter(|t| *t > 0).unwrap_or(FS_TIMEOUT_MS);
        let stdin = req.stdin.as_deref().unwrap_or_default();
        let out = match self.run_command(
            "shell",
            &req.script,
            &workdir,
            Value::Object(serde_json::Map::new()),
            &req.args,
            stdin,
            timeout,
        )? {
            None => {
                return Err(Error::new(
                    Code::Timeout,
                    format!("run-shell: did not finish within {timeout} ms"),
                ));
            }
            Some(out) => out,
        };
        let code = out.exit_status.ok_or_else(|| {
            Error::new(
                Code::Remote,
                "run-shell: the command runner on the target was killed",
            )
        })?;
        if code != 0 && !req.allow_failure {
            let stderr = String::from_utf8_lossy(&out.stderr_tail).trim().to_string();
            let message = if stderr.is_empty() {
                format!("ssh exited with code {code}")
            } else {
                stderr
            };
            return Err(Error::new(Code::CommandFailed, message));
        }
        Ok(ShellResult {
            code,
            stdout: out.stdout,
            stderr: out.stderr_tail,
        })
    }

    // --- the filesystem bridge -----------------------------------------------------

    /// A path an operation may change: in a writable mount, and not in one
    /// of OpenClaw's protected skills directories (`skills/`,
    /// `.agents/skills/`, `.openclaw/sandbox-skills/skills/` of each mount)
    /// while that directory exists on the target; with `descendants`
    /// (a recursive remove, a rename) not holding one either. As OpenClaw's
    /// bridge, the directory's existence is asked only for a path that lies
    /// in or above one.
    fn writable(
        &mut self,
        file: &FileRef,
        action: &str,
        descendants: bool,
    ) -> Result<ResolvedPath, Error> {
        let r = resolve_writable(&self.layout, file, action)?;
        for root in PROTECTED_SKILLS {
            let under = r.relative_path == root || r.relative_path.starts_with(&format!("{root}/"));
            let above = descendants
                && (r.relative_path.is_empty()
                    || root.starts_with(&format!("{}/", r.relative_path)));
            if !(under || above) {
                continue;
            }
            let at = ResolvedPath {
                relative_path: root.to_string(),
                ..r.clone()
            };
            if self.stat_at(&at)?.is_some() {
                return Err(Error::read_only(action, &r.container_path));
            }
        }
        Ok(r)
    }

    pub fn resolve(&self, file: &FileRef) -> Result<ResolvedPath, Error> {
        resolve(&self.layout, file, "access")
    }

    fn bound(max_bytes: Option<u64>) -> u64 {
        max_bytes.map_or(MAX_FILE_BYTES, |m| m.min(MAX_FILE_BYTES))
    }

    fn read_at(&mut self, r: &ResolvedPath, limit: u64) -> Result<Vec<u8>, Error> {
        self.workspace_op(
            "read",
            &[r.mount.name(), &r.relative_path, &limit.to_string()],
            &[],
            "read",
        )
        .map_err(|e| match e.code {
            Code::NotFound => Error::new(
                Code::NotFound,
                format!("Sandbox file not found: {}", r.container_path),
            )
            .at(&r.container_path),
            _ => e,
        })
    }

    pub fn read_file(&mut self, file: &FileRef, max_bytes: Option<u64>) -> Result<Vec<u8>, Error> {
        let r = resolve(&self.layout, file, "read files")?;
        self.read_at(&r, Self::bound(max_bytes))
    }

    fn check_size(data: &[u8], path: &str) -> Result<(), Error> {
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::new(
                Code::TooLarge,
                format!("{path}: {} bytes exceed the bridge's bound of {MAX_FILE_BYTES} bytes per write", data.len()),
            )
            .at(path));
        }
        Ok(())
    }

    fn write_at(&mut self, r: &ResolvedPath, data: &[u8], mkdir: bool) -> Result<(), Error> {
        Self::check_size(data, &r.container_path)?;
        self.workspace_op(
            "write",
            &[
                r.mount.name(),
                &r.relative_path,
                if mkdir { "1" } else { "0" },
            ],
            data,
            "write",
        )?;
        Ok(())
    }

    pub fn write_file(&mut self, file: &FileRef, data: &[u8], mkdir: bool) -> Result<(), Error> {
        let r = self.writable(file, "write files", false)?;
        self.write_at(&r, data, mkdir)
            .map_err(|e| e.or_read_only("write files", &r.container_path))
    }

    fn create_at(
        &mut self,
        r: &ResolvedPath,
        data: &[u8],
        mkdir: bool,
    ) -> Result<CreateOutcome, Error> {
        Self::check_size(data, &r.container_path)?;
        let v = self.workspace_json(
            "create",
            &[
                r.mount.name(),
                &r.relative_path,
                if mkdir { "1" } else { "0" },
            ],
            data,
            "create",
        )?;
        match v["result"].as_str() {
            Some("created") => Ok(CreateOutcome::Created),
            Some("exists") => Ok(CreateOutcome::Exists),
            other => Err(Error::new(
                Code::Remote,
                format!("create: unexpected answer {other:?}"),
            )),
        }
    }

    pub fn create_file_exclusive(
        &mut self,
        file: &FileRef,
        data: &[u8],
        mkdir: bool,
    ) -> Result<CreateOutcome, Error> {
        let r = self.writable(file, "create files", false)?;
        self.create_at(&r, data, mkdir)
            .map_err(|e| e.or_read_only("create files", &r.container_path))
    }

    pub fn mkdirp(&mut self, dir: &FileRef) -> Result<(), Error> {
        let r = self.writable(dir, "create directories", false)?;
        self.workspace_op("mkdirp", &[r.mount.name(), &r.relative_path], &[], "mkdirp")
            .map_err(|e| e.or_read_only("create directories", &r.container_path))?;
        Ok(())
    }

    fn remove_at(&mut self, r: &ResolvedPath, recursive: bool, force: bool) -> Result<(), Error> {
        if r.relative_path.is_empty() {
            return Err(Error::new(
                Code::InvalidPath,
                format!("cannot remove the mount root {}", r.container_path),
            )
            .at(&r.container_path));
        }
        self.workspace_op(
            "remove",
            &[
                r.mount.name(),
                &r.relative_path,
                if recursive { "1" } else { "0" },
                if force { "1" } else { "0" },
            ],
            &[],
            "remove",
        )?;
        Ok(())
    }

    pub fn remove(&mut self, file: &FileRef, recursive: bool, force: bool) -> Result<(), Error> {
        let r = self.writable(file, "remove files", recursive)?;
        self.remove_at(&r, recursive, force)
            .map_err(|e| e.or_read_only("remove files", &r.container_path))
    }

    pub fn rename(&mut self, from: &FileRef, to: &FileRef) -> Result<(), Error> {
        let from = self.writable(from, "rename files", true)?;
        let to = self.writable(to, "rename files", true)?;
        if from.relative_path.is_empty() || to.relative_path.is_empty() {
            return Err(Error::new(Code::InvalidPath, "cannot rename a mount root"));
        }
        self.workspace_op(
            "rename",
            &[
                from.mount.name(),
                &from.relative_path,
                to.mount.name(),
                &to.relative_path,
            ],
            &[],
            "rename",
        )
        .map_err(|e| {
            let at = if e.path() == Some(to.relative_path.as_str()) {
                &to.container_path
            } else {
                &from.container_path
            };
            e.or_read_only("rename files", at)
        })?;
        Ok(())
    }

    fn stat_at(&mut self, r: &ResolvedPath) -> Result<Option<FileStat>, Error> {
        let v = self.workspace_json("stat", &[r.mount.name(), &r.relative_path], &[], "stat")?;
        if v["exists"] != Value::Bool(true) {
            return Ok(None);
        }
        Ok(Some(FileStat {
            kind: FileKind::parse(v["kind"].as_str().unwrap_or("other")),
            size: v["size"].as_u64().unwrap_or(0),
            mtime_ms: v["mtimeMs"].as_u64().unwrap_or(0),
            mode: v["mode"].as_u64().unwrap_or(0) as u32,
        }))
    }

    pub fn stat(&mut self, file: &FileRef) -> Result<Option<FileStat>, Error> {
        let r = resolve(&self.layout, file, "stat files")?;
        self.stat_at(&r)
    }

    pub fn read_directory(&mut self, dir: &FileRef) -> Result<Vec<DirEntry>, Error> {
        let r = resolve(&self.layout, dir, "list directories")?;
        let v = self.workspace_json(
            "readdir",
            &[r.mount.name(), &r.relative_path],
            &[],
            "read directory",
        )?;
        Ok(v["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| DirEntry {
                name: e["name"].as_str().unwrap_or_default().to_string(),
                kind: FileKind::parse(e["kind"].as_str().unwrap_or("other")),
            })
            .collect())
    }

    // --- built on the bridge -----------------------------------------------------------

    fn read_text(&mut self, r: &ResolvedPath) -> Result<String, Error> {
        let bytes = self.read_at(r, MAX_FILE_BYTES)?;
        String::from_utf8(bytes).map_err(|_| {
            Error::new(
                Code::InvalidPath,
                format!("{} is not UTF-8 text", r.container_path),
            )
            .at(&r.container_path)
        })
    }

    pub fn edit(&mut self, file: &FileRef, edits: &[TextEdit]) -> Result<EditResult, Error> {
        let r = self.writable(file, "edit files", false)?;
        let text = self.read_text(&r)?;
        let (new, replacements) = edit::apply(&text, edits, &r.container_path)?;
        self.write_at(&r, new.as_bytes(), false)
            .map_err(|e| e.or_read_only("edit files", &r.container_path))?;
        Ok(EditResult {
            replacements,
            path: r.container_path,
        })
    }

    /// Plan the whole patch against the files (every hunk checked) before
    /// changing anything, then apply it in order.
    pub fn apply_patch(
        &mut self,
        patch_text: &str,
        cwd: Option<&str>,
    ) -> Result<PatchResult, Error> {
        enum Step {
            Create(ResolvedPath, String),
            Write(ResolvedPath, String),
            Remove(ResolvedPath),
        }
        let hunks = patch::parse(patch_text)?;
        let at = |path: &str| FileRef {
            path: path.to_string(),
            cwd: cwd.map(str::to_string),
        };
        let display = |r: &ResolvedPath| {
            if r.relative_path.is_empty() {
                r.container_path.clone()
            } else {
                r.relative_path.clone()
            }
        };
        // What each touched path will hold (None: absent), as planned so far.
        let mut planned: std::collections::BTreeMap<(Mount, String), Option<String>> =
            Default::default();
        let mut steps = Vec::new();
        let mut result = PatchResult::default();
        for hunk in &hunks {
            match hunk {
                Hunk::Add { path, contents } => {
                    let r = self.writable(&at(path), "create files", false)?;
                    if self.planned_contents(&mut planned, &r)?.is_some() {
                        return Err(Error::new(
                            Code::Exists,
                            format!("Cannot create {}: the file already exists. Use \"*** Update File: {}\" to change it, or delete it earlier in the same patch.", display(&r), display(&r)),
                        )
                        .at(&r.container_path));
                    }
                    planned.insert((r.mount, r.relative_path.clone()), Some(contents.clone()));
                    push_unique(&mut result.added, display(&r));
                    steps.push(Step::Create(r, contents.clone()));
                }
                Hunk::Delete { path } => {
                    let r = self.writable(&at(path), "remove files", false)?;
                    if self.planned_contents(&mut planned, &r)?.is_none() {
                        return Err(Error::new(
                            Code::NotFound,
                            format!(
                                "Sandbox path not found; cannot remove files: {}",
                                display(&r)
                            ),
                        )
                        .at(&r.container_path));
                    }
                    planned.insert((r.mount, r.relative_path.clone()), None);
                    push_unique(&mut result.deleted, display(&r));
                    steps.push(Step::Remove(r));
                }
                Hunk::Update {
                    path,
                    move_to,
                    chunks,
                } => {
                    let r = self.writable(&at(path), "write files", false)?;
                    let Some(old) = self.planned_contents(&mut planned, &r)? else {
                        return Err(Error::new(
                            Code::NotFound,
                            format!("Failed to read file to update {}: not found", display(&r)),
                        )
                        .at(&r.container_path));
                    };
                    let new = patch::apply_chunks(&old, chunks, &display(&r))?;
                    match move_to {
                        Some(dest) => {
                            let d = self.writable(&at(dest), "write files", false)?;
                            if (d.mount, &d.relative_path) == (r.mount, &r.relative_path) {
                                if !patch::same_contents(&old, &new) {
                                    planned.insert(
                                        (r.mount, r.relative_path.clone()),
                                        Some(new.clone()),
                                    );
                                    push_unique(&mut result.modified, display(&r));
                                    steps.push(Step::Write(r, new));
                                }
                                continue;
                            }
                            if self.planned_contents(&mut planned, &d)?.is_some() {
                                return Err(Error::new(
                                    Code::Exists,
                                    format!("Cannot create {}: the file already exists. Delete it earlier in the same patch to replace it.", display(&d)),
                                )
                                .at(&d.container_path));
                            }
                            planned.insert((d.mount, d.relative_path.clone()), Some(new.clone()));
                            planned.insert((r.mount, r.relative_path.clone()), None);
                            push_unique(&mut result.modified, display(&d));
                            steps.push(Step::Create(d, new));
                            steps.push(Step::Remove(r));
                        }
                        None => {
                            if !patch::same_contents(&old, &new) {
                                planned
                                    .insert((r.mount, r.relative_path.clone()), Some(new.clone()));
                                push_unique(&mut result.modified, display(&r));
                                steps.push(Step::Write(r, new));
                            }
                        }
                    }
                }
            }
        }
        for step in steps {
            match step {
                Step::Create(r, contents) => {
                    if self.create_at(&r, contents.as_bytes(), true)? == CreateOutcome::Exists {
                        return Err(Error::new(
                            Code::Exists,
                            format!(
                                "Cannot create {}: the file appeared while the patch was applied",
                                display(&r)
                            ),
                        )
                        .at(&r.container_path));
                    }
                }
                Step::Write(r, contents) => self.write_at(&r, contents.as_bytes(), false)?,
                Step::Remove(r) => self.remove_at(&r, false, false)?,
            }
        }
        Ok(result)
    }

    /// A path's contents as the patch plan has them: planned, else read (None
    /// when absent).
    fn planned_contents(
        &mut self,
        planned: &mut std::collections::BTreeMap<(Mount, String), Option<String>>,
        r: &ResolvedPath,
    ) -> Result<Option<String>, Error> {
        let key = (r.mount, r.relative_path.clone());
        if let Some(known) = planned.get(&key) {
            return Ok(known.clone());
        }
        let contents = match self.stat_at(r)? {
            None => None,
            Some(s) if s.kind == FileKind::Directory => {
                return Err(Error::new(
                    Code::IsADirectory,
                    format!("{} is a directory", r.container_path),
                )
                .at(&r.container_path));
            }
            Some(_) => Some(self.read_text(r)?),
        };
        planned.insert(key, contents.clone());
        Ok(contents)
    }

    pub fn read_media(&mut self, file: &FileRef, max_bytes: Option<u64>) -> Result<Media, Error> {
        let r = resolve(&self.layout, file, "read media")?;
        let limit = max_bytes.unwrap_or(DEFAULT_MEDIA_BYTES).min(MAX_FILE_BYTES);
        let data = self.read_at(&r, limit)?;
        Ok(Media {
            mime_type: media::sniff(&data).map(str::to_string),
            data,
            container_path: r.container_path,
        })
    }
}

/// `out` without the last line of its stderr tail (the exec script's report).
/// Where OpenClaw's SSH backend puts a scope's materialized skills, relative
/// to the workspace mount.
const SKILLS_DIR: &str = ".openclaw/sandbox-skills";

/// OpenClaw's read-only skills directories, relative to each mount.
const PROTECTED_SKILLS: [&str; 3] = [
    "skills",
    ".agents/skills",
    ".openclaw/sandbox-skills/skills",
];

fn without_last_line(mut out: ExecOutput) -> ExecOutput {
    let tail = &out.stderr_tail;
    let end = tail.strip_suffix(b"\n").unwrap_or(tail);
    let cut = end.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
    out.stderr_tail.truncate(cut);
    out
}

fn push_unique(list: &mut Vec<String>, value: String) {
    if !list.contains(&value) {
        list.push(value);
    }
}
