//! What the host crate's integration tests and benches share: where the
//! components `cargo guests` built are.

// Each test binary and bench includes this file and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

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
