//! A hostile driver against real test hosts: what the host's bounds do when the
//! remote side is real. The fault guest (`tests/guests/fault-guest`) misbehaves on
//! request; its own helper is pinned, as an operator would pin an audited one, so
//! each attack gets as far as a granted host allows.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.
//! The bounds that need no host are proven in `host/tests/hostile.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use occ_e2e::model::sha256_hex;
use occ_e2e::rig::{Host, Rig};
use occ_e2e::{component, host_binary, repo_root, target_dir};
use serde_json::{Value, json};

/// An installation of the fault guest granted `host`, its helper pinned.
fn installation(dir: &Path, rig: &Rig, host: &Host, fault: &str, count: usize) -> PathBuf {
    let helper = std::fs::read(repo_root().join("tests/guests/fault-guest/helper.js")).unwrap();
    let doc = json!({"drivers": {"compute": {
        "id": "compute-fault",
        "component": component("fault_guest"),
        "approvedHelpers": [sha256_hex(&helper)],
        "configuration": {
            "fault": fault, "host": "granted", "node": rig.node, "count": count.to_string(),
            "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts, "connectTimeoutSeconds": 5},
            "hosts": {"granted": {"address": host.address, "port": host.port, "user": "root"}},
            "runtime": {"nodePath": rig.node, "openclawPath": rig.openclaw, "user": "openclaw",
                        "root": "/var/lib/occ-fault"},
            "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
        },
    }}});
    let path = dir.join(format!("{fault}.yaml"));
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

struct Run {
    status: i32,
    result: Value,
    /// The host process's peak resident set, in KiB (`ru_maxrss` from wait4).
    max_rss_kib: i64,
}

/// One `occ-driver-host call preflight` (the method that may run a helper,
/// as `probe`), with its peak memory.
/// std's `Child` does not report resource usage, so the child is reaped with
/// wait4 (which clippy cannot see).
#[allow(unsafe_code, clippy::zombie_processes)]
fn preflight(installation: &Path) -> Run {
    let child = Command::new(host_binary())
        .args(["call", "preflight", "--json", "--installation"])
        .arg(installation)
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid, and wait4 writes it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet reaped (std never waited on it).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let text = reader.join().unwrap();
    Run {
        status: libc::WEXITSTATUS(status),
        result: serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text})),
        max_rss_kib: usage.ru_maxrss,
    }
}

fn message(run: &Run) -> String {
    run.result["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A remote command that writes 300 MB without a newline is cut at the stdout cap
/// as it is read: the host process's peak memory stays near that of a run whose
/// helper writes one line, and the remote command does not outlive the call.
#[test]
#[ignore = "needs the test hosts: run tests/run.sh"]
fn an_output_flood_is_cut_as_it_is_read_and_memory_stays_bounded() {
    let rig = Rig::load();
    let host = &rig.hosts[0];
    let dir = tempfile::tempdir().unwrap();

    let baseline = preflight(&installation(dir.path(), &rig, host, "helper", 1));
    assert!(
        message(&baseline).contains("exit Some(0)"),
        "the pinned helper did not run: {}",
        baseline.result
    );
    let flood = preflight(&installation(dir.path(), &rig, host, "flood", 1));
    let text = message(&flood);
    assert_ne!(flood.status, 0);
    assert!(
        text.contains("OutputTooLarge(4194304)") && !text.contains("exit Some(0)"),
        "the flood was not refused as output over the cap: {text}"
    );
    let grown_mib = (flood.max_rss_kib - baseline.max_rss_kib) / 1024;
    eprintln!(
        "peak RSS: one-line helper {} MiB, 300 MB flood {} MiB (+{grown_mib} MiB)",
        baseline.max_rss_kib / 1024,
        flood.max_rss_kib / 1024
    );
    // The cap is 4 MiB of stdout; buffering the flood would add 300.
    assert!(
        grown_mib < 64,
        "the flood grew the host process by {grown_mib} MiB"
    );
    // The remote writer went with its ssh client.
    let mut left = String::new();
    for _ in 0..50 {
        left = rig.sh_ok(
            host,
            // The flood's operation, {"version":2,"op":"probe","deadlineMs":1300}.
            "pgrep -af 'node - eyJ2ZXJzaW9uIjoyLCJvcCI6InByb2JlIiwiZGVhZGxpbmVNcyI6MTMwMH0=' | grep -v pgrep || true",
        );
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        left.is_empty(),
        "the flooding helper outlived the call: {left}"
    );
    // And the host serves the next call.
    let next = preflight(&installation(dir.path(), &rig, host, "helper", 1));
    assert!(message(&next).contains("exit Some(0)"), "{}", next.result);
}

fn epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Fifty execs whose timeout (1 ms) ends before any connection could: the guest
/// gets fifty timeouts, but the host neither abandons a handshake per exec nor
/// opens one per exec: sshd on the host authenticates the driver once or twice.
#[test]
#[ignore = "needs the test hosts: run tests/run.sh"]
fn a_connect_abort_loop_opens_no_handshake_per_exec() {
    let rig = Rig::load();
    let host = &rig.hosts[0];
    let dir = tempfile::tempdir().unwrap();
    let inst = installation(dir.path(), &rig, host, "connect-loop", 50);
    // The journal's resolution is a second: start on a fresh one, after our own ssh.
    let since = epoch() + 1;
    std::thread::sleep(Duration::from_millis(1100));
    let run = preflight(&inst);
    let until = epoch();
    std::thread::sleep(Duration::from_millis(1100));
    let text = message(&run);
    assert_eq!(
        text.matches(" | ").count() + 1,
        50,
        "expected 50 outcomes: {text}"
    );
    assert!(
        !text.contains("exit Some(0)"),
        "an exec ran in 1 ms: {text}"
    );
    let accepted: usize = rig
        .sh_ok(
            host,
            &format!(
                "journalctl --no-pager -q --since @{since} --until @{until} -t sshd -t sshd-session \
                 | grep -c 'Accepted publickey' || true"
            ),
        )
        .parse()
        .unwrap();
    eprintln!(
        "50 aborted execs: {accepted} sshd authentication(s) on {}",
        host.name
    );
    assert!(
        accepted <= 2,
        "{accepted} authentications for 50 aborted execs"
    );
    // The connection the loop left is reused: the next call runs the helper.
    let next = preflight(&installation(dir.path(), &rig, host, "helper", 1));
    assert!(message(&next).contains("exit Some(0)"), "{}", next.result);
}
