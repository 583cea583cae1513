//! What the host writes for every script run, and what each script operation
//! may act on.
//!
//! The component runs `[<interpreter>, "-c", <script>, <name>, <args...>]`;
//! the host runs `[<interpreter>, "-c", <script>, <name>, <envelope>,
//! <args...>]`. The envelope is one compact JSON object the component never
//! writes:
//!
//! ```json
//! {"version":1,"method":"readFile","ops":["describe","stage","unpack","publish","discard","skills","inputs-absent","inputs","read"],
//!  "workspaceRoot":"/tmp/openclaw-sandboxes","runtimeId":"openclaw-ssh-workspace-…",
//!  "mounts":[{"name":"workspace","writable":true}]}
//! ```
//!
//! It holds what is trusted, from the installation (`workspaceRoot`) and from
//! the call the controller made (`method`, the scope's `runtimeId` and
//! `mounts`), and the operations that method may run ([`method_ops`]). It is
//! deterministic: the same call always gets the same bytes. A call without a
//! scope (`preflight`) has `runtimeId` null and no mounts.
//!
//! Everything after it is policy: each argument has a kind ([`Arg`]) that the
//! host checks before any ssh process starts and the script checks again
//! before it acts.

use crate::layout::{Layout, Mount};

/// The envelope's format; a script refuses any other.
pub const VERSION: u32 = 1;

/// The preflight script's one operation.
pub const PREFLIGHT: &str = "preflight";
/// The exec script's operations: its two modes.
pub const EXEC: &str = "exec";
pub const SHELL: &str = "shell";

const DESCRIBE: &str = "describe";
const STAGE: &str = "stage";
const UNPACK: &str = "unpack";
const PUBLISH: &str = "publish";
const DISCARD: &str = "discard";
const REMOVE_RUNTIME: &str = "remove-runtime";
/// OpenClaw's refresh of a scope's materialized skills: the host streams them
/// into `<workspace>/.openclaw/sandbox-skills` (see the admission).
pub const SKILLS: &str = "skills";
/// Which of OpenClaw's staged-input directories (a turn's inbound files,
/// `media/inbound/openclaw-staged-<id>`) the remote workspace lacks.
pub const INPUTS_ABSENT: &str = "inputs-absent";
/// The staged-input directories the host streams from the scope's local
/// `media/inbound`, each put in place whole unless the remote has it (see
/// the admission).
pub const INPUTS: &str = "inputs";
const READ: &str = "read";
const WRITE: &str = "write";
const CREATE: &str = "create";
const MKDIRP: &str = "mkdirp";
const REMOVE: &str = "remove";
const RENAME: &str = "rename";
const STAT: &str = "stat";
const READDIR: &str = "readdir";
const WORKDIR: &str = "workdir";

/// The kind of one script argument after the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A mount of the envelope (`workspace`, `agent`); writable when the
    /// operation changes something.
    Mount,
    /// A path below the mount before it: `/`-separated names, none empty,
    /// `.` or `..`; empty for the mount root. The script walks it on
    /// descriptors.
    Path,
    /// A stage of the envelope's runtime: `<runtime id>.bootstrap-<32 hex>`.
    Stage,
    /// `0` or `1`.
    Flag,
    /// Decimal digits.
    Count,
    /// Names of staged-input directories ([`is_staged_input`]), separated
    /// by `,`; at most [`MAX_STAGED_NAMES`].
    Staged,
}

impl Arg {
    /// The text of a [`Arg::Flag`]: `1` or `0`.
    pub fn flag_text(on: bool) -> &'static str {
        if on { "1" } else { "0" }
    }

    /// The value of a [`Arg::Flag`]'s text, if it is one.
    pub fn read_flag(text: &str) -> Option<bool> {
        match text {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }
    }
}

/// One argument of a workspace operation, as the component means it. What
/// the script reads is written from it here, once ([`ArgValue::text`]), and
/// its kind is checked against the operation's row of [`WORKSPACE_OPS`] when
/// the request is made ([`WorkspaceRequest::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgValue<'a> {
    /// A mount's name (`workspace`, `agent`).
    Mount(&'a str),
    /// A path below the mount before it.
    Path(&'a str),
    /// A stage of the runtime.
    Stage(&'a str),
    /// A yes or no.
    Flag(bool),
    /// A count.
    Count(u64),
    /// Staged-input directory names, already joined by `,`.
    Staged(&'a str),
}

impl ArgValue<'_> {
    /// Its kind.
    pub fn kind(&self) -> Arg {
        match self {
            ArgValue::Mount(_) => Arg::Mount,
            ArgValue::Path(_) => Arg::Path,
            ArgValue::Stage(_) => Arg::Stage,
            ArgValue::Flag(_) => Arg::Flag,
            ArgValue::Count(_) => Arg::Count,
            ArgValue::Staged(_) => Arg::Staged,
        }
    }

    /// The text the script reads.
    pub fn text(&self) -> String {
        match *self {
            ArgValue::Mount(t) | ArgValue::Path(t) | ArgValue::Stage(t) | ArgValue::Staged(t) => {
                t.to_owned()
            }
            ArgValue::Flag(on) => Arg::flag_text(on).to_owned(),
            ArgValue::Count(n) => n.to_string(),
        }
    }
}

/// A workspace operation with its arguments, each of the kind the table
/// gives it: the words after the host's envelope, as the component asks for
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRequest {
    /// The operation's row of [`WORKSPACE_OPS`].
    pub op: &'static WorkspaceOp,
    /// The operation's name, then each argument's text.
    pub words: Vec<String>,
}

impl WorkspaceRequest {
    /// `op` with `args`; refused, naming what differs, where the table has
    /// no such operation or other kinds of arguments.
    pub fn new(op: &str, args: &[ArgValue<'_>]) -> Result<WorkspaceRequest, String> {
        let row = workspace_op(op).ok_or_else(|| format!("no workspace operation {op}"))?;
        let kinds: Vec<Arg> = args.iter().map(ArgValue::kind).collect();
        if kinds != row.args {
            return Err(format!("{op} takes {:?}, not {kinds:?}", row.args));
        }
        let mut words = vec![row.name.to_owned()];
        words.extend(args.iter().map(ArgValue::text));
        Ok(WorkspaceRequest { op: row, words })
    }
}

/// Where OpenClaw stages a turn's inbound files, below the workspace.
pub const STAGED_INPUTS_DIR: &str = "media/inbound";

/// How many staged-input names one `inputs-absent` asks about.
pub const MAX_STAGED_NAMES: usize = 256;

/// Whether `name` is one of OpenClaw's staged-input directories:
/// `openclaw-staged-` and a random UUID or 64 lowercase hex digits.
pub fn is_staged_input(name: &str) -> bool {
    let Some(id) = name.strip_prefix("openclaw-staged-") else {
        return false;
    };
    let hex = crate::digest::is_lower_hex;
    if id.len() == 64 {
        return hex(id);
    }
    let parts: Vec<&str> = id.split('-').collect();
    matches!(parts.as_slice(), [a, b, c, d, e]
        if a.len() == 8 && b.len() == 4 && c.len() == 4 && d.len() == 4 && e.len() == 12
            && parts.iter().all(|p| hex(p))
            && c.starts_with('4')
            && d.starts_with(['8', '9', 'a', 'b']))
}

/// Whether `value` is an [`Arg::Staged`] list.
pub fn is_staged_list(value: &str) -> bool {
    let names: Vec<&str> = value.split(',').collect();
    names.len() <= MAX_STAGED_NAMES && names.iter().all(|n| is_staged_input(n))
}

/// One operation of the workspace script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceOp {
    pub name: &'static str,
    /// The arguments after the operation's name.
    pub args: &'static [Arg],
    /// Whether it changes a mount: then each of its mounts must be writable.
    pub mutating: bool,
}

use Arg::{Count, Flag, Mount as M, Path as P, Stage as S, Staged};

/// The workspace script's operations. `workspace.py` has the same table; a
/// test reads both.
pub const WORKSPACE_OPS: &[WorkspaceOp] = &[
    op(DESCRIBE, &[], false),
    op(STAGE, &[S], false),
    op(UNPACK, &[S, M], false),
    op(PUBLISH, &[S], false),
    op(DISCARD, &[S], false),
    op(REMOVE_RUNTIME, &[], false),
    op(SKILLS, &[], false),
    op(INPUTS_ABSENT, &[Staged], false),
    op(INPUTS, &[], false),
    op(READ, &[M, P, Count], false),
    op(WRITE, &[M, P, Flag], true),
    op(CREATE, &[M, P, Flag], true),
    op(MKDIRP, &[M, P], true),
    op(REMOVE, &[M, P, Flag, Flag], true),
    op(RENAME, &[M, P, M, P], true),
    op(STAT, &[M, P], false),
    op(READDIR, &[M, P], false),
    op(WORKDIR, &[M, P], false),
];

const fn op(name: &'static str, args: &'static [Arg], mutating: bool) -> WorkspaceOp {
    WorkspaceOp {
        name,
        args,
        mutating,
    }
}

/// The exec script's arguments after its mode: the mount and path the
/// command runs in, its time limit in milliseconds, and the length of the
/// header that starts its stdin.
pub const EXEC_ARGS: &[Arg] = &[M, P, Count, Count];

/// The workspace operation called `name`.
pub fn workspace_op(name: &str) -> Option<&'static WorkspaceOp> {
    WORKSPACE_OPS.iter().find(|o| o.name == name)
}

/// The script an operation belongs to.
pub fn script_of(op: &str) -> Option<&'static str> {
    match op {
        PREFLIGHT => Some("preflight"),
        EXEC | SHELL => Some("exec"),
        _ => workspace_op(op).map(|_| "workspace"),
    }
}

/// Seeding a missing workspace on first use: `describe`, then staging,
/// unpacking and publishing it (or discarding the stage).
const SEEDING: [&str; 5] = [DESCRIBE, STAGE, UNPACK, PUBLISH, DISCARD];

/// What runs before a command, a shell script, a working directory's
/// validation and each operation of the filesystem bridge: seeding, then the
/// skills and staged-inputs refresh.
const PREPARED: [&str; SEEDING.len() + 3] = then(&SEEDING, &[SKILLS, INPUTS_ABSENT, INPUTS]);

/// `first` then `rest`, as one row of [`METHOD_OPS`]; `N` must be their
/// length together (checked when the table is built).
const fn then<const N: usize>(first: &[&'static str], rest: &[&'static str]) -> [&'static str; N] {
    assert!(
        first.len() + rest.len() == N,
        "a row's length is its parts' together"
    );
    let mut row = [""; N];
    let mut i = 0;
    while i < first.len() {
        row[i] = first[i];
        i += 1;
    }
    let mut j = 0;
    while j < rest.len() {
        row[i + j] = rest[j];
        j += 1;
    }
    row
}

/// A row of [`METHOD_OPS`]: [`PREPARED`], then the method's own operations.
macro_rules! prepared {
    ($($op:expr),+ $(,)?) => {{
        const ROW: [&str; PREPARED.len() + [$($op),+].len()] = then(&PREPARED, &[$($op),+]);
        &ROW
    }};
}

/// Which operations each method may run, by the method's name. Seeding
/// (`describe`, then `stage`, `unpack`, `publish` and `discard`) belongs to
/// the methods that seed a missing workspace on first use; `remove-runtime`
/// to the two that delete it; the exec script to the two that run a command,
/// each in its own mode; a read gets no operation that changes a mount. The
/// skills refresh belongs where OpenClaw's SSH backend refreshes: before a
/// command, a shell script, a working directory's validation and each
/// operation of its filesystem bridge (which runs through its shell scripts).
pub const METHOD_OPS: &[(&str, &[&str])] = &[
    ("validateConfiguration", &[]),
    ("preflight", &[PREFLIGHT]),
    ("describeRuntime", &[DESCRIBE]),
    ("ensureRuntime", &SEEDING),
    ("removeRuntime", &[REMOVE_RUNTIME]),
    ("recreateRuntime", {
        const ROW: [&str; 1 + SEEDING.len()] = then(&[REMOVE_RUNTIME], &SEEDING);
        &ROW
    }),
    ("validateWorkdir", prepared![WORKDIR]),
    ("exec", prepared![EXEC]),
    ("runShellCommand", prepared![SHELL]),
    // Resolving a path is lexical: nothing runs.
    ("resolvePath", &[]),
    // Where the scope's workspace is: the host answers from its layout,
    // without the component and without the target.
    ("resolveWorkdir", &[]),
    ("readFile", prepared![READ]),
    ("readMedia", prepared![READ]),
    ("writeFile", prepared![STAT, WRITE]),
    ("createFileExclusive", prepared![STAT, CREATE]),
    ("mkdirp", prepared![STAT, MKDIRP]),
    ("remove", prepared![STAT, REMOVE]),
    ("rename", prepared![STAT, RENAME]),
    ("stat", prepared![STAT]),
    ("readDirectory", prepared![READDIR]),
    // A change asks `stat` whether a protected skills directory it would
    // touch exists (OpenClaw's read-only skills mounts).
    // An edit reads the file and writes it whole.
    ("edit", prepared![STAT, READ, WRITE]),
    // A patch is planned against the files, then applied.
    ("applyPatch", prepared![STAT, READ, CREATE, WRITE, REMOVE]),
];

/// The operations `method` may run; `None` for a name that is no method.
pub fn method_ops(method: &str) -> Option<&'static [&'static str]> {
    METHOD_OPS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, ops)| *ops)
}

/// One mount as the envelope carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeMount {
    pub mount: Mount,
    pub writable: bool,
}

/// The envelope of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub method: String,
    pub ops: Vec<&'static str>,
    pub workspace_root: String,
    pub runtime_id: Option<String>,
    pub mounts: Vec<EnvelopeMount>,
}

impl Envelope {
    /// The envelope of a `method` call: `workspace_root` from the
    /// installation, the scope's runtime and mounts from `layout` (none for a
    /// call without a scope). `None` for a name that is no method.
    pub fn new(method: &str, workspace_root: &str, layout: Option<&Layout>) -> Option<Envelope> {
        Some(Envelope {
            method: method.to_string(),
            ops: method_ops(method)?.to_vec(),
            workspace_root: workspace_root.to_string(),
            runtime_id: layout.map(|l| l.runtime_id.clone()),
            mounts: layout
                .map(|l| {
                    l.mounts
                        .iter()
                        .map(|m| EnvelopeMount {
                            mount: m.mount,
                            writable: m.writable,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The mount called `name`, if the envelope has it.
    pub fn mount(&self, name: &str) -> Option<EnvelopeMount> {
        self.mounts.iter().copied().find(|m| m.mount.name() == name)
    }

    /// Whether the envelope lets `op` run.
    pub fn allows(&self, op: &str) -> bool {
        self.ops.contains(&op)
    }

    /// The compact JSON the scripts read, keys in a fixed order.
    pub fn to_json(&self) -> String {
        let text = |s: &str| serde_json::Value::from(s).to_string();
        let ops: Vec<String> = self.ops.iter().map(|o| text(o)).collect();
        let mounts: Vec<String> = self
            .mounts
            .iter()
            .map(|m| {
                format!(
                    "{{\"name\":{},\"writable\":{}}}",
                    text(m.mount.name()),
                    m.writable
                )
            })
            .collect();
        format!(
            "{{\"version\":{VERSION},\"method\":{},\"ops\":[{}],\"workspaceRoot\":{},\"runtimeId\":{},\"mounts\":[{}]}}",
            text(&self.method),
            ops.join(","),
            text(&self.workspace_root),
            self.runtime_id.as_deref().map_or("null".to_string(), text),
            mounts.join(",")
        )
    }
}

/// Whether `text` is a nonce as the exec header carries it: 32 lowercase
/// hex digits, so that no command output can be mistaken for the marker.
pub fn is_nonce(text: &str) -> bool {
    text.len() == 32
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Access, ScopeRef, Settings};
    use crate::scope::Scope;

    #[test]
    fn rows_are_seeding_and_the_refresh_then_the_methods_own() {
        let prepared = [
            DESCRIBE,
            STAGE,
            UNPACK,
            PUBLISH,
            DISCARD,
            SKILLS,
            INPUTS_ABSENT,
            INPUTS,
        ];
        let row = |m| method_ops(m).unwrap().to_vec();
        assert_eq!(row("exec"), [&prepared[..], &[EXEC]].concat());
        assert_eq!(
            row("applyPatch"),
            [&prepared[..], &[STAT, READ, CREATE, WRITE, REMOVE]].concat()
        );
        assert_eq!(row("ensureRuntime"), prepared[..5]);
        assert_eq!(
            row("recreateRuntime"),
            [&[REMOVE_RUNTIME], &prepared[..5]].concat()
        );
        assert_eq!(row("resolvePath"), Vec::<&str>::new());
    }

    #[test]
    fn every_operation_of_a_method_is_a_script_operation() {
        for (method, ops) in METHOD_OPS {
            for op in *ops {
                assert!(script_of(op).is_some(), "{method}: {op}");
            }
        }
        // A read never changes a mount, and only the remove methods delete a runtime.
        for (method, ops) in METHOD_OPS {
            let mutates = ops
                .iter()
                .any(|o| workspace_op(o).is_some_and(|w| w.mutating));
            let reads = [
                "describeRuntime",
                "validateWorkdir",
                "resolvePath",
                "readFile",
                "readMedia",
                "stat",
                "readDirectory",
            ];
            if reads.contains(method) {
                assert!(!mutates, "{method}");
            }
            assert_eq!(
                ops.contains(&REMOVE_RUNTIME),
                ["removeRuntime", "recreateRuntime"].contains(method),
                "{method}"
            );
            assert_eq!(ops.contains(&PREFLIGHT), *method == "preflight", "{method}");
            assert_eq!(
                ops.iter().any(|o| script_of(o) == Some("exec")),
                ["exec", "runShellCommand"].contains(method),
                "{method}"
            );
        }
    }

    #[test]
    fn the_envelope_is_compact_and_deterministic() {
        let layout = Layout::new(
            &Settings {
                workspace_root: "/r".into(),
                scope: Scope::Shared,
                access: Access::ReadOnly,
            },
            &ScopeRef {
                workspace_dir: "/w",
                agent_workspace_dir: Some("/a"),
                ..ScopeRef::default()
            },
        )
        .unwrap();
        let e = Envelope::new("stat", "/r", Some(&layout)).unwrap();
        assert_eq!(
            e.to_json(),
            "{\"version\":1,\"method\":\"stat\",\"ops\":[\"describe\",\"stage\",\"unpack\",\"publish\",\"discard\",\"skills\",\"inputs-absent\",\"inputs\",\"stat\"],\
             \"workspaceRoot\":\"/r\",\"runtimeId\":\"openclaw-ssh-shared-8198076c\",\
             \"mounts\":[{\"name\":\"workspace\",\"writable\":false},{\"name\":\"agent\",\"writable\":false}]}"
        );
        assert_eq!(e.to_json(), e.clone().to_json());
        let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(v["runtimeId"], "openclaw-ssh-shared-8198076c");
        let p = Envelope::new("preflight", "/r \"x\"", None).unwrap();
        assert_eq!(
            p.to_json(),
            "{\"version\":1,\"method\":\"preflight\",\"ops\":[\"preflight\"],\"workspaceRoot\":\"/r \\\"x\\\"\",\"runtimeId\":null,\"mounts\":[]}"
        );
        assert!(Envelope::new("ensureNamespace", "/r", None).is_none());
        assert!(e.allows("stat") && !e.allows("write"));
        assert_eq!(e.mount("agent").map(|m| m.writable), Some(false));
        assert_eq!(e.mount("other"), None);
    }

    #[test]
    fn nonces() {
        assert!(is_nonce(&"0a".repeat(16)));
        for bad in ["", "nonce", &"0A".repeat(16), &"0a".repeat(17)] {
            assert!(!is_nonce(bad), "{bad}");
        }
    }

    #[test]
    fn a_request_is_the_tables_operation_with_arguments_of_its_kinds() {
        use ArgValue as V;
        let write = WorkspaceRequest::new(
            "write",
            &[V::Mount("workspace"), V::Path("notes/a.txt"), V::Flag(true)],
        )
        .unwrap();
        assert_eq!(write.op.name, "write");
        assert_eq!(write.words, ["write", "workspace", "notes/a.txt", "1"]);
        let remove = WorkspaceRequest::new(
            "remove",
            &[
                V::Mount("agent"),
                V::Path(""),
                V::Flag(false),
                V::Flag(true),
            ],
        )
        .unwrap();
        assert_eq!(remove.words, ["remove", "agent", "", "0", "1"]);
        let read = WorkspaceRequest::new(
            "read",
            &[V::Mount("workspace"), V::Path("a"), V::Count(4096)],
        );
        assert_eq!(read.unwrap().words, ["read", "workspace", "a", "4096"]);
        // Each flag's text reads back as the flag; nothing else does.
        for on in [true, false] {
            assert_eq!(Arg::read_flag(Arg::flag_text(on)), Some(on));
        }
        for bad in ["", "2", "true", "01"] {
            assert_eq!(Arg::read_flag(bad), None, "{bad}");
        }
        // An operation the table lacks, or arguments of other kinds or count.
        assert!(WorkspaceRequest::new("chmod", &[]).is_err());
        let wrong =
            WorkspaceRequest::new("write", &[V::Mount("workspace"), V::Path("a"), V::Count(1)]);
        assert!(wrong.unwrap_err().contains("write takes"));
        assert!(WorkspaceRequest::new("stat", &[V::Mount("workspace")]).is_err());
    }
}
