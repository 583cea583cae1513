//! `occ-driver-host`: inspect, check, call and serve OCC driver components.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_tracing(args.verbose);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli::EXIT_LOCAL)
        }
    }
}
