//! What the host crate's integration tests and benches share: where the
//! components `cargo guests` built are, the one call every driver test makes
//! first, and how a bench reads the rig and sums up its samples.

// Each test binary and bench includes this file and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use occ_driver_host::{CallError, CallOptions, Driver, Method};
use serde_json::{Value, json};

/// The cargo target directory these tests were built in. The tests build for
/// the host's own triple (`cargo xtask test`), which puts
/// `CARGO_TARGET_TMPDIR` under `<target>/<triple>/`; the components are under
/// `<target>/wasm32-wasip2/` either way.
pub(crate) fn target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    // Cargo marks the target directory, and each triple's inside it, with a
    // CACHEDIR.TAG: the outer of the two nearest.
    let tagged = |dir: &&Path| dir.join("CACHEDIR.TAG").is_file();
    let nearest = tmp
        .ancestors()
        .find(tagged)
        .unwrap_or_else(|| panic!("{} is not inside a cargo target directory", tmp.display()));
    nearest
        .parent()
        .filter(tagged)
        .unwrap_or(nearest)
        .to_path_buf()
}

/// A component `cargo guests` built, by crate name (`guest_ssh_driver`).
pub(crate) fn component(name: &str) -> PathBuf {
    let path = target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `cargo guests` first",
        path.display()
    );
    path
}

/// `validate-configuration` with no parameters, as every driver test calls it.
pub(crate) async fn validate(driver: &Driver) -> Result<Value, CallError> {
    driver
        .call_json(
            Method::ValidateConfiguration,
            &json!({}),
            CallOptions::default(),
        )
        .await
}

/// The value of `key` in a rig's env file (`KEY=value` lines); panics when
/// the rig did not write it.
pub(crate) fn rig_var(env: &str, key: &str) -> String {
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} missing from the rig env"))
        .to_string()
}

/// The middle of `v` once sorted (the upper one of an even count).
pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
