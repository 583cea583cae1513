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
use crate::capability::ssh_exec::Serve;

/// The exec request the controller made, as the exec script must carry it.
#[derive(Debug, Clone, Default)]
pub(super) struct Asked {
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

/// What the host knows of one call.
struct Facts {
    envelope: Envelope,
    json: String,
    /// The scope's layout; none for a call without a scope.
    layout: Option<Layout>,
}

/// One call's say over its execs.
pub(super) struct CallAdmission {
    method: Method,
    /// Why nothing may run, when the call's settings or scope give no layout.
    facts: Result<Facts, String>,
    asked: Option<Asked>,
    /// The grant's bound of one exec, in milliseconds.
    operation_ms: u64,
}

impl CallAdmission {
    /// The admission of a `method` call under the installation's `settings`,
    /// for `scope` (none for a call without one) and, for a command, the
    /// caller's request.
    pub(super) fn new(
        method: Method,
        settings: &Result<Settings, SandboxSettingsError>,
        scope: Option<ScopeRef<'_>>,
        asked: Option<Asked>,
        operation_ms: u64,
    ) -> CallAdmission {
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
        CallAdmission {
            method,
            facts,
            asked,
            operation_ms,
        }
    }

    /// The argument vector that runs for `argv` (one the grant allowed), with
    /// `stdin`; `streamed` names the local root that streams into it, if
    /// one does. Refused with the reason.
    pub(super) fn admit(
        &self,
        argv: &[String],
        stdin: &[u8],
        streamed: Option<&str>,
    ) -> Result<Vec<String>, String> {
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
                self.check_exec(layout, op, rest, stdin)?;
            }
        }
        let mut run = argv[..4].to_vec();
        run.push(facts.json.clone());
        run.extend(args.iter().cloned());
        Ok(run)
    }

    /// The exec script's arguments after its mode, and its header.
    fn check_exec(
        &self,
        layout: &Layout,
        mode: &str,
        rest: &[String],
        stdin: &[u8],
    ) -> Result<(), String> {
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
        if !header
            .get("nonce")
            .and_then(Value::as_str)
            .is_some_and(is_nonce)
        {
            return Err(format!(
                "{method}: the exec header's nonce must be 32 lowercase hex digits"
            ));
        }
        if command_stdin != asked.stdin.as_slice() {
            return Err(differs("stdin"));
        }
        Ok(())
    }
}

/// The workspace operations a long-lived worker may answer: every one that
/// takes its whole input with it (a stream, seeding or skills, is a session's
/// own), and of those, the ones that change nothing (sent again to a new
/// worker when one failed mid-request).
const SERVED: &[(&str, bool)] = &[
    ("describe", true),
    ("read", true),
    ("stat", true),
    ("readdir", true),
    ("workdir", true),
    (envelope::INPUTS_ABSENT, true),
    ("write", false),
    ("create", false),
    ("mkdirp", false),
    ("remove", false),
    ("rename", false),
    ("stage", false),
    ("publish", false),
    ("discard", false),
    ("remove-runtime", false),
];

/// What a target's long-lived worker starts from: the approved workspace
/// script, which it runs, and the frame of the approved exec script it runs
/// commands with (`{"exec": null}` when the installation approves none:
/// commands then run one-shot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WorkerPrograms {
    /// The interpreter the workspace script's first line names.
    pub(super) interpreter: String,
    /// The workspace script's text.
    pub(super) workspace: String,
    /// The start's second frame: `{"exec": <text or null>}`.
    pub start_input: Vec<u8>,
    /// Commands go to the worker (the exec script is approved).
    pub runs_commands: bool,
}

impl WorkerPrograms {
    /// From the approved texts of the component's workspace and exec scripts.
    pub(super) fn new(workspace: &str, exec: Option<&str>) -> Option<WorkerPrograms> {
        let interpreter = occ_ssh_target::programs::interpreter_of(workspace)?;
        let start = serde_json::json!({ "exec": exec }).to_string();
        let mut start_input = (start.len() as u32).to_be_bytes().to_vec();
        start_input.extend_from_slice(start.as_bytes());
        Some(WorkerPrograms {
            interpreter: interpreter.to_string(),
            workspace: workspace.to_string(),
            start_input,
            runs_commands: exec.is_some(),
        })
    }
}

impl CallAdmission {
    /// How the target's long-lived worker answers the argument vector this
    /// call admitted, if it may: a file operation
    /// (`[<interpreter>, "-c", <script>, "workspace", <envelope>, <op>,
    /// <args...>]`) in the order of its scope's others, or a command (the
    /// exec script's run) beside them. The worker is started as
    /// `[<interpreter>, "-c", <workspace script>, "workspace", "--serve",
    /// <workspace root>]` (one per target and root, whichever scope asks
    /// first), and sent everything after the script's name.
    pub(super) fn served(
        &self,
        argv: &[String],
        bound: std::time::Duration,
        programs: &WorkerPrograms,
    ) -> Option<Serve> {
        let [_, _, _, name, _, op, ..] = argv else {
            return None;
        };
        let envelope = &self.facts.as_ref().ok()?.envelope;
        let runtime = envelope.runtime_id.as_deref()?;
        let (command, idempotent) = match name.as_str() {
            "workspace" => (false, SERVED.iter().find(|(o, _)| o == op)?.1),
            "exec" if programs.runs_commands => (true, false),
            _ => return None,
        };
        Some(Serve {
            start: vec![
                programs.interpreter.clone(),
                "-c".into(),
                programs.workspace.clone(),
                "workspace".into(),
                "--serve".into(),
                envelope.workspace_root.clone(),
            ],
            start_input: programs.start_input.clone(),
            request: argv[4..].to_vec(),
            command,
            order: (!command).then(|| runtime.to_string()),
            idempotent,
            bound,
        })
    }
}

/// The nonce in the header of an exec-script run (the argument vector that
/// runs, and its stdin), which marks the script's own report lines.
pub(super) fn exec_nonce(argv: &[String], stdin: &[u8]) -> Option<String> {
    if argv.get(3).map(String::as_str) != Some("exec") {
        return None;
    }
    let len: usize = argv.last()?.parse().ok()?;
    let header: Value = serde_json::from_slice(stdin.get(..len)?).ok()?;
    header
        .get("nonce")?
        .as_str()
        .filter(|n| is_nonce(n))
        .map(str::to_string)
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
                if !matches!(value.as_str(), "0" | "1") {
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
    format!(
        "{:?}",
        crate::runtime::escape_control(&value.chars().take(64).collect::<String>())
    )
}

/// What an admitted script run runs, for its audit records: the script's
/// name and its operation (`[<interpreter>, "-c", <script>, <name>,
/// <envelope>, <op>, ...]`; a script without operations, `preflight`, is its
/// own), so that an auditor reads them without the long arguments the log
/// keeps only as length and SHA-256.
pub(super) fn describe() -> crate::capability::ssh_exec::Describe {
    std::sync::Arc::new(|argv: &[String]| {
        let mut fields = serde_json::Map::new();
        if let Some(name) = argv.get(3) {
            fields.insert("script".into(), Value::String(name.clone()));
            let op = argv.get(5).unwrap_or(name);
            fields.insert("operation".into(), Value::String(op.clone()));
        }
        fields
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_ssh_target::layout::{Access, SettingsError};
    use occ_ssh_target::scope::Scope;

    const SCRIPT: &str = "#!/usr/bin/env python3\n";

    fn settings(access: Access) -> Result<Settings, SandboxSettingsError> {
        Ok(Settings {
            workspace_root: "/r".into(),
            scope: Scope::Shared,
            access,
        })
    }

    fn scope() -> ScopeRef<'static> {
        ScopeRef {
            workspace_dir: "/w",
            agent_workspace_dir: Some("/a"),
            ..ScopeRef::default()
        }
    }

    fn argv(name: &str, args: &[&str]) -> Vec<String> {
        let mut v = vec!["python3".into(), "-c".into(), SCRIPT.into(), name.into()];
        v.extend(args.iter().map(|a| a.to_string()));
        v
    }

    fn admission(method: Method, access: Access, asked: Option<Asked>) -> CallAdmission {
        CallAdmission::new(method, &settings(access), Some(scope()), asked, 7_200_000)
    }

    const RUNTIME: &str = "openclaw-ssh-shared-8198076c";

    fn programs(exec: bool) -> WorkerPrograms {
        WorkerPrograms::new(
            "#!/usr/bin/env python3\n# the workspace script\n",
            exec.then_some("#!/usr/bin/env python3\n# the exec script\n"),
        )
        .unwrap()
    }

    /// What a target's worker answers: the admitted vector's file operations
    /// that stream nothing, in their scope's order, and commands beside them;
    /// it starts from the approved workspace script and the envelope's root
    /// alone (no scope of its own), and is sent the admitted arguments.
    #[test]
    fn a_worker_answers_what_was_admitted_and_starts_from_the_envelope() {
        let bound = std::time::Duration::from_secs(7);
        let read = admission(Method::ReadFile, Access::ReadWrite, None)
            .admit(
                &argv("workspace", &["read", "workspace", "x", "10"]),
                &[],
                None,
            )
            .unwrap();
        let serve = admission(Method::ReadFile, Access::ReadWrite, None)
            .served(&read, bound, &programs(true))
            .expect("a read is served");
        assert_eq!(
            serve.start,
            [
                "python3",
                "-c",
                "#!/usr/bin/env python3\n# the workspace script\n",
                "workspace",
                "--serve",
                "/r"
            ],
            "the approved workspace script, with the envelope's root and no scope"
        );
        assert_eq!(
            &serve.start_input[4..],
            br##"{"exec":"#!/usr/bin/env python3\n# the exec script\n"}"##
        );
        assert_eq!(serve.request, read[4..].to_vec(), "envelope first");
        assert!(serve.idempotent && !serve.command);
        assert_eq!(
            serve.order.as_deref(),
            Some(RUNTIME),
            "in its scope's order"
        );
        assert_eq!(serve.bound, bound);
        let write = admission(Method::WriteFile, Access::ReadWrite, None)
            .admit(
                &argv("workspace", &["write", "workspace", "x", "0"]),
                b"data",
                None,
            )
            .unwrap();
        let serve = admission(Method::WriteFile, Access::ReadWrite, None)
            .served(&write, bound, &programs(true))
            .expect("a write is served");
        assert!(!serve.idempotent, "a write is never sent twice");
        // A command, beside the scope's file operations, never sent twice.
        let exec = argv("exec", &["{}", "exec", "workspace", "", "0", "2"]);
        let serve = admission(Method::Exec, Access::ReadWrite, None)
            .served(&exec, bound, &programs(true))
            .expect("a command is served");
        assert!(serve.command && !serve.idempotent && serve.order.is_none());
        assert_eq!(serve.request, exec[4..].to_vec());
        // ... unless no exec script is approved for the worker to run.
        assert!(
            admission(Method::Exec, Access::ReadWrite, None)
                .served(&exec, bound, &programs(false))
                .is_none()
        );
        assert_eq!(&programs(false).start_input[4..], br#"{"exec":null}"#);
        // Streams and the preflight script run on their own.
        for (name, args) in [
            ("workspace", vec!["unpack", "s", "workspace"]),
            ("workspace", vec!["skills"]),
            ("workspace", vec!["inputs"]),
            ("preflight", vec![]),
        ] {
            let mut run = argv(name, &["{}"]);
            run.extend(args.iter().map(|a| a.to_string()));
            assert!(
                admission(Method::ReadFile, Access::ReadWrite, None)
                    .served(&run, bound, &programs(true))
                    .is_none(),
                "{name} {args:?}"
            );
        }
        // An envelope without a scope names no worker.
        let unscoped = CallAdmission::new(
            Method::ReadFile,
            &settings(Access::ReadWrite),
            None,
            None,
            1,
        );
        assert!(unscoped.served(&read, bound, &programs(true)).is_none());
    }

    #[test]
    fn the_envelope_goes_before_the_components_arguments() {
        let a = admission(Method::ReadFile, Access::ReadWrite, None);
        let run = a
            .admit(
                &argv("workspace", &["read", "agent", "x/y", "10"]),
                &[],
                None,
            )
            .unwrap();
        assert_eq!(&run[3..4], &["workspace"]);
        let envelope: Value = serde_json::from_str(&run[4]).unwrap();
        assert_eq!(envelope["method"], "readFile");
        assert_eq!(envelope["runtimeId"], RUNTIME);
        assert_eq!(envelope["workspaceRoot"], "/r");
        assert_eq!(&run[5..], &["read", "agent", "x/y", "10"]);
    }

    #[test]
    fn refusals_name_what_is_refused() {
        let stage = format!("{RUNTIME}.bootstrap-{}", "0".repeat(32));
        let other_stage = format!("openclaw-ssh-other-1.bootstrap-{}", "0".repeat(32));
        // A method, its access, the script run, the root streamed into it and
        // what the refusal says.
        type Case<'a> = (Method, Access, Vec<&'a str>, Option<&'a str>, &'a str);
        let cases: &[Case] = &[
            (
                Method::RemoveRuntime,
                Access::ReadWrite,
                vec!["workspace", "remove-runtime", "/root", "acc-victim"],
                None,
                "workspace remove-runtime takes 0 arguments, not 2",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["workspace", "remove-runtime"],
                None,
                "readFile may not run workspace remove-runtime",
            ),
            (
                Method::DescribeRuntime,
                Access::ReadWrite,
                vec!["workspace", "stage", &stage],
                None,
                "describeRuntime may not run workspace stage",
            ),
            (
                Method::EnsureRuntime,
                Access::ReadWrite,
                vec!["workspace", "stage", &other_stage],
                None,
                "is not a stage of this scope's runtime",
            ),
            (
                Method::ReadFile,
                Access::None,
                vec!["workspace", "read", "agent", "x", "10"],
                None,
                "argument 1 of workspace read: \"agent\" is not a mount of this scope (it has workspace)",
            ),
            (
                Method::WriteFile,
                Access::ReadOnly,
                vec!["workspace", "write", "workspace", "x", "0"],
                None,
                "workspace write would change the workspace mount, which workspaceAccess makes read-only",
            ),
            (
                Method::Rename,
                Access::ReadOnly,
                vec!["workspace", "rename", "workspace", "x", "agent", "y"],
                None,
                "read-only",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["workspace", "read", "workspace", "../x", "10"],
                None,
                "is not a path of plain names",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["workspace", "read", "workspace", "x", "-1"],
                None,
                "must be a count",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["preflight"],
                None,
                "readFile may not run preflight preflight",
            ),
            (
                Method::Preflight,
                Access::ReadWrite,
                vec!["preflight", "extra"],
                None,
                "takes no argument",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["workspace", "{\"version\":1}", "read"],
                None,
                "\"{\\\"version\\\":1}\" is not an operation of the workspace script",
            ),
            (
                Method::ReadFile,
                Access::ReadWrite,
                vec!["evil"],
                None,
                "runs the preflight, workspace and exec scripts",
            ),
            (
                Method::EnsureRuntime,
                Access::ReadWrite,
                vec!["workspace", "unpack", &stage, "workspace"],
                None,
                "takes its archive from the local workspace",
            ),
            (
                Method::EnsureRuntime,
                Access::ReadWrite,
                vec!["workspace", "describe"],
                Some("workspace"),
                "the local workspace root streams into workspace unpack, not workspace describe",
            ),
            (
                Method::EnsureRuntime,
                Access::None,
                vec!["workspace", "unpack", &stage, "agent"],
                Some("agent"),
                "argument 2 of workspace unpack: \"agent\" is not a mount of this scope",
            ),
            (
                Method::ValidateConfiguration,
                Access::ReadWrite,
                vec!["preflight"],
                None,
                "may not run preflight preflight (it may run: nothing)",
            ),
        ];
        for (method, access, args, streamed, expected) in cases {
            let a = admission(*method, *access, None);
            let err = a
                .admit(&argv(args[0], &args[1..]), &[], *streamed)
                .unwrap_err();
            assert!(err.contains(expected), "{method} {args:?}: {err}");
        }
        // The skills refresh: its archive is the host's stream or nothing,
        // only into a writable workspace, only where OpenClaw refreshes.
        let skills = argv("workspace", &["skills"]);
        let rw = admission(Method::ReadFile, Access::ReadWrite, None);
        assert!(rw.admit(&skills, &[], Some("skills")).is_ok());
        assert!(rw.admit(&skills, &[], None).is_ok());
        let forged = rw.admit(&skills, b"a tar of the component's", None);
        assert!(
            forged
                .as_ref()
                .unwrap_err()
                .contains("takes its archive from the local skills workspace"),
            "{forged:?}"
        );
        let ro = admission(Method::ReadFile, Access::ReadOnly, None);
        let err = ro.admit(&skills, &[], Some("skills")).unwrap_err();
        assert!(err.contains("workspaceAccess makes read-only"), "{err}");
        let describe = admission(Method::DescribeRuntime, Access::ReadWrite, None);
        let err = describe.admit(&skills, &[], Some("skills")).unwrap_err();
        assert!(err.contains("may not run workspace skills"), "{err}");
        let extra = rw.admit(&argv("workspace", &["skills", "/etc"]), &[], Some("skills"));
        assert!(extra.unwrap_err().contains("takes 0 arguments"));
        // Each root streams only into its own operation: the skills never
        // seed a mount, a workspace never becomes the skills or the inputs.
        for (root, run) in [
            (
                "skills",
                argv("workspace", &["unpack", &stage, "workspace"]),
            ),
            ("agent", argv("workspace", &["unpack", &stage, "workspace"])),
            ("inputs", argv("workspace", &["skills"])),
            ("workspace", argv("workspace", &["inputs"])),
            ("skills", argv("workspace", &["inputs"])),
        ] {
            let a = admission(Method::ReadFile, Access::ReadWrite, None);
            let err = a.admit(&run, &[], Some(root)).unwrap_err();
            assert!(
                err.contains(&format!("the local {root} root streams into")),
                "{root} {run:?}: {err}"
            );
        }
        // The inputs refresh: its archive is the host's stream of the staged
        // inputs, in every access mode; the question before it names
        // staged-input directories and nothing else.
        let inputs = argv("workspace", &["inputs"]);
        assert!(rw.admit(&inputs, &[], Some("inputs")).is_ok());
        let err = rw
            .admit(&inputs, b"a tar of the component's", None)
            .unwrap_err();
        assert!(
            err.contains("takes its archive from the scope's staged inputs"),
            "{err}"
        );
        let err = rw.admit(&inputs, &[], None).unwrap_err();
        assert!(
            err.contains("takes its archive from the scope's staged inputs"),
            "{err}"
        );
        assert!(ro.admit(&inputs, &[], Some("inputs")).is_ok());
        let id = "openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-1234567890ab";
        let asked = |list: &str| rw.admit(&argv("workspace", &["inputs-absent", list]), &[], None);
        assert!(asked(id).is_ok());
        assert!(asked(&format!("{id},openclaw-staged-{}", "ab".repeat(32))).is_ok());
        for bad in [
            "",
            "../../etc",
            "openclaw-staged-x",
            "skills",
            &format!("{id},.."),
            &format!("{id}/x"),
            &vec![id; 257].join(","),
        ] {
            let err = asked(bad).unwrap_err();
            assert!(
                err.contains("is not a list of at most 256 staged-input directory names"),
                "{bad:?}: {err}"
            );
        }
        // What the method may run gets through.
        let a = admission(Method::EnsureRuntime, Access::ReadOnly, None);
        assert!(
            a.admit(
                &argv("workspace", &["unpack", &stage, "agent"]),
                &[],
                Some("agent")
            )
            .is_ok()
        );
        assert!(
            a.admit(&argv("workspace", &["describe"]), &[], None)
                .is_ok()
        );
        let p = CallAdmission::new(Method::Preflight, &settings(Access::None), None, None, 1);
        assert!(p.admit(&argv("preflight", &[]), &[], None).is_ok());
        // A call whose settings give no layout runs nothing.
        let broken = CallAdmission::new(
            Method::ReadFile,
            &Err(SandboxSettingsError::Invalid(SettingsError {
                key: "scope",
                reason: "bad".into(),
            })),
            Some(scope()),
            None,
            1,
        );
        assert!(
            broken
                .admit(&argv("workspace", &["describe"]), &[], None)
                .unwrap_err()
                .contains("scope: bad")
        );
    }

    fn exec_run(header: Value, rest: &[u8], args: [&str; 3]) -> (Vec<String>, Vec<u8>) {
        let header = header.to_string();
        let len = header.len().to_string();
        let mut stdin = header.into_bytes();
        stdin.extend_from_slice(rest);
        let mut a = args.to_vec();
        a.push(&len);
        (argv("exec", &[&["exec"][..], &a].concat()), stdin)
    }

    #[test]
    fn an_exec_carries_the_callers_request_and_nothing_else() {
        let asked = Asked {
            mode: "exec",
            command: "make test".into(),
            env: BTreeMap::from([("CI".into(), "1".into())]),
            stdin: b"in".to_vec(),
            workdir: Some("src".into()),
            timeout_ms: Some(5000),
            ..Asked::default()
        };
        let a = admission(Method::Exec, Access::ReadWrite, Some(asked));
        let nonce = "0123456789abcdef".repeat(2);
        let honest = serde_json::json!({"command": "make test", "env": {"CI": "1"}, "args": [], "nonce": nonce});
        let (run, stdin) = exec_run(honest.clone(), b"in", ["workspace", "src", "5000"]);
        let admitted = a.admit(&run, &stdin, None).unwrap();
        assert_eq!(exec_nonce(&admitted, &stdin), Some(nonce.clone()));
        let with = |key: &str, value: Value| {
            let mut h = honest.clone();
            h[key] = value;
            h
        };
        let cases: Vec<(Value, &[u8], [&str; 3], &str)> = vec![
            (
                with("command", "make test; rm -rf /".into()),
                b"in",
                ["workspace", "src", "5000"],
                "header's command",
            ),
            (
                with(
                    "env",
                    serde_json::json!({"CI": "1", "LD_PRELOAD": "/tmp/x.so"}),
                ),
                b"in",
                ["workspace", "src", "5000"],
                "header's env",
            ),
            (
                with("env", serde_json::json!({})),
                b"in",
                ["workspace", "src", "5000"],
                "header's env",
            ),
            (
                with("args", serde_json::json!(["x"])),
                b"in",
                ["workspace", "src", "5000"],
                "header's args",
            ),
            (
                with("nonce", "short".into()),
                b"in",
                ["workspace", "src", "5000"],
                "nonce must be",
            ),
            (
                with("extra", 1.into()),
                b"in",
                ["workspace", "src", "5000"],
                "carries \"extra\"",
            ),
            (
                honest.clone(),
                b"other",
                ["workspace", "src", "5000"],
                "header's stdin",
            ),
            (
                honest.clone(),
                b"in",
                ["workspace", "", "5000"],
                "in the caller's workdir (workspace/src), not in \"workspace\"/\"\"",
            ),
            (
                honest.clone(),
                b"in",
                ["agent", "src", "5000"],
                "in the caller's workdir",
            ),
            (
                honest.clone(),
                b"in",
                ["workspace", "src", "5001"],
                "not within the caller's 5000 ms",
            ),
            (
                honest.clone(),
                b"in",
                ["workspace", "src", "0"],
                "not within the caller's 5000 ms",
            ),
        ];
        for (header, rest, args, expected) in cases {
            let (run, stdin) = exec_run(header.clone(), rest, args);
            let err = a.admit(&run, &stdin, None).unwrap_err();
            assert!(err.contains(expected), "{header} {args:?}: {err}");
        }
        // A header length past the end of stdin, or no count at all.
        let (mut run, stdin) = exec_run(honest.clone(), b"in", ["workspace", "src", "5000"]);
        *run.last_mut().unwrap() = (stdin.len() + 1).to_string();
        let err = a.admit(&run, &stdin, None).unwrap_err();
        assert!(err.contains("stdin is shorter than its header"), "{err}");
        *run.last_mut().unwrap() = "12 ".into();
        let err = a.admit(&run, &stdin, None).unwrap_err();
        assert!(
            err.contains("argument 4 of exec exec: must be a count"),
            "{err}"
        );
        // The other mode, or the script in a call that asked for no command.
        let shell = admission(
            Method::RunShellCommand,
            Access::ReadWrite,
            Some(Asked {
                mode: "shell",
                command: "make test".into(),
                ..Asked::default()
            }),
        );
        let (run, stdin) = exec_run(honest.clone(), b"in", ["workspace", "src", "5000"]);
        assert!(
            shell
                .admit(&run, &stdin, None)
                .unwrap_err()
                .contains("may not run exec exec")
        );
        let none = admission(Method::ReadFile, Access::ReadWrite, None);
        assert!(
            none.admit(&run, &stdin, None)
                .unwrap_err()
                .contains("may not run exec exec")
        );
    }

    #[test]
    fn a_terminal_is_the_callers_and_the_host_writes_it() {
        let asked = |tty: bool, mode: &'static str| Asked {
            mode,
            command: "x".into(),
            tty,
            ..Asked::default()
        };
        let header =
            serde_json::json!({"command": "x", "env": {}, "args": [], "nonce": "a".repeat(32)});
        let envelope_of = |method: Method, a: Asked| {
            let adm = admission(method, Access::ReadWrite, Some(a));
            let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "0"]);
            let run = adm.admit(&run, &stdin, None).unwrap();
            serde_json::from_str::<Value>(&run[4]).unwrap()
        };
        assert_eq!(envelope_of(Method::Exec, asked(true, "exec"))["tty"], true);
        assert!(
            envelope_of(Method::Exec, asked(false, "exec"))
                .get("tty")
                .is_none()
        );
        // A component that asks for one in the header is refused: the header
        // is the caller's request, and a terminal is not part of it.
        let adm = admission(Method::Exec, Access::ReadWrite, Some(asked(false, "exec")));
        let mut forged = header.clone();
        forged["tty"] = Value::Bool(true);
        let (run, stdin) = exec_run(forged, b"", ["workspace", "", "0"]);
        let err = adm.admit(&run, &stdin, None).unwrap_err();
        assert!(err.contains("carries \"tty\""), "{err}");
    }

    #[test]
    fn without_a_limit_of_its_own_an_exec_is_bounded_by_the_grant() {
        let asked = Asked {
            mode: "exec",
            command: "x".into(),
            ..Asked::default()
        };
        let a = admission(Method::Exec, Access::ReadWrite, Some(asked));
        let header =
            serde_json::json!({"command": "x", "env": {}, "args": [], "nonce": "a".repeat(32)});
        let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "7200000"]);
        assert!(a.admit(&run, &stdin, None).is_ok());
        let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "0"]);
        assert!(a.admit(&run, &stdin, None).is_ok(), "no limit of its own");
        let (run, stdin) = exec_run(header, b"", ["workspace", "", "7200001"]);
        let err = a.admit(&run, &stdin, None).unwrap_err();
        assert!(
            err.contains("not within the host's bound of 7200000 ms"),
            "{err}"
        );
    }
}
