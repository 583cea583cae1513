//! From a path as a caller names it to a mount and a relative path, without
//! touching the target (OpenClaw's `resolvePath`). The component resolves
//! every path a caller names with it; the host resolves an exec's working
//! directory with it, to check that the exec script runs where the caller
//! asked.
//!
//! A path is a sandbox path (absolute under a mount's container root), a path
//! relative to `cwd` (itself a sandbox or local path) or to the workspace, or a
//! local path under the local workspace a mount was seeded from. It is
//! normalized lexically first (`a/../b` is `b`); whatever then lies outside
//! every mount, `..` past a mount root included, is refused. What the target
//! itself holds (symbolic links, hard links) is the remote script's to judge,
//! on descriptors, while it acts.

use crate::layout::{Layout, Mount, MountInfo, join};

/// Where a path lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub mount: Mount,
    /// Below the mount root, `/`-separated, without `.` or `..`; empty for the
    /// mount root itself.
    pub relative_path: String,
}

/// Why a path does not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// The path is empty.
    Empty,
    /// The path or its `cwd` holds NUL.
    Nul,
    /// This path (the one given, or its `cwd`) lies outside every mount.
    Escapes(String),
}

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

/// Resolve `path`, relative ones against `cwd` (a sandbox or local path, or
/// relative to the workspace) or else the workspace.
///
/// As OpenClaw's bridge does, the path is trimmed of surrounding white space
/// first, and one that is absolute once `\` is read as `/` names a sandbox
/// path under a container root that way; any other path keeps its `\` (on
/// a POSIX gateway it is a character of a local name).
pub fn resolve(layout: &Layout, path: &str, cwd: Option<&str>) -> Result<Resolved, PathError> {
    let path = path.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') || cwd.is_some_and(|c| c.contains('\0')) {
        return Err(PathError::Nul);
    }
    let posix = path.replace('\\', "/");
    if posix.starts_with('/') {
        let parts = normalize_absolute(&posix);
        if let Some((m, rel)) = find(layout, &parts, |m| &m.container_root) {
            return Ok(Resolved {
                mount: m.mount,
                relative_path: rel.join("/"),
            });
        }
    }
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        // The base directory as a sandbox path.
        let base = match cwd.filter(|c| !c.is_empty()) {
            None => layout.workspace().container_root.clone(),
            Some(cwd) if cwd.starts_with('/') => {
                let parts = normalize_absolute(cwd);
                let (mount, rel) =
                    absolute(layout, &parts).ok_or_else(|| PathError::Escapes(cwd.to_string()))?;
                layout.container_path(mount, &rel.join("/"))
            }
            Some(cwd) => join(&layout.workspace().container_root, cwd),
        };
        join(&base, path)
    };
    let parts = normalize_absolute(&joined);
    let (mount, rel) =
        absolute(layout, &parts).ok_or_else(|| PathError::Escapes(path.to_string()))?;
    Ok(Resolved {
        mount,
        relative_path: rel.join("/"),
    })
}

/// Where a command of an `exec` call runs: the caller's `workdir`, or the
/// workspace when it names none. The component sends the exec script there
/// and the host checks that it does, both through this function.
pub fn exec_workdir(layout: &Layout, workdir: Option<&str>) -> Result<Resolved, PathError> {
    resolve(
        layout,
        workdir.filter(|w| !w.is_empty()).unwrap_or("."),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Access, ScopeRef, Settings};
    use crate::scope::Scope;

    fn layout(access: Access) -> Layout {
        Layout::new(
            &Settings {
                workspace_root: "/r".into(),
                scope: Scope::Shared,
                access,
            },
            &ScopeRef {
                workspace_dir: "/home/me/sbx",
                agent_workspace_dir: Some("/home/me/agent"),
                ..ScopeRef::default()
            },
        )
        .unwrap()
    }

    const WS: &str = "/r/openclaw-ssh-shared-8198076c/workspace";
    const AG: &str = "/r/openclaw-ssh-shared-8198076c/agent";

    /// path, cwd -> (mount, relative path) or the refusal.
    #[test]
    fn resolution_table() {
        let l = layout(Access::ReadOnly);
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
            // Trimmed, and `\` read as `/` in a sandbox path, as OpenClaw's bridge.
            ("  a.txt\n", None, Mount::Workspace, "a.txt"),
            ("\u{feff}a.txt", None, Mount::Workspace, "a.txt"),
            (
                &format!("{WS}\\x\\y").replace('/', "\\"),
                None,
                Mount::Workspace,
                "x/y",
            ),
            (&format!("{WS}/x\\y"), None, Mount::Workspace, "x/y"),
            // A relative one keeps it: a character of a local name.
            ("x\\y", None, Mount::Workspace, "x\\y"),
        ];
        for (path, cwd, mount, rel) in ok {
            let r = resolve(&l, path, *cwd).unwrap_or_else(|e| panic!("{path} {cwd:?}: {e:?}"));
            assert_eq!(
                (r.mount, r.relative_path.as_str()),
                (*mount, *rel),
                "{path} {cwd:?}"
            );
        }
        let escapes: &[(&str, Option<&str>, &str)] = &[
            ("../x", None, "../x"),
            ("a/../../x", None, "a/../../x"),
            ("/etc/passwd", None, "/etc/passwd"),
            (
                "/r/openclaw-ssh-shared-8198076c",
                None,
                "/r/openclaw-ssh-shared-8198076c",
            ),
            (&format!("{WS}/../agent2/x"), None, ""),
            (&format!("{WS}/../../other/x"), None, ""),
            ("/home/me/sbx/../secret", None, "/home/me/sbx/../secret"),
            ("x", Some("/etc"), "/etc"),
            ("../../x", Some("sub"), "../../x"),
            ("/home/me/sbxy/x", None, "/home/me/sbxy/x"),
        ];
        for (path, cwd, named) in escapes {
            let Err(PathError::Escapes(at)) = resolve(&l, path, *cwd) else {
                panic!("{path} {cwd:?} resolved");
            };
            let named = if named.is_empty() { *path } else { *named };
            assert_eq!(at, named, "{path} {cwd:?}");
        }
        assert_eq!(resolve(&l, "", None), Err(PathError::Empty));
        assert_eq!(resolve(&l, " \t\n", None), Err(PathError::Empty));
        // Not a sandbox path, so a local name inside the workspace: never /etc.
        assert_eq!(
            resolve(&l, "\\etc\\passwd", None).unwrap().relative_path,
            "\\etc\\passwd"
        );
        assert_eq!(resolve(&l, "a\0b", None), Err(PathError::Nul));
        assert_eq!(resolve(&l, "a", Some("b\0")), Err(PathError::Nul));
    }

    #[test]
    fn an_exec_runs_in_the_workspace_unless_the_caller_names_a_workdir() {
        let l = layout(Access::ReadWrite);
        for none in [None, Some("")] {
            assert_eq!(
                exec_workdir(&l, none).unwrap(),
                Resolved {
                    mount: Mount::Workspace,
                    relative_path: String::new()
                }
            );
        }
        assert_eq!(
            exec_workdir(&l, Some("src/./x")).unwrap().relative_path,
            "src/x"
        );
        assert_eq!(exec_workdir(&l, Some(AG)).unwrap().mount, Mount::Agent);
        assert!(exec_workdir(&l, Some("/etc")).is_err());
    }
}
