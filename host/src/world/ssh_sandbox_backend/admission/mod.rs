//! What one call's execs may be, beyond the grant, and the envelope each runs
//! with.
//!
//! The grant lets only the approved scripts run, by SHA-256; every argument
//! after a script's name is the component's. Per call, the host admits an
//! exec only if
//! - the script's operation is one the call's method may run
//!   ([`occ_ssh_target::envelope::METHOD_OPS`]): `remove-runtime` only from
//!   the methods that remove a runtime, seeding only from those that seed on
//!   first use, `preflight` only from `preflight`, the exec script only from
//!   `exec` (mode `exec`) and `runShellCommand` (mode `shell`);
//! - each argument has its kind ([`Arg`]): a mount of the call's scope
//!   (writable, for an operation that changes one), a path of plain names, a
//!   stage of the scope's runtime, a flag, a count; and no more arguments than
//!   the operation takes (a workspace root or a runtime id in argv is one too
//!   many);
//! - for the exec script, the header on stdin is the caller's request and
//!   nothing else (command, environment, arguments; the command's stdin
//!   after it), the command runs in the caller's workdir, and its time limit
//!   is within the caller's;
//! - a local workspace streams into `unpack` or `skills` and nothing else;
//!   `unpack` takes no archive but the stream, `skills` the stream or
//!   nothing (a scope without skills), and only into a writable workspace.
//!
//! What runs is then `[<interpreter>, "-c", <script>, <name>, <envelope>,
//! <args...>]`: the host's envelope (the installation's workspace root, the
//! scope's runtime id and mounts, the method's operations) comes first, and
//! the scripts take those values from it alone and bound the rest again.

use std::collections::BTreeMap;

use occ_ssh_target::envelope::{
    self, Arg, EXEC_ARGS, Envelope, WorkspaceOp, is_nonce, script_of, workspace_op,
};
use occ_ssh_target::layout::{Layout, Mount, ScopeRef, Settings};
use occ_ssh_target::paths;
use serde_json::Value;

use super::installation::SandboxSettingsError;
use super::method::Method;
use crate::capability::ssh_exec::Admitted;

#[cfg(test)]
mod tests;
mod worker;

pub(super) use worker::WorkerPrograms;

/// The command the caller asked an `exec` or `runShellCommand` call to run:
/// what the exec script's header must carry, and nothing else.
#[derive(Debug, Clone, Default)]
pub(super) struct CallerCommand {
    /// `exec` or `shell`.
    pub mode: &'static str,
    pub command: String,
    pub env: BTreeMap<String, String>,
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
    pub workdir: Option<String>,
    /// The caller's time limit, when it gave one.
    pub timeout_ms: Option<u32>,
    /// The caller asked for a pseudo-terminal (mode `exec` only). The host
    /// says so in the envelope (`tty`), never the component.
    pub tty: bool,
}

/// Which approved script a run is: the only three the sandbox world runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Script {
    /// `preflight`, whose one argument is the envelope.
    Preflight,
    /// `workspace`: a file operation, seeding, or a runtime's steps.
    Workspace,
    /// `exec`: the caller's command, in mode `exec` or `shell`.
    Exec,
}

impl Script {
    fn of(name: &str) -> Option<Script> {
        match name {
            "preflight" => Some(Script::Preflight),
            "workspace" => Some(Script::Workspace),
            "exec" => Some(Script::Exec),
            _ => None,
        }
    }

    /// The script's name, as the component ships it and the audit names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Script::Preflight => "preflight",
            Script::Workspace => "workspace",
            Script::Exec => "exec",
        }
    }
}

/// A script run this call admitted: the argument vector that runs, and what
/// the admission read of the request on the way, so that nothing after it
/// reads the vector again by position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScriptRun {
    /// `[<interpreter>, "-c", <script>, <name>, <envelope>, <args...>]`.
    pub argv: Vec<String>,
    /// The script it runs.
    pub script: Script,
    /// Its operation: the workspace script's, the exec script's mode
    /// (`exec` or `shell`), or `preflight` for the script that is its own.
    pub op: String,
    /// The exec script's nonce, from the header on its stdin, which marks
    /// the script's own report lines; none for the other scripts.
    pub nonce: Option<String>,
}

impl ScriptRun {
    /// Whether it is the exec script's run of the caller's command in mode
    /// `exec` (the mode whose stdin the caller may keep open).
    pub(super) fn is_exec_mode(&self) -> bool {
        self.script == Script::Exec && self.op == envelope::EXEC
    }

    /// What runs, with what its audit records name it by: the script's name
    /// and its operation, so that an auditor reads them without the long
    /// arguments the log keeps only as length and SHA-256.
    pub(super) fn into_admitted(self) -> Admitted {
        let mut audit = serde_json::Map::new();
        audit.insert("script".into(), Value::String(self.script.name().into()));
        audit.insert("operation".into(), Value::String(self.op));
        Admitted::new(self.argv, audit)
    }
}

/// What the host knows of one call.
struct Facts {
    envelope: Envelope,
    json: String,
    /// The scope's layout; none for a call without a scope.
    layout: Option<Layout>,
}

/// One call's rules for its script runs: the scope's layout and envelope, written
/// once for the call, against which each run is checked ([`CallRules::admit`]).
pub(super) struct CallRules {
    method: Method,
    /// Why nothing may run, when the call's settings or scope give no layout.
    facts: Result<Facts, String>,
    asked: Option<CallerCommand>,
    /// The grant's bound of one exec, in milliseconds.
    operation_ms: u64,
}

impl CallRules {
    /// The admission of a `method` call under the installation's `settings`,
    /// for `scope` (none for a call without one) and, for a command, the
    /// caller's request.
    pub(super) fn new(
        method: Method,
        settings: &Result<Settings, SandboxSettingsError>,
        scope: Option<ScopeRef<'_>>,
        asked: Option<CallerCommand>,
        operation_ms: u64,
    ) -> CallRules {
        let facts = settings
            .as_ref()
            .map_err(ToString::to_string)
            .and_then(|settings| {
                let layout = scope
                    .map(|s| Layout::new(settings, &s))
                    .transpose()
                    .map_err(|why| format!("the call's scope has no sandbox: {why}"))?;
                let envelope =
                    Envelope::new(method.name(), &settings.workspace_root, layout.as_ref())
                        .ok_or_else(|| {
                            format!("{method} has no row in the table of script operations")
                        })?;
                let mut json = envelope.to_json();
                if asked
                    .as_ref()
                    .is_some_and(|a| a.tty && a.mode == envelope::EXEC)
                {
                    // The caller's terminal, which the exec script gives the
                    // command: a value of the call, so the host writes it.
                    let mut v: serde_json::Map<String, Value> =
                        serde_json::from_str(&json).expect("the envelope is a JSON object");
                    v.insert("tty".into(), Value::Bool(true));
                    json = Value::Object(v).to_string();
                }
                Ok(Facts {
                    json,
                    envelope,
                    layout,
                })
            });
        CallRules {
            method,
            facts,
            asked,
            operation_ms,
        }
    }

    /// The run of `argv` (one the grant allowed), with `stdin`; `streamed`
    /// names the local root that streams into it, if one does. Refused with
    /// the reason.
    pub(super) fn admit(
        &self,
        argv: &[String],
        stdin: &[u8],
        streamed: Option<&str>,
    ) -> Result<ScriptRun, String> {
        let method = self.method;
        let [_, _, _, name, args @ ..] = argv else {
            return Err("not a script run".into());
        };
        let facts = self
            .facts
            .as_ref()
            .map_err(|why| format!("{method}: {why}"))?;
        let op = match name.as_str() {
            "preflight" => {
                if !args.is_empty() {
                    return Err(
                        "the preflight script takes no argument: the host writes its envelope"
                            .into(),
                    );
                }
                envelope::PREFLIGHT
            }
            "workspace" | "exec" => args.first().map(String::as_str).unwrap_or_default(),
            other => {
                return Err(format!(
                    "the sandbox world runs the preflight, workspace and exec scripts, not {}",
                    shown(other)
                ));
            }
        };
        let script = Script::of(name).expect("one of the three scripts");
        if script_of(op) != Some(name.as_str()) {
            return Err(format!(
                "{} is not an operation of the {name} script",
                shown(op)
            ));
        }
        if !facts.envelope.allows(op) {
            return Err(format!(
                "{method} may not run {name} {op} (it may run: {})",
                if facts.envelope.ops.is_empty() {
                    "nothing".to_string()
                } else {
                    facts.envelope.ops.join(", ")
                }
            ));
        }
        let is_unpack = name == "workspace" && op == "unpack";
        let is_skills = name == "workspace" && op == envelope::SKILLS;
        let is_inputs = name == "workspace" && op == envelope::INPUTS;
        // Each root streams only into the operation that takes it.
        let takes = |root: &str| match root {
            // A workspace seeds the mount of its name.
            "workspace" | "agent" => is_unpack && args.get(2).map(String::as_str) == Some(root),
            "skills" => is_skills,
            "inputs" => is_inputs,
            _ => false,
        };
        if let Some(root) = streamed
            && !takes(root)
        {
            return Err(format!(
                "the local {root} root streams into {}, not {name} {op}",
                match root {
                    "skills" => "workspace skills",
                    "inputs" => "workspace inputs",
                    _ => "workspace unpack",
                }
            ));
        }
        if is_unpack && streamed.is_none() {
            return Err("workspace unpack takes its archive from the local workspace the host streams, not from the component".into());
        }
        if is_skills && streamed.is_none() && !stdin.is_empty() {
            return Err("workspace skills takes its archive from the local skills workspace the host streams, or nothing, not from the component".into());
        }
        if is_inputs && streamed.is_none() {
            return Err("workspace inputs takes its archive from the scope's staged inputs the host streams, not from the component".into());
        }
        let mut nonce = None;
        if name != "preflight" {
            let layout = facts
                .layout
                .as_ref()
                .ok_or_else(|| format!("{method} names no sandbox scope"))?;
            let rest = &args[1..];
            if name == "workspace" {
                let spec = workspace_op(op).expect("a workspace operation");
                check_args(layout, &format!("workspace {op}"), spec, rest)?;
                // The staged inputs are the user's own files for the turn, in
                // every access mode; the skills are refreshed only where
                // OpenClaw refreshes them.
                if is_skills && !layout.mount(Mount::Workspace).is_some_and(|m| m.writable) {
                    return Err("workspace skills would change the workspace mount, which workspaceAccess makes read-only".into());
                }
            } else {
                nonce = Some(self.check_exec(layout, op, rest, stdin)?);
            }
        }
        let mut run = argv[..4].to_vec();
        run.push(facts.json.clone());
        run.extend(args.iter().cloned());
        Ok(ScriptRun {
            argv: run,
            script,
            op: op.to_string(),
            nonce,
        })
    }

    /// The exec script's arguments after its mode, and its header; the
    /// header's nonce.
    fn check_exec(
        &self,
        layout: &Layout,
        mode: &str,
        rest: &[String],
        stdin: &[u8],
    ) -> Result<String, String> {
        let method = self.method;
        let spec = WorkspaceOp {
            name: envelope::EXEC,
            args: EXEC_ARGS,
            mutating: false,
        };
        check_args(layout, &format!("exec {mode}"), &spec, rest)?;
        let asked = self
            .asked
            .as_ref()
            .filter(|a| a.mode == mode)
            .ok_or_else(|| format!("{method} asked for no command in mode {mode}"))?;
        let [mount, relative, timeout, header_len] = rest else {
            unreachable!("checked against EXEC_ARGS")
        };
        let workdir = paths::exec_workdir(layout, asked.workdir.as_deref())
            .map_err(|_| format!("{method}: the caller's workdir is outside the scope's mounts"))?;
        if (mount.as_str(), relative.as_str()) != (workdir.mount.name(), &workdir.relative_path) {
            return Err(format!(
                "{method} runs the caller's command in the caller's workdir ({}/{}), not in {}/{}",
                workdir.mount.name(),
                workdir.relative_path,
                shown(mount),
                shown(relative)
            ));
        }
        // A caller's own limit binds the script; without one, the script may
        // run with none of its own ("0"), and the host's bound of one run
        // (the grant's, which the transport applies to every exec) ends it.
        let callers = asked.timeout_ms.filter(|t| *t > 0).map(u64::from);
        let limit = callers.unwrap_or(self.operation_ms);
        match timeout.parse::<u64>() {
            Ok(0) if callers.is_none() => {}
            Ok(t) if (1..=limit).contains(&t) => {}
            _ => {
                let whose = if callers.is_some() {
                    "the caller's"
                } else {
                    "the host's bound of"
                };
                return Err(format!(
                    "{method}: the exec script's time limit {} ms is not within {whose} {limit} ms",
                    shown(timeout)
                ));
            }
        }
        let header_len: usize = header_len.parse().map_err(|_| "a header length")?;
        let (header, command_stdin) = match stdin.get(..header_len) {
            Some(h) => (h, &stdin[header_len..]),
            None => return Err(format!("{method}: stdin is shorter than its header")),
        };
        let header: serde_json::Map<String, Value> = serde_json::from_slice(header)
            .map_err(|_| format!("{method}: the exec header is not a JSON object"))?;
        if let Some(key) = header
            .keys()
            .find(|k| !["command", "env", "args", "nonce"].contains(&k.as_str()))
        {
            return Err(format!(
                "{method}: the exec header carries {}, which the caller did not ask for",
                shown(key)
            ));
        }
        let differs = |field: &str| {
            format!(
                "{method} runs the caller's command and nothing else: the exec header's {field} is not the caller's"
            )
        };
        if header.get("command").and_then(Value::as_str) != Some(asked.command.as_str()) {
            return Err(differs("command"));
        }
        let env: Option<BTreeMap<String, String>> = match header.get("env") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect(),
            _ => None,
        };
        if env.as_ref() != Some(&asked.env) {
            return Err(differs("env"));
        }
        let args: Option<Vec<String>> = match header.get("args") {
            Some(Value::Array(a)) => a.iter().map(|v| v.as_str().map(str::to_string)).collect(),
            _ => None,
        };
        if args.as_ref() != Some(&asked.args) {
            return Err(differs("args"));
        }
        let Some(nonce) = header
            .get("nonce")
            .and_then(Value::as_str)
            .filter(|n| is_nonce(n))
        else {
            return Err(format!(
                "{method}: the exec header's nonce must be 32 lowercase hex digits"
            ));
        };
        if command_stdin != asked.stdin.as_slice() {
            return Err(differs("stdin"));
        }
        Ok(nonce.to_string())
    }
}

/// Each argument of `what` as `spec` has it, against the scope's layout.
fn check_args(
    layout: &Layout,
    what: &str,
    spec: &WorkspaceOp,
    args: &[String],
) -> Result<(), String> {
    if args.len() != spec.args.len() {
        return Err(format!(
            "{what} takes {} arguments, not {}: the workspace root, the runtime and the mounts \
             are the host's, in the envelope it writes",
            spec.args.len(),
            args.len()
        ));
    }
    for (index, (kind, value)) in spec.args.iter().zip(args).enumerate() {
        let field = format!("argument {} of {what}", index + 1);
        match kind {
            Arg::Mount => {
                let mount = Mount::from_name(value)
                    .and_then(|m| layout.mount(m))
                    .ok_or_else(|| {
                        format!(
                            "{field}: {} is not a mount of this scope (it has {})",
                            shown(value),
                            layout
                                .mounts
                                .iter()
                                .map(|m| m.mount.name())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?;
                if spec.mutating && !mount.writable {
                    return Err(format!(
                        "{what} would change the {value} mount, which workspaceAccess makes read-only"
                    ));
                }
            }
            Arg::Path => {
                if !value.is_empty() && value.split('/').any(|part| matches!(part, "" | "." | ".."))
                {
                    return Err(format!(
                        "{field}: {} is not a path of plain names below its mount",
                        shown(value)
                    ));
                }
            }
            Arg::Stage => {
                if !layout.is_stage(value) {
                    return Err(format!(
                        "{field}: {} is not a stage of this scope's runtime {}",
                        shown(value),
                        layout.runtime_id
                    ));
                }
            }
            Arg::Flag => {
                if Arg::read_flag(value).is_none() {
                    return Err(format!("{field}: must be 0 or 1, not {}", shown(value)));
                }
            }
            Arg::Staged => {
                if !envelope::is_staged_list(value) {
                    return Err(format!(
                        "{field}: {} is not a list of at most {} staged-input directory names \
                         (openclaw-staged-<id>, separated by commas)",
                        shown(value),
                        envelope::MAX_STAGED_NAMES
                    ));
                }
            }
            Arg::Count => {
                if value.is_empty()
                    || value.len() > 18
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(format!(
                        "{field}: must be a count in decimal digits, not {}",
                        shown(value)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A value of the component's, quoted and cut short for a message.
fn shown(value: &str) -> String {
    format!("{:?}", crate::runtime::escape_control_head(value, 64))
}
