//! A local target for the native tests: the real remote scripts, run by the
//! local `python3` and `/bin/sh` against a temporary directory, with the
//! envelope the host would write inserted before their arguments, sent as the
//! host sends them (a Python script's arguments in the first frame on its
//! stdin, the preflight script's in argv), and the local `tar` standing in
//! for the host's archive stream. Nothing is simulated but the SSH hop and
//! the host's own checks.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use occ_ssh_target::envelope::Envelope;

use crate::backend::Effects;
use crate::error::ExecError;
use crate::model::{ExecOutput, Level, Root, WorkspaceSummary};
use crate::scripts::Run;

pub(crate) struct LocalTarget {
    pub(crate) roots: HashMap<&'static str, PathBuf>,
    /// The envelope the host writes for the call (see [`Envelope::to_json`]).
    pub(crate) envelope: String,
    /// The script and operation of every exec, in order (`workspace stat`).
    pub(crate) calls: Vec<String>,
    pub(crate) logs: Vec<String>,
    /// Runs right before the workspace script's `publish`.
    pub(crate) before_publish: Option<Box<dyn FnMut()>>,
    counter: u64,
}

fn root_key(root: Root) -> &'static str {
    match root {
        Root::Workspace => "workspace",
        Root::Agent => "agent",
        Root::Skills => "skills",
        Root::Inputs => "inputs",
    }
}

impl LocalTarget {
    /// The local directory of `root`: the staged inputs lie in the workspace.
    fn dir(&self, root: Root) -> Result<std::path::PathBuf, ExecError> {
        let key = match root {
            Root::Inputs => "workspace",
            other => root_key(other),
        };
        let dir = self
            .roots
            .get(key)
            .cloned()
            .ok_or_else(|| ExecError::NotGranted(root_key(root).into()))?;
        Ok(match root {
            Root::Inputs => dir.join("media/inbound"),
            _ => dir,
        })
    }

    /// Run `run` with a tar archive of `members` of `root` on its stdin.
    fn upload_tar(
        &mut self,
        root: Root,
        members: &[impl AsRef<std::ffi::OsStr>],
        run: &Run,
    ) -> Result<ExecOutput, ExecError> {
        let dir = self.dir(root)?;
        let tar = Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .args(["-cf", "-"])
            .args(members)
            .output()
            .map_err(|e| ExecError::Local(e.to_string()))?;
        self.run(run, &mut |input| {
            let _ = input.write_all(&tar.stdout);
        })
    }

    pub(crate) fn new(workspace: &Path, envelope: &Envelope) -> LocalTarget {
        LocalTarget {
            roots: HashMap::from([("workspace", workspace.to_path_buf())]),
            envelope: envelope.to_json(),
            calls: Vec::new(),
            logs: Vec::new(),
            before_publish: None,
            counter: 0,
        }
    }

    /// How many random values it has handed out.
    pub(crate) fn issued(&self) -> u64 {
        self.counter
    }

    /// Run a script as the host builds its exec: `<interpreter> -c <text>
    /// <name>`, the envelope before the arguments.
    fn run(
        &mut self,
        run: &Run,
        stdin: &mut dyn FnMut(&mut std::process::ChildStdin),
    ) -> Result<ExecOutput, ExecError> {
        let (script, op) = (run.script, run.args.first().map(String::as_str));
        self.calls
            .push(format!("{} {}", script.name, op.unwrap_or("")));
        if script.name == "workspace"
            && op == Some("publish")
            && let Some(hook) = self.before_publish.as_mut()
        {
            hook();
        }
        let mut args = vec![self.envelope.clone()];
        args.extend(run.args.iter().cloned());
        let interpreter = script.interpreter();
        let framed = interpreter == "python3";
        let mut command = Command::new(interpreter);
        command.args(["-c", script.text, script.name]);
        if !framed {
            command.args(&args);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ExecError::Io(e.to_string()))?;
        let mut input = child.stdin.take().unwrap();
        if framed {
            let body = serde_json::json!({ "args": args }).to_string();
            let _ = input.write_all(&(body.len() as u32).to_be_bytes());
            let _ = input.write_all(body.as_bytes());
        }
        stdin(&mut input);
        drop(input);
        let out = child
            .wait_with_output()
            .map_err(|e| ExecError::Io(e.to_string()))?;
        Ok(ExecOutput {
            exit_status: out.status.code(),
            stdout: out.stdout,
            stderr_tail: out.stderr,
        })
    }
}

impl Effects for LocalTarget {
    fn exec(&mut self, run: &Run, stdin: &[u8], _timeout_ms: u32) -> Result<ExecOutput, ExecError> {
        self.run(run, &mut |input| {
            let _ = input.write_all(stdin);
        })
    }

    fn summary(&mut self, root: Root) -> Result<WorkspaceSummary, ExecError> {
        let dir = &self.dir(root)?;
        let mut s = WorkspaceSummary::default();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            s.directories += 1;
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                if t.is_symlink() {
                    s.symlinks += 1;
                } else if t.is_dir() {
                    stack.push(e.path());
                } else {
                    s.files += 1;
                    s.bytes += e.metadata().unwrap().len();
                }
            }
        }
        Ok(s)
    }

    fn upload(&mut self, root: Root, run: &Run, _timeout_ms: u32) -> Result<ExecOutput, ExecError> {
        self.upload_tar(root, &["."], run)
    }

    fn entries(&mut self, root: Root) -> Result<Vec<String>, ExecError> {
        let dir = self.dir(root)?;
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(listing) => listing
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(ExecError::Local(e.to_string())),
        };
        names.sort();
        Ok(names)
    }

    fn upload_entries(
        &mut self,
        root: Root,
        names: &[String],
        run: &Run,
        _timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError> {
        let mut members = vec![
            "--no-recursion".to_string(),
            ".".into(),
            "--recursion".into(),
        ];
        members.extend(names.iter().map(|n| format!("./{n}")));
        self.upload_tar(root, &members, run)
    }

    fn random_hex(&mut self) -> String {
        self.counter += 1;
        format!(
            "{:032x}",
            u128::from(self.counter) | (u128::from(std::process::id()) << 64)
        )
    }

    fn log(&mut self, _level: Level, message: &str) {
        self.logs.push(message.to_string());
    }
}
