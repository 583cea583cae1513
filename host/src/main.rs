//! `occ-driver-host`: inspect, check, call and serve OCC driver components.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    if !args.is_serve() {
        restore_sigpipe();
    }
    cli::init_tracing(args.verbose);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli::EXIT_LOCAL)
        }
    }
}

/// A one-shot command piped into `head` should end quietly, like any Unix tool,
/// instead of panicking on the closed pipe. `serve` keeps Rust's default (SIGPIPE
/// ignored): a controller that goes away must not take the server with it.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is
    // a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
