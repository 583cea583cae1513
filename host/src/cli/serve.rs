//! `serve`: the component's methods over JSON-RPC 2.0 on stdio or a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use occ_driver_host::capability::ssh_exec::SshMode;
use occ_driver_host::rpc::Service;
use occ_driver_host::world::ssh_sandbox_backend::SandboxCallOptions;
use occ_driver_host::{CallError, CallOptions, Code, LoadError, Method, rpc};
use serde_json::json;

use super::{Opened, Setup};

/// Arguments of `serve`.
#[derive(clap::Args)]
#[command(after_help = "\
Before answering anything, serve validates the whole configuration and exits
65 naming the key at fault; with --preflight it also probes every host (for a
sandbox backend, its target's remote utilities) and refuses to serve when one
fails (OCC's production startup does the same).

Protocol: JSON-RPC 2.0, one JSON message per line. Requests name the world's
methods with their JSON shapes as named params: for a compute driver the OCC
contract (configurationSchema, validateConfiguration, preflight, ensureNamespace,
bindAgent, validateHarnessAuth, prepareRevision, activateRevision,
deactivateRevision, stopRevision, retireRevision, deleteAgentRuntimeCredentials,
deleteNamespace), revision calls using the binding bindAgent accepted; for a
sandbox backend OpenClaw's handle and bridge (ensureRuntime, exec, readFile,
writeFile, ... ; `occ-driver-host call --help` lists them). The host asks the
controller for lifecycle hooks with requests hooks/afterNamespacePrepared
{namespace}, hooks/beforeWorkloadStart {revision, launch}, hooks/beforeWorkloadStop
{revision, cleanup} and hooks/beforeNamespaceDelete {namespace}, each with the
call's callId; $/cancelRequest {\"id\"} cancels a running call; $/progress
notifications report remote progress and $/output {\"id\", \"stream\", \"data\"}
(base64) a sandbox command's output as it arrives. SIGTERM and SIGINT stop
serving: running calls are cancelled and the host's private files removed.

Example:
  printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"preflight\",\"params\":{}}' \\
    | occ-driver-host serve --installation inst.yaml")]
pub(crate) struct ServeArgs {
    /// The installation YAML [default: $OCC_CONFIG_PATH].
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// Listen on this Unix socket (mode 0600, this user only) instead of stdio;
    /// `listening <path>` on stdout says it is ready.
    #[arg(long, value_name = "PATH")]
    listen: Option<PathBuf>,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Probe every configured host before serving; a failure names the host and
    /// stops the server.
    #[arg(long)]
    preflight: bool,
    /// With --listen: also stop when stdin closes, so that a host started by a
    /// client process (which keeps a pipe to it open) ends with that client.
    #[arg(long, requires = "listen")]
    until_stdin_closes: bool,
    /// Allow --ssh-replay: every exec is answered from a recording, so a
    /// controller would believe hosts changed that were never touched. For tests only.
    #[arg(long)]
    test_mode: bool,
}

/// The end of stdin.
async fn stdin_closed() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 1024];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // Without handlers the default actions stop the process anyway.
        _ => std::future::pending().await,
    }
}

pub(crate) fn run(setup: &Setup, args: ServeArgs) -> Result<ExitCode> {
    if matches!(setup.ssh, SshMode::Replay(_)) && !args.test_mode {
        bail!(
            "serve --ssh-replay answers every exec from a recording and touches no host; a controller would take that for real effects. Add --test-mode if this is a test"
        );
    }
    let tokio = tokio::runtime::Runtime::new()?;
    // Open inside the runtime: the SSH capability starts its idle reaper there.
    let opened = match tokio
        .block_on(async { setup.open_any(&args.installation, args.audit_log.clone(), true) })
    {
        Ok(d) => d,
        Err(LoadError::Configuration { error, .. }) => {
            return Ok(refuse_to_serve("the configuration", &error));
        }
        Err(LoadError::AuditLog(message)) => {
            // As `call` reports it: a full disk is worth a retry (75).
            let error = CallError::host(Code::AuditUnavailable, message);
            return Ok(refuse_to_serve("the audit log", &error));
        }
        Err(e) => return Err(e.into()),
    };
    let checks: &[&str] = if args.preflight {
        &["validateConfiguration", "preflight"]
    } else {
        &["validateConfiguration"]
    };
    for check in checks {
        let checked = match &opened {
            Opened::Compute(driver) => {
                let method = Method::from_name(check).expect("a contract method");
                tokio.block_on(driver.call_json(method, &json!({}), CallOptions::default()))
            }
            Opened::Sandbox(backend) => {
                tokio.block_on(backend.call_json(check, &json!({}), SandboxCallOptions::default()))
            }
        };
        if let Err(e) = checked {
            return Ok(refuse_to_serve(check, &e));
        }
    }
    let service: Arc<dyn Service> = match opened {
        Opened::Compute(driver) => Arc::new(driver),
        Opened::Sandbox(backend) => Arc::new(backend),
    };
    let served = tokio.block_on(async {
        let serving = async {
            match &args.listen {
                Some(path) => {
                    let listener = rpc::bind_private(path)?;
                    // A client waits for this line rather than for the file.
                    println!("listening {}", path.display());
                    rpc::serve_listener(service.clone(), listener, path).await
                }
                None => rpc::serve_stdio(service.clone()).await,
            }
        };
        let parent_gone = async {
            if args.until_stdin_closes {
                stdin_closed().await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            r = serving => r,
            () = stop_signal() => Ok(()),
            () = parent_gone => Ok(()),
        }
    });
    // Dropping the service closes its connections and removes the host's
    // private files (control sockets, inline credentials).
    drop(service);
    drop(tokio);
    served?;
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
    eprintln!(
        "serve: {what} failed at startup, not serving: {} ({}){host}: {}",
        e.code, e.failure, e.message
    );
    ExitCode::from(e.failure.exit_code())
}
