//! `check`: validate an installation and its driver's configuration, touching
//! no host, and say whether the helper the component ships is approved.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use occ_driver_host::capability::ssh_exec::ExecPolicy;
use occ_driver_host::{CallOptions, Method};
use serde_json::json;

use super::{Setup, report_error, report_load_error};

/// Arguments of `check`.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The installation YAML (the OCC Installation document) [default: $OCC_CONFIG_PATH].
    #[arg(env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(setup: &Setup, args: CheckArgs) -> Result<ExitCode> {
    let driver = match setup.open(&args.installation, None, false) {
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
    let helper = driver.helper().map(|(_, sha)| sha);
    let ExecPolicy::NodeHelper { approved } = &driver.ssh().grant().policy;
    let pinned = helper.as_ref().is_some_and(|h| approved.contains(h));
    // The line an operator adds once the helper is audited.
    let pin_line = helper
        .as_ref()
        .filter(|_| !pinned)
        .map(|h| format!("approvedHelpers: [\"{h}\"]"));
    match result {
        Ok(v) => {
            if args.json {
                println!(
                    "{}",
                    json!({
                        "installation": inst.path, "component": inst.component,
                        "helperSha256": helper, "helperApproved": pinned,
                        "warnings": v["warnings"],
                    })
                );
            } else {
                println!("{}: ok", inst.path.display());
                println!(
                    "  driver {} ({}) from {}",
                    inst.driver_id,
                    inst.implementation,
                    inst.component.display()
                );
                for w in v["warnings"].as_array().into_iter().flatten() {
                    println!(
                        "  warning {}: {}",
                        w["code"].as_str().unwrap_or(""),
                        w["message"].as_str().unwrap_or("")
                    );
                }
                match (&helper, pinned) {
                    (Some(h), true) => println!("  helper {h}: approved"),
                    (Some(h), false) => {
                        println!(
                            "  helper {h}: NOT approved; the driver can run nothing on hosts until it is."
                        );
                        println!("  After auditing helper/helper.js, add under drivers.compute:");
                        println!("    {}", pin_line.as_deref().unwrap_or_default());
                    }
                    (None, _) => println!(
                        "  helper: the component ships none (no occ:helper section); it can run nothing on hosts"
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report_error(&e, args.json)),
    }
}
