//! Opening what an installation selects: the document read and parsed once,
//! the component file read once, and the world its exports name opened with
//! both. Every command that runs a component (`check`, `call`, `serve`) opens
//! it here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::capability::ssh_exec::SshMode;
use crate::error::LoadError;
use crate::installation::read_document;
use crate::runtime::{ComponentCache, Runtime, component};
use crate::world::ssh_compute_driver::installation::Installation;
use crate::world::ssh_sandbox_backend::installation::SandboxInstallation;
use crate::world::{self, ssh_compute_driver, ssh_sandbox_backend};
use crate::{BackendOptions, Driver, DriverOptions, SandboxBackend};

/// A component opened for its world.
pub enum Opened {
    /// An SSH Compute Driver.
    Compute(Driver),
    /// OpenClaw's SSH sandbox backend.
    Sandbox(SandboxBackend),
}

/// How to open it.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// The component to load instead of (or in the absence of) the one the
    /// selection names.
    pub component: Option<PathBuf>,
    /// Where precompiled components are kept; `None` compiles every time.
    pub cache: Option<ComponentCache>,
    /// The audit log to append to.
    pub audit_log: Option<PathBuf>,
    /// Live SSH, or a recorded session.
    pub ssh: SshMode,
    /// A compute driver's revision calls use only bindings `bindAgent`
    /// accepted (a long-running `serve`).
    pub require_bind: bool,
}

/// Which selection of the document is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Compute,
    Sandbox,
}

/// The document's selection, parsed.
enum Selected {
    Compute(Installation),
    Sandbox(SandboxInstallation),
}

/// Open the installation at `path`: the component the caller names, or the
/// one the document's only selection (`drivers.compute` or `drivers.sandbox`)
/// names, for the world its exports name. The selection is parsed once: for
/// the component it names, and then opened with it; a component named by the
/// caller is opened with the selection of its world.
pub fn open(
    runtime: Arc<Runtime>,
    path: &Path,
    options: &OpenOptions,
) -> Result<Opened, LoadError> {
    let doc = read_document(path)?;
    let selected = |kind: &str| doc.pointer(&format!("/drivers/{kind}")).is_some();
    let err = |message: String| LoadError::Installation {
        path: path.to_path_buf(),
        message,
    };
    let (component, parsed) = match &options.component {
        Some(c) => (c.clone(), None),
        // The only selection names it, in its own words when it does not.
        None => {
            let parsed = match (selected("compute"), selected("sandbox")) {
                (true, false) => Selected::Compute(Installation::from_document(path, &doc, None)?),
                (false, true) => {
                    Selected::Sandbox(SandboxInstallation::from_document(path, &doc, None)?)
                }
                (true, true) => {
                    return Err(err(
                        "selects both drivers.compute and drivers.sandbox; name the component to load with --component".into(),
                    ));
                }
                (false, false) => {
                    return Err(err(
                        "drivers.compute or drivers.sandbox: missing; select a compute driver or a sandbox backend".into(),
                    ));
                }
            };
            let component = match &parsed {
                Selected::Compute(i) => i.component.clone(),
                Selected::Sandbox(i) => i.component.clone(),
            };
            (component, Some(parsed))
        }
    };
    let bytes = component::read(&component)?;
    let kind = world_of(&component, &bytes)?;
    if kind == Kind::Sandbox && !selected("sandbox") {
        return Err(err(format!(
            "drivers.sandbox: missing; {} is a sandbox backend ({})",
            component.display(),
            ssh_sandbox_backend::WORLD.name
        )));
    }
    let selection = match (kind, parsed) {
        (Kind::Compute, Some(Selected::Compute(i))) => Selected::Compute(i),
        (Kind::Sandbox, Some(Selected::Sandbox(i))) => Selected::Sandbox(i),
        (Kind::Compute, _) => {
            Selected::Compute(Installation::from_document(path, &doc, Some(&component))?)
        }
        (Kind::Sandbox, _) => Selected::Sandbox(SandboxInstallation::from_document(
            path,
            &doc,
            Some(&component),
        )?),
    };
    open_selected(runtime, selection, &bytes, options)
}

/// The world a component's exports name, after its WIT version is checked.
fn world_of(component: &Path, bytes: &[u8]) -> Result<Kind, LoadError> {
    let exports =
        component::export_names(bytes).map_err(|message| LoadError::InvalidComponent {
            path: component.to_path_buf(),
            message,
        })?;
    world::check_version(component, exports.iter().map(String::as_str))?;
    match world::identify(exports.iter().map(String::as_str)) {
        Some(w) if w.name == ssh_sandbox_backend::WORLD.name => Ok(Kind::Sandbox),
        Some(w) if w.name == ssh_compute_driver::WORLD.name => Ok(Kind::Compute),
        _ => Err(LoadError::MissingExport {
            path: component.to_path_buf(),
            expected: world::WORLDS
                .iter()
                .map(|w| w.export)
                .collect::<Vec<_>>()
                .join(" or "),
            found: exports,
        }),
    }
}

fn open_selected(
    runtime: Arc<Runtime>,
    selection: Selected,
    bytes: &[u8],
    options: &OpenOptions,
) -> Result<Opened, LoadError> {
    match selection {
        Selected::Compute(installation) => Driver::open_read(
            runtime,
            installation,
            bytes,
            &DriverOptions {
                cache: options.cache.clone(),
                audit_log: options.audit_log.clone(),
                ssh: options.ssh.clone(),
                require_bind: options.require_bind,
            },
        )
        .map(Opened::Compute),
        Selected::Sandbox(installation) => SandboxBackend::open_read(
            runtime,
            installation,
            bytes,
            &BackendOptions {
                cache: options.cache.clone(),
                audit_log: options.audit_log.clone(),
                ssh: options.ssh.clone(),
            },
        )
        .map(Opened::Sandbox),
    }
}
