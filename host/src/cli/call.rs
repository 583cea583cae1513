//! `call`: one method, its JSON result on stdout.

use std::io::IsTerminal;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use occ_driver_host::capability::ssh_exec::{OutputSink, OutputStream};
use occ_driver_host::world::ssh_sandbox_backend::SandboxCallOptions;
use occ_driver_host::{CallOptions, Method, present};
use serde_json::Value;

use super::progress::ProgressLine;
use super::{Opened, Setup, report_error, report_load_error};

/// Arguments of `call`.
#[derive(clap::Args)]
#[command(
    after_help = "Compute drivers: the OCC contract's methods (preflight, ensureNamespace, bindAgent,\n\
prepareRevision, activateRevision, ...) with OCC's own JSON shapes. Revision methods take\n\
{\"revision\": {...}, \"context\"?: {...}, \"binding\": {\"namespace\": {...}, \"agent\": {...}}}:\n\
a one-shot call has no earlier bindAgent, so it passes the binding with the revision.\n\n\
Sandbox backends: validateConfiguration, preflight, describeRuntime, ensureRuntime,\n\
removeRuntime, recreateRuntime, validateWorkdir, resolveWorkdir, exec, runShellCommand,\n\
resolvePath, readFile, writeFile, createFileExclusive, mkdirp, remove, rename, stat,\n\
readDirectory, edit, applyPatch, readMedia; every method but the first two takes\n\
{\"scope\": {\"workspaceDir\", \"sessionKey\"?, \"agentId\"?, \"scopeKey\"?, \"agentWorkspaceDir\"?}}.\n\
resolveWorkdir answers from the installation and the scope alone, without the component or\n\
the target: `-i /dev/stdin` takes the installation from a pipe; with `-p @-` as well,\n\
stdin holds the installation (JSON) and then the params, and neither reaches a command line.\n\
An exec's output streams to this process's stdout and stderr before the JSON result."
)]
pub(crate) struct CallArgs {
    /// The method, as the component's world names it.
    #[arg(value_parser = known_method)]
    method: String,
    /// The installation YAML [default: $OCC_CONFIG_PATH]; `/dev/stdin` (or an
    /// inherited `/dev/fd/N`) reads it from a pipe, so that credentials in it
    /// touch no disk.
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// The params object as JSON, or @FILE to read it from a file, or @- for
    /// stdin (after the installation document when `-i /dev/stdin`).
    #[arg(long, short = 'p', default_value = "{}")]
    params: String,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print only the JSON result (no progress), also on a terminal.
    #[arg(long)]
    json: bool,
}

/// A method of some world this host serves: anything else is a usage error,
/// before any file is read.
fn known_method(name: &str) -> Result<String, String> {
    use occ_driver_host::world::ssh_sandbox_backend::Method as SandboxMethod;
    if Method::from_name(name).is_some() || SandboxMethod::from_name(name).is_some() {
        return Ok(name.to_string());
    }
    Err(format!(
        "unknown method; compute drivers: {}; sandbox backends: {}",
        Method::names(),
        SandboxMethod::names()
    ))
}

fn read_params(arg: &str) -> Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some("-") => {
            std::io::read_to_string(std::io::stdin()).context("reading params from stdin")?
        }
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading params from {path}"))?
        }
        None => arg.to_string(),
    };
    let v: Value = serde_json::from_str(&text).context("--params is not valid JSON")?;
    if !v.is_object() {
        bail!("--params must be a JSON object");
    }
    Ok(v)
}

/// A command's output, passed through to this process's own streams.
fn passthrough() -> OutputSink {
    Arc::new(|stream, chunk| {
        Box::pin(async move {
            let _ = match stream {
                OutputStream::Stdout => std::io::stdout()
                    .write_all(&chunk)
                    .and_then(|()| std::io::stdout().flush()),
                OutputStream::Stderr => std::io::stderr()
                    .write_all(&chunk)
                    .and_then(|()| std::io::stderr().flush()),
            };
        })
    })
}

/// `-i /dev/stdin -p @-`: stdin holds two JSON texts, the installation
/// document and then the params object, so that neither touches a disk or a
/// command line; the installation is handed to the loader as stdin's text.
fn read_stdin_pair() -> Result<Value> {
    use std::io::Read;
    let mut text = String::new();
    std::io::stdin()
        .take(STDIN_PAIR_MAX + 1)
        .read_to_string(&mut text)
        .context("reading the installation and the params from stdin")?;
    if text.len() as u64 > STDIN_PAIR_MAX {
        bail!("stdin: more than {STDIN_PAIR_MAX} bytes of installation and params");
    }
    let mut values = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    let installation = match values.next() {
        Some(Ok(v)) if v.is_object() => v,
        Some(Err(e)) => bail!("stdin: the installation is not JSON: {e}"),
        _ => bail!(
            "stdin: with -i /dev/stdin -p @-, the installation document (a JSON object) comes first"
        ),
    };
    let params = match values.next() {
        Some(Ok(v)) if v.is_object() => v,
        Some(Err(e)) => bail!("stdin: the params are not JSON: {e}"),
        _ => bail!("stdin: the params object must follow the installation document"),
    };
    if values.next().is_some() {
        bail!("stdin: more than the installation document and the params object");
    }
    occ_driver_host::installation::stdin_document(installation.to_string())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(params)
}

/// The installation document and the params together, read from stdin.
const STDIN_PAIR_MAX: u64 = 2 << 20;

pub(crate) fn run(setup: &Setup, args: CallArgs) -> Result<ExitCode> {
    let params = if args.params == "@-" && args.installation == std::path::Path::new("/dev/stdin") {
        read_stdin_pair()?
    } else {
        read_params(&args.params)?
    };
    let tokio = tokio::runtime::Runtime::new()?;
    // Open inside the runtime: the SSH capability starts its idle reaper there.
    let opened = match tokio
        .block_on(async { setup.open_any(&args.installation, args.audit_log.clone(), false) })
    {
        Ok(d) => d,
        Err(e) => return report_load_error(e, args.json),
    };
    let progress = ProgressLine::new(!args.json && std::io::stderr().is_terminal());
    let sink = progress.clone();
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupt = cancel.clone();
    tokio.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupt.cancel();
        }
    });
    let result = match &opened {
        Opened::Compute(driver) => {
            let Some(method) = Method::from_name(&args.method) else {
                bail!(
                    "unknown method {:?} for a compute driver; one of: {}",
                    args.method,
                    Method::names()
                );
            };
            let options = CallOptions {
                progress: Arc::new(move |p| sink.show(p)),
                cancel,
                ..CallOptions::default()
            };
            let result = tokio.block_on(driver.call_json(method, &params, options));
            // A Namespace method answers in OCC's shape, whose `reason` is
            // bounded; the operator at this terminal gets the whole error too.
            if let (Err(e), Method::EnsureNamespace | Method::DeleteNamespace) = (&result, method) {
                eprintln!("{method}: {} ({}): {}", e.code, e.failure, e.message);
            }
            present(method, &params, result)
        }
        Opened::Sandbox(backend) => {
            let options = SandboxCallOptions {
                id: None,
                cancel,
                output: Some(passthrough()),
                input: None,
            };
            tokio.block_on(backend.call_json(&args.method, &params, options))
        }
    };
    progress.finish();
    // Close the connections (and remove what the host wrote for them) before
    // reporting.
    drop(opened);
    drop(tokio);
    match result {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(match v.get("failure").and_then(Value::as_str) {
                Some("retryable") => ExitCode::from(75),
                Some(_) => ExitCode::from(65),
                None => ExitCode::SUCCESS,
            })
        }
        Err(e) => Ok(report_error(&e, args.json)),
    }
}
