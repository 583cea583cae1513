//! The remote scripts a component ships, one custom section each, and which
//! of them the installation approves.

use std::collections::BTreeMap;

use occ_ssh_target::digest::sha256_hex;

use super::SandboxBackend;
use crate::capability::ssh_exec::{self, ExecPolicy};
use crate::runtime::CompiledComponent;

/// Custom sections named `occ:script:<name>` hold the component's scripts.
pub const SCRIPT_SECTION_PREFIX: &str = "occ:script:";

/// One remote script a component ships.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedScript {
    /// Its name, as the installation approves it.
    pub name: String,
    /// SHA-256 of its text.
    pub sha256: String,
    /// Its size in bytes.
    pub size: usize,
    /// The interpreter its first line names, if it names one the host knows.
    pub interpreter: Option<&'static str>,
}

/// The scripts a component ships, by name (a name shipped twice is listed once,
/// with the first text: the host then refuses to load it).
pub fn scripts_of(component: &CompiledComponent) -> Vec<ShippedScript> {
    let mut seen = BTreeMap::new();
    for (section, bytes) in &component.sections {
        if let Some(name) = section.strip_prefix(SCRIPT_SECTION_PREFIX) {
            seen.entry(name.to_string())
                .or_insert_with(|| ShippedScript {
                    name: name.to_string(),
                    sha256: sha256_hex(bytes),
                    size: bytes.len(),
                    interpreter: std::str::from_utf8(bytes)
                        .ok()
                        .and_then(ssh_exec::interpreter_of),
                });
        }
    }
    seen.into_values().collect()
}

impl SandboxBackend {
    /// The scripts the component ships, and whether the installation approves each.
    pub fn scripts(&self) -> Vec<(ShippedScript, bool)> {
        let ExecPolicy::PinnedScripts { approved } = &self.ssh.grant().policy else {
            return Vec::new();
        };
        scripts_of(&self.linked.component)
            .into_iter()
            .map(|s| {
                let ok = approved
                    .get(&s.name)
                    .is_some_and(|hashes| hashes.iter().any(|h| h.as_str() == s.sha256.as_str()));
                (s, ok)
            })
            .collect()
    }
}
