//! `serve`: the contract over JSON-RPC 2.0 on stdio or a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use occ_driver_host::rpc;

use super::{Setup, report_load_error};

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
    installation: PathBuf,
    /// Listen on this Unix socket (mode 0600, this user only) instead of stdio.
    #[arg(long, value_name = "PATH")]
    listen: Option<PathBuf>,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
}

pub(crate) fn run(setup: &Setup, args: ServeArgs) -> Result<ExitCode> {
    let tokio = tokio::runtime::Runtime::new()?;
    // Open inside the runtime: the SSH capability starts its idle reaper there.
    let driver =
        match tokio.block_on(async { setup.open(&args.installation, args.audit_log.clone()) }) {
            Ok(d) => Arc::new(d),
            Err(e) => return report_load_error(e, false),
        };
    tokio.block_on(async {
        match &args.listen {
            Some(path) => rpc::serve_unix(driver, path).await,
            None => rpc::serve_stdio(driver).await,
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
