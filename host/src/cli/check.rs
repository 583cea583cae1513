//! `check`: validate an installation and its driver's configuration, touching
//! no host, and say whether the helper the component ships is approved.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use occ_driver_host::capability::ssh_exec::SHIPPED_HELPER;
use occ_driver_host::world::ssh_sandbox_backend::{SandboxBackend, SandboxCallOptions};
use occ_driver_host::{CallOptions, Method};
use serde_json::json;

use super::{Opened, Setup, report_error, report_load_error};

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
    let driver = match setup.open_any(&args.installation, None, false) {
        Ok(Opened::Compute(d)) => d,
        Ok(Opened::Sandbox(backend)) => return check_sandbox(&backend, args.json),
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
    // Decided once, when the driver was opened.
    let pinned = driver.ssh().ships_approved(SHIPPED_HELPER);
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
                print_warnings(&v);
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

/// `check` of a sandbox backend: its configuration, and which of the scripts
/// it ships the installation approves (with the lines to add for the others).
fn check_sandbox(backend: &SandboxBackend, json_out: bool) -> Result<ExitCode> {
    let tokio = tokio::runtime::Runtime::new()?;
    let result = tokio.block_on(backend.call_json(
        "validateConfiguration",
        &json!({}),
        SandboxCallOptions::default(),
    ));
    let inst = backend.installation();
    let scripts = backend.scripts();
    let missing: Vec<String> = scripts
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(s, _)| format!("{}: \"{}\"", s.name, s.sha256))
        .collect();
    match result {
        Ok(v) => {
            if json_out {
                println!(
                    "{}",
                    json!({
                        "installation": inst.path, "component": inst.component,
                        "target": backend.target_label(),
                        "scripts": scripts.iter().map(|(s, ok)| json!({"name": s.name, "sha256": s.sha256, "approved": ok})).collect::<Vec<_>>(),
                        "warnings": v["warnings"],
                    })
                );
            } else {
                println!("{}: ok", inst.path.display());
                println!(
                    "  sandbox backend {} on {} from {}",
                    inst.id,
                    backend.target_label(),
                    inst.component.display()
                );
                print_warnings(&v);
                for (s, ok) in &scripts {
                    let state = if *ok { "approved" } else { "NOT approved" };
                    println!("  script {} {}: {state}", s.name, s.sha256);
                }
                if !missing.is_empty() {
                    println!(
                        "  The backend can run nothing unapproved. After auditing guest-ssh-sandbox/scripts/, add under drivers.sandbox:"
                    );
                    println!("    approvedScripts: {{{}}}", missing.join(", "));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report_error(&e, json_out)),
    }
}

/// The `warnings` of a validateConfiguration result, one line each.
fn print_warnings(v: &serde_json::Value) {
    for w in v["warnings"].as_array().into_iter().flatten() {
        println!(
            "  warning {}: {}",
            w["code"].as_str().unwrap_or(""),
            w["message"].as_str().unwrap_or("")
        );
    }
}
