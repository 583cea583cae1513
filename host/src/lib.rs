//! `occ-driver-host` loads OCC drivers as WebAssembly components and calls their
//! contracts, granting each nothing but what its world names. Everything else a
//! component could ask for (files, sockets, environment) is refused when it is
//! loaded.
//!
//! Where things live:
//! - [`runtime`]: the engine, the precompiled-component cache, the per-call
//!   store and its bounds. It knows no capability.
//! - [`capability`]: one module per capability (`ssh_exec`, `local_workspace`,
//!   `hooks`, `log`): its grant from the installation, its per-call state, its
//!   linker wiring and host functions. The SSH grant is
//!   [`capability::ssh_exec::SshGrant`].
//! - [`world`]: one module per world, each with its selection of the
//!   installation; the SSH Compute Driver's is [`world::ssh_compute_driver`],
//!   whose [`Driver`] a controller calls, and OpenClaw's SSH sandbox backend is
//!   [`world::ssh_sandbox_backend`], whose [`SandboxBackend`] OpenClaw (through
//!   the Node client) calls.
//! - [`rpc`]: JSON-RPC 2.0 for controllers in other languages, one
//!   [`rpc::Service`] per world.
//! - [`audit`] and [`installation`]: the audit log sink and the Installation
//!   document (read and parsed; each world reads its own selection); [`open`]: what an installation selects, read once and opened
//!   for the world its component's exports name.
//!
//! Data flows one way: surface (CLI, JSON-RPC, this API) -> world -> runtime
//! and capabilities -> transport.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use occ_driver_host::{CallOptions, Driver, DriverOptions, Installation, Limits, Method, Runtime};
//!
//! let runtime = Arc::new(Runtime::new(Limits::default())?);
//! let installation = Installation::load("installation.yaml".as_ref())?;
//! let driver = Driver::open(runtime, installation, &DriverOptions::default())?;
//! let result = driver
//!     .call_json(Method::ValidateConfiguration, &serde_json::json!({}), CallOptions::default())
//!     .await?;
//! println!("{result}");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod audit;
pub mod capability;
pub mod error;
pub mod installation;
pub mod open;
pub mod rpc;
pub mod runtime;
mod uid;
pub mod world;

pub use capability::hooks::{
    Hook, HookAnswer, HookFuture, HookRefusal, HookRequest, LifecycleHooks, NoHooks,
};
pub use error::{CallError, Code, FailureKind, LoadError};
pub use runtime::{ComponentCache, Limits, Runtime};
pub use world::ssh_compute_driver::installation::Installation;
pub use world::ssh_compute_driver::{CallOptions, Driver, DriverOptions, Method, present};
pub use world::ssh_sandbox_backend::{BackendOptions, SandboxBackend, SandboxCallOptions};
pub use world::{Progress, ProgressSink};
