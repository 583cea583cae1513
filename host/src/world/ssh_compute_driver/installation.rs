//! The compute selection of the trusted Installation document,
//! `drivers.compute`: the spec's OCC Installation YAML plus the component file
//! to load.
//!
//! ```yaml
//! drivers:
//!   compute:
//!     id: compute-ssh
//!     implementation: occ/ssh            # optional, the default
//!     component: /opt/occ/drivers/guest_ssh_driver.wasm
//!     approvedHelpers: [<SHA-256 of the helper the operator audited>]
//!     configuration: { ssh: ..., hosts: ..., runtime: ..., network: ... }
//! ```
//!
//! The spec's document works as written: `component` may instead come from the
//! command line (`--component`) or `$OCC_DRIVER_COMPONENT`, and the document itself
//! from `$OCC_CONFIG_PATH`. The host reads `drivers.compute` only; the other
//! selections OCC keeps in the same document (occ, Configuration, IAM, Secret) are
//! left alone. A relative `component` path is resolved against the installation
//! file's directory. The driver itself validates `configuration` (unknown keys fail
//! there); the host reads from it only the trusted inputs of its grants (see
//! [`crate::capability::ssh_exec::SshGrant`]). `approvedHelpers` pins what the
//! driver may run on hosts: nothing runs until the helper's SHA-256 is listed
//! (`occ-driver-host check` prints the line to add). The document is read and
//! its YAML parsed, with bounds, by [`crate::installation`].

use std::path::{Path, PathBuf};

use occ_ssh_target::digest::Sha256;
use serde_json::Value;

use crate::error::LoadError;
use crate::installation::{COMPONENT_ENV, parse_document, read_text};
use crate::world::selection;

/// Keys the host accepts under `drivers.compute`.
const COMPUTE_KEYS: &[&str] = &[
    "id",
    "implementation",
    "component",
    "approvedHelpers",
    "maxSessions",
    "configuration",
];

/// The implementation identity when the document names none: the spec's
/// "compute-ssh (implementation occ/ssh)".
pub const DEFAULT_IMPLEMENTATION: &str = "occ/ssh";

/// A parsed Installation document.
#[derive(Debug, Clone)]
pub struct Installation {
    /// Where it was read from, for error messages.
    pub path: PathBuf,
    /// `drivers.compute.id`.
    pub driver_id: String,
    /// `drivers.compute.implementation` (default [`DEFAULT_IMPLEMENTATION`]).
    pub implementation: String,
    /// `drivers.compute.approvedHelpers`: SHA-256 (lowercase hex) of each helper
    /// the operator approved for the driver to run on hosts.
    pub approved_helpers: Vec<Sha256>,
    /// The component file, resolved against the installation's directory.
    pub component: PathBuf,
    /// `drivers.compute.maxSessions`: sessions one host connection keeps
    /// open at once.
    pub max_sessions: usize,
    /// `drivers.compute.configuration`, as JSON for the driver.
    pub configuration: Value,
}

impl Installation {
    /// Read and parse an installation file.
    pub fn load(path: &Path) -> Result<Installation, LoadError> {
        Installation::load_with_component(path, None)
    }

    /// Read and parse an installation file, loading `component` instead of (or
    /// in the absence of) `drivers.compute.component`.
    pub fn load_with_component(
        path: &Path,
        component: Option<&Path>,
    ) -> Result<Installation, LoadError> {
        let text = read_text(path)?;
        Installation::parse_with_component(path, &text, component)
    }

    /// Parse installation text; `path` names it in errors and anchors a relative
    /// component path.
    pub fn parse(path: &Path, text: &str) -> Result<Installation, LoadError> {
        Installation::parse_with_component(path, text, None)
    }

    /// Like [`Installation::parse`], with a component file chosen by the caller.
    pub fn parse_with_component(
        path: &Path,
        text: &str,
        component_override: Option<&Path>,
    ) -> Result<Installation, LoadError> {
        Installation::from_document(path, &parse_document(path, text)?, component_override)
    }

    /// Parse `drivers.compute` of an already read document; `component_override`
    /// (the caller's) replaces the document's component.
    pub fn from_document(
        path: &Path,
        doc: &Value,
        component_override: Option<&Path>,
    ) -> Result<Installation, LoadError> {
        let err = |message: String| LoadError::Installation {
            path: path.to_path_buf(),
            message,
        };
        let compute = selection::section(
            path,
            doc,
            "compute",
            "select a compute driver",
            COMPUTE_KEYS,
        )?;
        let driver_id = match compute.get("id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => return Err(err("drivers.compute.id: must be a nonempty string".into())),
            None => return Err(err("drivers.compute.id: missing".into())),
        };
        let implementation = match compute.get("implementation") {
            None => DEFAULT_IMPLEMENTATION.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => {
                return Err(err(
                    "drivers.compute.implementation: must be a nonempty string".into(),
                ));
            }
        };
        let approved_helpers = match compute.get("approvedHelpers") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, h)| match h.as_str().and_then(Sha256::parse) {
                    Some(sha) => Ok(sha),
                    None => Err(err(format!(
                        "drivers.compute.approvedHelpers[{i}]: must be a SHA-256 in lowercase hex (64 characters), as `occ-driver-host inspect` prints it"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(err(
                    "drivers.compute.approvedHelpers: must be a list of SHA-256 hashes".into(),
                ));
            }
        };
        let max_sessions = crate::capability::ssh_exec::grant::max_sessions_setting(
            compute.get("maxSessions"),
            "drivers.compute.maxSessions",
        )
        .map_err(err)?;
        let component = selection::component(
            path,
            compute,
            "compute",
            component_override,
            &format!(
                "drivers.compute.component: missing; name the driver component (.wasm) to load here, with --component or in ${COMPONENT_ENV}"
            ),
        )?;
        let configuration = selection::configuration(
            path,
            compute,
            "compute",
            "drivers.compute.configuration: missing",
        )?;
        Ok(Installation {
            path: path.to_path_buf(),
            driver_id,
            implementation,
            approved_helpers,
            component,
            max_sessions,
            configuration,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Installation, String> {
        Installation::parse(Path::new("/etc/occ/installation.yaml"), text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn resolves_a_relative_component_against_the_file() {
        let i = parse(
            "occ: {}\ndrivers:\n  iam: {id: x}\n  compute:\n    id: compute-ssh\n    component: drivers/ssh.wasm\n    configuration: {ssh: {}}\n",
        )
        .unwrap();
        assert_eq!(i.component, PathBuf::from("/etc/occ/drivers/ssh.wasm"));
        assert_eq!(i.driver_id, "compute-ssh");
        assert_eq!(i.configuration["ssh"], serde_json::json!({}));
    }

    #[test]
    fn a_caller_chosen_component_replaces_or_supplies_the_documents() {
        let text = "drivers:\n  compute:\n    id: compute-ssh\n    configuration: {}\n";
        let path = Path::new("/etc/occ/installation.yaml");
        let i = Installation::parse_with_component(path, text, Some(Path::new("d.wasm"))).unwrap();
        assert_eq!(i.component, PathBuf::from("d.wasm"));
        assert!(Installation::parse(path, text).is_err());
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            ("drivers: {}", "drivers.compute: missing"),
            (
                "drivers: {compute: []}",
                "drivers.compute: must be a mapping",
            ),
            (
                "drivers: {compute: {id: a, component: c.wasm, configuration: {}, extra: 1}}",
                "drivers.compute.extra: unknown key",
            ),
            (
                "drivers: {compute: {component: c.wasm, configuration: {}}}",
                "drivers.compute.id: missing",
            ),
            (
                "drivers: {compute: {id: a, configuration: {}}}",
                "drivers.compute.component: missing",
            ),
            (
                "drivers: {compute: {id: a, component: c.wasm}}",
                "drivers.compute.configuration: missing",
            ),
            (
                "drivers: {compute: {id: a, component: c.wasm, configuration: 3}}",
                "must be a mapping",
            ),
            (
                "drivers: {compute: {id: a, component: c.wasm, configuration: {}, approvedHelpers: [abc]}}",
                "drivers.compute.approvedHelpers[0]: must be a SHA-256",
            ),
            (
                "drivers: {compute: {id: a, component: c.wasm, configuration: {}, implementation: 3}}",
                "drivers.compute.implementation: must be a nonempty string",
            ),
            ("drivers: [", "not valid YAML"),
        ];
        for (text, expected) in cases {
            let got = parse(text).unwrap_err();
            assert!(
                got.contains(expected),
                "{text:?}: expected {expected:?} in {got:?}"
            );
            assert!(got.starts_with("/etc/occ/installation.yaml: "), "{got}");
        }
    }

    #[test]
    fn duplicate_keys_and_alias_bombs_are_refused() {
        let duplicate = "drivers:\n  compute:\n    id: a\n    id: b\n    component: c.wasm\n    configuration: {}\n";
        assert!(parse(duplicate).unwrap_err().contains("not valid YAML"));
        // Nine levels of nine aliases: a billion strings if expanded.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        bomb.push_str("drivers: {compute: {id: a, component: c.wasm, configuration: {x: *a9}}}\n");
        assert!(parse(&bomb).unwrap_err().contains("not valid YAML"));
    }
}
