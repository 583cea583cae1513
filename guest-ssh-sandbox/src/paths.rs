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

    /// path, cwd -> (mount, relative path) or the refusal.
    #[test]
    fn resolution_table() {
        let l = layout("ro");
        let ok: &[(&str, Option<&str>, Mount, &str)] = &[
            ("a.txt", None, Mount::Workspace, "a.txt"),
            ("./a/./b/../c.txt", None, Mount::Workspace, "a/c.txt"),
            (".", None, Mount::Workspace, ""),
            (&format!("{WS}/x/y"), None, Mount::Workspace, "x/y"),
            (WS, None, Mount::Workspace, ""),
            (&format!("{AG}/notes.md"), None, Mount::Agent, "notes.md"),
            (
                "/home/me/sbx/src/lib.rs",
                None,
                Mount::Workspace,
                "src/lib.rs",
            ),
            ("/home/me/agent/AGENTS.md", None, Mount::Agent, "AGENTS.md"),
            ("b.txt", Some("sub"), Mount::Workspace, "sub/b.txt"),
            ("b.txt", Some(&format!("{AG}/d")), Mount::Agent, "d/b.txt"),
            ("../x", Some(&format!("{WS}/d")), Mount::Workspace, "x"),
            ("b", Some("/home/me/agent/k"), Mount::Agent, "k/b"),
        ];
        for (path, cwd, mount, rel) in ok {
            let r = resolve(&l, &file(path, *cwd), "read files")
                .unwrap_or_else(|e| panic!("{path} {cwd:?}: {e}"));
            assert_eq!(
                (r.mount, r.relative_path.as_str()),
                (*mount, *rel),
                "{path} {cwd:?}"
            );
            assert_eq!(r.container_path, l.container_path(*mount, rel));
        }
        let escapes: &[(&str, Option<&str>)] = &[
            ("../x", None),
            ("a/../../x", None),
            ("/etc/passwd", None),
            ("/r/openclaw-ssh-shared-8198076c", None),
            (&format!("{WS}/../agent2/x"), None),
            (&format!("{WS}/../../other/x"), None),
            ("/home/me/sbx/../secret", None),
            ("x", Some("/etc")),
            ("../../x", Some("sub")),
            ("/home/me/sbxy/x", None),
        ];
        for (path, cwd) in escapes {
            let e = resolve(&l, &file(path, *cwd), "read files").unwrap_err();
            assert_eq!(e.code(), "escapes-workspace", "{path} {cwd:?}: {e}");
            assert!(
                e.to_string()
                    .starts_with("Sandbox path escapes allowed mounts; cannot read files: ")
            );
        }
        assert_eq!(
            resolve(&l, &file("", None), "read files")
                .unwrap_err()
                .code(),
            "invalid-path"
        );
        assert_eq!(
            resolve(&l, &file("a\0b", None), "read files")
                .unwrap_err()
                .code(),
            "invalid-path"
        );
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
