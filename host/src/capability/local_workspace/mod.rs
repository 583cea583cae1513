//! The `local-workspace` capability: read-only access to the local directories
//! a sandbox seeds from, for one call at a time.
//!
//! - The grant ([`LocalWorkspaceGrant`]) is the installation's list of
//!   directories under which a caller may name a workspace, and the bounds of
//!   one seed. No directory is granted by default.
//! - Per call, the world names the scope's workspace and (optionally) the
//!   Agent's ([`CallRoots`]); each is granted only when its canonical path lies
//!   inside a listed directory, checked again right before it is read.
//! - The component never sees the files: it names a root and an approved remote
//!   script, and the host streams the tree ([`tree`]) into that script's stdin
//!   through the call's `ssh-exec` state, with its checks and audit records.
//!
//! No `wasi:filesystem` is ever linked: this interface is all a component can
//! learn about the local file system.

mod host;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use super::Scope;
use super::ssh_exec::SshExecState;

/// The generated bindings of the `local-workspace` interface.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        interfaces: "import occ:compute/local-workspace@0.2.0;",
        imports: { default: async },
        with: {
            "occ:compute/ssh-exec": crate::capability::ssh_exec::bindings::occ::compute::ssh_exec,
        },
    });

    /// `occ:compute/local-workspace@0.3.0`: uploads into a shipped script by
    /// name. Its types are 0.2.0's, shared with the module above.
    pub(crate) mod v0_3 {
        wasmtime::component::bindgen!({
            path: ["../wit/0.2.0", "../wit/0.3.0"],
            interfaces: "import occ:compute/local-workspace@0.3.0;",
            imports: { default: async },
            with: {
                "occ:compute/ssh-exec@0.2.0": crate::capability::ssh_exec::bindings::occ::compute::ssh_exec,
                "occ:compute/local-workspace@0.2.0": super::occ::compute::local_workspace,
            },
        });
    }
}

/// What the installation grants: where local workspaces may be, and how much
/// one seed may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWorkspaceGrant {
    /// Canonical directories; a call's workspace must be one of them or below.
    pub allowed: Vec<PathBuf>,
    /// Bounds of one seed.
    pub bounds: tree::Bounds,
}

impl LocalWorkspaceGrant {
    /// A grant of the directories `allowed` (made canonical; each must exist).
    pub fn new(allowed: &[PathBuf]) -> Result<LocalWorkspaceGrant, WorkspaceError> {
        let allowed = allowed
            .iter()
            .map(|p| directory(p))
            .collect::<Result<_, _>>()?;
        Ok(LocalWorkspaceGrant {
            allowed,
            bounds: tree::Bounds {
                // A seed is a workspace, not a disk image.
                max_bytes: 8 << 30,
                max_entries: 1_000_000,
            },
        })
    }

    /// Whether `path`, which does not exist, would lie in the grant: a
    /// missing directory there is an empty tree, anywhere else not granted.
    /// Judged where it would be: an absolute path of plain names whose
    /// nearest existing ancestor, its links resolved, is inside a listed
    /// directory (`<granted>/../elsewhere` and a link out of the grant are
    /// not).
    pub fn covers_missing(&self, path: &Path) -> bool {
        use std::path::Component;
        if !matches!(path.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            return false;
        }
        if !path.is_absolute()
            || path
                .components()
                .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
        {
            return false;
        }
        let mut existing = path;
        while let Some(parent) = existing.parent() {
            existing = parent;
            if existing.symlink_metadata().is_ok() {
                break;
            }
        }
        existing
            .canonicalize()
            .is_ok_and(|c| self.allowed.iter().any(|a| c.starts_with(a)))
    }

    /// The canonical directory of `path` if the grant covers it.
    pub fn admit(&self, path: &Path) -> Result<PathBuf, WorkspaceError> {
        let canonical = directory(path)?;
        if !self.allowed.iter().any(|a| canonical.starts_with(a)) {
            return Err(WorkspaceError::Outside {
                path: canonical,
                allowed: self.allowed.clone(),
            });
        }
        Ok(canonical)
    }
}

/// `path` made canonical, if it is a directory.
fn directory(path: &Path) -> Result<PathBuf, WorkspaceError> {
    let canonical = path
        .canonicalize()
        .map_err(|source| WorkspaceError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if !canonical.is_dir() {
        return Err(WorkspaceError::NotADirectory(path.to_path_buf()));
    }
    Ok(canonical)
}

/// Why a local directory is not granted.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// It cannot be resolved (missing, or a component unreadable).
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// As named.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a directory.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// It lies outside every directory the installation lists.
    #[error("{} is outside the local workspaces the installation lists ({})", path.display(), listed(allowed))]
    Outside {
        /// Its canonical path.
        path: PathBuf,
        /// The installation's directories.
        allowed: Vec<PathBuf>,
    },
}

fn listed(allowed: &[PathBuf]) -> String {
    if allowed.is_empty() {
        return "none".into();
    }
    allowed
        .iter()
        .map(|a| a.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The local directories one call names (as the caller named them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallRoots {
    /// The scope's workspace.
    pub workspace: Option<PathBuf>,
    /// The Agent's workspace.
    pub agent: Option<PathBuf>,
    /// The skills OpenClaw materialized for the scope (workspaceAccess rw).
    pub skills: Option<PathBuf>,
}

/// The capability's state for one call.
pub struct LocalWorkspaceState {
    grant: Arc<LocalWorkspaceGrant>,
    roots: CallRoots,
    exec: SshExecState,
    scope: Scope,
}

impl LocalWorkspaceState {
    /// State for one call of `scope`: `roots` as the caller named them, and the
    /// call's own `ssh-exec` state, through which uploads run.
    pub fn new(
        grant: Arc<LocalWorkspaceGrant>,
        roots: CallRoots,
        exec: SshExecState,
        scope: Scope,
    ) -> LocalWorkspaceState {
        LocalWorkspaceState {
            grant,
            roots,
            exec,
            scope,
        }
    }
}

struct HasLocalWorkspace;

impl HasData for HasLocalWorkspace {
    type Data<'a> = &'a mut LocalWorkspaceState;
}

/// Link `occ:compute/local-workspace`, at every version this host serves, with `get` projecting the store's data
/// onto the call's [`LocalWorkspaceState`].
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut LocalWorkspaceState,
) -> wasmtime::Result<()> {
    bindings::occ::compute::local_workspace::add_to_linker::<T, HasLocalWorkspace>(linker, get)?;
    bindings::v0_3::occ::compute0_3_0::local_workspace::add_to_linker::<T, HasLocalWorkspace>(
        linker, get,
    )
}

#[cfg(test)]
mod tests {
    use super::LocalWorkspaceGrant;

    #[test]
    fn a_missing_root_is_covered_only_where_it_would_lie_in_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let granted = dir.path().join("granted");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(granted.join("scope")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, granted.join("out")).unwrap();
        let grant = LocalWorkspaceGrant::new(std::slice::from_ref(&granted)).unwrap();
        assert!(grant.covers_missing(&granted.join("scope/skills")));
        assert!(grant.covers_missing(&granted.join("new/deeper/skills")));
        // Lexically below the grant, really elsewhere.
        assert!(!grant.covers_missing(&granted.join("../outside/skills")));
        assert!(!grant.covers_missing(&granted.join("out/skills")));
        // Not below it at all, relative, or not missing.
        assert!(!grant.covers_missing(&outside.join("skills")));
        assert!(!grant.covers_missing(std::path::Path::new("granted/skills")));
        assert!(!grant.covers_missing(&granted.join("scope")));
    }
}
