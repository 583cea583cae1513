//! The sandbox world's JSON: a controller's params as WIT values, the
//! component's results in the shapes OpenClaw's handle and bridge return
//! (`stat` as `{type, size, mtimeMs}`, directory entries with `isDirectory`).
//! Bytes cross as base64 (`data`, `stdin`) or, for text, as `text` and
//! `stdinText`.

use std::path::{Component, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::bindings::exports::occ::compute::sandbox_backend as wit;
use super::installation::expand_home;
use super::method::Method;
use crate::capability::local_workspace::CallRoots;
use crate::error::CallError;

/// A method's params object.
pub(super) struct Params<'a> {
    method: Method,
    map: &'a Map<String, Value>,
}

impl<'a> Params<'a> {
    pub(super) fn new(method: Method, params: &'a Value) -> Result<Params<'a>, CallError> {
        let map = params.as_object().ok_or_else(|| {
            CallError::invalid_params(format!("{method}: params must be an object"))
        })?;
        Ok(Params { method, map })
    }

    fn bad(&self, key: &str, why: &str) -> CallError {
        CallError::invalid_params(format!("{}: params.{key}: {why}", self.method))
    }

    pub(super) fn opt_string(&self, key: &str) -> Result<Option<String>, CallError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(key, "must be a string")),
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<String, CallError> {
        self.opt_string(key)?
            .ok_or_else(|| self.bad(key, "required: a string"))
    }

    pub(super) fn flag(&self, key: &str, default: bool) -> Result<bool, CallError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.bad(key, "must be true or false")),
        }
    }

    pub(super) fn opt_u64(&self, key: &str) -> Result<Option<u64>, CallError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.bad(key, "must be a nonnegative integer")),
        }
    }

    pub(super) fn opt_u32(&self, key: &str) -> Result<Option<u32>, CallError> {
        self.opt_u64(key)?
            .map(|n| u32::try_from(n).map_err(|_| self.bad(key, "must be at most 4294967295")))
            .transpose()
    }

    /// Bytes given as base64 under `data_key` or as UTF-8 under `text_key`.
    pub(super) fn bytes(
        &self,
        data_key: &str,
        text_key: &str,
    ) -> Result<Option<Vec<u8>>, CallError> {
        match (self.opt_string(data_key)?, self.opt_string(text_key)?) {
            (Some(_), Some(_)) => Err(self.bad(
                data_key,
                &format!("give {data_key} (base64) or {text_key}, not both"),
            )),
            (Some(b64), None) => B64
                .decode(b64.as_bytes())
                .map(Some)
                .map_err(|e| self.bad(data_key, &format!("not base64: {e}"))),
            (None, Some(text)) => Ok(Some(text.into_bytes())),
            (None, None) => Ok(None),
        }
    }

    pub(super) fn strings(&self, key: &str) -> Result<Vec<String>, CallError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| self.bad(key, "must be a list of strings"))
                })
                .collect(),
            Some(_) => Err(self.bad(key, "must be a list of strings")),
        }
    }

    pub(super) fn env(&self, key: &str) -> Result<Vec<(String, String)>, CallError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| self.bad(key, "must map names to strings"))
                })
                .collect(),
            Some(_) => Err(self.bad(key, "must map names to strings")),
        }
    }

    /// `{filePath, cwd?}` (or the keys given).
    pub(super) fn file(&self, path_key: &str) -> Result<wit::FileRef, CallError> {
        Ok(wit::FileRef {
            path: self.string(path_key)?,
            cwd: self.opt_string("cwd")?,
        })
    }

    /// `edits: [{oldText, newText, replaceAll?}]`, or one edit as
    /// `oldText`/`newText`/`replaceAll` beside the path.
    pub(super) fn edits(&self) -> Result<Vec<wit::TextEdit>, CallError> {
        let one = |m: &Map<String, Value>, at: &str| -> Result<wit::TextEdit, CallError> {
            let text = |k: &str| {
                m.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| self.bad(&format!("{at}{k}"), "required: a string"))
            };
            Ok(wit::TextEdit {
                old_text: text("oldText")?,
                new_text: text("newText")?,
                replace_all: m
                    .get("replaceAll")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        };
        match self.map.get("edits") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    e.as_object()
                        .ok_or_else(|| self.bad(&format!("edits[{i}]"), "must be an object"))
                        .and_then(|m| one(m, &format!("edits[{i}].")))
                })
                .collect(),
            Some(_) => Err(self.bad("edits", "must be a list of {oldText, newText}")),
            None => Ok(vec![one(self.map, "")?]),
        }
    }

    /// The scope: as the component sees it (local paths made absolute, `~`
    /// expanded, as OpenClaw resolves them) and the local roots it names.
    pub(super) fn scope(&self) -> Result<(wit::SandboxScope, CallRoots), CallError> {
        let scope = match self.map.get("scope") {
            Some(Value::Object(m)) => m,
            Some(_) => return Err(self.bad("scope", "must be an object")),
            None => return Err(self.bad(
                "scope",
                "required: {workspaceDir, scopeKey?, sessionKey?, agentId?, agentWorkspaceDir?, skillsWorkspaceDir?}",
            )),
        };
        let text = |k: &str| -> Result<Option<String>, CallError> {
            match scope.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(self.bad(&format!("scope.{k}"), "must be a string")),
            }
        };
        if let Some(unknown) = scope.keys().find(|k| {
            ![
                "scopeKey",
                "sessionKey",
                "agentId",
                "workspaceDir",
                "agentWorkspaceDir",
                "skillsWorkspaceDir",
            ]
            .contains(&k.as_str())
        }) {
            return Err(self.bad(&format!("scope.{unknown}"), "unknown key"));
        }
        let workspace = text("workspaceDir")?.ok_or_else(|| {
            self.bad(
                "scope.workspaceDir",
                "required: the local workspace of the scope",
            )
        })?;
        let workspace = local_path(&workspace)
            .map_err(|why| self.bad("scope.workspaceDir", &why.to_string()))?;
        let agent = text("agentWorkspaceDir")?
            .map(|a| {
                local_path(&a).map_err(|why| self.bad("scope.agentWorkspaceDir", &why.to_string()))
            })
            .transpose()?;
        let skills = text("skillsWorkspaceDir")?
            .map(|a| {
                local_path(&a).map_err(|why| self.bad("scope.skillsWorkspaceDir", &why.to_string()))
            })
            .transpose()?;
        let roots = CallRoots {
            workspace: Some(workspace.clone()),
            agent: agent.clone(),
            skills: skills.clone(),
        };
        let shown = |p: PathBuf| p.to_string_lossy().into_owned();
        Ok((
            wit::SandboxScope {
                scope_key: text("scopeKey")?,
                session_key: text("sessionKey")?,
                agent_id: text("agentId")?,
                workspace_dir: shown(workspace),
                agent_workspace_dir: agent.map(shown),
                skills_workspace_dir: skills.map(shown),
            },
            roots,
        ))
    }
}

/// Why a scope's local directory cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub(super) enum LocalPathError {
    /// It is empty, or has a NUL in it.
    #[error("must be a nonempty path without NUL")]
    Empty,
    /// It is relative, and this process has no working directory.
    #[error("no working directory to resolve it against: {0}")]
    NoWorkingDirectory(std::io::Error),
}

/// A local directory as OpenClaw resolves a user path: `~` expanded, made
/// absolute against the working directory, `.` and `..` resolved lexically.
pub(super) fn local_path(raw: &str) -> Result<PathBuf, LocalPathError> {
    let raw = raw.trim();
    if raw.is_empty() || raw.contains('\0') {
        return Err(LocalPathError::Empty);
    }
    let expanded = PathBuf::from(expand_home(raw));
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        std::env::current_dir()
            .map_err(LocalPathError::NoWorkingDirectory)?
            .join(expanded)
    };
    let mut out = PathBuf::from("/");
    for part in absolute.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Ok(out)
}

fn b64(bytes: &[u8]) -> Value {
    Value::String(B64.encode(bytes))
}

pub(super) fn runtime_info(r: &wit::RuntimeInfo) -> Value {
    json!({
        "runtimeId": r.runtime_id,
        "runtimeRoot": r.runtime_root,
        "workdir": r.workdir,
        "agentWorkdir": r.agent_workdir,
        "configLabel": r.config_label,
        "configLabelKind": "Target",
        "running": r.running,
    })
}

pub(super) fn ensured(e: &wit::Ensured) -> Value {
    let mut v = runtime_info(&e.runtime);
    v["seeding"] = json!(match e.seeding {
        wit::Seeding::Existing => "existing",
        wit::Seeding::Seeded => "seeded",
        wit::Seeding::Adopted => "adopted",
    });
    v
}

fn kind(k: wit::FileKind) -> &'static str {
    match k {
        wit::FileKind::File => "file",
        wit::FileKind::Directory => "directory",
        wit::FileKind::Other => "other",
    }
}

pub(super) fn stat(s: &Option<wit::FileStat>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => {
            json!({"type": kind(s.kind), "size": s.size, "mtimeMs": s.mtime_ms, "mode": s.mode})
        }
    }
}

pub(super) fn entries(e: &[wit::DirEntry]) -> Value {
    Value::Array(
        e.iter()
            .map(|e| {
                json!({"name": e.name, "type": kind(e.kind), "isDirectory": e.kind == wit::FileKind::Directory, "isFile": e.kind == wit::FileKind::File})
            })
            .collect(),
    )
}

pub(super) fn resolved(r: &wit::ResolvedPath) -> Value {
    json!({
        "mount": match r.mount { wit::Mount::Workspace => "workspace", wit::Mount::Agent => "agent" },
        "relativePath": r.relative_path,
        "containerPath": r.container_path,
        "hostPath": r.host_path,
        "writable": r.writable,
    })
}

pub(super) fn exec_result(r: &wit::ExecResult) -> Value {
    json!({
        "exitCode": r.exit_code,
        "timedOut": r.timed_out,
        "stdoutTail": String::from_utf8_lossy(&r.stdout_tail),
        "stderrTail": String::from_utf8_lossy(&r.stderr_tail),
    })
}

pub(super) fn shell_result(r: &wit::ShellResult) -> Value {
    json!({"code": r.code, "stdout": b64(&r.stdout), "stderr": b64(&r.stderr)})
}

pub(super) fn data(bytes: &[u8]) -> Value {
    json!({"data": b64(bytes), "size": bytes.len()})
}

pub(super) fn media(m: &wit::Media) -> Value {
    json!({"data": b64(&m.data), "size": m.data.len(), "mimeType": m.mime_type, "containerPath": m.container_path})
}

pub(super) fn patch(r: &wit::PatchResult) -> Value {
    json!({"added": r.added, "modified": r.modified, "deleted": r.deleted})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_resolve_like_openclaw() {
        assert_eq!(local_path("/a/./b/../c/").unwrap(), PathBuf::from("/a/c"));
        assert_eq!(local_path("/../x").unwrap(), PathBuf::from("/x"));
        assert!(local_path("").is_err());
        assert!(local_path("a\0b").is_err());
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(local_path("rel").unwrap(), cwd.join("rel"));
    }

    #[test]
    fn params_name_the_key_at_fault() {
        let v = json!({"filePath": 3, "data": "%%", "scope": {"workspaceDir": "/w", "bogus": 1}});
        let p = Params::new(Method::WriteFile, &v).unwrap();
        assert_eq!(
            p.file("filePath").unwrap_err().message,
            "writeFile: params.filePath: must be a string"
        );
        assert!(
            p.bytes("data", "text")
                .unwrap_err()
                .message
                .starts_with("writeFile: params.data: not base64")
        );
        assert_eq!(
            p.scope().unwrap_err().message,
            "writeFile: params.scope.bogus: unknown key"
        );
        let v = json!({"edits": [{"oldText": "a"}]});
        let p = Params::new(Method::Edit, &v).unwrap();
        assert_eq!(
            p.edits().unwrap_err().message,
            "edit: params.edits[0].newText: required: a string"
        );
    }
}
