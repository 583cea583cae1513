//! `occ-driver-host` loads an OCC Compute Driver as a WebAssembly component and
//! calls its ComputeDriver contract, granting it nothing but what its world names:
//! exec on the installation's SSH hosts by alias, the controller's lifecycle
//! hooks, and a log. Everything else a component could ask for (files, sockets,
//! environment) is refused when it is loaded.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use occ_driver_host::{Driver, DriverOptions, Installation, Limits, Method, Runtime};
//!
//! let runtime = Arc::new(Runtime::new(Limits::default())?);
//! let installation = Installation::load("installation.yaml".as_ref())?;
//! let driver = Driver::open(runtime, installation, &DriverOptions::default())?;
//! let result = driver
//!     .call_json(Method::ValidateConfiguration, &serde_json::json!({}), Default::default())
//!     .await?;
//! println!("{result}");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod audit;
#[allow(missing_docs, unreachable_pub)]
mod bindings;
pub mod cache;
mod context;
pub mod contract;
pub mod error;
pub mod hooks;
pub mod imports;
pub mod installation;
mod log;
pub mod rpc;
pub mod runtime;
pub mod ssh_exec;
pub mod transcript;

pub use audit::AuditLog;
pub use bindings::occ::compute::types::{AgentBinding, Namespace};
pub use cache::ComponentCache;
pub use context::{HelperLine, ProgressSink};
pub use contract::{CallOptions, Driver, DriverOptions, Method, present};
pub use error::{CallError, FailureKind, LoadError};
pub use hooks::{LifecycleHooks, NoHooks};
pub use installation::Installation;
pub use runtime::{Limits, Runtime};
