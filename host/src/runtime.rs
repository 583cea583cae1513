//! The engine, component loading, and one sandboxed store per contract call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::SshComputeDriverPre;
use crate::cache::{ComponentCache, hex};
use crate::context::CallContext;
use crate::error::{CallError, FailureKind, LoadError};
use crate::imports;

/// How often the epoch advances. The CPU bound is checked at this granularity,
/// and a looping guest yields to the executor this often so that wall-clock
/// timeouts and cancellation can fire.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Bytes of guest stdout/stderr kept per call before it goes to the log.
const GUEST_OUTPUT_CAPACITY: usize = 256 * 1024;

/// Resource bounds for every contract call.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Guest execution time per call, not counting time spent in host calls
    /// (SSH, hooks): a driver's policy runs in microseconds, so seconds mean a loop.
    pub cpu: Duration,
    /// Wall-clock time per call, host calls included. It bounds a whole
    /// lifecycle operation: a few SSH execs of at most 180 s each and hooks.
    pub wall: Duration,
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Concurrent instances the pooling allocator reserves room for.
    pub max_instances: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(600),
            memory_bytes: 64 << 20,
            max_instances: 128,
        }
    }
}

/// One engine for the process, with the pooling allocator and epoch interruption.
pub struct Runtime {
    engine: Engine,
    limits: Limits,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Build the engine and start its epoch ticker.
    pub fn new(limits: Limits) -> Result<Runtime, LoadError> {
        let mut pool = PoolingAllocationConfig::default();
        // A driver component holds a handful of core instances (its module plus
        // adapter shims); leave generous room per component and in total.
        pool.total_component_instances(limits.max_instances)
            .total_core_instances(limits.max_instances * 16)
            .total_memories(limits.max_instances * 4)
            .total_tables(limits.max_instances * 8)
            .total_stacks(limits.max_instances)
            .max_core_instances_per_component(32)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_memory_size(limits.memory_bytes);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .max_wasm_stack(1 << 20);
        let engine = Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = ticker_stop.clone();
            std::thread::Builder::new()
                .name("epoch-ticker".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| LoadError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        }
        Ok(Runtime {
            engine,
            limits,
            ticker_stop,
        })
    }

    /// The engine, for callers that precompile or inspect.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The bounds applied to every call.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Read a component, compile it or load it from `cache`, and report what it
    /// imports and exports. Nothing is checked against the grant yet.
    pub fn compile(
        &self,
        path: &Path,
        cache: Option<&ComponentCache>,
    ) -> Result<CompiledComponent, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::ReadComponent {
            path: path.to_path_buf(),
            source,
        })?;
        let sha256 = hex(&Sha256::digest(&bytes));
        let started = Instant::now();
        let invalid = |e: wasmtime::Error| LoadError::InvalidComponent {
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        };
        let mut from_cache = false;
        let component = match cache {
            Some(cache) => {
                let artifact = cache.artifact_path(&self.engine, &sha256);
                match load_artifact(&self.engine, &artifact) {
                    Some(component) => {
                        from_cache = true;
                        component
                    }
                    None => {
                        let serialized =
                            self.engine.precompile_component(&bytes).map_err(invalid)?;
                        if let Err(e) = cache.store(&artifact, &serialized) {
                            tracing::warn!(artifact = %artifact.display(), "cannot cache the compiled component: {e}");
                        }
                        Component::new(&self.engine, &bytes).map_err(invalid)?
                    }
                }
            }
            None => Component::new(&self.engine, &bytes).map_err(invalid)?,
        };
        let ty = component.component_type();
        let imports = ty
            .imports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let exports = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        Ok(CompiledComponent {
            path: path.to_path_buf(),
            sha256,
            size: bytes.len() as u64,
            component,
            imports,
            exports,
            from_cache,
            load_time: started.elapsed(),
        })
    }

    /// Compile (or load from cache), check imports and exports against the
    /// driver world, and prepare instantiation.
    pub fn load(
        &self,
        path: &Path,
        cache: Option<&ComponentCache>,
    ) -> Result<LoadedDriver, LoadError> {
        let compiled = self.compile(path, cache)?;
        let refused = imports::refused(compiled.imports.iter().map(String::as_str));
        if !refused.is_empty() {
            return Err(LoadError::RefusedImports {
                path: path.to_path_buf(),
                refused,
            });
        }
        if !compiled
            .exports
            .iter()
            .any(|e| e == imports::COMPUTE_DRIVER_EXPORT)
        {
            return Err(LoadError::MissingExport {
                path: path.to_path_buf(),
                expected: imports::COMPUTE_DRIVER_EXPORT.to_string(),
                found: compiled.exports.clone(),
            });
        }
        let mut linker: Linker<CallState> = Linker::new(&self.engine);
        link_sealed_wasi(&mut linker).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        crate::bindings::SshComputeDriver::add_to_linker::<CallState, HasSelf<CallState>>(
            &mut linker,
            |s| s,
        )
        .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let pre = linker.instantiate_pre(&compiled.component).map_err(|e| {
            LoadError::InvalidComponent {
                path: path.to_path_buf(),
                message: format!("{e:#}"),
            }
        })?;
        let pre = SshComputeDriverPre::new(pre).map_err(|e| LoadError::InvalidComponent {
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        })?;
        Ok(LoadedDriver {
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "driver".into()),
            compiled,
            pre,
        })
    }

    /// Run `f` against a fresh instance of `driver` in a fresh store, bounded by
    /// the runtime's limits. Traps, CPU and memory exhaustion and the wall-clock
    /// bound all come back as a [`CallError`]; the host carries on.
    pub async fn call<R, F>(
        &self,
        driver: &LoadedDriver,
        ctx: Arc<CallContext>,
        f: F,
    ) -> Result<R, CallError>
    where
        F: for<'a> FnOnce(
            &'a crate::bindings::SshComputeDriver,
            &'a mut Store<CallState>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = wasmtime::Result<R>> + Send + 'a>,
        >,
    {
        let limits = self.limits;
        let state = CallState::new(ctx.clone(), &limits);
        let stdout = state.stdout.clone();
        let stderr = state.stderr.clone();
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            let meter = &ctx.data().meter;
            if meter.guest_time() > meter.budget {
                return Err(wasmtime::Error::new(CpuExceeded(meter.budget)));
            }
            // Yield so that the wall-clock bound and cancellation get a chance.
            Ok(UpdateDeadline::Yield(1))
        });
        let run = async {
            let instance = driver.pre.instantiate_async(&mut store).await?;
            f(&instance, &mut store).await
        };
        let outcome = tokio::select! {
            r = tokio::time::timeout(limits.wall, run) => match r {
                Ok(r) => r.map_err(|e| classify_trap(e, &limits, &stderr)),
                Err(_) => Err(CallError::new(
                    FailureKind::Retryable,
                    "call-timeout",
                    format!("the driver call did not finish within {} s", limits.wall.as_secs()),
                )),
            },
            () = ctx.cancel.cancelled() => Err(CallError::cancelled()),
        };
        flush_guest_output(&driver.name, "stdout", &stdout);
        flush_guest_output(&driver.name, "stderr", &stderr);
        outcome
    }
}

/// Link only the WASI interfaces the driver world grants: io, the cli streams,
/// environment, exit and terminal interfaces, random and clocks. Filesystem,
/// sockets and name lookup are not linked at all (and a component importing them
/// was refused before linking); the context built in `CallState::new` behind
/// these has no environment, no arguments and a closed stdin.
fn link_sealed_wasi(l: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, io, random};
    use wasmtime_wasi::random::WasiRandom;

    /// The io interfaces work on the resource table alone.
    struct Io;
    impl wasmtime::component::HasData for Io {
        type Data<'a> = &'a mut ResourceTable;
    }

    io::error::add_to_linker::<CallState, Io>(l, |t| &mut t.table)?;
    io::poll::add_to_linker::<CallState, Io>(l, |t| &mut t.table)?;
    io::streams::add_to_linker::<CallState, Io>(l, |t| &mut t.table)?;
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, |t| t.clocks())?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, |t| t.clocks())?;
    random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.wasi.random())?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, |t| t.cli())?;
    Ok(())
}

/// Load an artifact we wrote earlier, or `None` if it is absent or unusable.
#[allow(unsafe_code)]
fn load_artifact(engine: &Engine, artifact: &Path) -> Option<Component> {
    // Read the artifact instead of mapping it: a mapped file truncated by anyone
    // later would fault this process with SIGBUS.
    let bytes = std::fs::read(artifact).ok()?;
    // SAFETY: the artifact was produced by `Engine::precompile_component` of an
    // engine with the same compatibility hash (it is part of the file name) and
    // lives in a directory `ComponentCache::open` verified to be private to this
    // user. Wasmtime additionally checks the header and refuses an incompatible
    // artifact with an error, which sends us back to compiling.
    match unsafe { Component::deserialize(engine, &bytes) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(artifact = %artifact.display(), "ignoring unusable cached component: {e:#}");
            None
        }
    }
}

fn flush_guest_output(driver: &str, stream: &str, pipe: &MemoryOutputPipe) {
    let bytes = pipe.contents();
    for line in String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| !l.is_empty())
    {
        tracing::info!(target: "driver", driver, stream, "{line}");
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the driver used more than {} ms of CPU in one call", .0.as_millis())]
struct CpuExceeded(Duration);

fn classify_trap(e: wasmtime::Error, limits: &Limits, stderr: &MemoryOutputPipe) -> CallError {
    if let Some(cpu) = e.downcast_ref::<CpuExceeded>() {
        return CallError::new(
            FailureKind::Permanent,
            "cpu-limit",
            format!("driver stopped: {cpu}"),
        );
    }
    let text = format!("{e:#}");
    if text.contains("forcing trap when growing memory")
        || text.contains("memory") && text.contains("limit")
    {
        return CallError::new(
            FailureKind::Permanent,
            "memory-limit",
            format!(
                "driver stopped: it tried to grow its memory past the {} MiB limit",
                limits.memory_bytes >> 20
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
        return CallError::new(
            FailureKind::Permanent,
            "driver-panic",
            format!("driver panicked at {location}: {message}"),
        );
    }
    let summary = text.lines().next().unwrap_or("trap").to_string();
    CallError::new(
        FailureKind::Permanent,
        "driver-trap",
        format!("driver trapped: {summary}"),
    )
}

/// A compiled component and what it asks for, before any grant check.
pub struct CompiledComponent {
    /// The file it came from.
    pub path: PathBuf,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// File size in bytes.
    pub size: u64,
    /// The compiled component.
    pub component: Component,
    /// Import names, in the component's order.
    pub imports: Vec<String>,
    /// Export names.
    pub exports: Vec<String>,
    /// Whether it came from the precompiled cache.
    pub from_cache: bool,
    /// Time to compile or deserialize.
    pub load_time: Duration,
}

/// A driver component ready to instantiate once per call.
pub struct LoadedDriver {
    /// The driver's name in logs (the component file's stem).
    pub name: String,
    /// The compiled component and its metadata.
    pub compiled: CompiledComponent,
    pre: SshComputeDriverPre<CallState>,
}

/// Tracks guest execution time as wall time minus time spent inside host calls.
pub(crate) struct CpuMeter {
    started: Instant,
    in_host: Duration,
    budget: Duration,
}

impl CpuMeter {
    fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.in_host)
    }

    /// Add the time a host call took; it does not count against the guest.
    pub(crate) fn host_time(&mut self, spent: Duration) {
        self.in_host += spent;
    }
}

/// Everything a store holds for one call.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    pub(crate) meter: CpuMeter,
    pub(crate) ctx: Arc<CallContext>,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl CallState {
    fn new(ctx: Arc<CallContext>, limits: &Limits) -> CallState {
        let stdout = MemoryOutputPipe::new(GUEST_OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(GUEST_OUTPUT_CAPACITY);
        // Deny by default: `WasiCtxBuilder::new()` starts with no preopens, no
        // environment, no arguments and a closed stdin; sockets and name lookup
        // are switched off explicitly so that even a linked socket call fails.
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        CallState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .trap_on_grow_failure(true)
                .build(),
            meter: CpuMeter {
                started: Instant::now(),
                in_host: Duration::ZERO,
                budget: limits.cpu,
            },
            ctx,
            stdout,
            stderr,
        }
    }
}

impl CallState {
    /// Await `work` done on the guest's behalf outside it (SSH, hooks): its time
    /// does not count against the guest's CPU budget.
    pub(crate) async fn outside_guest<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let started = Instant::now();
        let result = work.await;
        self.meter.host_time(started.elapsed());
        result
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
