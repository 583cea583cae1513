//! The remote scripts under a symbolic link swapped in while they run
//! (`tests/swap.py`, against the script as it ships), with the local python3.

#[test]
fn a_link_swapped_in_mid_operation_is_never_followed() {
    let dir = &std::path::PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = std::process::Command::new("python3")
        .arg(dir.join("tests/swap.py"))
        .output()
        .expect("python3 runs the swap cases");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        8,
        "{stdout}"
    );
}
