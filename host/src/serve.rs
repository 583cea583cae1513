//! `serve`: the contract over JSON-RPC 2.0 on stdio or a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use occ_driver_host::{Driver, DriverOptions, Installation, Runtime, rpc};

/// Arguments of `serve`.
#[derive(clap::Args)]
#[command(after_help = "\
Protocol: JSON-RPC 2.0, one JSON message per line. Requests name contract methods
(preflight, ensureNamespace, bindAgent, validateHarnessAuth, prepareRevision,
activateRevision, deactivateRevision, stopRevision, retireRevision, deleteNamespace)
with OCC's JSON shapes as named params. The host asks the controller for lifecycle
hooks with requests hooks/afterNamespacePrepared, hooks/beforeWorkloadStart,
hooks/beforeWorkloadStop and hooks/beforeNamespaceDelete; $/cancelRequest {\"id\"}
cancels a running call; $/progress notifications report remote progress.

Example:
  printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"preflight\",\"params\":{}}' \\
    | occ-driver-host serve --installation inst.yaml")]
pub(crate) struct ServeArgs {
    /// The installation YAML.
    #[arg(long, short = 'i')]
    pub(crate) installation: PathBuf,
    /// Listen on this Unix socket (mode 0600) instead of stdio.
    #[arg(long, value_name = "PATH")]
    pub(crate) listen: Option<PathBuf>,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
}

pub(crate) fn run(
    runtime: Arc<Runtime>,
    options: DriverOptions,
    installation: Installation,
    args: ServeArgs,
) -> Result<ExitCode> {
    let driver = Arc::new(Driver::open(runtime, installation, &options)?);
    let tokio = tokio::runtime::Runtime::new()?;
    tokio.block_on(async {
        match &args.listen {
            Some(path) => rpc::serve_unix(driver, path).await,
            None => rpc::serve_stdio(driver).await,
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
