//! Compiling a component (or loading it precompiled) and reading what it asks
//! for, before any grant is checked.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_ssh_target::digest::sha256_hex;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::cache::ComponentCache;
use crate::error::LoadError;

/// A compiled component and what it asks for, before any grant check.
pub struct CompiledComponent {
    /// The file it came from.
    pub path: PathBuf,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// File size in bytes.
    pub size: u64,
    /// The compiled component.
    pub component: Component,
    /// Import names, in the component's order.
    pub imports: Vec<String>,
    /// Export names.
    pub exports: Vec<String>,
    /// Custom sections of its core modules whose name starts with `occ:`, in order.
    pub sections: Vec<(String, Vec<u8>)>,
    /// Whether it came from the precompiled cache.
    pub from_cache: bool,
    /// Time to compile or deserialize.
    pub load_time: Duration,
}

impl std::fmt::Debug for CompiledComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledComponent")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish()
    }
}

impl CompiledComponent {
    /// The contents of every `occ:` custom section called `name`.
    pub fn section(&self, name: &str) -> impl Iterator<Item = &[u8]> {
        self.sections
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
    }

    /// The component file's stem, for logs.
    pub fn name(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "component".into())
    }
}

pub(crate) fn compile(
    engine: &Engine,
    path: &Path,
    cache: Option<&ComponentCache>,
) -> Result<CompiledComponent, LoadError> {
    compile_bytes(engine, path, &read(path)?, cache)
}

/// A component file's bytes.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|source| LoadError::ReadComponent {
        path: path.to_path_buf(),
        source,
    })
}

/// [`compile`] for a file already read: `bytes` are `path`'s.
pub(crate) fn compile_bytes(
    engine: &Engine,
    path: &Path,
    bytes: &[u8],
    cache: Option<&ComponentCache>,
) -> Result<CompiledComponent, LoadError> {
    let sha256 = sha256_hex(bytes);
    let started = Instant::now();
    let invalid = |e: wasmtime::Error| LoadError::InvalidComponent {
        path: path.to_path_buf(),
        message: format!("{e:#}"),
    };
    let sections = occ_sections(bytes).map_err(|message| LoadError::InvalidComponent {
        path: path.to_path_buf(),
        message,
    })?;
    let mut from_cache = false;
    let component = match cache {
        Some(cache) => {
            let artifact = cache.artifact_path(engine, &sha256);
            let cached = cache.read(&artifact).map_err(|e| LoadError::LocalFile {
                path: artifact.clone(),
                message: e.to_string(),
            })?;
            match cached.and_then(|b| deserialize(engine, &artifact, &b)) {
                Some(component) => {
                    from_cache = true;
                    component
                }
                None => {
                    let serialized = engine.precompile_component(bytes).map_err(invalid)?;
                    if let Err(e) = cache.store(&artifact, &serialized) {
                        tracing::warn!(artifact = %artifact.display(), "cannot cache the compiled component: {e}");
                    }
                    Component::new(engine, bytes).map_err(invalid)?
                }
            }
        }
        None => Component::new(engine, bytes).map_err(invalid)?,
    };
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    Ok(CompiledComponent {
        path: path.to_path_buf(),
        sha256,
        size: bytes.len() as u64,
        component,
        imports,
        exports,
        sections,
        from_cache,
        load_time: started.elapsed(),
    })
}

/// Load an artifact read from the cache, or `None` if wasmtime refuses it.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &Path, bytes: &[u8]) -> Option<Component> {
    // SAFETY: the artifact was produced by `Engine::precompile_component` of an
    // engine with the same compatibility hash (it is part of the file name), and
    // `ComponentCache::read` checked that it is a regular file of this user with
    // mode 0600 in a directory chain no other user can change, so only this user
    // can have written it. Wasmtime additionally checks the header and refuses an
    // incompatible artifact with an error, which sends us back to compiling.
    match unsafe { Component::deserialize(engine, bytes) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(artifact = %artifact.display(), "ignoring unusable cached component: {e:#}");
            None
        }
    }
}

/// The names a component file exports at its top level, read without
/// compiling it (to tell which world it is for).
pub fn export_names(bytes: &[u8]) -> Result<Vec<String>, String> {
    use wasmparser::{Parser, Payload};
    let mut names = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("{e}"))? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) if depth > 0 => depth -= 1,
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    names.push(export.map_err(|e| format!("{e}"))?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(names)
}

/// Custom sections named `occ:*` in the component or any core module nested in
/// it. A driver ships what the host must see before running it (its helper)
/// there, where the host can read it without executing the guest.
pub fn occ_sections(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    use wasmparser::{Parser, Payload};
    let mut found = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("{e}"))? {
            Payload::CustomSection(reader) if reader.name().starts_with("occ:") => {
                found.push((reader.name().to_string(), reader.data().to_vec()));
            }
            _ => {}
        }
    }
    Ok(found)
}

/// One entry of a component's `producers` sections: a field (`language`,
/// `processed-by`, `sdk`), a tool and its version, e.g. `processed-by rustc
/// 1.95.0 (...)`, `processed-by wit-bindgen-rust 0.60.0`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Producer {
    /// `language`, `processed-by` or `sdk`.
    pub field: String,
    /// The language or tool.
    pub name: String,
    /// Its version, as the tool wrote it.
    pub version: String,
}

/// What built a component, from the `producers` sections of the component
/// and of every core module in it, each entry once: an auditor compares the
/// toolchain with the one `rust-toolchain.toml` pins before rebuilding.
pub fn producers(bytes: &[u8]) -> Result<Vec<Producer>, String> {
    use wasmparser::{KnownCustom, Parser, Payload};
    let mut found = std::collections::BTreeSet::new();
    for payload in Parser::new(0).parse_all(bytes) {
        if let Payload::CustomSection(reader) = payload.map_err(|e| format!("{e}"))?
            && let KnownCustom::Producers(fields) = reader.as_known()
        {
            for field in fields {
                let field = field.map_err(|e| format!("producers section: {e}"))?;
                for value in field.values {
                    let value = value.map_err(|e| format!("producers section: {e}"))?;
                    found.insert(Producer {
                        field: field.name.to_string(),
                        name: value.name.to_string(),
                        version: value.version.to_string(),
                    });
                }
            }
        }
    }
    Ok(found.into_iter().collect())
}
