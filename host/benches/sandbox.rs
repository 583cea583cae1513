//! The sandbox backend on a warm host against OpenClaw's way (a fresh `ssh`
//! process per operation), on the same test host, in one run: a small-file
//! write and read and an exec of `true`; and seeding a 100 MB workspace
//! against `tar | ssh tar`. Figures and ratios are printed, never asserted.
//!
//!   cargo guests && OCC_RIG=/run/occ-rig-sandbox cargo bench -p occ-driver-host --bench sandbox
//!
//! Reads the rig from $OCC_RIG/env (default /run/occ-rig/env), first host.

#[path = "../tests/support/mod.rs"]
mod support;
use support::{median, rig_var};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use occ_driver_host::world::ssh_sandbox_backend::installation::SandboxInstallation;
use occ_driver_host::{BackendOptions, Limits, Runtime, SandboxBackend, SandboxCallOptions};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const ROUNDS: usize = 30;
const SEED_ROUNDS: usize = 3;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sha(path: &Path) -> String {
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// 100 files of 1 MiB that do not compress.
fn big_workspace(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..100 {
        let mut data = vec![0u8; 1 << 20];
        for chunk in data.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        std::fs::write(dir.join(format!("blob-{i:03}.bin")), data).unwrap();
    }
}

struct Ssh {
    config: PathBuf,
    target: String,
}

impl Ssh {
    /// A fresh ssh process: connect, authenticate, run, close.
    fn run(&self, command: &str, stdin: &[u8]) -> Duration {
        let t = Instant::now();
        let mut child = Command::new("ssh")
            .arg("-F")
            .arg(&self.config)
            .arg(&self.target)
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        assert!(child.wait().unwrap().success(), "{command}");
        t.elapsed()
    }
}

fn main() {
    let rig_dir = std::env::var("OCC_RIG").unwrap_or_else(|_| "/run/occ-rig".into());
    let env = std::fs::read_to_string(format!("{rig_dir}/env"))
        .expect("rig env: bring the rig up with tests/rig/up.sh");
    let hosts: Value = serde_json::from_str(
        &std::fs::read_to_string(rig_var(&env, "OCC_RIG_HOSTS_JSON")).unwrap(),
    )
    .unwrap();
    let address = hosts[0]["address"]
        .as_str()
        .expect("a host in hosts.json")
        .to_string();
    let identity = rig_var(&env, "OCC_RIG_IDENTITY");
    let known_hosts = rig_var(&env, "OCC_RIG_KNOWN_HOSTS");
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(small.join("README.md"), "bench\n").unwrap();
    let big = dir.path().join("big");
    big_workspace(&big);
    let remote_root = format!("/tmp/occ-sbx-bench-{}", std::process::id());

    let target = support::target_dir().join("wasm32-wasip2/release");
    let scripts =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../guest-ssh-sandbox/scripts");
    let doc = json!({"drivers": {"sandbox": {
        "component": target.join("guest_ssh_sandbox.wasm"),
        "approvedScripts": {
            "preflight": sha(&scripts.join("preflight.sh")),
            "workspace": sha(&scripts.join("workspace.py")),
            "exec": sha(&scripts.join("exec.py")),
        },
        "localWorkspaces": [dir.path()],
        "configuration": {"agents": {"defaults": {"sandbox": {"mode": "all", "scope": "session", "workspaceAccess": "rw", "ssh": {
            "target": format!("root@{address}:22"), "workspaceRoot": remote_root,
            "identityFile": identity, "knownHostsFile": known_hosts, "updateHostKeys": false,
        }}}}},
    }}});
    let installation_path = dir.path().join("installation.yaml");
    std::fs::write(&installation_path, doc.to_string()).unwrap();
    let installation = SandboxInstallation::load(&installation_path, None).unwrap();

    let tokio = tokio::runtime::Runtime::new().unwrap();
    let runtime = Arc::new(Runtime::new(Limits::default()).unwrap());
    let backend = tokio
        .block_on(async { SandboxBackend::open(runtime, installation, &BackendOptions::default()) })
        .unwrap();
    let call = |method: &str, params: Value| -> Value {
        tokio
            .block_on(backend.call_json(method, &params, SandboxCallOptions::default()))
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    let scope = json!({"workspaceDir": small, "sessionKey": format!("agent:main:bench-{}", std::process::id())});
    let payload = "x".repeat(1024);
    // Warm: the master connection is up and the workspace seeded.
    let info = call("ensureRuntime", json!({"scope": scope}));
    let workdir = info["workdir"].as_str().unwrap().to_string();
    let timed = |f: &dyn Fn()| -> Duration {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed()
                })
                .collect(),
        )
    };
    let ours_write = timed(&|| {
        call(
            "writeFile",
            json!({"scope": scope, "filePath": "small.txt", "text": payload}),
        );
    });
    let ours_read = timed(&|| {
        call("readFile", json!({"scope": scope, "filePath": "small.txt"}));
    });
    let ours_exec = timed(&|| {
        let r = call("exec", json!({"scope": scope, "command": "true"}));
        assert_eq!(r["exitCode"], 0);
    });

    // OpenClaw's way: every operation is a fresh ssh process.
    let config = dir.path().join("ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host *\n  BatchMode yes\n  IdentitiesOnly yes\n  IdentityFile {identity}\n  UserKnownHostsFile {known_hosts}\n  StrictHostKeyChecking yes\n  UpdateHostKeys no\n  LogLevel ERROR\n"
        ),
    )
    .unwrap();
    let ssh = Ssh {
        config,
        target: format!("root@{address}"),
    };
    let fresh = |command: &str, stdin: &[u8]| {
        median((0..ROUNDS).map(|_| ssh.run(command, stdin)).collect())
    };
    let fresh_write = fresh(&format!("cat > {workdir}/fresh.txt"), payload.as_bytes());
    let fresh_read = fresh(&format!("cat {workdir}/fresh.txt"), b"");
    let fresh_exec = fresh("true", b"");

    // Seeding 100 MB.
    let ours_seed = median(
        (0..SEED_ROUNDS)
            .map(|i| {
                let scope = json!({"workspaceDir": big, "sessionKey": format!("agent:main:seed-{}-{i}", std::process::id())});
                let t = Instant::now();
                let r = call("ensureRuntime", json!({"scope": scope}));
                let took = t.elapsed();
                assert_eq!(r["seeding"], "seeded");
                took
            })
            .collect(),
    );
    let tar_seed = median(
        (0..SEED_ROUNDS)
            .map(|i| {
                let dest = format!("{remote_root}/tar-{i}");
                let t = Instant::now();
                let status = Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "tar -C '{}' -cf - . | ssh -F '{}' root@{address} 'mkdir -p {dest} && tar -xf - -C {dest}'",
                        big.display(),
                        ssh.config.display()
                    ))
                    .status()
                    .unwrap();
                assert!(status.success());
                t.elapsed()
            })
            .collect(),
    );
    ssh.run(&format!("rm -rf {remote_root}"), b"");
    drop(backend);

    println!(
        "host {address}; medians of {ROUNDS} runs ({SEED_ROUNDS} for seeding), one run of this benchmark"
    );
    println!(
        "{:<44} {:>10} {:>12} {:>8}",
        "operation", "component", "fresh ssh", "ratio"
    );
    for (what, ours, theirs) in [
        ("write a 1 KiB file", ours_write, fresh_write),
        ("read a 1 KiB file", ours_read, fresh_read),
        ("exec `true`", ours_exec, fresh_exec),
    ] {
        println!(
            "{what:<44} {:>8.1}ms {:>10.1}ms {:>7.1}x",
            ms(ours),
            ms(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
    println!(
        "{:<44} {:>8.1}ms {:>10.1}ms {:>7.2}x",
        "seed 100 MB (ensureRuntime vs tar | ssh tar)",
        ms(ours_seed),
        ms(tar_seed),
        tar_seed.as_secs_f64() / ours_seed.as_secs_f64()
    );
    println!("(ratio: fresh ssh / component; above 1 the component is faster)");
}
