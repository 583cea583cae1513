//! The engine, component loading and one sandboxed store per call.
//!
//! The runtime knows no capability and no world: it compiles components (with
//! the on-disk [`cache`]), reports what they import and export, links the sealed
//! WASI interfaces, and runs one call at a time in a fresh store bounded by
//! [`Limits`]. Worlds (`crate::world`) add their capabilities to the linker and
//! decide what a call does.
//!
//! Bounds on every call:
//! - **CPU**: fuel. Every guest instruction consumes it and host calls do not,
//!   so time spent waiting on SSH or the controller, or a loaded machine, never
//!   counts against the guest. Running out traps (`cpu-limit`, permanent).
//! - **Wall clock**: the whole call, host calls included (`call-timeout`,
//!   retryable). The guest yields to the executor every [`YIELD_FUEL`] units, so
//!   the bound and cancellation fire even inside a loop.
//! - **Memory, tables, instances**: per call, across every memory of the
//!   component ([`sandbox::CallLimiter`]).
//! - **Cancellation**: the capabilities answer `cancelled` from then on and the
//!   guest gets [`Limits::cancel_grace`] to finish (for example to run a
//!   compensating hook); then its store is dropped.

pub mod cache;
pub mod component;
pub mod sandbox;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

pub use cache::ComponentCache;
pub use component::CompiledComponent;
pub use sandbox::{CallData, Sandbox};

use crate::error::{CallError, Code, LoadError};
use sandbox::LimitExceeded;

/// Fuel units per millisecond of guest CPU, measured on the 2-core development
/// machines with the `overhead` benchmark's fuel figure (a fuel unit is roughly
/// one WebAssembly instruction). Budgets are stated in time because that is what
/// an operator reasons about; the conversion only has to be the right order of
/// magnitude.
pub const FUEL_PER_MS: u64 = 400_000;

/// The guest yields to the executor after this much fuel (about a quarter of a
/// millisecond), so that wall-clock bounds and cancellation can fire.
pub const YIELD_FUEL: u64 = 100_000;

/// Resource bounds for every call.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Guest CPU per call, as fuel (see [`FUEL_PER_MS`]); host calls do not
    /// count. A driver's policy runs in microseconds, so seconds mean a loop.
    pub cpu: Duration,
    /// Wall-clock time per call, host calls included. It bounds a whole
    /// lifecycle operation: a few SSH execs of at most 180 s each and hooks.
    pub wall: Duration,
    /// After cancellation, how long the guest may still run (to compensate)
    /// before its store is dropped. OCC gives a cancelled rollback 5 s.
    pub cancel_grace: Duration,
    /// Linear memory per call, summed over every memory of the component.
    pub memory_bytes: usize,
    /// Memories per call.
    pub max_memories: u32,
    /// Tables per call.
    pub max_tables: u32,
    /// Elements per table.
    pub max_table_elements: usize,
    /// Core instances per call (a component is a handful of them).
    pub max_core_instances: u32,
    /// Concurrent calls the pooling allocator reserves room for.
    pub max_instances: u32,
    /// The largest result a call may return, as JSON bytes.
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(600),
            cancel_grace: Duration::from_secs(5),
            memory_bytes: 64 << 20,
            max_memories: 4,
            max_tables: 16,
            max_table_elements: 100_000,
            max_core_instances: 32,
            max_instances: 128,
            max_result_bytes: 1 << 20,
        }
    }
}

impl Limits {
    /// The CPU budget in fuel units.
    pub fn fuel(&self) -> u64 {
        (self.cpu.as_millis() as u64).saturating_mul(FUEL_PER_MS)
    }
}

/// One engine for the process, with the pooling allocator and fuel metering.
pub struct Runtime {
    engine: Engine,
    limits: Limits,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.limits)
            .finish()
    }
}

/// What a call runs against its fresh store.
pub type CallFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

impl Runtime {
    /// Build the engine.
    pub fn new(limits: Limits) -> Result<Runtime, LoadError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(limits.max_instances)
            .total_core_instances(limits.max_instances * limits.max_core_instances)
            .total_memories(limits.max_instances * limits.max_memories)
            .total_tables(limits.max_instances * limits.max_tables)
            .total_stacks(limits.max_instances)
            .max_core_instances_per_component(limits.max_core_instances)
            .max_memories_per_component(limits.max_memories)
            .max_tables_per_component(limits.max_tables)
            .table_elements(limits.max_table_elements)
            .max_memory_size(limits.memory_bytes);
        let mut config = Config::new();
        config
            .consume_fuel(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .max_wasm_stack(1 << 20);
        let engine = Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(Runtime { engine, limits })
    }

    /// The engine, for callers that precompile or inspect.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The bounds applied to every call.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The same engine with another wall-clock bound per call, for a world
    /// whose calls wait on long remote commands. Only per-call bounds can
    /// differ: the engine's pooling allocator is shared.
    pub fn with_wall(&self, wall: Duration) -> Runtime {
        Runtime {
            engine: self.engine.clone(),
            limits: Limits {
                wall,
                ..self.limits
            },
        }
    }

    /// Read a component, compile it or load it from `cache`, and report what it
    /// imports and exports. Nothing is checked against any grant yet.
    pub fn compile(
        &self,
        path: &Path,
        cache: Option<&ComponentCache>,
    ) -> Result<CompiledComponent, LoadError> {
        component::compile(&self.engine, path, cache)
    }

    /// [`Runtime::compile`] for a component file already read: `bytes` are
    /// `path`'s, read once by whoever opened the installation.
    pub fn compile_bytes(
        &self,
        path: &Path,
        bytes: &[u8],
        cache: Option<&ComponentCache>,
    ) -> Result<CompiledComponent, LoadError> {
        component::compile_bytes(&self.engine, path, bytes, cache)
    }

    /// A linker with the sealed WASI interfaces; the world adds its capabilities.
    pub fn linker<D: CallData>(&self) -> Result<Linker<D>, LoadError> {
        let mut linker = Linker::new(&self.engine);
        sandbox::link_sealed_wasi(&mut linker).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(linker)
    }

    /// Run `f` against a fresh store holding `data`, bounded by the runtime's
    /// limits. Traps, CPU and memory exhaustion, the wall-clock bound and
    /// cancellation all come back as a [`CallError`]; the host carries on.
    /// `name` labels the guest's own stdout and stderr in the log.
    pub async fn call<D, R, F>(
        &self,
        name: &str,
        data: D,
        cancel: &CancellationToken,
        f: F,
    ) -> Result<R, CallError>
    where
        D: CallData,
        F: for<'a> FnOnce(&'a mut Store<D>) -> CallFuture<'a, R>,
    {
        let limits = self.limits;
        let mut store = Store::new(&self.engine, data);
        store.limiter(|d| &mut d.sandbox().limiter);
        store
            .set_fuel(limits.fuel())
            .and_then(|()| store.fuel_async_yield_interval(Some(YIELD_FUEL)))
            .map_err(|e| CallError::host(Code::Engine, format!("{e:#}")))?;
        let stdout = store.data_mut().sandbox().stdout.clone();
        let stderr = store.data_mut().sandbox().stderr.clone();
        let outcome = {
            let run = f(&mut store);
            tokio::pin!(run);
            tokio::select! {
                r = tokio::time::timeout(limits.wall, &mut run) => match r {
                    Ok(r) => r.map_err(|e| classify_trap(e, &limits, &stderr)),
                    Err(_) => Err(CallError::host(Code::CallTimeout, format!("the driver call did not finish within {} s", limits.wall.as_secs()),
                    )),
                },
                () = cancel.cancelled() => {
                    // The capabilities see the same token and now answer
                    // `cancelled`; the guest may still compensate, briefly.
                    let _ = tokio::time::timeout(limits.cancel_grace, &mut run).await;
                    Err(CallError::cancelled())
                }
            }
        };
        flush_guest_output(name, "stdout", &stdout);
        flush_guest_output(name, "stderr", &stderr);
        outcome
    }
}

fn flush_guest_output(driver: &str, stream: &str, pipe: &MemoryOutputPipe) {
    let bytes = pipe.contents();
    for line in String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| !l.is_empty())
    {
        tracing::info!(target: "driver", driver, stream, "{}", escape_control(line));
    }
}

/// Text from a guest or a remote host, safe to print on a terminal: control
/// characters (escape sequences among them) are shown escaped.
pub fn escape_control(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// The first `chars` characters of `text`, as [`escape_control`] shows them:
/// how an error names a value a guest or a caller chose, however long it is.
pub fn escape_control_head(text: &str, chars: usize) -> String {
    escape_control(&text.chars().take(chars).collect::<String>())
}

fn classify_trap(e: wasmtime::Error, limits: &Limits, stderr: &MemoryOutputPipe) -> CallError {
    if matches!(
        e.downcast_ref::<wasmtime::Trap>(),
        Some(wasmtime::Trap::OutOfFuel)
    ) {
        return CallError::host(
            Code::CpuLimit,
            format!(
                "driver stopped: it used more than {} ms of CPU in one call (a budget of {} fuel units)",
                limits.cpu.as_millis(),
                limits.fuel()
            ),
        );
    }
    if let Some(limit) = e.downcast_ref::<LimitExceeded>() {
        let code = match limit {
            LimitExceeded::Memory(_) => Code::MemoryLimit,
            _ => Code::ResourceLimit,
        };
        return CallError::host(code, format!("driver stopped: {limit}"));
    }
    let text = format!("{e:#}");
    if text.contains("resource limit exceeded") {
        // Counts the limiter reports to wasmtime (memories, tables, instances)
        // are enforced by wasmtime itself, with its own message.
        return CallError::host(
            Code::ResourceLimit,
            format!(
                "driver stopped: {}",
                text.lines().next().unwrap_or_default()
            ),
        );
    }
    let guest_stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
    let lines: Vec<&str> = guest_stderr.lines().collect();
    if let Some(i) = lines.iter().position(|l| l.contains("panicked at")) {
        // Rust prints the location on one line and the message on the next.
        let location = lines[i]
            .split("panicked at")
            .nth(1)
            .unwrap_or("")
            .trim()
            .trim_end_matches(':');
        let message = lines.get(i + 1).map(|m| m.trim()).unwrap_or("");
        return CallError::host(
            Code::DriverPanic,
            escape_control(&format!("driver panicked at {location}: {message}")),
        );
    }
    let summary = text.lines().next().unwrap_or("trap").to_string();
    CallError::host(
        Code::DriverTrap,
        escape_control(&format!("driver trapped: {summary}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value is cut to its first characters (never inside one) before its
    /// control characters are escaped, so an escape is never cut in half.
    #[test]
    fn the_head_of_a_value_is_cut_by_characters_then_escaped() {
        assert_eq!(escape_control_head(&"é".repeat(70), 64), "é".repeat(64));
        assert_eq!(escape_control_head("ab\u{1b}[2J", 3), "ab\\u{1b}");
        assert_eq!(escape_control_head("short", 64), "short");
    }
}
