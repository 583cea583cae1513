//! `call`: one contract method, its JSON result on stdout.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use occ_driver_host::{CallOptions, Method, present};
use serde_json::Value;

use super::progress::ProgressLine;
use super::{Setup, report_error, report_load_error};

/// Arguments of `call`.
#[derive(clap::Args)]
#[command(
    after_help = "Params are OCC's own JSON shapes (AgentRevision, Namespace, Agent, ComputeRevisionContext).\n\
Revision methods take {\"revision\": {...}, \"context\"?: {...}, \"binding\": {\"namespace\": {...}, \"agent\": {...}}}:\n\
a one-shot call has no earlier bindAgent, so it passes the binding with the revision."
)]
pub(crate) struct CallArgs {
    /// The contract method, as OCC names it.
    method: Method,
    /// The installation YAML [default: $OCC_CONFIG_PATH].
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// The params object as JSON, or @FILE to read it from a file, or @- for stdin.
    #[arg(long, short = 'p', default_value = "{}")]
    params: String,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print only the JSON result (no progress), also on a terminal.
    #[arg(long)]
    json: bool,
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

pub(crate) fn run(setup: &Setup, args: CallArgs) -> Result<ExitCode> {
    let params = read_params(&args.params)?;
    let driver = match setup.open(&args.installation, args.audit_log.clone(), false) {
        Ok(d) => d,
        Err(e) => return report_load_error(e, args.json),
    };
    let progress = ProgressLine::new(!args.json && std::io::stderr().is_terminal());
    let sink = progress.clone();
    let options = CallOptions {
        progress: Arc::new(move |p| sink.show(p)),
        ..CallOptions::default()
    };
    let tokio = tokio::runtime::Runtime::new()?;
    let method = args.method;
    let result = tokio.block_on(async {
        let cancel = options.cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
        driver.call_json(method, &params, options).await
    });
    progress.finish();
    match present(method, &params, result) {
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
