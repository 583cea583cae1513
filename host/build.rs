//! Names the commit this binary was built from, for `occ-driver-host
//! --version`: `$OCC_BUILD_COMMIT` when the release build (`cargo xtask dist`)
//! sets it, else what git says of the checkout, else "unknown" (a source tree
//! without git). Nothing else about the build machine goes into the binary.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=OCC_BUILD_COMMIT");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let commit = std::env::var("OCC_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git_commit(Path::new(&manifest)))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OCC_BUILD_COMMIT={commit}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git_commit(dir: &Path) -> Option<String> {
    // Rebuild when HEAD moves: a commit, a checkout, a reset.
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"])?;
    for f in ["HEAD", "logs/HEAD"] {
        println!("cargo:rerun-if-changed={git_dir}/{f}");
    }
    // HEAD only: a development build does not track uncommitted edits (the
    // release build marks them, "-modified").
    git(dir, &["rev-parse", "HEAD"])
}
