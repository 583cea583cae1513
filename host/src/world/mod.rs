//! The worlds this host serves, one module each: the component contract a kind
//! of driver implements, the capabilities it is granted, and how the host calls
//! it.
//!
//! A world module holds its private bindings, the list of imports it grants,
//! how its grants are read from the installation, and the dispatch of its
//! exports. Adding a kind of driver is a new module here and its WIT.

pub mod ssh_compute_driver;
pub mod ssh_sandbox_backend;

use std::sync::Arc;

use crate::runtime::sandbox::is_sealed_wasi;

/// A step of remote work, for people watching a long operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The host alias the step runs on.
    pub host: String,
    /// A short machine name, e.g. `readiness`.
    pub step: Option<String>,
    /// The sentence for people.
    pub message: Option<String>,
}

/// Receives the progress of a running call.
pub type ProgressSink = Arc<dyn Fn(&Progress) + Send + Sync>;

/// What the host knows about a world before loading anything; a world is
/// picked by the interface a component exports ([`identify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorldInfo {
    /// The world's WIT name, e.g. `occ:compute/ssh-compute-driver@0.1.0`.
    pub name: &'static str,
    /// The interface a component of this world must export.
    pub export: &'static str,
    /// The interfaces of our own package it may import.
    pub imports: &'static [&'static str],
}

impl WorldInfo {
    /// Whether a component of this world may import `import`: one of the
    /// world's own interfaces or a sealed WASI interface.
    pub fn grants(&self, import: &str) -> bool {
        self.imports.contains(&import) || is_sealed_wasi(import)
    }

    /// The imports of `imports` this world refuses, in order.
    pub fn refused<'a>(&self, imports: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        imports
            .into_iter()
            .filter(|name| !self.grants(name))
            .map(str::to_string)
            .collect()
    }
}

/// Every world this host serves.
pub const WORLDS: &[&WorldInfo] = &[&ssh_compute_driver::WORLD, &ssh_sandbox_backend::WORLD];

/// The world a component with these exports targets, if any.
pub fn identify<'a>(exports: impl IntoIterator<Item = &'a str>) -> Option<&'static WorldInfo> {
    let exports: Vec<&str> = exports.into_iter().collect();
    WORLDS.iter().copied().find(|w| exports.contains(&w.export))
}
