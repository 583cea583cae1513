//! From a path as a caller names it to a mount and a relative path, without
//! touching the target (OpenClaw's `resolvePath`): the shared rules of
//! [`occ_ssh_target::paths`], with OpenClaw's wording for a refusal and the
//! paths a caller is shown.
//!
//! Whatever lies outside every mount after lexical normalization, `..` past a
//! mount root included, is refused. What the target itself holds (symbolic
//! links, hard links) is the remote script's to judge, on descriptors, while
//! it acts: it follows a link that stays inside the mount on the way to a
//! file and refuses one that leads out.

use occ_ssh_target::paths::{self, PathError};

use crate::error::{Code, Error};
use crate::layout::{Layout, join};
use crate::model::{FileRef, ResolvedPath};

/// The refusal of `path` for `action` (OpenClaw's wording).
fn refusal(e: PathError, action: &str, path: &str) -> Error {
    match e {
        PathError::Empty => Error::new(
            Code::InvalidPath,
            format!("cannot {action}: the path is empty"),
        ),
        PathError::Nul => Error::new(
            Code::InvalidPath,
            format!("cannot {action}: the path holds NUL"),
        )
        .at(path),
        PathError::Escapes(at) => Error::escapes(action, &at),
    }
}

/// Where a resolved path is, as a caller sees it.
fn shown(layout: &Layout, r: paths::Resolved) -> ResolvedPath {
    let info = layout
        .mount(r.mount)
        .expect("resolved among the layout's mounts");
    ResolvedPath {
        mount: r.mount,
        container_path: join(&info.container_root, &r.relative_path),
        host_path: Some(join(&info.local_root, &r.relative_path)),
        writable: info.writable,
        relative_path: r.relative_path,
    }
}

/// Resolve `file` for `action` (OpenClaw's wording: "read files", "write
/// files", ...), which names it in a refusal.
pub fn resolve(layout: &Layout, file: &FileRef, action: &str) -> Result<ResolvedPath, Error> {
    paths::resolve(layout, &file.path, file.cwd.as_deref())
        .map(|r| shown(layout, r))
        .map_err(|e| refusal(e, action, &file.path))
}

/// Where a command of an `exec` call runs ([`paths::exec_workdir`], which the
/// host checks the exec script against).
pub fn exec_workdir(layout: &Layout, workdir: Option<&str>) -> Result<ResolvedPath, Error> {
    let path = workdir.filter(|w| !w.is_empty()).unwrap_or(".");
    paths::exec_workdir(layout, workdir)
        .map(|r| shown(layout, r))
        .map_err(|e| refusal(e, "run commands in", path))
}

/// Like [`resolve`], refusing a mount the configuration keeps read-only.
pub fn resolve_writable(
    layout: &Layout,
    file: &FileRef,
    action: &str,
) -> Result<ResolvedPath, Error> {
    let resolved = resolve(layout, file, action)?;
    if !resolved.writable {
        return Err(Error::read_only(action, &resolved.container_path));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::{Mount, SandboxScope};
    use serde_json::json;

    fn layout(access: &str) -> Layout {
        let config = Config::parse(
            &json!({"agents": {"defaults": {"sandbox": {
                "scope": "shared", "workspaceAccess": access,
                "ssh": {"target": "me@h", "workspaceRoot": "/r"}
            }}}})
            .to_string(),
        )
        .unwrap();
        Layout::new(
            &config,
            &SandboxScope {
                workspace_dir: "/home/me/sbx".into(),
                agent_workspace_dir: Some("/home/me/agent".into()),
                ..SandboxScope::default()
            },
        )
        .unwrap()
    }

    const WS: &str = "/r/openclaw-ssh-shared-8198076c/workspace";
    const AG: &str = "/r/openclaw-ssh-shared-8198076c/agent";

    fn file(path: &str, cwd: Option<&str>) -> FileRef {
        FileRef {
            path: path.into(),
            cwd: cwd.map(str::to_string),
        }
    }

    /// The resolution table itself is `occ_ssh_target::paths`'s (its tests);
    /// here, what this wrapper adds: the paths a caller is shown and
    /// OpenClaw's wording of each refusal.
    #[test]
    fn shows_each_mounts_paths_and_words_refusals_as_openclaw() {
        let l = layout("ro");
        for (path, cwd, mount, rel) in [
            ("./a/../src/lib.rs", None, Mount::Workspace, "src/lib.rs"),
            ("/home/me/agent/AGENTS.md", None, Mount::Agent, "AGENTS.md"),
            ("b.txt", Some(AG), Mount::Agent, "b.txt"),
        ] {
            let r = resolve(&l, &file(path, cwd), "read files")
                .unwrap_or_else(|e| panic!("{path} {cwd:?}: {e}"));
            assert_eq!((r.mount, r.relative_path.as_str()), (mount, rel));
            assert_eq!(r.container_path, l.container_path(mount, rel));
            let local = if mount == Mount::Workspace {
                "/home/me/sbx"
            } else {
                "/home/me/agent"
            };
            assert_eq!(
                r.host_path.as_deref(),
                Some(format!("{local}/{rel}").as_str())
            );
        }
        assert_eq!(
            resolve(&l, &file(&format!("{WS}/x"), None), "read files")
                .unwrap()
                .container_path,
            format!("{WS}/x")
        );
        for (path, cwd) in [("../x", None), ("/etc/passwd", None), ("x", Some("/etc"))] {
            let e = resolve(&l, &file(path, cwd), "read files").unwrap_err();
            assert_eq!(e.code(), "escapes-workspace", "{path} {cwd:?}: {e}");
            assert!(
                e.to_string()
                    .starts_with("Sandbox path escapes allowed mounts; cannot read files: "),
                "{e}"
            );
        }
        for path in ["", "a\0b"] {
            let e = resolve(&l, &file(path, None), "write files").unwrap_err();
            assert_eq!(e.code(), "invalid-path", "{path:?}");
            assert!(e.to_string().starts_with("cannot write files: "), "{e}");
        }
    }

    #[test]
    fn read_only_mounts_refuse_writes() {
        let l = layout("ro");
        let e = resolve_writable(&l, &file("a.txt", None), "write files").unwrap_err();
        assert_eq!(e.code(), "read-only");
        let l = layout("none");
        assert!(resolve_writable(&l, &file("a.txt", None), "write files").is_ok());
        // With access "none" there is no agent mount: its local path is outside.
        let e = resolve(&l, &file("/home/me/agent/x", None), "read files").unwrap_err();
        assert_eq!(e.code(), "escapes-workspace");
    }
}
