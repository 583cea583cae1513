//! `serve`: the contract over JSON-RPC 2.0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use occ_driver_host::{ComponentCache, Runtime};

/// Arguments of `serve`.
#[derive(clap::Args)]
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
    _runtime: Arc<Runtime>,
    _cache: Option<ComponentCache>,
    _args: ServeArgs,
) -> Result<ExitCode> {
    anyhow::bail!("serve is not available in this build")
}
