//! What a target's long-lived worker may answer of an admitted call: the
//! operations it serves (and which of them change nothing, so a new worker
//! may be sent one again), and the programs it starts from.

use std::sync::Arc;

use occ_ssh_target::envelope;

use super::{CallRules, Script, ScriptRun};
use crate::capability::ssh_exec::Serve;
use crate::capability::ssh_exec::seal::frame;

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
/// commands then run one-shot). Built once per backend: every request shares
/// its start vector and frame instead of copying the scripts' texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::world::ssh_sandbox_backend) struct WorkerPrograms {
    /// `[<interpreter>, "-c", <workspace script>, "workspace", "--serve",
    /// <workspace root>]`, the interpreter being what the script's first
    /// line names.
    start: Arc<[String]>,
    /// The start's second frame: `{"exec": <text or null>}`.
    pub(super) start_input: Arc<[u8]>,
    /// Commands go to the worker (the exec script is approved).
    pub runs_commands: bool,
}

impl WorkerPrograms {
    /// From the approved texts of the component's workspace and exec scripts,
    /// for the installation's workspace root.
    pub(in crate::world::ssh_sandbox_backend) fn new(
        workspace: &str,
        exec: Option<&str>,
        workspace_root: &str,
    ) -> Option<WorkerPrograms> {
        let interpreter = occ_ssh_target::programs::interpreter_of(workspace)?;
        let start = serde_json::json!({ "exec": exec }).to_string();
        Some(WorkerPrograms {
            start: start_vector(interpreter, workspace, workspace_root),
            start_input: frame(start.as_bytes()).into(),
            runs_commands: exec.is_some(),
        })
    }
}

fn start_vector(interpreter: &str, workspace: &str, workspace_root: &str) -> Arc<[String]> {
    [
        interpreter,
        "-c",
        workspace,
        "workspace",
        "--serve",
        workspace_root,
    ]
    .map(str::to_string)
    .into()
}

impl CallRules {
    /// How the target's long-lived worker answers a run this call admitted,
    /// if it may: a file operation
    /// (`[<interpreter>, "-c", <script>, "workspace", <envelope>, <op>,
    /// <args...>]`) in the order of its scope's others, or a command (the
    /// exec script's run) beside them. The worker is started as
    /// `[<interpreter>, "-c", <workspace script>, "workspace", "--serve",
    /// <workspace root>]` (one per target and root, whichever scope asks
    /// first), and sent everything after the script's name.
    pub(in crate::world::ssh_sandbox_backend) fn served(
        &self,
        run: &ScriptRun,
        bound: std::time::Duration,
        programs: &WorkerPrograms,
    ) -> Option<Serve> {
        let envelope = &self.facts.as_ref().ok()?.envelope;
        let runtime = envelope.runtime_id.as_deref()?;
        let (command, idempotent) = match run.script {
            Script::Workspace => (false, SERVED.iter().find(|(o, _)| *o == run.op)?.1),
            Script::Exec if programs.runs_commands => (true, false),
            _ => return None,
        };
        // The envelope's root is the installation's, which the backend's
        // start vector was built for.
        let start = match programs.start.last() {
            Some(root) if *root == envelope.workspace_root => programs.start.clone(),
            _ => start_vector(
                &programs.start[0],
                &programs.start[2],
                &envelope.workspace_root,
            ),
        };
        Some(Serve {
            start,
            start_input: programs.start_input.clone(),
            request: run.argv[4..].to_vec(),
            command,
            order: (!command).then(|| runtime.to_string()),
            idempotent,
            bound,
        })
    }
}
