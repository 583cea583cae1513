//! `occ-driver-host`: inspect, check, call and serve OCC driver components.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

mod cli;

fn main() -> ExitCode {
    let command = cli::Cli::command()
        .version(cli::short_version().leak() as &str)
        .long_version(cli::long_version().leak() as &str);
    let args = match cli::Cli::from_arg_matches(&command.get_matches()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    if args.only_prints() {
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

/// A command that only prints, piped into `head`, should end quietly, like any
/// Unix tool, instead of panicking on the closed pipe. Every other command keeps
/// Rust's default, SIGPIPE ignored: it writes to the pipes and sockets of its
/// execs (the helper into an ssh session whose remote command may already have
/// ended, as when a nodePath is wrong), and a write there must fail with EPIPE,
/// which is reported, not end the process by a signal with nothing said; and
/// a controller that goes away must not take `serve` with it.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is
    // a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
