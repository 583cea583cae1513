//! What both worlds read alike from their selection of the installation
//! document (`drivers.compute`, `drivers.sandbox`): the mapping and its keys,
//! the component file to load, and the configuration the component gets.
//! Each world reads its own keys beside these.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::LoadError;
use crate::installation::COMPONENT_ENV;

/// A refusal of the installation at `path`.
fn refused(path: &Path, message: String) -> LoadError {
    LoadError::Installation {
        path: path.to_path_buf(),
        message,
    }
}

/// `drivers.<key>` of `doc` (the document at `path`): a mapping of no keys
/// but `keys`. `select` ends the message when it is missing (`select a
/// compute driver`).
pub(crate) fn section<'a>(
    path: &Path,
    doc: &'a Value,
    key: &str,
    select: &str,
    keys: &[&str],
) -> Result<&'a Map<String, Value>, LoadError> {
    let section = doc
        .get("drivers")
        .and_then(|d| d.get(key))
        .ok_or_else(|| refused(path, format!("drivers.{key}: missing; {select}")))?
        .as_object()
        .ok_or_else(|| refused(path, format!("drivers.{key}: must be a mapping")))?;
    if let Some(unknown) = section.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(refused(
            path,
            format!(
                "drivers.{key}.{unknown}: unknown key (expected one of: {})",
                keys.join(", ")
            ),
        ));
    }
    Ok(section)
}

/// The component file of `drivers.<key>`: the caller's `component_override`
/// as given (relative to the working directory), else the section's
/// `component` (relative to the document's directory), else
/// `$OCC_DRIVER_COMPONENT`; `missing` is the message when none names one.
pub(crate) fn component(
    path: &Path,
    section: &Map<String, Value>,
    key: &str,
    component_override: Option<&Path>,
    missing: &str,
) -> Result<PathBuf, LoadError> {
    match (component_override, section.get("component")) {
        (Some(c), _) => Ok(c.to_path_buf()),
        (None, Some(Value::String(s))) if !s.is_empty() => Ok(relative_to(path, s)),
        (None, Some(_)) => Err(refused(
            path,
            format!("drivers.{key}.component: must be a file path"),
        )),
        (None, None) => match std::env::var_os(COMPONENT_ENV).filter(|v| !v.is_empty()) {
            Some(c) => Ok(PathBuf::from(c)),
            None => Err(refused(path, missing.to_string())),
        },
    }
}

/// `p` as the document at `path` names it: a relative path against the
/// document's directory.
pub(crate) fn relative_to(path: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    if p.is_relative() {
        path.parent().unwrap_or(Path::new(".")).join(p)
    } else {
        p
    }
}

/// `drivers.<key>.configuration`: a mapping, as the component gets it;
/// `missing` is the message when there is none.
pub(crate) fn configuration(
    path: &Path,
    section: &Map<String, Value>,
    key: &str,
    missing: &str,
) -> Result<Value, LoadError> {
    match section.get("configuration") {
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(refused(
            path,
            format!("drivers.{key}.configuration: must be a mapping"),
        )),
        None => Err(refused(path, missing.to_string())),
    }
}
