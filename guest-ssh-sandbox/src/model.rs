//! Plain values the policy works on: the WIT records without the bindings, so
//! that everything compiles and tests natively. The component layer maps them
//! one-to-one.

/// A non-fatal observation for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub code: String,
    pub message: String,
}

impl Warning {
    pub fn new(code: &str, message: impl Into<String>) -> Warning {
        Warning {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

/// The scope a call acts on (WIT `sandbox-scope`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxScope {
    pub scope_key: Option<String>,
    pub session_key: Option<String>,
    pub agent_id: Option<String>,
    pub workspace_dir: String,
    pub agent_workspace_dir: Option<String>,
    pub skills_workspace_dir: Option<String>,
}

/// What a finished remote script produced (WIT `ssh-exec.exec-output`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr_tail: Vec<u8>,
}

/// A local directory the host may stream (WIT `local-workspace.workspace-root`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    Workspace,
    Agent,
    Skills,
    /// The scope's staged inputs: `media/inbound` of its local workspace.
    Inputs,
}

/// What a local root holds (WIT `workspace-summary`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkspaceSummary {
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

/// Log levels (WIT `log.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
}

/// Where a scope's sandbox lives (WIT `runtime-info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeInfo {
    pub runtime_id: String,
    pub runtime_root: String,
    pub workdir: String,
    pub agent_workdir: Option<String>,
    pub config_label: String,
    pub running: bool,
}

/// How `ensure` found the remote workspace (WIT `seeding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeding {
    Existing,
    Seeded,
    Adopted,
}

/// WIT `ensured`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    pub runtime: RuntimeInfo,
    pub seeding: Seeding,
}

/// WIT `preflight-report`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightReport {
    pub target: String,
    pub python: String,
    pub warnings: Vec<Warning>,
}

/// WIT `exec-request`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    pub command: String,
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: Option<u32>,
}

/// WIT `exec-result`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout_tail: Vec<u8>,
    pub stderr_tail: Vec<u8>,
}

/// WIT `shell-request`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellRequest {
    pub script: String,
    pub args: Vec<String>,
    pub stdin: Option<Vec<u8>>,
    pub allow_failure: bool,
    pub timeout_ms: Option<u32>,
}

/// WIT `shell-result`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellResult {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// WIT `file-ref`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileRef {
    pub path: String,
    pub cwd: Option<String>,
}

impl FileRef {
    pub fn new(path: &str) -> FileRef {
        FileRef {
            path: path.to_string(),
            cwd: None,
        }
    }
}

/// WIT `mount`: the shared rules' mounts.
pub use occ_ssh_target::layout::Mount;

/// WIT `resolved-path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    pub mount: Mount,
    pub relative_path: String,
    pub container_path: String,
    pub host_path: Option<String>,
    pub writable: bool,
}

/// WIT `file-kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Directory,
    Other,
}

impl FileKind {
    pub fn parse(name: &str) -> FileKind {
        match name {
            "file" => FileKind::File,
            "directory" => FileKind::Directory,
            _ => FileKind::Other,
        }
    }
}

/// WIT `file-stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    pub size: u64,
    pub mtime_ms: u64,
    pub mode: u32,
}

/// WIT `dir-entry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: FileKind,
}

/// WIT `create-outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    Exists,
}

/// WIT `text-edit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextEdit {
    pub old_text: String,
    pub new_text: String,
    pub replace_all: bool,
}

/// WIT `edit-result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditResult {
    pub replacements: u32,
    pub path: String,
}

/// WIT `patch-result`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchResult {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

/// WIT `media`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    pub data: Vec<u8>,
    pub mime_type: Option<String>,
    pub container_path: String,
}
