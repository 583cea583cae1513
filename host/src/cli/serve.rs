//! `serve`: the contract over JSON-RPC 2.0 on stdio or a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use occ_driver_host::capability::ssh_exec::SshMode;
use occ_driver_host::{CallError, CallOptions, FailureKind, LoadError, Method, rpc};
use serde_json::json;

use super::Setup;

/// Arguments of `serve`.
#[derive(clap::Args)]
#[command(after_help = "\
Before answering anything, serve validates the whole driver configuration and
exits 65 naming the key at fault; with --preflight it also probes every host
and refuses to serve when one fails (OCC's production startup does the same).

Protocol: JSON-RPC 2.0, one JSON message per line. Requests name the contract
methods (configurationSchema, validateConfiguration, preflight, ensureNamespace,
bindAgent, validateHarnessAuth, prepareRevision, activateRevision,
deactivateRevision, stopRevision, retireRevision, deleteAgentRuntimeCredentials,
deleteNamespace) with OCC's JSON shapes as named params. Revision calls use the
binding bindAgent accepted. The host asks the controller for lifecycle hooks with
requests hooks/afterNamespacePrepared {namespace}, hooks/beforeWorkloadStart
{revision, launch}, hooks/beforeWorkloadStop {revision, cleanup} and
hooks/beforeNamespaceDelete {namespace}, each with the call's callId;
$/cancelRequest {\"id\"} cancels a running call; $/progress notifications report
remote progress.

Example:
  printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"preflight\",\"params\":{}}' \\
    | occ-driver-host serve --installation inst.yaml")]
pub(crate) struct ServeArgs {
    /// The installation YAML [default: $OCC_CONFIG_PATH].
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// Listen on this Unix socket (mode 0600, this user only) instead of stdio.
    #[arg(long, value_name = "PATH")]
    listen: Option<PathBuf>,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Probe every configured host before serving; a failure names the host and
    /// stops the server.
    #[arg(long)]
    preflight: bool,
    /// Allow --ssh-replay: every exec is answered from a recording, so a
    /// controller would believe hosts changed that were never touched. For tests only.
    #[arg(long)]
    test_mode: bool,
}

pub(crate) fn run(setup: &Setup, args: ServeArgs) -> Result<ExitCode> {
    if matches!(setup.ssh, SshMode::Replay(_)) && !args.test_mode {
        bail!(
            "serve --ssh-replay answers every exec from a recording and touches no host; a controller would take that for real effects. Add --test-mode if this is a test"
        );
    }
    let tokio = tokio::runtime::Runtime::new()?;
    // Open inside the runtime: the SSH capability starts its idle reaper there.
    let driver = match tokio
        .block_on(async { setup.open(&args.installation, args.audit_log.clone(), true) })
    {
        Ok(d) => Arc::new(d),
        Err(LoadError::Configuration { error, .. }) => {
            return Ok(refuse_to_serve("the configuration", &error));
        }
        Err(e) => return Err(e.into()),
    };
    let mut startup = vec![Method::ValidateConfiguration];
    if args.preflight {
        startup.push(Method::Preflight);
    }
    for method in startup {
        let checked = tokio.block_on(driver.call_json(method, &json!({}), CallOptions::default()));
        if let Err(e) = checked {
            return Ok(refuse_to_serve(method.name(), &e));
        }
    }
    tokio.block_on(async {
        match &args.listen {
            Some(path) => rpc::serve_unix(driver, path).await,
            None => rpc::serve_stdio(driver).await,
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A startup check failed: say so on stderr (stdout is the JSON-RPC channel)
/// and exit with the failure's status.
fn refuse_to_serve(what: &str, e: &CallError) -> ExitCode {
    let host = e
        .host
        .as_deref()
        .map(|h| format!(" [host {h}]"))
        .unwrap_or_default();
    let kind = match e.failure {
        FailureKind::Permanent => "permanent",
        FailureKind::Retryable => "retryable",
    };
    eprintln!(
        "serve: {what} failed at startup, not serving: {} ({kind}){host}: {}",
        e.code, e.message
    );
    ExitCode::from(e.failure.exit_code())
}
