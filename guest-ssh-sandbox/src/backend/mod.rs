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
//!
//! The operations are split by concern, each file with its own `impl` of
//! [`Backend`]: `runtime` (the runtime's lifecycle, seeding and the refreshes
//! before each operation), `exec` (commands and shell scripts) and `fs` (the
//! filesystem bridge and what is built on it). What they share is here.

mod exec;
mod fs;
mod runtime;

use crate::config::{Access, Config};
use crate::error::{Code, Error, ExecError};
use crate::layout::Layout;
use crate::model::{
    ExecOutput, Level, PreflightReport, Root, SandboxScope, Warning, WorkspaceSummary,
};
use crate::scripts::{self, Failure, PREFLIGHT, Run, WORKSPACE};
use occ_ssh_target::envelope::{ArgValue, WorkspaceRequest};

/// What the backend may do besides computing: the host's imports.
pub trait Effects {
    /// Run a shipped script on the target (`ssh-exec.run` to `target`).
    fn exec(&mut self, run: &Run, stdin: &[u8], timeout_ms: u32) -> Result<ExecOutput, ExecError>;
    /// Count a granted local root, refusing what cannot be sent.
    fn summary(&mut self, root: Root) -> Result<WorkspaceSummary, ExecError>;
    /// Stream a granted local root into a shipped script's stdin.
    fn upload(&mut self, root: Root, run: &Run, timeout_ms: u32) -> Result<ExecOutput, ExecError>;
    /// The names of a granted local root's top-level entries, sorted.
    fn entries(&mut self, root: Root) -> Result<Vec<String>, ExecError>;
    /// [`Effects::upload`] of the named top-level entries of the root only.
    fn upload_entries(
        &mut self,
        root: Root,
        names: &[String],
        run: &Run,
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
        .exec(&PREFLIGHT.run::<&str>(&[]), &[], FS_TIMEOUT_MS)
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

    /// `workspace <op> <args...>`: the host puts its envelope (the workspace
    /// root, the runtime id, the mounts) before the operation. Each argument
    /// is of the kind the operation's row of the shared table gives it: every
    /// call here is a fixed shape, which the unit tests run.
    fn workspace(op: &str, args: &[ArgValue<'_>]) -> Run {
        let request = WorkspaceRequest::new(op, args)
            .unwrap_or_else(|e| panic!("a workspace request out of the table: {e}"));
        WORKSPACE.run(&request.words)
    }

    /// A workspace operation; seeds the runtime on first use and runs it again.
    fn workspace_op(
        &mut self,
        op: &str,
        args: &[ArgValue<'_>],
        stdin: &[u8],
        what: &str,
    ) -> Result<Vec<u8>, Error> {
        let run = Self::workspace(op, args);
        self.seeded(what, |b| b.effects.exec(&run, stdin, FS_TIMEOUT_MS))
    }
}
