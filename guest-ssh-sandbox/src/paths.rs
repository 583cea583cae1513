//! From a path as a caller names it to a mount and a relative path, without
//! touching the target (OpenClaw's `resolvePath`).
//!
//! A path is a sandbox path (absolute under a mount's container root), a path
//! relative to `cwd` (itself a sandbox or local path) or to the workspace, or a
//! local path under the local workspace a mount was seeded from. It is
//! normalized lexically first (`a/../b` is `b`); whatever then lies outside
//! every mount, `..` past a mount root included, is refused with OpenClaw's
//! wording. What the target itself holds (symbolic links, hard links) is the
//! remote script's to judge, on descriptors, while it acts: it follows a link
//! that stays inside the mount on the way to a file and refuses one that
//! leads out.

use crate::error::{Code, Error};
use crate::layout::{Layout, MountInfo, join};
use crate::model::{FileRef, Mount, ResolvedPath};

/// Components of an absolute path after lexical normalization; `..` stops at `/`.
fn normalize_absolute(path: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts
}

fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}

/// The part of `parts` below `root`, if `parts` is `root` or inside it.
fn strip<'a>(parts: &[&'a str], root: &str) -> Option<Vec<&'a str>> {
    let root = components(root);
    (parts.len() >= root.len() && parts[..root.len()] == root[..])
        .then(|| parts[root.len()..].to_vec())
}

/// The longest mount root (container or local, as `root_of` picks) holding `parts`.
fn find<'l, 'p>(
    layout: &'l Layout,
    parts: &[&'p str],
    root_of: fn(&MountInfo) -> &str,
) -> Option<(&'l MountInfo, Vec<&'p str>)> {
    let mut best: Option<(&MountInfo, Vec<&str>)> = None;
    for m in &layout.mounts {
        if let Some(rel) = strip(parts, root_of(m))
            && best
                .as_ref()
                .is_none_or(|(b, _)| components(root_of(b)).len() < components(root_of(m)).len())
        {
            best = Some((m, rel));
        }
    }
    best
}

/// An absolute path: a sandbox path first (as OpenClaw), then a local one.
fn absolute<'p>(layout: &Layout, parts: &[&'p str]) -> Option<(Mount, Vec<&'p str>)> {
    find(layout, parts, |m| &m.container_root)
        .or_else(|| find(layout, parts, |m| &m.local_root))
        .map(|(m, rel)| (m.mount, rel))
}

/// Resolve `file` for `action` (OpenClaw's wording: "read files", "write
/// files", ...), which names it in a refusal.
pub fn resolve(layout: &Layout, file: &FileRef, action: &str) -> Result<ResolvedPath, Error> {
    let path = file.path.as_str();
    if path.is_empty() {
        return Err(Error::new(
            Code::InvalidPath,
            format!("cannot {action}: the path is empty"),
        ));
    }
    if path.contains('\0') || file.cwd.as_deref().is_some_and(|c| c.contains('\0')) {
        return Err(Error::new(
            Code::InvalidPath,
            format!("cannot {action}: the path holds NUL"),
        )
        .at(path));
    }
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        // The base directory as a sandbox path.
        let base = match file.cwd.as_deref().filter(|c| !c.is_empty()) {
            None => layout.workspace().container_root.clone(),
            Some(cwd) if cwd.starts_with('/') => {
                let parts = normalize_absolute(cwd);
                let (mount, rel) =
                    absolute(layout, &parts).ok_or_else(|| Error::escapes(action, cwd))?;
                layout.container_path(mount, &rel.join("/"))
            }
            Some(cwd) => join(&layout.workspace().container_root, cwd),
        };
        join(&base, path)
    };
    let parts = normalize_absolute(&joined);
    let (mount, rel) = absolute(layout, &parts).ok_or_else(|| Error::escapes(action, path))?;
    let info = layout
        .mount(mount)
        .expect("found among the layout's mounts");
    let relative = rel.join("/");
    Ok(ResolvedPath {
        mount,
        container_path: join(&info.container_root, &relative),
        host_path: Some(join(&info.local_root, &relative)),
        writable: info.writable,
        relative_path: relative,
    })
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
    use crate::model::SandboxScope;
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
