//! `schema`: the JSON Schema of a driver's configuration, from the component
//! itself, before any installation exists.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use occ_driver_host::{CallOptions, Driver, DriverOptions, Method};
use serde_json::json;

use super::{Setup, report_error};

/// Arguments of `schema`.
#[derive(clap::Args)]
pub(crate) struct SchemaArgs {
    /// The component file (.wasm).
    component: PathBuf,
}

pub(crate) fn run(setup: &Setup, args: SchemaArgs) -> Result<ExitCode> {
    let driver = Driver::open_ungranted(
        setup.runtime.clone(),
        &args.component,
        &DriverOptions {
            cache: setup.cache().cloned(),
            ..DriverOptions::default()
        },
    )?;
    let tokio = tokio::runtime::Runtime::new()?;
    match tokio.block_on(driver.call_json(
        Method::ConfigurationSchema,
        &json!({}),
        CallOptions::default(),
    )) {
        Ok(schema) => {
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(report_error(&e, false)),
    }
}
