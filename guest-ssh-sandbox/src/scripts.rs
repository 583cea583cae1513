//! The remote scripts and how the backend reads what they say.
//!
//! Every remote effect is one of three fixed scripts under `scripts/`, shipped
//! in the component (and in custom sections the host reads before anything
//! runs; see `component.rs`). The backend names what runs, a [`Run`]: a
//! script by name and its arguments (WIT 0.3.0's `ssh-exec.run`). The host
//! builds the exec, `[<interpreter>, "-c", <script text>, <script name>,
//! <args...>]`, from the text it approved at load, the interpreter being what
//! the script's first line names; it refuses any script the installation did
//! not approve, and any operation or argument the call's method does not
//! allow ([`occ_ssh_target::envelope`]). It runs the script with its own
//! envelope before the arguments: the workspace root, the runtime id and the
//! mounts come from there, never from the component.
//!
//! - `preflight` (POSIX sh): the remote utility contract;
//! - `workspace` (python3): every change to a remote workspace, on descriptors;
//! - `exec` (python3): runs one command in the sandbox and makes sure it ends.
//!
//! What they answer: exit 0 with a JSON object on stdout (raw bytes for a
//! read); or exit 1 with a JSON line `{"error", "message", "path"}` last on
//! stderr. `exec` passes the command's own status on and reports itself only in
//! a last stderr line `occ-sandbox-exec <nonce> <json>` with exit 124 or 125
//! (the nonce is the one its header carried on stdin); a command's own 124 or
//! 125 gets such a line too, `{"exitCode": <n>}`.

use serde_json::Value;

use crate::error::{Code, Error};
use crate::model::ExecOutput;

/// One remote script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Script {
    pub name: &'static str,
    pub text: &'static str,
}

pub const PREFLIGHT: Script = Script {
    name: "preflight",
    text: include_str!("../scripts/preflight.sh"),
};

pub const WORKSPACE: Script = Script {
    name: "workspace",
    text: include_str!("../scripts/workspace.py"),
};

pub const EXEC: Script = Script {
    name: "exec",
    text: include_str!("../scripts/exec.py"),
};

impl Script {
    /// The program that runs the script, from its first line.
    pub fn interpreter(&self) -> &'static str {
        occ_ssh_target::programs::interpreter_of(self.text).unwrap_or_else(|| {
            panic!(
                "script {} starts with {:?}, not a known interpreter line",
                self.name,
                self.text.lines().next()
            )
        })
    }

    /// A run of the script with `args`.
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Run {
        Run {
            script: *self,
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
        }
    }
}

/// What the backend asks to run: one of the scripts it ships, by name, and
/// the arguments after the host's envelope. Neither the script's text nor an
/// argument vector crosses to the host: it builds those from what it approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub script: Script,
    pub args: Vec<String>,
}

/// Why a script did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The runtime root does not exist: the caller seeds it and tries again.
    NoRuntime,
    Error(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Error(e)
    }
}

/// The last nonempty line of `bytes`, lossily decoded.
pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// A shell's "not found" for `program`: the remote utility is missing.
pub fn missing_program(out: &ExecOutput, program: &str) -> bool {
    out.exit_status == Some(127) && String::from_utf8_lossy(&out.stderr_tail).contains(program)
}

/// The error of a script's error line. A full disk names `target`: the
/// operator frees space on that host.
pub fn error_line(line: &str, what: &str, target: &str) -> Option<Failure> {
    let v: Value = serde_json::from_str(line).ok()?;
    let code = v.get("error")?.as_str()?;
    if code == "no-runtime" {
        return Some(Failure::NoRuntime);
    }
    let message = v.get("message").and_then(Value::as_str).unwrap_or(code);
    let code = Code::from_remote(code).unwrap_or(Code::Remote);
    let error = if code == Code::DiskFull {
        Error::new(code, format!("{what} on {target}: {message}"))
    } else {
        Error::new(code, format!("{what}: {message}"))
    };
    Some(Failure::Error(
        match v.get("path").and_then(Value::as_str) {
            Some(p) => error.at(p),
            None => error,
        },
    ))
}

/// `what` could not run on `target` because python3 is not on the PATH of
/// its non-interactive SSH command.
pub fn missing_python(what: &str, target: &str) -> Error {
    Error::new(
        Code::MissingUtility,
        format!(
            "{what}: python3 is not on the non-interactive PATH of {target}; the sandbox needs it there (run preflight)"
        ),
    )
}

/// What a finished script means: its stdout, or why it failed. `what` names the
/// operation and `target` the host in messages.
pub fn outcome(
    out: ExecOutput,
    interpreter: &str,
    what: &str,
    target: &str,
) -> Result<Vec<u8>, Failure> {
    if out.exit_status == Some(0) {
        return Ok(out.stdout);
    }
    if interpreter == "python3" && missing_program(&out, "python3") {
        return Err(missing_python(what, target).into());
    }
    let line = last_line(&out.stderr_tail);
    if let Some(failure) = error_line(&line, what, target) {
        return Err(failure);
    }
    let status = match out.exit_status {
        Some(n) => format!("exit {n}"),
        None => "ended by a signal".to_string(),
    };
    Err(Error::new(
        Code::Remote,
        format!(
            "{what} on {target} failed ({status}){}",
            if line.is_empty() {
                String::new()
            } else {
                format!(": {line}")
            }
        ),
    )
    .into())
}

/// A script's JSON answer.
pub fn json(stdout: &[u8], what: &str) -> Result<Value, Error> {
    serde_json::from_slice(stdout).map_err(|e| {
        Error::new(
            Code::Remote,
            format!("{what}: the remote answer is not JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(status: i32, stdout: &str, stderr: &str) -> ExecOutput {
        ExecOutput {
            exit_status: Some(status),
            stdout: stdout.as_bytes().to_vec(),
            stderr_tail: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn every_script_names_its_interpreter() {
        assert_eq!(PREFLIGHT.interpreter(), "/bin/sh");
        assert_eq!(WORKSPACE.interpreter(), "python3");
        assert_eq!(EXEC.interpreter(), "python3");
        let run = WORKSPACE.run(&["stat", "workspace", "a"]);
        assert_eq!(run.script.name, "workspace");
        assert_eq!(run.args, ["stat", "workspace", "a"]);
    }

    #[test]
    fn outcomes() {
        assert_eq!(
            outcome(out(0, "{}", ""), "python3", "x", "t").unwrap(),
            b"{}"
        );
        let e = outcome(
            out(1, "", "noise\n{\"error\": \"symlink\", \"message\": \"a: is a symbolic link\", \"path\": \"a\"}\n"),
            "python3",
            "read",
            "t",
        )
        .unwrap_err();
        let Failure::Error(e) = e else { panic!() };
        assert_eq!((e.code(), e.path()), ("symlink", Some("a")));
        assert_eq!(e.to_string(), "read: a: is a symbolic link");
        assert_eq!(
            outcome(
                out(1, "", "{\"error\": \"no-runtime\", \"message\": \"x\"}"),
                "python3",
                "read",
                "t"
            )
            .unwrap_err(),
            Failure::NoRuntime
        );
        let Failure::Error(e) = outcome(
            out(127, "", "bash: line 1: python3: command not found"),
            "python3",
            "read",
            "me@h:22",
        )
        .unwrap_err() else {
            panic!()
        };
        assert_eq!(e.code(), "missing-utility");
        assert!(
            e.to_string()
                .contains("python3 is not on the non-interactive PATH of me@h:22"),
            "{e}"
        );
        let Failure::Error(e) = outcome(
            out(1, "", "Traceback...\nKeyError: 'x'\n"),
            "python3",
            "read",
            "t",
        )
        .unwrap_err() else {
            panic!()
        };
        assert_eq!(
            (e.code(), e.to_string().as_str()),
            ("remote", "read on t failed (exit 1): KeyError: 'x'")
        );
    }
}
