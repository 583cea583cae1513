//! `cargo guest`, `cargo sandbox`, `cargo template`, `cargo components` and
//! `cargo guests` (aliases in `.cargo/config.toml`): build the components
//! so that the same commit gives the same bytes wherever it is built.
//!
//! A component embeds the paths of the sources it was built from, in panic
//! locations: a dependency's are under `$CARGO_HOME/registry/src/...`, code a
//! build script generated is under the target directory. Cargo cannot name
//! those paths in its configuration (its `rustflags` are literal and
//! `trim-paths` is unstable), so this program, which knows them, passes
//! `--remap-path-prefix` for each to the `wasm32-wasip2` builds only (the
//! host's native build keeps its flags and its cache). The toolchain is
//! pinned by `rust-toolchain.toml`; rustc already writes the standard
//! library's paths as `/rustc/<commit>/`, nothing in a component holds a
//! time, and the components are never built incrementally. `tests/reproducible.sh` builds one commit in two clones at two
//! paths under two HOMEs and compares the bytes.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

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

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let Some(packages) = packages(&command) else {
        eprintln!(
            "xtask: unknown command {command:?}; one of guest, sandbox, template, components, guests"
        );
        return ExitCode::from(2);
    };
    let workspace = match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(dir) => PathBuf::from(dir)
            .parent()
            .expect("xtask sits in the workspace")
            .to_path_buf(),
        None => {
            eprintln!("xtask: run it through cargo (cargo guests), which names the workspace");
            return ExitCode::from(2);
        }
    };
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
    let mut flags: Vec<String> = remaps(&workspace, &cargo_home, &target)
        .into_iter()
        .map(|(from, to)| format!("--remap-path-prefix={}={to}", from.display()))
        .collect();
    // `strip = true` drops every custom section at link time, rustc's producers
    // entry with them; keep that one so that `inspect` shows the toolchain.
    flags.push("-Clink-arg=--keep-section=producers".into());
    // Cargo applies these to the wasm32-wasip2 artifacts only (a --target
    // build never gives them to build scripts or proc-macros), and unlike the
    // space-separated forms they keep a path with spaces whole. Flags the
    // caller set still apply, after ours.
    match std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        Ok(extra) if !extra.is_empty() => flags.extend(extra.split('\x1f').map(str::to_string)),
        _ => {
            if let Ok(extra) = std::env::var("RUSTFLAGS") {
                flags.extend(extra.split_whitespace().map(str::to_string));
            }
        }
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(&workspace)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .args(packages.iter().flat_map(|p| ["-p", p]))
        .args(args)
        // An incremental build reuses what an earlier build of other sources
        // left, and partitions code differently from a fresh one: a warm tree
        // could then give other bytes than the auditor's cold clone.
        .env("CARGO_INCREMENTAL", "0")
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    match build.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::from(1)
        }
    }
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
