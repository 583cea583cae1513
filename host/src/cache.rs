//! The on-disk cache of precompiled components.
//!
//! Compiling a driver takes tens of milliseconds to seconds; loading its
//! precompiled form takes about a millisecond. An artifact is keyed by the
//! component's SHA-256 and by the engine's compatibility hash (wasmtime version,
//! target and every setting that changes code generation), so a different engine
//! or a changed component can never pick up a stale artifact.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

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

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ComponentCache {
    /// A cache in `dir`, created (mode 0700) if missing.
    ///
    /// The directory must be private: whoever can write an artifact there can run
    /// native code in this process, so a directory other users can write to is
    /// refused.
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<ComponentCache> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let meta = fs::metadata(&dir)?;
        let uid = fs::metadata("/proc/self")?.uid();
        if meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "component cache {} must be owned by this user and not writable by others",
                    dir.display()
                ),
            ));
        }
        Ok(ComponentCache { dir })
    }

    /// The default location: `$OCC_DRIVER_CACHE`, else `$XDG_CACHE_HOME/occ-driver-host`,
    /// else `~/.cache/occ-driver-host`.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("OCC_DRIVER_CACHE") {
            return dir.into();
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            return Path::new(&dir).join("occ-driver-host");
        }
        let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
        Path::new(&home).join(".cache/occ-driver-host")
    }

    /// Where the artifact for a component with this SHA-256 lives.
    pub fn artifact_path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{sha256}-{}.cwasm", engine_key(engine)))
    }

    /// Store an artifact atomically: a reader sees the whole file or none.
    pub fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}
