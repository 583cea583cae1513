//! The on-disk cache of precompiled components.
//!
//! Compiling a driver takes a few hundred milliseconds; loading its precompiled
//! form takes about a millisecond. An artifact is keyed by the component's SHA-256
//! and by the engine's compatibility hash (wasmtime version, target and every
//! setting that changes code generation), so a different engine or a changed
//! component never picks up a stale artifact.
//!
//! A precompiled artifact is native code that runs inside the process holding the
//! SSH identity, so whoever can write one owns the host. The cache therefore
//! refuses, naming the path, any directory on the way to it that another user
//! could write (a sticky, root-owned directory such as `/tmp` excepted: others
//! can add entries there but not replace ours), a cache directory not owned by
//! this user or open to others, and any artifact that is not a regular file of
//! this user with mode 0600. The checks run when the cache is opened and again
//! before every artifact is read. There is no fallback location: without
//! `$OCC_DRIVER_CACHE`, `$XDG_CACHE_HOME` or `$HOME`, choose a directory or
//! `--no-cache`.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use crate::uid::current_uid;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

/// Feeds `Hash` output into SHA-256, so the engine's compatibility hash becomes a
/// stable file name rather than a process-seeded `u64`.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        unreachable!("only the full digest is used")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A short hex key of everything about `engine` that affects compiled code.
pub fn engine_key(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex(&hasher.0.finalize())[..16].to_string()
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn refused(path: &Path, why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

/// Every directory from `/` to `dir` must be a directory that only root or this
/// user can change; `dir` itself must be this user's and closed to others.
fn check_chain(dir: &Path) -> std::io::Result<()> {
    let uid = current_uid();
    let mut at = PathBuf::from("/");
    let components: Vec<_> = dir.components().skip(1).collect();
    for (i, part) in std::iter::once(None)
        .chain(components.iter().map(Some))
        .enumerate()
    {
        if let Some(part) = part {
            at.push(part);
        }
        let meta = fs::symlink_metadata(&at)?;
        if meta.file_type().is_symlink() {
            return Err(refused(
                &at,
                "is a symlink; the cache path is never followed through links",
            ));
        }
        if !meta.is_dir() {
            return Err(refused(&at, "is not a directory"));
        }
        let last = i == components.len();
        let mode = meta.mode();
        if last {
            if meta.uid() != uid || mode & 0o077 != 0 {
                return Err(refused(
                    &at,
                    format!(
                        "the component cache must be owned by this user (uid {uid}) and closed to others (mode 700), not uid {} mode {:o}",
                        meta.uid(),
                        mode & 0o7777
                    ),
                ));
            }
        } else {
            let owner_ok = meta.uid() == 0 || meta.uid() == uid;
            let sticky_root = mode & 0o1000 != 0 && meta.uid() == 0;
            if !owner_ok || (mode & 0o022 != 0 && !sticky_root) {
                return Err(refused(
                    &at,
                    format!(
                        "another user can change this directory (uid {}, mode {:o}), so it could replace the cache under it",
                        meta.uid(),
                        mode & 0o7777
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// None of the variables that name a cache directory is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "no component cache directory: set OCC_DRIVER_CACHE, XDG_CACHE_HOME or HOME, pass --cache-dir, or --no-cache"
)]
pub struct NoCacheDir;

impl ComponentCache {
    /// A cache in `dir`, created (mode 0700) if missing, after the checks of the
    /// module documentation.
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<ComponentCache> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = dir.into();
        if !dir.is_absolute() {
            return Err(refused(
                &dir,
                "the component cache must be an absolute path",
            ));
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        // Resolve links in the configured path once, then verify the real chain.
        let dir = fs::canonicalize(&dir)?;
        check_chain(&dir)?;
        Ok(ComponentCache { dir })
    }

    /// The default location: `$OCC_DRIVER_CACHE`, else `$XDG_CACHE_HOME/occ-driver-host`,
    /// else `$HOME/.cache/occ-driver-host`; none of them set is an error.
    pub fn default_dir() -> Result<PathBuf, NoCacheDir> {
        let from = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
        if let Some(dir) = from("OCC_DRIVER_CACHE") {
            return Ok(dir.into());
        }
        if let Some(dir) = from("XDG_CACHE_HOME") {
            return Ok(Path::new(&dir).join("occ-driver-host"));
        }
        if let Some(home) = from("HOME") {
            return Ok(Path::new(&home).join(".cache/occ-driver-host"));
        }
        Err(NoCacheDir)
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the artifact for a component with this SHA-256 lives.
    pub fn artifact_path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{sha256}-{}.cwasm", engine_key(engine)))
    }

    /// Read an artifact after checking the directory chain and the file; `None`
    /// when there is none. An artifact that fails the checks is an error.
    pub fn read(&self, path: &Path) -> std::io::Result<Option<Vec<u8>>> {
        check_chain(&self.dir)?;
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refused(path, "is a symlink"));
            }
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let uid = current_uid();
        if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(refused(
                path,
                format!(
                    "a cached artifact must be a regular file of this user (uid {uid}) with mode 600, not uid {} mode {:o}",
                    meta.uid(),
                    meta.mode() & 0o7777
                ),
            ));
        }
        // Read it instead of mapping it: a mapped file truncated by anyone later
        // would fault this process with SIGBUS.
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// Store an artifact atomically (mode 0600): a reader sees the whole file or none.
    pub fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        check_chain(&self.dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .tempfile_in(&self.dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_cache_under_a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        let err = ComponentCache::open(shared.join("cache")).unwrap_err();
        assert!(err.to_string().contains("another user can change"), "{err}");
        assert!(err.to_string().contains("shared"), "{err}");
        // The cache directory itself open to others is refused too.
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = ComponentCache::open(&open).unwrap_err();
        assert!(err.to_string().contains("closed to others"), "{err}");
    }

    #[test]
    fn artifacts_must_be_private_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::open(dir.path().join("cache")).unwrap();
        let path = cache.dir().join("a.cwasm");
        cache.store(&path, b"bytes").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(cache.read(&path).unwrap().unwrap(), b"bytes");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(
            cache
                .read(&path)
                .unwrap_err()
                .to_string()
                .contains("mode 600")
        );
        let link = cache.dir().join("b.cwasm");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(
            cache
                .read(&link)
                .unwrap_err()
                .to_string()
                .contains("symlink")
        );
        assert!(cache.read(&cache.dir().join("none")).unwrap().is_none());
    }
}
