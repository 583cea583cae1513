//! Commands and shell scripts: the exec script's runs, their working
//! directory and environment.

use serde_json::Value;

use super::{Backend, EXEC_SLACK_MS, Effects, FS_TIMEOUT_MS, NO_TIME_LIMIT, exec_error};
use crate::error::{Code, Error, ExecError};
use crate::model::{
    ExecOutput, ExecRequest, ExecResult, FileRef, Mount, ResolvedPath, ShellRequest, ShellResult,
};
use crate::paths::{exec_workdir, resolve};
use crate::scripts::{self, EXEC, Failure};
use occ_ssh_target::envelope::ArgValue;

impl<'e, E: Effects> Backend<'e, E> {
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
            &[
                ArgValue::Mount(resolved.mount.name()),
                ArgValue::Path(&resolved.relative_path),
            ],
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
            let run = EXEC.run(&[
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
            let out = match self.effects.exec(&run, &input, bound) {
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
            match scripts::error_line(&report, mode, &target) {
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
}

/// Where OpenClaw's SSH backend puts a scope's materialized skills, relative
/// to the workspace mount.
const SKILLS_DIR: &str = ".openclaw/sandbox-skills";

/// `out` without the last line of its stderr tail (the exec script's report).
fn without_last_line(mut out: ExecOutput) -> ExecOutput {
    let tail = &out.stderr_tail;
    let end = tail.strip_suffix(b"\n").unwrap_or(tail);
    let cut = end.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
    out.stderr_tail.truncate(cut);
    out
}
