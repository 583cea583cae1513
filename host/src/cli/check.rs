//! `check`: validate an installation and its driver's configuration, touching
//! no host.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use occ_driver_host::{CallOptions, Method};
use serde_json::json;

use super::{Setup, report_error, report_load_error};

/// Arguments of `check`.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The installation YAML (the OCC Installation document plus drivers.compute.component).
    installation: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(setup: &Setup, args: CheckArgs) -> Result<ExitCode> {
    let driver = match setup.open(&args.installation, None) {
        Ok(d) => d,
        Err(e) => return report_load_error(e, args.json),
    };
    let tokio = tokio::runtime::Runtime::new()?;
    let result = tokio.block_on(driver.call_json(
        Method::ValidateConfiguration,
        &json!({}),
        CallOptions::default(),
    ));
    let inst = driver.installation();
    match result {
        Ok(v) => {
            if args.json {
                println!(
                    "{}",
                    json!({"ok": true, "installation": inst.path, "component": inst.component, "warnings": v["warnings"]})
                );
            } else {
                println!("{}: ok", inst.path.display());
                println!(
                    "  driver {} from {}",
                    inst.driver_id,
                    inst.component.display()
                );
                for w in v["warnings"].as_array().into_iter().flatten() {
                    println!(
                        "  warning {}: {}",
                        w["code"].as_str().unwrap_or(""),
                        w["message"].as_str().unwrap_or("")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report_error(&e, args.json)),
    }
}
