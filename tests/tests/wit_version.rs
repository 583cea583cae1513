//! A component built for a version of `occ:compute` this host does not serve
//! is refused by `inspect` and by every load, naming both versions; and
//! `inspect` shows what built a component. No test host needed.

use occ_e2e::{component, run_host};
use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The real driver, with every `occ:compute` name moved to another version:
/// what a driver built against a future (or retired) WIT package looks like.
fn at_version(dir: &std::path::Path, version: &str) -> std::path::PathBuf {
    let bytes = std::fs::read(component("guest_ssh_driver")).unwrap();
    let (from, to) = (b"@0.2.0".as_slice(), format!("@{version}"));
    assert_eq!(to.len(), from.len(), "same length keeps the binary valid");
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to.as_bytes());
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let path = dir.join(format!("driver-{version}.wasm"));
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn a_component_for_an_unserved_version_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let future = at_version(dir.path(), "0.9.0");
    let out = run_host(&["inspect", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("occ:compute@0.9.0") && err.contains("serves occ:compute@0.2.0"),
        "{err}"
    );

    // Loading it for a call is refused the same way, before any host is asked.
    let inst = dir.path().join("installation.yaml");
    std::fs::write(
        &inst,
        r#"{"drivers": {"compute": {"id": "compute-ssh", "approvedHelpers": [], "configuration": {}}}}"#,
    )
    .unwrap();
    let out = run_host(&[
        "call",
        "preflight",
        "-i",
        inst.to_str().unwrap(),
        "--component",
        future.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("built for occ:compute@0.9.0") && err.contains("serves occ:compute@0.2.0"),
        "{err}"
    );
}

#[test]
fn inspect_shows_the_producers_of_a_component() {
    let out = run_host(&[
        "inspect",
        "--json",
        component("guest_ssh_driver").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let producers = v["producers"].as_array().unwrap();
    assert!(
        producers
            .iter()
            .any(|p| p["field"] == "processed-by" && p["name"] == "wit-component"),
        "{producers:?}"
    );
    let out = run_host(&["inspect", component("guest_ssh_driver").to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains("producers"),
        "{}",
        text(&out.stdout)
    );
}
