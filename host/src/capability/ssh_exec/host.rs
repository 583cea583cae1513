//! The WIT `ssh-exec` host functions: the grant checked right before the
//! effect (the alias, then what may run there), and the effect bracketed by
//! audit records. A refused exec starts nothing and is audited as refused.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use occ_ssh_target::digest::{Sha256, sha256_hex};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::backend::{ExecError, ExecOutput, ExecRun, InputStream, OutputSink, Serve};
use super::bindings::occ::compute::ssh_exec as wit;
use super::bindings::v0_3::occ::compute0_3_0::ssh_exec as wit_0_3;
use super::grant::{ExecPolicy, HostGrant};
use super::seal::{check_command_line, sealed_command_line_len};
use super::{Admitted, ExecAsk, SshExecState};

pub use occ_ssh_target::programs::interpreter_of;

/// Arguments longer than this are recorded as their length and SHA-256 only.
const AUDIT_ARG_BYTES: usize = 256;

/// The SHA-256 of an exec's stdin for its audit record: the one taken at load
/// when the stdin is the text of the shipped program that `shipped` names
/// (the helper, which `run` hands over as it is, not a copy), else taken now.
pub(super) fn stdin_sha256(shipped: Option<(&[u8], &Sha256)>, stdin: &[u8]) -> String {
    match shipped {
        Some((text, sha256)) if std::ptr::eq(text, stdin) => sha256.as_str().to_string(),
        _ => sha256_hex(stdin),
    }
}

/// `argv` for its audit record: a long argument as its length and SHA-256,
/// the one taken at load when it is the text of the shipped program that
/// `shipped` names (a script, which the host put in the vector).
pub(super) fn audited_argv(argv: &[String], shipped: Option<(&[u8], &Sha256)>) -> Value {
    Value::Array(
        argv.iter()
            .map(|a| {
                if a.len() <= AUDIT_ARG_BYTES {
                    return json!(a);
                }
                let sha256 = match shipped {
                    Some((text, sha256)) if a.as_bytes() == text => sha256.as_str().to_string(),
                    _ => sha256_hex(a.as_bytes()),
                };
                json!({"length": a.len(), "sha256": sha256})
            })
            .collect(),
    )
}

impl SshExecState {
    /// Bounds on the request itself, checked before anything is recorded, so
    /// that a flood of huge arguments costs neither memory in the log nor disk.
    fn check_request(&self, argv: &[String], stdin: &[u8]) -> Result<(), ExecError> {
        let bounds = &self.exec.grant.bounds;
        let argv_bytes: usize = argv.iter().map(String::len).sum();
        if argv.is_empty() {
            return Err(ExecError::Refused("an empty argument vector".into()));
        }
        if argv.len() > bounds.max_args || argv_bytes > bounds.max_argv_bytes {
            return Err(ExecError::Refused(format!(
                "{} arguments of {argv_bytes} bytes exceed the bound of {} arguments and {} bytes",
                argv.len(),
                bounds.max_args,
                bounds.max_argv_bytes
            )));
        }
        if stdin.len() > bounds.max_stdin_bytes {
            return Err(ExecError::Refused(format!(
                "{} bytes of stdin exceed the bound of {} bytes",
                stdin.len(),
                bounds.max_stdin_bytes
            )));
        }
        // An argument cannot carry NUL to the remote shell; one that tries is
        // not an argument this host sends.
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(ExecError::Refused("an argument holds NUL".into()));
        }
        Ok(())
    }

    /// What may run on `host`, per the grant's [`ExecPolicy`]. `program`
    /// names the shipped program the host built `argv` and `stdin` from (WIT
    /// 0.3.0's `run`): its approval was decided at load and is not decided
    /// again from its text; the arguments the component added still are.
    fn check_policy(
        &self,
        alias: &str,
        host: &HostGrant,
        argv: &[String],
        stdin: &[u8],
        program: Option<&str>,
    ) -> Result<(), ExecError> {
        // Approved at load, and built by the host from that text under that
        // name: the one program `argv` runs.
        let approved_at_load = |name: &str| program == Some(name) && self.exec.ships_approved(name);
        match &self.exec.grant.policy {
            ExecPolicy::NodeHelper { approved } => {
                let operation = match argv {
                    [program, dash, operation] if program == &host.node_path && dash == "-" => {
                        operation
                    }
                    _ => {
                        return Err(ExecError::Refused(format!(
                            "on {alias} only `{} - <operation>` with the approved helper on stdin may run, not {}",
                            host.node_path,
                            describe_argv(argv)
                        )));
                    }
                };
                if operation.is_empty()
                    || !operation
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                {
                    return Err(ExecError::Refused(
                        "the operation argument must be one base64 string".into(),
                    ));
                }
                if approved_at_load(occ_ssh_target::programs::HELPER)
                    || self
                        .exec
                        .is_shipped_approved(occ_ssh_target::programs::HELPER, stdin)
                {
                    return Ok(());
                }
                let sha = Sha256::of(stdin);
                if approved.is_empty() {
                    return Err(ExecError::Refused(format!(
                        "no helper is approved for this driver; after auditing the helper the component ships \
                         (`occ-driver-host inspect` shows its SHA-256), add it under drivers.compute in the \
                         installation: approvedHelpers: [\"{sha}\"]"
                    )));
                }
                if !approved.contains(&sha) {
                    return Err(ExecError::Refused(format!(
                        "the helper on stdin (SHA-256 {sha}) is not one the installation approves ({}); \
                         audit it and add it to drivers.compute.approvedHelpers, or run the approved helper",
                        approved
                            .iter()
                            .map(Sha256::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                Ok(())
            }
            ExecPolicy::PinnedScripts { approved } => {
                let [program, flag, script, name, ..] = argv else {
                    return Err(ExecError::Refused(format!(
                        "on {alias} only [<interpreter>, \"-c\", <approved script>, <its name>, <args...>] may run, not {}",
                        describe_argv(argv)
                    )));
                };
                if flag != "-c" {
                    return Err(ExecError::Refused(format!(
                        "on {alias} a script runs as <interpreter> -c <script>, not with {:?}",
                        crate::runtime::escape_control_head(flag, 64)
                    )));
                }
                // The approved script the component ships, byte for byte, was
                // approved at load; any other text is hashed and judged here.
                if !(approved_at_load(name)
                    || self.exec.is_shipped_approved(name, script.as_bytes()))
                {
                    let sha = Sha256::of(script.as_bytes());
                    let name_shown = crate::runtime::escape_control_head(name, 64);
                    match approved.get(name.as_str()) {
                        None if approved.is_empty() => {
                            return Err(ExecError::Refused(format!(
                                "no script is approved for this backend; after auditing the scripts the component ships \
                                 (`occ-driver-host inspect` shows each SHA-256), approve them under drivers.sandbox in the \
                                 installation: approvedScripts: {{{name_shown}: \"{sha}\", ...}}"
                            )));
                        }
                        None => {
                            return Err(ExecError::Refused(format!(
                                "script {name_shown:?} is not approved (the installation approves {})",
                                approved.keys().cloned().collect::<Vec<_>>().join(", ")
                            )));
                        }
                        Some(pinned) if !pinned.contains(&sha) => {
                            let pinned: Vec<&str> = pinned.iter().map(Sha256::as_str).collect();
                            return Err(ExecError::Refused(format!(
                                "script {name_shown:?} has SHA-256 {sha}, not the approved {}; audit it and \
                                 approve it under drivers.sandbox.approvedScripts.{name_shown} (a list holds the old \
                                 release's and the new one's while both roll out), or run the approved one",
                                pinned.join(" or ")
                            )));
                        }
                        Some(_) => {}
                    }
                }
                match interpreter_of(script) {
                    Some(expected) if expected == program => Ok(()),
                    Some(expected) => Err(ExecError::Refused(format!(
                        "script {:?} runs with {expected}, the interpreter its first line names, not {}",
                        crate::runtime::escape_control_head(name, 64),
                        describe_argv(argv)
                    ))),
                    None => Err(ExecError::Refused(format!(
                        "script {:?} does not name #!/bin/sh or #!/usr/bin/env python3 on its first line",
                        crate::runtime::escape_control_head(name, 64)
                    ))),
                }
            }
        }
    }

    /// Run an exec whose stdin is `stdin` followed by everything `stream`
    /// yields (an archive too large to hold), after the same checks and with the
    /// same records as any exec.
    /// `source` names the local root the stream is read from, for the
    /// world's admission; `program` the shipped script the host built `argv`
    /// from (WIT 0.3.0), whose approval was decided at load.
    pub async fn exec_streamed(
        &mut self,
        alias: &str,
        argv: &[String],
        program: Option<&str>,
        source: &str,
        stream: InputStream<'_>,
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        self.run(alias, argv, &[], Some((source, stream)), program, timeout)
            .await
    }

    /// One exec: the request's bounds, the grant, the world's admission, then
    /// the effect between its audit records. `program` names the shipped
    /// program the host built `argv` and `stdin` from, if it did.
    async fn run(
        &mut self,
        alias: &str,
        argv: &[String],
        stdin: &[u8],
        stream: Option<(&str, InputStream<'_>)>,
        program: Option<&str>,
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        let (streamed, stream) = match stream {
            Some((source, stream)) => (Some(source), Some(stream)),
            None => (None, None),
        };
        let exec = self.exec.clone();
        let checked = self.check_request(argv, stdin).and_then(|()| {
            let host = exec
                .grant
                .hosts
                .get(alias)
                .ok_or_else(|| ExecError::UnknownHost(alias.to_string()))?;
            self.check_policy(alias, host, argv, stdin, program)?;
            let admitted = self
                .admission
                .admit(ExecAsk {
                    alias,
                    argv,
                    stdin,
                    streamed,
                })
                .map_err(ExecError::Refused)?;
            // What travels on the remote command line is the sealed vector.
            check_command_line(sealed_command_line_len(&exec.grant.policy, &admitted.argv))?;
            Ok((host, admitted))
        });
        let (
            host,
            Admitted {
                argv,
                audit,
                output: sink,
                input,
                serve,
            },
        ) = match checked {
            Ok(checked) => checked,
            Err(refusal) => return Err(self.refuse(alias, argv, stdin, refusal)),
        };
        let argv = argv.as_slice();
        // An open stdin only where the output streams: it ends with that
        // output, since the transport finishes an exec once its input has
        // ended too.
        let (stream, sink) = match (stream, sink, input) {
            (None, Some(sink), Some(open)) => {
                let ended = CancellationToken::new();
                let stream: InputStream<'_> = Box::pin(Until {
                    input: open,
                    ended: Box::pin(ended.clone().cancelled_owned()),
                });
                (Some(stream), Some(ending(sink, ended)))
            }
            (stream, sink, _) => (stream, sink),
        };
        // A file operation goes to a worker only when it holds its whole
        // input and collects its output (a stream, seeding, is a session's
        // own); a command streams both through it.
        let serve = serve.filter(|s| s.command || (stream.is_none() && sink.is_none()));
        // The record's hashes (the long arguments, the stdin: a file's
        // bytes, for a write) are taken only when records are written.
        let mut fields = if self.scope.audit.enabled() {
            let shipped = program.and_then(|name| exec.shipped(name));
            json!({
                "host": alias,
                "backend": self.exec.backend_kind(),
                "argv": audited_argv(argv, shipped),
                "stdinLength": stdin.len(),
                "stdinSha256": stdin_sha256(shipped, stdin),
                "stdinStreamed": stream.is_some(),
                "outputStreamed": sink.is_some(),
            })
        } else {
            Value::Null
        };
        if let (Some(_), Value::Object(f)) = (&serve, &mut fields) {
            // Answered by the scope's long-lived worker, not a run of its own.
            f.insert("worker".into(), Value::Bool(true));
        }
        if let Value::Object(f) = &mut fields {
            f.extend(audit);
        }
        let span = self
            .scope
            .audit
            .begin("ssh-exec", fields)
            // Nothing runs unaudited; a log that cannot be written now (a full
            // disk) may be writable later: the call may be retried.
            .map_err(|e| ExecError::Io(format!("{e}; nothing ran on {alias}")))?;
        let started = std::time::Instant::now();
        let worker = serve.is_some();
        let streamed_in = stream.is_some();
        let result = self
            .effect(
                alias,
                host,
                argv,
                stdin,
                stream,
                sink,
                serve.as_ref(),
                timeout,
            )
            .await;
        // Each exec's time, for a breakdown of a call (`-vv`).
        tracing::debug!(
            host = alias,
            program = program.unwrap_or("-"),
            worker,
            streamed_in,
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "exec"
        );
        let outcome = match &result {
            Ok(out) => json!({"exitStatus": out.exit_status, "stdoutLength": out.stdout.len()}),
            Err(e) => json!({"error": e.code(), "message": e.to_string()}),
        };
        span.end(outcome)
            .map_err(|e| ExecError::Io(format!("the exec ran but {e}")))?;
        result
    }

    /// Record `refusal` of an exec on `alias` (in the audit log, and as the
    /// call's refusal) and return it. Recorded without the arguments
    /// themselves: a refused request may be a flood of them.
    fn refuse(&self, alias: &str, argv: &[String], stdin: &[u8], refusal: ExecError) -> ExecError {
        let argv_bytes: usize = argv.iter().map(String::len).sum();
        if let Err(e) = self.scope.audit.event(
            "refused",
            json!({"capability": "ssh-exec", "host": alias, "argvCount": argv.len(),
               "argvBytes": argv_bytes, "stdinLength": stdin.len(),
               "error": refusal.code(), "message": refusal.to_string()}),
        ) {
            return ExecError::Refused(e.to_string());
        }
        let why = match &refusal {
            ExecError::Refused(why) => why.clone(),
            other => other.to_string(),
        };
        self.scope.refused(format!("ssh-exec on {alias}: {why}"));
        refusal
    }

    /// `run` (WIT 0.3.0): [`SshExec::program_exec`], then the exec, each
    /// refusal recorded as any exec's.
    pub(crate) async fn run_program(
        &mut self,
        alias: &str,
        program: &str,
        args: Vec<String>,
        stdin: Vec<u8>,
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        let exec = self.exec.clone();
        match exec.program_exec(alias, program, args, &stdin) {
            Ok((argv, input)) => {
                self.run(alias, &argv, input, None, Some(program), timeout)
                    .await
            }
            Err(refusal) => Err(self.refuse(alias, &[program.to_string()], &stdin, refusal)),
        }
    }

    /// The argument vector of the shipped script `program` with `args` on
    /// `alias`, for an upload that streams its stdin (WIT 0.3.0's
    /// `local-workspace`); a refusal is recorded as any exec's.
    pub(crate) fn script_argv(
        &self,
        alias: &str,
        program: &str,
        args: Vec<String>,
    ) -> Result<Vec<String>, ExecError> {
        self.exec
            .program_exec(alias, program, args, &[])
            .map(|(argv, _)| argv)
            .map_err(|refusal| self.refuse(alias, &[program.to_string()], &[], refusal))
    }

    /// The backend, for an exec the grant allowed on `host`.
    #[allow(clippy::too_many_arguments)]
    async fn effect(
        &self,
        alias: &str,
        host: &HostGrant,
        argv: &[String],
        stdin: &[u8],
        stream: Option<InputStream<'_>>,
        sink: Option<OutputSink>,
        serve: Option<&Serve>,
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        if self.scope.cancel.is_cancelled() {
            return Err(ExecError::Cancelled);
        }
        let lines = self.lines.clone();
        let on_line = move |line: &str| lines(alias, line);
        self.exec
            .backend
            .exec(ExecRun {
                alias,
                host,
                argv,
                stdin,
                timeout,
                on_line: &on_line,
                cancel: &self.scope.cancel,
                stdin_stream: stream,
                output: sink.as_ref(),
                serve,
            })
            .await
    }
}

/// An open stdin that ends when its command's output has.
struct Until {
    input: InputStream<'static>,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl AsyncRead for Until {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.ended.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(()));
        }
        self.input.as_mut().poll_read(cx, buf)
    }
}

/// `sink`, cancelling `ended` once both of its streams have ended.
fn ending(sink: OutputSink, ended: CancellationToken) -> OutputSink {
    let ends = Arc::new(AtomicU8::new(0));
    Arc::new(move |stream, chunk| {
        if chunk.is_empty() && ends.fetch_add(1, Ordering::SeqCst) == 1 {
            ended.cancel();
        }
        sink(stream, chunk)
    })
}

fn describe_argv(argv: &[String]) -> String {
    match argv.first() {
        Some(program) => format!(
            "program {:?} with {} arguments",
            crate::runtime::escape_control_head(program, 64),
            argv.len() - 1
        ),
        None => "an empty argument vector".into(),
    }
}

impl From<ExecError> for wit::ExecError {
    fn from(e: ExecError) -> wit::ExecError {
        match e {
            ExecError::UnknownHost(s) => wit::ExecError::UnknownHost(s),
            ExecError::Refused(s) => wit::ExecError::Refused(s),
            ExecError::Connect(s) => wit::ExecError::Connect(s),
            ExecError::Auth(s) => wit::ExecError::Auth(s),
            ExecError::HostKey(s) => wit::ExecError::HostKey(s),
            ExecError::Timeout => wit::ExecError::Timeout,
            ExecError::Cancelled => wit::ExecError::Cancelled,
            ExecError::OutputTooLarge(n) => wit::ExecError::OutputTooLarge(n),
            ExecError::Io(s) => wit::ExecError::Io(s),
        }
    }
}

impl From<ExecOutput> for wit::ExecOutput {
    fn from(out: ExecOutput) -> wit::ExecOutput {
        wit::ExecOutput {
            exit_status: out.exit_status,
            stdout: out.stdout,
            stderr_tail: out.stderr_tail,
        }
    }
}

impl wit::Host for SshExecState {
    async fn hosts(&mut self) -> Vec<String> {
        self.exec.grant.hosts.keys().cloned().collect()
    }

    async fn exec(
        &mut self,
        host: String,
        argv: Vec<String>,
        stdin: Vec<u8>,
        timeout_ms: u32,
    ) -> Result<wit::ExecOutput, wit::ExecError> {
        let timeout = Duration::from_millis(timeout_ms.into());
        self.run(&host, &argv, &stdin, None, None, timeout)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }
}

impl wit_0_3::Host for SshExecState {
    async fn hosts(&mut self) -> Vec<String> {
        wit::Host::hosts(self).await
    }

    async fn run(
        &mut self,
        host: String,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
        timeout_ms: u32,
    ) -> Result<wit::ExecOutput, wit::ExecError> {
        let timeout = Duration::from_millis(timeout_ms.into());
        self.run_program(&host, &program, args, stdin, timeout)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }
}
