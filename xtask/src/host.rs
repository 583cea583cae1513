//! The host binary as the release ships it, built once for every step:
//! `cargo xtask host` builds it, `cargo xtask test ARGS` runs `cargo test`
//! with the same flags, and `cargo xtask dist` packs the binary those built.
//!
//! The flags are the release's: the host's own target triple (so that the
//! artifacts live apart from a plain `cargo build --release` under
//! `<target>/<triple>/release/`), the path remaps of every component build,
//! no debug information, a stripped binary, no incremental state, and the
//! commit `--version` names. Every command that builds host code for the
//! triple passes exactly these, so cargo finds the dependencies one command
//! compiled fresh for the next: the tests exercise the binary the release
//! packs, and wasmtime is compiled once, not once per command.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::{Build, run};

/// Runs `command` and returns its stdout, or an error naming it.
pub(crate) fn output(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The triple of the machine that builds: the one the binary runs on.
pub(crate) fn triple() -> Result<String, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let text = output(Command::new(rustc).arg("-vV"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .ok_or_else(|| "rustc -vV names no host triple".into())
}

impl Build {
    /// The commit of the checkout, marked when the tree differs from it.
    pub(crate) fn commit(&self) -> Result<String, String> {
        let git =
            |args: &[&str]| output(Command::new("git").current_dir(&self.workspace).args(args));
        let head = git(&["rev-parse", "HEAD"])?;
        let status = git(&["status", "--porcelain", "--untracked-files=no"])?;
        let head = head.trim().to_string();
        Ok(if status.trim().is_empty() {
            head
        } else {
            format!("{head}-modified")
        })
    }

    /// `cargo <verb> --release --target <triple> <args>` with the release's
    /// flags and commit: what builds and tests the host binary.
    pub(crate) fn host_cargo(&self, verb: &str, args: &[String]) -> Result<Command, String> {
        let triple = triple()?;
        let commit = self.commit()?;
        let mut command = self.cargo(
            verb,
            &triple,
            &[],
            &[
                // The release profile keeps line tables for a developer's
                // plain build; the shipped binary has none and is stripped.
                "--config".into(),
                "profile.release.debug=false".into(),
                "--config".into(),
                "profile.release.strip=true".into(),
            ],
        );
        command.args(args).env("OCC_BUILD_COMMIT", commit);
        Ok(command)
    }

    /// Where [`Build::host_cargo`] puts the binary.
    pub(crate) fn host_binary(&self) -> Result<PathBuf, String> {
        Ok(self.target.join(triple()?).join("release/occ-driver-host"))
    }
}

const HOST_HELP: &str = "\
cargo xtask host [--print-path] [CARGO BUILD ARGS...]

Builds the occ-driver-host binary exactly as `cargo xtask dist` ships it
(the host's triple, path remaps, no debug information, stripped, the
commit in --version) and prints where it is. The tests (`cargo xtask test`),
the demo and the release all use this one build.";

const TEST_HELP: &str = "\
cargo xtask test [CARGO TEST ARGS...]

Runs `cargo test --release --target <host triple> ARGS` with the flags of
`cargo xtask host`, so that the tests link the libraries the shipped binary
is built from and build nothing twice. Example:
  cargo xtask test --workspace --exclude fault-guest -- --test-threads=2";

/// `cargo xtask host`: builds the binary and prints its path.
pub(crate) fn main_host(build: &Build, args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{HOST_HELP}");
        return ExitCode::SUCCESS;
    }
    let quiet = args.iter().any(|a| a == "--print-path");
    let rest: Vec<String> = args
        .iter()
        .filter(|a| *a != "--print-path")
        .cloned()
        .collect();
    let result = build
        .host_cargo(
            "build",
            &[vec!["-p".into(), "occ-driver-host".into()], rest].concat(),
        )
        .and_then(|mut command| {
            if quiet {
                command.arg("--quiet");
            }
            if run(command) != ExitCode::SUCCESS {
                return Err("building the host binary failed".into());
            }
            build.host_binary()
        });
    match result {
        Ok(path) => {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask host: {e}");
            ExitCode::from(1)
        }
    }
}

/// `cargo xtask test ARGS`: `cargo test` with the host binary's flags.
pub(crate) fn main_test(build: &Build, args: &[String]) -> ExitCode {
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{TEST_HELP}");
        return ExitCode::SUCCESS;
    }
    match build.host_cargo("test", args) {
        Ok(command) => run(command),
        Err(e) => {
            eprintln!("xtask test: {e}");
            ExitCode::from(1)
        }
    }
}
