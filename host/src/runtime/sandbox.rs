//! What every store holds whatever the world: the sealed WASI context, the
//! resource table, the resource limiter and the guest's own stdout and stderr.
//!
//! WASI is linked sealed: io, the cli streams, environment, exit and terminal
//! interfaces, random and clocks, and nothing else. The context behind them is
//! built deny-by-default (`WasiCtxBuilder::new()` starts with no preopens, no
//! environment, no arguments and a closed stdin) and sockets and name lookup are
//! switched off explicitly, so that even a linked socket call would fail.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Limits;

/// Bytes of guest stdout/stderr kept per call before it goes to the log.
pub(crate) const GUEST_OUTPUT_CAPACITY: usize = 256 * 1024;

/// The runtime's part of a store's data.
pub struct Sandbox {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("limiter", &self.limiter)
            .finish()
    }
}

/// Store data of any world: it contains a [`Sandbox`].
pub trait CallData: Send + 'static {
    /// The runtime's part.
    fn sandbox(&mut self) -> &mut Sandbox;
}

impl Sandbox {
    /// A fresh sandbox bounded by `limits`.
    pub fn new(limits: &Limits) -> Sandbox {
        let stdout = MemoryOutputPipe::new(GUEST_OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(GUEST_OUTPUT_CAPACITY);
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Sandbox {
            wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter::new(limits),
            stdout,
            stderr,
        }
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Link the sealed WASI interfaces (see the module documentation).
pub(crate) fn link_sealed_wasi<D: CallData>(l: &mut Linker<D>) -> Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, io, random};
    use wasmtime_wasi::random::WasiRandom;

    /// The io interfaces work on the resource table alone.
    struct Io;
    impl wasmtime::component::HasData for Io {
        type Data<'a> = &'a mut ResourceTable;
    }

    io::error::add_to_linker::<D, Io>(l, |d| &mut d.sandbox().table)?;
    io::poll::add_to_linker::<D, Io>(l, |d| &mut d.sandbox().table)?;
    io::streams::add_to_linker::<D, Io>(l, |d| &mut d.sandbox().table)?;
    clocks::wall_clock::add_to_linker::<D, WasiClocks>(l, |d| d.sandbox().clocks())?;
    clocks::monotonic_clock::add_to_linker::<D, WasiClocks>(l, |d| d.sandbox().clocks())?;
    random::random::add_to_linker::<D, WasiRandom>(l, |d| d.sandbox().wasi.random())?;
    random::insecure::add_to_linker::<D, WasiRandom>(l, |d| d.sandbox().wasi.random())?;
    random::insecure_seed::add_to_linker::<D, WasiRandom>(l, |d| d.sandbox().wasi.random())?;
    cli::exit::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::environment::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::stdin::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::stdout::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::stderr::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::terminal_input::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::terminal_output::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::terminal_stdin::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::terminal_stdout::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    cli::terminal_stderr::add_to_linker::<D, WasiCli>(l, |d| d.sandbox().cli())?;
    Ok(())
}

/// The WASI interfaces linked sealed, by package and interface; any 0.2.x
/// version is accepted because the linker serves every 0.2 patch release.
pub const SEALED_WASI: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
];

/// Whether `import` names one of the sealed WASI interfaces.
pub fn is_sealed_wasi(import: &str) -> bool {
    match import.split_once('@') {
        Some((interface, version)) => {
            version.starts_with("0.2.") && SEALED_WASI.contains(&interface)
        }
        None => false,
    }
}

/// Why the limiter stopped a guest.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LimitExceeded {
    #[error("it tried to grow its memories past the {} MiB limit of one call", .0 >> 20)]
    Memory(usize),
    #[error("it tried to grow a table past {0} elements")]
    TableElements(usize),
}

/// Bounds the memory of a whole call, not of each memory alone: a component can
/// have several memories, and the bound is on what one call may hold.
#[derive(Debug)]
pub struct CallLimiter {
    total: usize,
    max_total: usize,
    max_memories: usize,
    max_tables: usize,
    max_table_elements: usize,
    max_instances: usize,
}

impl CallLimiter {
    fn new(limits: &Limits) -> CallLimiter {
        CallLimiter {
            total: 0,
            max_total: limits.memory_bytes,
            max_memories: limits.max_memories as usize,
            max_tables: limits.max_tables as usize,
            max_table_elements: limits.max_table_elements,
            max_instances: limits.max_core_instances as usize,
        }
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _: Option<usize>) -> Result<bool> {
        let total = self.total - current.min(self.total) + desired;
        if total > self.max_total {
            return Err(LimitExceeded::Memory(self.max_total).into());
        }
        self.total = total;
        Ok(true)
    }

    fn table_growing(&mut self, _: usize, desired: usize, _: Option<usize>) -> Result<bool> {
        if desired > self.max_table_elements {
            return Err(LimitExceeded::TableElements(self.max_table_elements).into());
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.max_instances
    }

    fn tables(&self) -> usize {
        self.max_tables
    }

    fn memories(&self) -> usize {
        self.max_memories
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_sealed_wasi_only() {
        let cases = [
            ("wasi:io/streams@0.2.6", true),
            ("wasi:io/streams@0.2.0", true),
            ("wasi:cli/environment@0.2.3", true),
            ("wasi:clocks/wall-clock@0.2.6", true),
            ("wasi:random/random@0.2.6", true),
            ("wasi:io/streams@0.3.0", false),
            ("wasi:io/streams", false),
            ("wasi:filesystem/types@0.2.6", false),
            ("wasi:filesystem/preopens@0.2.6", false),
            ("wasi:sockets/tcp@0.2.6", false),
            ("wasi:sockets/ip-name-lookup@0.2.6", false),
            ("wasi:http/outgoing-handler@0.2.6", false),
        ];
        for (name, sealed) in cases {
            assert_eq!(is_sealed_wasi(name), sealed, "{name}");
        }
    }

    #[test]
    fn the_memory_bound_is_on_the_sum_of_memories() {
        let mut limiter = CallLimiter::new(&Limits {
            memory_bytes: 100,
            ..Limits::default()
        });
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        // A second memory of 60 would bring the call to 120.
        assert!(limiter.memory_growing(0, 60, None).is_err());
        assert!(limiter.memory_growing(0, 40, None).unwrap());
    }
}
