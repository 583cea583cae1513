//! `cargo guest`, `cargo sandbox`, `cargo template`, `cargo components` and
//! `cargo guests` (aliases in `.cargo/config.toml`): build the components
//! so that the same commit gives the same bytes wherever it is built.
//! `cargo xtask host` builds the host binary as the release ships it, and
//! `cargo xtask test` runs the tests against that same build (host.rs).
//! `cargo xtask dist --out DIR` builds the release: the npm packages that
//! carry the host binary and the components, and their manifest (dist/).
//!
//! A component embeds the paths of the sources it was built from, in panic
//! locations: a dependency's are under `$CARGO_HOME/registry/src/...`, code a
//! build script generated is under the target directory. Cargo cannot name
//! those paths in its configuration (its `rustflags` are literal and
//! `trim-paths` is unstable), so this program, which knows them, passes
//! `--remap-path-prefix` for each to the `wasm32-wasip2` builds and to the
//! host binary's (`host`, `test` and `dist`), which is built for the host's
//! own target triple, in a directory of its own under the target directory:
//! a developer's plain `cargo build` keeps its flags and its cache. The toolchain is
//! pinned by `rust-toolchain.toml`; rustc already writes the standard
//! library's paths as `/rustc/<commit>/`, nothing in a component holds a
//! time, and nothing is built incrementally. `tests/reproducible.sh` builds
//! one commit in two clones at two paths under two HOMEs and compares the
//! bytes.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod dist;
mod host;

/// The components of each command: the shipped ones, then the test guests.
const SHIPPED: &[&str] = &["guest-ssh-driver", "guest-ssh-sandbox", "inventory-driver"];
const TEST_GUESTS: &[&str] = &[
    "fault-guest",
    "fs-guest",
    "sandbox-hostile-guest",
    "compute-hostile-guest",
];

fn packages(command: &str) -> Option<Vec<&'static str>> {
    Some(match command {
        "guest" => vec!["guest-ssh-driver"],
        "sandbox" => vec!["guest-ssh-sandbox"],
        "template" => vec!["inventory-driver"],
        "components" => SHIPPED.to_vec(),
        "guests" => SHIPPED.iter().chain(TEST_GUESTS).copied().collect(),
        _ => return None,
    })
}

/// What each build-machine path becomes inside a component. Later entries
/// win where prefixes nest (rustc applies the last match), so the most
/// specific comes last.
fn remaps(workspace: &Path, cargo_home: &Path, target: &Path) -> Vec<(PathBuf, &'static str)> {
    vec![
        (workspace.to_path_buf(), "/occ-driver-host"),
        (cargo_home.to_path_buf(), "/cargo"),
        (target.to_path_buf(), "/target"),
    ]
}

/// Where this build runs and what it passes to every cargo it starts.
#[derive(Debug)]
pub(crate) struct Build {
    pub(crate) workspace: PathBuf,
    pub(crate) cargo_home: PathBuf,
    pub(crate) target: PathBuf,
    cargo: std::ffi::OsString,
}

impl Build {
    fn from_env() -> Result<Build, String> {
        let workspace = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(|dir| {
                PathBuf::from(dir)
                    .parent()
                    .expect("xtask sits in the workspace")
                    .to_path_buf()
            })
            .ok_or("run it through cargo (cargo guests), which names the workspace")?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".cargo")))
            .unwrap_or_else(|| PathBuf::from("/nonexistent-cargo-home"));
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .map(|t| {
                if t.is_relative() {
                    workspace.join(t)
                } else {
                    t
                }
            })
            .unwrap_or_else(|| workspace.join("target"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        Ok(Build {
            workspace,
            cargo_home,
            target,
            cargo,
        })
    }

    /// The `--remap-path-prefix` flags, then the caller's own flags.
    fn rustflags(&self, extra: &[&str]) -> String {
        let mut flags: Vec<String> = remaps(&self.workspace, &self.cargo_home, &self.target)
            .into_iter()
            .map(|(from, to)| format!("--remap-path-prefix={}={to}", from.display()))
            .collect();
        flags.extend(extra.iter().map(|f| f.to_string()));
        // Cargo applies these to the --target artifacts only (never to build
        // scripts or proc-macros), and unlike the space-separated forms they
        // keep a path with spaces whole. Flags the caller set still apply,
        // after ours.
        match std::env::var("CARGO_ENCODED_RUSTFLAGS") {
            Ok(extra) if !extra.is_empty() => flags.extend(extra.split('\x1f').map(str::to_string)),
            _ => {
                if let Ok(extra) = std::env::var("RUSTFLAGS") {
                    flags.extend(extra.split_whitespace().map(str::to_string));
                }
            }
        }
        flags.join("\x1f")
    }

    /// `cargo <verb> --release --target <target> <args>` with the remaps
    /// and `extra_flags`, never incremental: an incremental build reuses what
    /// an earlier build of other sources left, and partitions code
    /// differently from a fresh one, so a warm tree could give other bytes
    /// than the auditor's cold clone.
    pub(crate) fn cargo(
        &self,
        verb: &str,
        target: &str,
        extra_flags: &[&str],
        args: &[String],
    ) -> Command {
        let mut command = Command::new(&self.cargo);
        command
            .current_dir(&self.workspace)
            .args([verb, "--release", "--target", target])
            .args(args)
            .env("CARGO_INCREMENTAL", "0")
            .env_remove("RUSTFLAGS")
            .env("CARGO_ENCODED_RUSTFLAGS", self.rustflags(extra_flags));
        command
    }

    /// Builds the wasm32-wasip2 components of `packages`.
    pub(crate) fn components(&self, packages: &[&str], args: &[String]) -> Command {
        // `strip = true` drops every custom section at link time, rustc's
        // producers entry with them; keep that one so that `inspect` shows
        // the toolchain.
        let packages = packages
            .iter()
            .flat_map(|p| ["-p".to_string(), p.to_string()]);
        self.cargo(
            "build",
            "wasm32-wasip2",
            &["-Clink-arg=--keep-section=producers"],
            &packages.chain(args.iter().cloned()).collect::<Vec<_>>(),
        )
    }
}

/// Runs `command`, turning its failure into this program's exit status.
pub(crate) fn run(mut command: Command) -> ExitCode {
    match command.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let args: Vec<String> = args.collect();
    let build = match Build::from_env() {
        Ok(build) => build,
        Err(e) => {
            eprintln!("xtask: {e}");
            return ExitCode::from(2);
        }
    };
    match command.as_str() {
        "dist" => return dist::main(&build, &args),
        "host" => return host::main_host(&build, &args),
        "test" => return host::main_test(&build, &args),
        _ => {}
    }
    let Some(packages) = packages(&command) else {
        eprintln!(
            "xtask: unknown command {command:?}; one of guest, sandbox, template, components, guests, host, test, dist"
        );
        return ExitCode::from(2);
    };
    run(build.components(&packages, &args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_has_a_command_and_nothing_else_does() {
        let all = packages("guests").unwrap();
        for p in SHIPPED.iter().chain(TEST_GUESTS) {
            assert!(all.contains(p), "{p}");
        }
        assert_eq!(packages("components").unwrap(), SHIPPED);
        assert_eq!(packages("guest").unwrap(), ["guest-ssh-driver"]);
        assert!(packages("host").is_none());
        assert!(packages("").is_none());
    }

    #[test]
    fn the_target_inside_the_clone_is_remapped_after_the_clone() {
        // rustc applies the last matching remap: the default target directory
        // lies inside the clone and must become /target, not /occ-driver-host/target.
        let ws = Path::new("/src/clone");
        let r = remaps(ws, Path::new("/home/a/.cargo"), &ws.join("target"));
        let target = r.iter().position(|(_, to)| *to == "/target").unwrap();
        let clone = r
            .iter()
            .position(|(_, to)| *to == "/occ-driver-host")
            .unwrap();
        assert!(target > clone, "{r:?}");
    }
}
