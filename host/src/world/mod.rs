//! The worlds this host serves, one module each: the component contract a kind
//! of driver implements, the capabilities it is granted, and how the host calls
//! it.
//!
//! A world module holds its private bindings, the list of imports it grants,
//! how its grants are read from the installation, and the dispatch of its
//! exports. Adding a kind of driver is a new module here and its WIT.
//!
//! What every world does alike lives here: admitting a component by its
//! imports and exports (`WorldInfo::admit`), compiling, linking and
//! instantiating it for each call (`World`, `Linked`), numbering, scoping
//! and auditing its calls (`Calls`), and reading the parts of its
//! installation selection both worlds have (`selection`).

/// [`World::prepare`] and [`World::instantiate`] of a world whose bindings
/// `wasmtime::component::bindgen!` generated: the same two calls for every
/// world, written once. Used inside `impl World for ...` after `Pre`.
macro_rules! generated_instance {
    () => {
        fn prepare(
            pre: wasmtime::component::InstancePre<Self::Data>,
        ) -> wasmtime::Result<Self::Pre> {
            <Self::Pre>::new(pre)
        }

        fn instantiate<'a>(
            pre: &'a Self::Pre,
            store: &'a mut wasmtime::Store<Self::Data>,
        ) -> crate::runtime::CallFuture<'a, Self::Guest> {
            Box::pin(pre.instantiate_async(store))
        }
    };
}

/// The names a world's `Method` enum is called by, written once as a table:
/// `name`, `from_name`, `all` (in the table's order), `names` (for messages)
/// and `Display` (the name).
macro_rules! method_names {
    ($method:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $method {
            /// The name a controller calls it by.
            pub fn name(self) -> &'static str {
                match self {
                    $($method::$variant => $name),+
                }
            }

            /// Every method, in the order of its table.
            pub fn all() -> &'static [$method] {
                &[$($method::$variant),+]
            }

            /// The method called `name`.
            pub fn from_name(name: &str) -> Option<$method> {
                Self::all().iter().copied().find(|m| m.name() == name)
            }

            /// Every name, comma separated, for messages.
            pub fn names() -> String {
                Self::all()
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }

        impl std::fmt::Display for $method {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

mod selection;
pub mod ssh_compute_driver;
pub mod ssh_sandbox_backend;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

use crate::audit::{Audit, AuditLog};
use crate::capability::hooks::bindings::occ::compute::types;
use crate::capability::ssh_exec::{SshExec, SshGrant, SshMode};
use crate::capability::{CallScope, Scope};
use crate::error::{CallError, Code, FailureKind, LoadError};
use crate::runtime::sandbox::is_sealed_wasi;
use crate::runtime::{CallData, CallFuture, CompiledComponent, ComponentCache, Runtime};

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
    /// The world's WIT name without its version, e.g.
    /// `occ:compute/ssh-compute-driver`.
    pub name: &'static str,
    /// The versions of [`PACKAGE`] whose world of this name the host serves,
    /// oldest first.
    pub versions: &'static [&'static str],
    /// The interface a component of this world must export.
    pub export: &'static str,
    /// The interfaces of our own package it may import, at every served
    /// version.
    pub imports: &'static [&'static str],
}

impl WorldInfo {
    /// The world's versioned name for a component whose imports and exports
    /// are `names`: at the newest served version any of them names (a 0.3.0
    /// world imports 0.2.0 interfaces beside its own).
    pub fn named_for<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> String {
        let newest = names
            .into_iter()
            .filter_map(|n| n.strip_prefix(PACKAGE)?.rsplit_once('@').map(|(_, v)| v))
            .filter_map(|v| self.versions.iter().position(|s| *s == v))
            .max()
            .unwrap_or(0);
        format!("{}@{}", self.name, self.versions[newest])
    }

    /// [`Self::named_for`] a compiled component.
    pub fn named(&self, component: &CompiledComponent) -> String {
        self.named_for(
            component
                .imports
                .iter()
                .chain(&component.exports)
                .map(String::as_str),
        )
    }

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

    /// Admit a compiled component into this world before anything is linked:
    /// every import granted, and the world's export present.
    pub(crate) fn admit(
        &self,
        path: &Path,
        component: &CompiledComponent,
    ) -> Result<(), LoadError> {
        check_version(
            path,
            component
                .imports
                .iter()
                .chain(&component.exports)
                .map(String::as_str),
        )?;
        let refused = self.refused(component.imports.iter().map(String::as_str));
        if !refused.is_empty() {
            return Err(LoadError::RefusedImports {
                path: path.to_path_buf(),
                world: self.name.into(),
                refused,
            });
        }
        if !component.exports.iter().any(|e| e == self.export) {
            return Err(LoadError::MissingExport {
                path: path.to_path_buf(),
                expected: self.export.into(),
                found: component.exports.clone(),
            });
        }
        Ok(())
    }
}

/// What sets one world's components apart in loading and calling them: the
/// data a call's store holds, the capabilities linked for it, and the
/// bindings an instance is used through. [`Linked`] does the phases every
/// world shares with these; a new world implements this once.
pub(crate) trait World: 'static {
    /// The world as the host knows it before loading anything.
    const INFO: &'static WorldInfo;
    /// A store's data for one call: the runtime's sandbox and each
    /// capability's state.
    type Data: CallData;
    /// The bindings of one instance.
    type Guest: Send + Sync;
    /// The bindings' instantiation, prepared once at load.
    type Pre: Clone + Send + Sync + 'static;
    /// Add the world's capabilities to a linker that holds the sealed WASI.
    fn link(linker: &mut Linker<Self::Data>) -> wasmtime::Result<()>;
    /// The typed form of a checked instantiation.
    fn prepare(pre: InstancePre<Self::Data>) -> wasmtime::Result<Self::Pre>;
    /// A fresh instance in `store`.
    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<Self::Data>,
    ) -> CallFuture<'a, Self::Guest>;
}

/// A component compiled, admitted into its world `W` and linked with the
/// world's capabilities: what every call instantiates afresh.
pub(crate) struct Linked<W: World> {
    /// The compiled component.
    pub(crate) component: CompiledComponent,
    pre: W::Pre,
}

impl<W: World> Linked<W> {
    /// Compile `bytes` (the file at `path`) or load them from `cache`, admit
    /// the component into `W` by its imports and exports, run the world's
    /// own `check` of it, and link it.
    pub(crate) fn load(
        runtime: &Runtime,
        path: &Path,
        bytes: &[u8],
        cache: Option<&ComponentCache>,
        check: impl FnOnce(&CompiledComponent) -> Result<(), LoadError>,
    ) -> Result<Linked<W>, LoadError> {
        let component = runtime.compile_bytes(path, bytes, cache)?;
        W::INFO.admit(path, &component)?;
        check(&component)?;
        let mut linker = runtime.linker::<W::Data>()?;
        W::link(&mut linker).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let invalid = |e: wasmtime::Error| LoadError::InvalidComponent {
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        };
        let pre = linker
            .instantiate_pre(&component.component)
            .map_err(invalid)?;
        let pre = W::prepare(pre).map_err(invalid)?;
        Ok(Linked { component, pre })
    }

    /// The component's prepared instantiation, its exports looked up.
    pub(crate) fn pre(&self) -> &W::Pre {
        &self.pre
    }

    /// One call of `scope`: `f` against a fresh instance in a fresh store
    /// holding `data`, bounded by `runtime`'s limits and cancelled by the
    /// scope's cancellation. The guest's own error becomes the call's by
    /// `guest_error`, an error carries the refusal a capability recorded,
    /// and a call that lost an audit record fails ([`unless_audit_lost`]).
    pub(crate) async fn invoke<R, E, F>(
        &self,
        runtime: &Runtime,
        data: W::Data,
        scope: &CallScope,
        guest_error: fn(E) -> CallError,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send + 'static,
        E: Send + 'static,
        F: for<'a> FnOnce(&'a W::Guest, &'a mut Store<W::Data>) -> CallFuture<'a, Result<R, E>>
            + Send
            + 'static,
    {
        let pre = self.pre.clone();
        let result = runtime
            .call(&self.component.name(), data, &scope.cancel, move |store| {
                Box::pin(async move {
                    let guest = W::instantiate(&pre, &mut *store).await?;
                    f(&guest, store).await
                })
            })
            .await
            .and_then(|result| result.map_err(guest_error))
            .map_err(|e| e.with_refusal(scope.refusal()));
        unless_audit_lost(scope, result)
    }
}

/// The calls of one loaded component: each gets an id (the controller's, or
/// one made up here), its audit records (bound to the component and its
/// SHA-256) and its cancellation. Both worlds number and audit calls alike.
pub(crate) struct Calls {
    driver: String,
    sha256: String,
    audit: Option<Arc<AuditLog>>,
    next: AtomicU64,
}

impl Calls {
    /// Open the audit log `audit_log` names, if any, for `component`'s calls.
    pub(crate) fn open(
        component: &CompiledComponent,
        audit_log: Option<&PathBuf>,
    ) -> Result<Calls, LoadError> {
        let audit = match audit_log {
            Some(path) => Some(Arc::new(AuditLog::open(path).map_err(|e| {
                LoadError::LocalFile {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?)),
            None => None,
        };
        Ok(Calls {
            driver: component.name(),
            sha256: component.sha256.clone(),
            audit,
            next: AtomicU64::new(1),
        })
    }

    /// Audit records of `method` (and of a call, with its id).
    pub(crate) fn audit(&self, method: &str, call_id: Option<&str>) -> Audit {
        let mut base = Map::new();
        base.insert("driver".into(), json!(self.driver));
        base.insert("driverSha256".into(), json!(self.sha256));
        if let Some(id) = call_id {
            base.insert("callId".into(), json!(id));
        }
        base.insert("method".into(), json!(method));
        Audit::new(self.audit.clone(), base)
    }

    /// The scope of one call of `method`.
    pub(crate) fn scope(
        &self,
        method: &str,
        id: Option<String>,
        cancel: CancellationToken,
    ) -> Scope {
        let id = id.unwrap_or_else(|| {
            format!(
                "host-{}-{}",
                std::process::id(),
                self.next.fetch_add(1, Ordering::Relaxed)
            )
        });
        Arc::new(CallScope {
            audit: self.audit(method, Some(&id)),
            id,
            method: method.to_string(),
            driver: self.driver.clone(),
            cancel,
            refusal: Default::default(),
        })
    }

    /// Record the load, or fail it: an audit log that cannot be written must
    /// not let a driver run unaudited.
    pub(crate) fn audit_load(&self, details: serde_json::Value) -> Result<(), LoadError> {
        self.audit("load", None)
            .event("load", details)
            .map_err(|e| LoadError::AuditLog(e.to_string()))
    }
}

/// A guest's own error as its call's: its kind and code, its message with
/// control characters escaped, and the host it names, if any.
pub(crate) fn guest_error(
    kind: types::FailureKind,
    code: String,
    message: &str,
    host: Option<String>,
) -> CallError {
    CallError {
        failure: kind.into(),
        code,
        message: crate::runtime::escape_control(message),
        host,
        refusal: None,
    }
}

/// The grants of the installation at `path` cannot be read from its
/// configuration (`error` says why): a load error that the component would
/// name as an invalid configuration, permanent.
pub(crate) fn invalid_configuration(path: &Path, error: impl std::fmt::Display) -> LoadError {
    LoadError::Configuration {
        path: path.to_path_buf(),
        error: Box::new(CallError::host(
            Code::InvalidConfiguration,
            error.to_string(),
        )),
    }
}

/// The `ssh-exec` capability over `grant` in `mode`, for the installation at
/// `path`, which a failure names.
pub(crate) fn open_ssh(path: &Path, grant: SshGrant, mode: &SshMode) -> Result<SshExec, LoadError> {
    SshExec::open(grant, mode).map_err(|e| LoadError::Installation {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// `result`, unless the call lost an audit record: then it fails with
/// [`Code::AuditUnavailable`], retryable, naming the log and the record,
/// whatever its driver made of the capability's error (a driver sees an I/O
/// error of its exec, which it would report as its transport's).
pub(crate) fn unless_audit_lost<T>(
    scope: &CallScope,
    result: Result<T, CallError>,
) -> Result<T, CallError> {
    match scope.audit.lost() {
        Some(lost) => Err(CallError::host(Code::AuditUnavailable, lost)),
        None => result,
    }
}

/// Every world this host serves.
pub const WORLDS: &[&WorldInfo] = &[&ssh_compute_driver::WORLD, &ssh_sandbox_backend::WORLD];

/// The WIT package every world here belongs to.
pub const PACKAGE: &str = "occ:compute";

/// The versions of [`PACKAGE`] this host serves: those of its worlds. A
/// released version is frozen; a new one is added beside it, with its own
/// worlds, and stays served as long as components built for it run
/// (docs/driver-authors.md, "WIT versions").
pub fn served_versions() -> Vec<&'static str> {
    let mut versions: Vec<&str> = WORLDS
        .iter()
        .flat_map(|w| w.versions.iter().copied())
        .collect();
    versions.sort_unstable();
    versions.dedup();
    versions
}

/// The first of `names` (a component's imports and exports) in [`PACKAGE`]
/// at a version this host does not serve: `(version, name)`.
pub fn unserved_version<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<(String, String)> {
    let served = served_versions();
    names.into_iter().find_map(|name| {
        let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
        let (_, version) = rest.rsplit_once('@')?;
        (!served.contains(&version)).then(|| (version.to_string(), name.to_string()))
    })
}

/// Refuse a component built for a version of [`PACKAGE`] this host does not
/// serve, naming both, before anything else is said about its imports.
pub fn check_version<'a>(
    path: &Path,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), LoadError> {
    match unserved_version(names) {
        Some((found, name)) => Err(LoadError::UnservedVersion {
            path: path.to_path_buf(),
            found,
            name,
            served: served_versions().into_iter().map(str::to_string).collect(),
        }),
        None => Ok(()),
    }
}

/// The world a component with these exports targets, if any.
pub fn identify<'a>(exports: impl IntoIterator<Item = &'a str>) -> Option<&'static WorldInfo> {
    let exports: Vec<&str> = exports.into_iter().collect();
    WORLDS.iter().copied().find(|w| exports.contains(&w.export))
}

impl From<types::FailureKind> for FailureKind {
    fn from(kind: types::FailureKind) -> FailureKind {
        match kind {
            types::FailureKind::Retryable => FailureKind::Retryable,
            types::FailureKind::Permanent => FailureKind::Permanent,
        }
    }
}

/// `result`, unless its JSON is over `max` bytes: then a permanent
/// `result-too-large` naming `what` (e.g. "the driver's preflight").
pub(crate) fn within_result_bound(
    result: Value,
    max: usize,
    what: &str,
) -> Result<Value, CallError> {
    let size = result.to_string().len();
    if size > max {
        return Err(CallError::host(
            Code::ResultTooLarge,
            format!("{what} result is {size} bytes, over the bound of {max}"),
        ));
    }
    Ok(result)
}

/// A component's warnings as JSON: `[{"code", "message"}]`.
pub(crate) fn warnings(w: Vec<types::Warning>) -> Value {
    Value::Array(
        w.into_iter()
            .map(|w| json!({"code": w.code, "message": w.message}))
            .collect(),
    )
}
