//! The release's packages checked before a build: what agrees with the host,
//! what is refused.

use super::package::NPM_MTIME;
use super::*;

#[test]
fn the_glibc_floor_is_the_newest_version_asked_for() {
    let bytes = b"\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.3\0GLIBC_PRIVATE\0GLIBC_2.17\0";
    assert_eq!(glibc_floor(bytes).as_deref(), Some("2.34"));
    assert_eq!(glibc_floor(b"no versions here"), None);
}

#[test]
fn a_tarball_is_the_same_bytes_whatever_order_its_files_come_in() {
    let a = tarball(vec![file("b", b"2".to_vec()), file("a", b"1".to_vec())]).unwrap();
    let b = tarball(vec![file("a", b"1".to_vec()), file("b", b"2".to_vec())]).unwrap();
    assert_eq!(a, b);
    let mut entries = tar::Archive::new(flate2::read::GzDecoder::new(a.as_slice()));
    let paths: Vec<(String, u32, u64)> = entries
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let h = e.header();
            (
                e.path().unwrap().display().to_string(),
                h.mode().unwrap(),
                h.mtime().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("package/a".into(), 0o644, NPM_MTIME),
            ("package/b".into(), 0o644, NPM_MTIME)
        ]
    );
}

#[test]
fn a_scoped_package_gets_npms_tarball_name() {
    assert_eq!(
        tarball_name("@occ/openclaw-sandbox-ssh", "0.2.0"),
        "occ-openclaw-sandbox-ssh-0.2.0.tgz"
    );
    assert_eq!(
        tarball_name("occ-driver-host-compute", "1.0.0"),
        "occ-driver-host-compute-1.0.0.tgz"
    );
}

#[test]
fn a_package_that_disagrees_with_the_host_is_refused() {
    let p = &PLATFORMS[0];
    let p = Some(p);
    let good = json!({"name": "x", "version": "1.0.0", "files": ["index.mjs"],
        "dependencies": {(RPC_PACKAGE): "1.0.0"},
        "optionalDependencies": {(PLATFORMS[0].package): "1.0.0"}});
    assert!(check_manifest(Path::new("p.json"), &good, "x", "1.0.0", p).is_ok());
    let mut other = good.clone();
    other["version"] = json!("0.9.0");
    let e = check_manifest(Path::new("p.json"), &other, "x", "1.0.0", p).unwrap_err();
    assert!(e.contains("p.json: version \"0.9.0\""), "{e}");
    let mut range = good.clone();
    range["optionalDependencies"][PLATFORMS[0].package] = json!("^1.0.0");
    assert!(check_manifest(Path::new("p.json"), &range, "x", "1.0.0", p).is_err());
    let mut shared = good.clone();
    shared["dependencies"][RPC_PACKAGE] = json!("0.9.0");
    let e = check_manifest(Path::new("p.json"), &shared, "x", "1.0.0", p).unwrap_err();
    assert!(
        e.contains("dependencies.occ-driver-host-rpc must be exactly"),
        "{e}"
    );
    let mut unlisted = good.clone();
    unlisted.as_object_mut().unwrap().remove("files");
    let e = check_manifest(Path::new("p.json"), &unlisted, "x", "1.0.0", p).unwrap_err();
    assert!(e.contains("files must list"), "{e}");
    let mut hook = good.clone();
    hook["scripts"] = json!({"postinstall": "node fetch.js"});
    assert!(
        check_manifest(Path::new("p.json"), &hook, "x", "1.0.0", p)
            .unwrap_err()
            .contains("--ignore-scripts")
    );
    // The shared package runs no binary: no platform package to name.
    let shared_package = json!({"name": RPC_PACKAGE, "version": "1.0.0", "files": ["rpc.mjs"]});
    assert!(
        check_manifest(
            Path::new("r.json"),
            &shared_package,
            RPC_PACKAGE,
            "1.0.0",
            None
        )
        .is_ok()
    );
}
