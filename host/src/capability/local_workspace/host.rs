//! The WIT `local-workspace` host functions: the root re-admitted right before
//! it is read, the walk on a blocking thread, the archive streamed into the
//! approved script through the call's `ssh-exec` state.

use std::time::Duration;

use serde_json::json;

use super::LocalWorkspaceState;
use super::bindings::occ::compute::local_workspace as wit;
use super::tree::{self, Summary, WalkError};
use crate::capability::ssh_exec::bindings::occ::compute::ssh_exec as exec_wit;

fn summary_to_wit(s: Summary) -> wit::WorkspaceSummary {
    wit::WorkspaceSummary {
        files: s.files,
        directories: s.directories,
        symlinks: s.symlinks,
        bytes: s.bytes,
    }
}

impl LocalWorkspaceState {
    /// The canonical directory of `root` for this call, or why it is not granted.
    fn admit(&self, root: wit::WorkspaceRoot) -> Result<std::path::PathBuf, wit::UploadError> {
        let (name, named) = match root {
            wit::WorkspaceRoot::Workspace => ("workspace", &self.roots.workspace),
            wit::WorkspaceRoot::Agent => ("agent workspace", &self.roots.agent),
            wit::WorkspaceRoot::Skills => ("skills workspace", &self.roots.skills),
        };
        let path = named.as_ref().ok_or_else(|| {
            wit::UploadError::NotGranted(format!("the caller named no {name} for this call"))
        })?;
        self.grant.admit(path).map_err(wit::UploadError::NotGranted)
    }

    fn refused(&self, root: wit::WorkspaceRoot, message: &str) -> Result<(), wit::UploadError> {
        self.scope
            .audit
            .event(
                "refused",
                json!({"capability": "local-workspace", "root": format!("{root:?}").to_lowercase(), "message": message}),
            )
            .map_err(|e| wit::UploadError::Local(e.to_string()))
    }
}

impl wit::Host for LocalWorkspaceState {
    async fn summary(
        &mut self,
        root: wit::WorkspaceRoot,
    ) -> Result<wit::WorkspaceSummary, wit::UploadError> {
        // OpenClaw materializes a scope's skills only when it has some: a
        // skills workspace that does not exist yet is an empty tree.
        if let (wit::WorkspaceRoot::Skills, Some(path)) = (root, &self.roots.skills)
            && self.grant.covers_missing(path)
        {
            return Ok(wit::WorkspaceSummary {
                files: 0,
                directories: 0,
                symlinks: 0,
                bytes: 0,
            });
        }
        let dir = match self.admit(root) {
            Ok(d) => d,
            Err(e) => {
                if let wit::UploadError::NotGranted(m) = &e {
                    self.refused(root, m)?;
                }
                return Err(e);
            }
        };
        let bounds = self.grant.bounds;
        let walked = tokio::task::spawn_blocking(move || tree::summarize(&dir, bounds))
            .await
            .map_err(|e| wit::UploadError::Local(format!("the walk failed: {e}")))?;
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
        let dir = match self.admit(root) {
            Ok(d) => d,
            Err(e) => {
                if let wit::UploadError::NotGranted(m) = &e {
                    self.refused(root, m)?;
                }
                return Err(e);
            }
        };
        let (reader, mut writer) =
            std::io::pipe().map_err(|e| wit::UploadError::Local(format!("pipe: {e}")))?;
        let bounds = self.grant.bounds;
        let walking = dir.clone();
        let walker = tokio::task::spawn_blocking(move || {
            let result = tree::write_tar(&walking, bounds, &mut writer);
            drop(writer);
            result
        });
        let stream = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())
            .map_err(|e| wit::UploadError::Local(format!("pipe: {e}")))?;
        let sent = self
            .exec
            .exec_streamed(
                &host,
                &argv,
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
