//! The WIT `local-workspace` host functions: the root re-admitted right before
//! it is read, the walk on a blocking thread, the archive streamed into the
//! approved script through the call's `ssh-exec` state.

use std::time::Duration;

use serde_json::json;

use super::LocalWorkspaceState;
use super::bindings::occ::compute::local_workspace as wit;
use super::bindings::v0_3::occ::compute0_3_0::local_workspace as wit_0_3;
use super::tree::{self, Summary, WalkError};
use crate::capability::ssh_exec::bindings::occ::compute::ssh_exec as exec_wit;

/// The archive's writes to the pipe: at most this much at once.
const STREAM_BUFFER: usize = 256 << 10;

fn summary_to_wit(s: Summary) -> wit::WorkspaceSummary {
    wit::WorkspaceSummary {
        files: s.files,
        directories: s.directories,
        symlinks: s.symlinks,
        bytes: s.bytes,
    }
}

impl LocalWorkspaceState {
    /// The canonical directory of `root` for this call, or why it is not
    /// granted; `None` for a root that counts as an empty tree (a skills
    /// workspace not materialized yet, no staged inputs).
    fn admit(
        &self,
        root: wit::WorkspaceRoot,
    ) -> Result<Option<std::path::PathBuf>, wit::UploadError> {
        let (name, named) = match root {
            wit::WorkspaceRoot::Workspace | wit::WorkspaceRoot::Inputs => {
                ("workspace", &self.roots.workspace)
            }
            wit::WorkspaceRoot::Agent => ("agent workspace", &self.roots.agent),
            wit::WorkspaceRoot::Skills => ("skills workspace", &self.roots.skills),
        };
        let path = named.as_ref().ok_or_else(|| {
            wit::UploadError::NotGranted(format!("the caller named no {name} for this call"))
        })?;
        // OpenClaw materializes a scope's skills only when it has some.
        if root == wit::WorkspaceRoot::Skills && self.grant.covers_missing(path) {
            return Ok(None);
        }
        let dir = self
            .grant
            .admit(path)
            .map_err(|e| wit::UploadError::NotGranted(e.to_string()))?;
        if root != wit::WorkspaceRoot::Inputs {
            return Ok(Some(dir));
        }
        inputs_of(&dir).map_err(wit::UploadError::Local)
    }

    fn refused(&self, root: wit::WorkspaceRoot, message: &str) -> Result<(), wit::UploadError> {
        self.scope
            .refused(format!("local-workspace {}: {message}", root_name(root)));
        self.scope
            .audit
            .event(
                "refused",
                json!({"capability": "local-workspace", "root": root_name(root), "message": message}),
            )
            .map_err(|e| wit::UploadError::Local(e.to_string()))
    }

    /// [`Self::admit`], with a refusal recorded in the audit log.
    fn admitted(
        &self,
        root: wit::WorkspaceRoot,
    ) -> Result<Option<std::path::PathBuf>, wit::UploadError> {
        self.admit(root).or_else(|e| {
            if let wit::UploadError::NotGranted(m) | wit::UploadError::Local(m) = &e {
                self.refused(root, m)?;
            }
            Err(e)
        })
    }

    /// [`Self::admitted`], for a root that must exist to be sent: an empty
    /// tree is no tree at all.
    fn admitted_to_send(
        &self,
        root: wit::WorkspaceRoot,
    ) -> Result<std::path::PathBuf, wit::UploadError> {
        match self.admitted(root)? {
            Some(dir) => Ok(dir),
            None => {
                let m = "there is nothing to upload: the root does not exist".to_string();
                self.refused(root, &m)?;
                Err(wit::UploadError::Local(m))
            }
        }
    }

    /// Stream `dir`, the admitted `root` (only its top-level entries `only`,
    /// when named), into `argv` on `host`; `program` names the shipped
    /// script the host built `argv` from (WIT 0.3.0), if it did.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &mut self,
        root: wit::WorkspaceRoot,
        dir: std::path::PathBuf,
        only: Option<Vec<String>>,
        host: String,
        argv: Vec<String>,
        program: Option<&str>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        let (reader, writer) =
            std::io::pipe().map_err(|e| wit::UploadError::Local(format!("pipe: {e}")))?;
        let bounds = self.grant.bounds;
        let walking = dir.clone();
        let walker = tokio::task::spawn_blocking(move || {
            // A member's header, data and padding leave in one write with
            // the next members', not three writes of their own (20,000
            // small files were 60,000 writes to the pipe, each woken for).
            let mut out = std::io::BufWriter::with_capacity(STREAM_BUFFER, writer);
            let result = tree::write_tar_of(&walking, only.as_deref(), bounds, &mut out);
            // The pipe closes with it: the archive's end.
            drop(out);
            result
        });
        let stream = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())
            .map_err(|e| wit::UploadError::Local(format!("pipe: {e}")))?;
        let sent = self
            .exec
            .exec_streamed(
                &host,
                &argv,
                program,
                root_name(root),
                Box::pin(stream),
                Duration::from_millis(timeout_ms.into()),
            )
            .await;
        // The exec is over, and with it the read end: a walker still writing
        // gets a broken pipe and ends.
        let walked = walker
            .await
            .map_err(|e| wit::UploadError::Local(format!("the walk failed: {e}")))?;
        match (walked, sent) {
            // A tree that cannot be sent is the reason, whatever the remote
            // side made of the stream cut short.
            (Err(WalkError::Refused(m)), _) => {
                self.refused(root, &m)?;
                Err(wit::UploadError::Local(m))
            }
            (_, Err(e)) => Err(wit::UploadError::Exec(e.into())),
            (_, Ok(out)) => {
                self.scope
                    .audit
                    .event(
                        "upload",
                        json!({"capability": "local-workspace", "root": dir, "host": host, "exitStatus": out.exit_status}),
                    )
                    .map_err(|e| wit::UploadError::Local(e.to_string()))?;
                Ok(out.into())
            }
        }
    }
}

/// The name of `root` as the WIT spells it, which the world's admission reads.
fn root_name(root: wit::WorkspaceRoot) -> &'static str {
    match root {
        wit::WorkspaceRoot::Workspace => "workspace",
        wit::WorkspaceRoot::Agent => "agent",
        wit::WorkspaceRoot::Skills => "skills",
        wit::WorkspaceRoot::Inputs => "inputs",
    }
}

/// Where OpenClaw stages a turn's inbound files, below the scope's workspace.
const INPUTS_DIR: [&str; 2] = ["media", "inbound"];

/// The staged inputs of the canonical workspace `workspace`: its
/// `media/inbound` when that is a directory reached without a link, `None`
/// while either level does not exist. A link or another kind of file there
/// is refused: nothing is read through it.
fn inputs_of(workspace: &std::path::Path) -> Result<Option<std::path::PathBuf>, String> {
    let mut dir = workspace.to_path_buf();
    for name in INPUTS_DIR {
        dir.push(name);
        match dir.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is not a directory (a link is never followed): staged inputs are read from a directory inside the workspace",
                    dir.display()
                ));
            }
        }
    }
    Ok(Some(dir))
}

impl wit::Host for LocalWorkspaceState {
    async fn summary(
        &mut self,
        root: wit::WorkspaceRoot,
    ) -> Result<wit::WorkspaceSummary, wit::UploadError> {
        let dir = match self.admitted(root)? {
            Some(d) => d,
            None => return Ok(summary_to_wit(Summary::default())),
        };
        let bounds = self.grant.bounds;
        let started = std::time::Instant::now();
        let walked = tokio::task::spawn_blocking(move || tree::summarize(&dir, bounds))
            .await
            .map_err(|e| wit::UploadError::Local(format!("the walk failed: {e}")))?;
        tracing::debug!(
            root = root_name(root),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "summary"
        );
        match walked {
            Ok(s) => Ok(summary_to_wit(s)),
            Err(WalkError::Refused(m)) => {
                self.refused(root, &m)?;
                Err(wit::UploadError::Local(m))
            }
            Err(WalkError::Write(e)) => Err(wit::UploadError::Local(e.to_string())),
        }
    }

    async fn upload(
        &mut self,
        root: wit::WorkspaceRoot,
        host: String,
        argv: Vec<String>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        let dir = self.admitted_to_send(root)?;
        self.send(root, dir, None, host, argv, None, timeout_ms)
            .await
    }

    async fn entries(&mut self, root: wit::WorkspaceRoot) -> Result<Vec<String>, wit::UploadError> {
        match self.admitted(root)? {
            Some(dir) => list(root, dir).await,
            None => Ok(Vec::new()),
        }
    }

    async fn upload_entries(
        &mut self,
        root: wit::WorkspaceRoot,
        names: Vec<String>,
        host: String,
        argv: Vec<String>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        self.send_entries(root, names, host, argv, None, timeout_ms)
            .await
    }
}

impl LocalWorkspaceState {
    /// 0.3.0: the argument vector of the shipped `program` an upload streams
    /// into, as an exec of it would run.
    fn script_argv(
        &self,
        host: &str,
        program: &str,
        args: Vec<String>,
    ) -> Result<Vec<String>, wit::UploadError> {
        self.exec
            .script_argv(host, program, args)
            .map_err(|e| wit::UploadError::Exec(e.into()))
    }

    /// `upload-entries`: the names checked against the root before anything
    /// connects, then [`Self::send`].
    async fn send_entries(
        &mut self,
        root: wit::WorkspaceRoot,
        names: Vec<String>,
        host: String,
        argv: Vec<String>,
        program: Option<&str>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        if let Some(bad) = names
            .iter()
            .find(|n| n.is_empty() || *n == "." || *n == ".." || n.contains(['/', '\0']))
        {
            let m = format!(
                "{} is not the name of an entry of the {} root",
                crate::runtime::escape_control(bad),
                root_name(root)
            );
            self.refused(root, &m)?;
            return Err(wit::UploadError::Local(m));
        }
        // Checked before anything connects; the walk checks again.
        let dir = self.admitted_to_send(root)?;
        let held = list(root, dir.clone()).await?;
        if let Some(missing) = names.iter().find(|n| held.binary_search(n).is_err()) {
            let m = format!(
                "the {} root holds no entry {}",
                root_name(root),
                crate::runtime::escape_control(missing)
            );
            self.refused(root, &m)?;
            return Err(wit::UploadError::Local(m));
        }
        self.send(root, dir, Some(names), host, argv, program, timeout_ms)
            .await
    }
}

/// 0.3.0: an upload names the approved script it streams into; the rest is
/// 0.2.0's.
impl wit_0_3::Host for LocalWorkspaceState {
    async fn summary(
        &mut self,
        root: wit::WorkspaceRoot,
    ) -> Result<wit::WorkspaceSummary, wit::UploadError> {
        wit::Host::summary(self, root).await
    }

    async fn upload(
        &mut self,
        root: wit::WorkspaceRoot,
        host: String,
        program: String,
        args: Vec<String>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        let argv = self.script_argv(&host, &program, args)?;
        let dir = self.admitted_to_send(root)?;
        self.send(root, dir, None, host, argv, Some(&program), timeout_ms)
            .await
    }

    async fn entries(&mut self, root: wit::WorkspaceRoot) -> Result<Vec<String>, wit::UploadError> {
        wit::Host::entries(self, root).await
    }

    async fn upload_entries(
        &mut self,
        root: wit::WorkspaceRoot,
        names: Vec<String>,
        host: String,
        program: String,
        args: Vec<String>,
        timeout_ms: u32,
    ) -> Result<exec_wit::ExecOutput, wit::UploadError> {
        let argv = self.script_argv(&host, &program, args)?;
        self.send_entries(root, names, host, argv, Some(&program), timeout_ms)
            .await
    }
}

/// The names of the top-level entries of `dir`, the admitted `root`, sorted.
/// A name that is not UTF-8 cannot be named back in `upload-entries`; it is
/// left out.
async fn list(
    root: wit::WorkspaceRoot,
    dir: std::path::PathBuf,
) -> Result<Vec<String>, wit::UploadError> {
    let listed = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    })
    .await
    .map_err(|e| wit::UploadError::Local(format!("the listing failed: {e}")))?;
    listed.map_err(|e| wit::UploadError::Local(format!("listing {}: {e}", root_name(root))))
}

#[cfg(test)]
mod tests {
    use super::inputs_of;

    #[test]
    fn staged_inputs_are_read_from_a_directory_inside_the_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // No media/ or no inbound/: nothing staged.
        assert_eq!(inputs_of(&ws), Ok(None));
        std::fs::create_dir(ws.join("media")).unwrap();
        assert_eq!(inputs_of(&ws), Ok(None));
        std::fs::create_dir(ws.join("media/inbound")).unwrap();
        assert_eq!(inputs_of(&ws), Ok(Some(ws.join("media/inbound"))));
        // A link at either level is refused, naming it, whatever it points to.
        let elsewhere = dir.path().join("elsewhere/inbound");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::remove_dir(ws.join("media/inbound")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join("media/inbound")).unwrap();
        let err = inputs_of(&ws).unwrap_err();
        assert!(
            err.contains("media/inbound is not a directory (a link is never followed)"),
            "{err}"
        );
        std::fs::remove_file(ws.join("media/inbound")).unwrap();
        std::fs::remove_dir(ws.join("media")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join("media")).unwrap();
        let err = inputs_of(&ws).unwrap_err();
        assert!(err.contains("/ws/media is not a directory"), "{err}");
        std::fs::remove_file(ws.join("media")).unwrap();
        std::fs::write(ws.join("media"), "a file").unwrap();
        assert!(inputs_of(&ws).is_err());
    }
}
