//! What an npm package is to the release: its files as a deterministic
//! tarball, and the manifest checks a source `package.json` must pass.

use std::path::Path;

use serde_json::Value;

use super::{Platform, RPC_PACKAGE};

/// npm's own fixed entry time: `npm pack` writes it too.
pub(super) const NPM_MTIME: u64 = 499_162_500;

/// One file of a package: its path inside the package, bytes and mode.
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) path: String,
    pub(super) bytes: Vec<u8>,
    pub(super) executable: bool,
}

pub(super) fn file(path: &str, bytes: Vec<u8>) -> Entry {
    Entry {
        path: path.into(),
        bytes,
        executable: false,
    }
}

/// A gzip'd tar of `entries` under `package/`, as npm lays a package out.
pub(super) fn tarball(mut entries: Vec<Entry>) -> Result<Vec<u8>, String> {
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for e in &entries {
        let mut header = tar::Header::new_ustar();
        header
            .set_path(format!("package/{}", e.path))
            .map_err(|err| format!("{}: {err}", e.path))?;
        header.set_size(e.bytes.len() as u64);
        header.set_mode(if e.executable { 0o755 } else { 0o644 });
        header.set_mtime(NPM_MTIME);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, e.bytes.as_slice())
            .map_err(|err| format!("{}: {err}", e.path))?;
    }
    let gz = tar.into_inner().map_err(|e| e.to_string())?;
    gz.finish().map_err(|e| e.to_string())
}

/// npm's tarball name: `@scope/name` becomes `scope-name`.
pub(super) fn tarball_name(name: &str, version: &str) -> String {
    format!(
        "{}-{version}.tgz",
        name.trim_start_matches('@').replace('/', "-")
    )
}

/// A package's manifest as the release needs it: its name, the host's
/// version, no install hook; for a package that runs the binary (`platform`),
/// the platform package and the shared one at exactly that version.
pub(super) fn check_manifest(
    path: &Path,
    manifest: &Value,
    name: &str,
    version: &str,
    platform: Option<&Platform>,
) -> Result<(), String> {
    let at = path.display();
    let field = |key: &str| manifest.get(key).and_then(Value::as_str);
    if field("name") != Some(name) {
        return Err(format!("{at}: name must be {name:?}"));
    }
    if field("version") != Some(version) {
        return Err(format!(
            "{at}: version {:?} is not the host's {version} (the workspace's Cargo.toml): a package and the binary it runs carry one version",
            field("version").unwrap_or("none")
        ));
    }
    if let Some(platform) = platform {
        let optional = manifest
            .pointer(&format!("/optionalDependencies/{}", platform.package))
            .and_then(Value::as_str);
        if optional != Some(version) {
            return Err(format!(
                "{at}: optionalDependencies.{} must be exactly {version:?}, found {optional:?}",
                platform.package
            ));
        }
        let shared = manifest
            .pointer(&format!("/dependencies/{RPC_PACKAGE}"))
            .and_then(Value::as_str);
        if shared != Some(version) {
            return Err(format!(
                "{at}: dependencies.{RPC_PACKAGE} must be exactly {version:?}, found {shared:?}"
            ));
        }
    }
    if !manifest.get("files").is_some_and(Value::is_array) {
        return Err(format!(
            "{at}: files must list what the package carries: its folder ships as it stands"
        ));
    }
    if manifest.get("private").is_some() {
        return Err(format!("{at}: a released package is not private"));
    }
    if let Some(scripts) = manifest.get("scripts").and_then(Value::as_object) {
        for hook in ["preinstall", "install", "postinstall", "prepare"] {
            if scripts.contains_key(hook) {
                return Err(format!(
                    "{at}: scripts.{hook}: OCC installs with --ignore-scripts, so nothing may depend on one"
                ));
            }
        }
    }
    Ok(())
}
