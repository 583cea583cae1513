//! Shared support for the workspace-level tests: where the built artifacts are,
//! installation files for them, and access to the disposable test hosts.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The cargo target directory the running test binary was built into.
/// A test binary is `<target>/release/deps/<test>`, or
/// `<target>/<triple>/release/deps/<test>` when built as the release builds
/// the host (`cargo xtask test`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // Cargo marks the target directory, and each triple's inside it, with a
    // CACHEDIR.TAG: the outer of the two nearest.
    let tagged = |dir: &&Path| dir.join("CACHEDIR.TAG").is_file();
    let nearest = exe
        .ancestors()
        .find(tagged)
        .unwrap_or_else(|| panic!("{} is not inside a cargo target directory", exe.display()));
    nearest
        .parent()
        .filter(tagged)
        .unwrap_or(nearest)
        .to_path_buf()
}

/// The `occ-driver-host` binary of the same build as these tests: beside
/// their `deps/` directory (`cargo xtask host` builds it).
pub fn host_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let path = exe
        .ancestors()
        .nth(2)
        .expect("test binary inside a cargo profile directory")
        .join("occ-driver-host");
    assert!(
        path.exists(),
        "{} missing: build the host first (cargo xtask host; tests/run.sh does)",
        path.display()
    );
    path
}

/// A built component under `wasm32-wasip2/release`.
pub fn component(name: &str) -> PathBuf {
    let path = target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} missing: run `cargo guests` first",
        path.display()
    );
    path
}

/// The repository root. Read from cargo's run-time `CARGO_MANIFEST_DIR`, not
/// the compile-time one: clones at different paths share one target directory,
/// and cargo does not rebuild a test because its clone moved, so a baked-in
/// path would read another clone's files.
/// The first frame a shipped Python script reads on stdin: its arguments,
/// as the host sends them (a 4-byte big-endian length, then
/// `{"args": [...]}`), so that none is on the command line.
pub fn args_frame(args: &[&str]) -> Vec<u8> {
    let body = serde_json::json!({ "args": args }).to_string();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body.as_bytes());
    frame
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// SHA-256 of the repository's helper: what an operator pins after auditing it.
pub fn helper_sha256() -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(repo_root().join("helper/helper.js")).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write an installation file selecting `component` with `configuration`, the
/// repository's helper approved.
pub fn write_installation(dir: &Path, component: &Path, configuration: &Value) -> PathBuf {
    let doc = serde_json::json!({
        "occ": {"environment": "test"},
        "drivers": {"compute": {
            "id": "compute-ssh",
            "component": component,
            "approvedHelpers": [helper_sha256()],
            "configuration": configuration,
        }},
    });
    let path = dir.join("installation.yaml");
    // JSON is YAML: the host reads it with its YAML parser like any installation.
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// The spec's example configuration with its one host, `stable`, on a port
/// that refuses connections at once (127.0.0.1:1), and an identity file and
/// known hosts of its own in `dir`: the identity is never read, the connection
/// being refused first, but private, as the host demands.
pub fn refusing_configuration(dir: &Path) -> Value {
    use std::os::unix::fs::PermissionsExt;
    let path = repo_root().join("guest-ssh-driver/tests/fixtures/valid-spec-example.json");
    let mut configuration: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    std::fs::write(dir.join("id"), "not a key\n").unwrap();
    std::fs::set_permissions(dir.join("id"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(dir.join("known_hosts"), "").unwrap();
    configuration["ssh"] = serde_json::json!({
        "identityFile": dir.join("id"),
        "knownHostsFile": dir.join("known_hosts"),
        "connectTimeoutSeconds": 2,
    });
    configuration["hosts"]["stable"]["address"] = serde_json::json!("127.0.0.1");
    configuration["hosts"]["stable"]["port"] = serde_json::json!(1);
    configuration
}

/// Run the host binary with `args`.
pub fn run_host(args: &[&str]) -> Output {
    Command::new(host_binary())
        .args(args)
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .output()
        .expect("run occ-driver-host")
}

/// Start `occ-driver-host serve --installation <installation> <extra>` with
/// JSON-RPC on its stdin and stdout (both piped) and its stderr shown.
pub fn spawn_serve(installation: &Path, extra: &[&OsStr]) -> Child {
    spawn_serve_with(installation, extra, &[])
}

/// [`spawn_serve`] with `env` added to its environment (a `TMPDIR` of the
/// test's own, so that everything the host writes there can be searched).
pub fn spawn_serve_with(installation: &Path, extra: &[&OsStr], env: &[(&str, &OsStr)]) -> Child {
    Command::new(host_binary())
        .args(["serve", "--installation"])
        .arg(installation)
        .args(extra)
        .envs(env.iter().copied())
        .env("OCC_DRIVER_CACHE", target_dir().join("tmp/driver-cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start occ-driver-host serve")
}

/// Deploying with a compute component through the host binary.
pub mod compute;

/// A scripted model provider on a test host, and Agent turns through a
/// deployed gateway.
pub mod model;

/// OpenClaw's SSH sandbox backend through the host binary: installations and a
/// JSON-RPC client of `serve`.
pub mod sandbox;

/// The test-host rig, as `tests/rig/up.sh` described it.
pub mod rig {
    use super::*;

    /// One running test host.
    #[derive(Debug, Clone)]
    pub struct Host {
        /// Its name (occ-hK).
        pub name: String,
        /// Its address inside its network namespace.
        pub address: String,
        /// Its SSH port.
        pub port: u16,
    }

    /// The rig's files and hosts.
    #[derive(Debug, Clone)]
    pub struct Rig {
        /// The client identity authorized on every host.
        pub identity: PathBuf,
        /// known_hosts for every host.
        pub known_hosts: PathBuf,
        /// Node.js 24 on the hosts.
        pub node: String,
        /// The OpenClaw entrypoint on the hosts.
        pub openclaw: String,
        /// The hosts that are up.
        pub hosts: Vec<Host>,
    }

    impl Rig {
        /// Read the rig from `$OCC_RIG/env` (default /run/occ-rig).
        pub fn load() -> Rig {
            let dir = std::env::var("OCC_RIG").unwrap_or_else(|_| "/run/occ-rig".into());
            let env_text =
                std::fs::read_to_string(Path::new(&dir).join("env")).unwrap_or_else(|e| {
                    panic!("{dir}/env: {e}; bring the rig up with tests/rig/up.sh 2")
                });
            let var = |k: &str| {
                env_text
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{k}=")))
                    .unwrap_or_else(|| panic!("{k} missing from {dir}/env"))
                    .to_string()
            };
            let hosts: Value =
                serde_json::from_str(&std::fs::read_to_string(var("OCC_RIG_HOSTS_JSON")).unwrap())
                    .unwrap();
            Rig {
                identity: var("OCC_RIG_IDENTITY").into(),
                known_hosts: var("OCC_RIG_KNOWN_HOSTS").into(),
                node: var("OCC_RIG_NODE"),
                openclaw: var("OCC_RIG_OPENCLAW"),
                hosts: hosts
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| Host {
                        name: h["name"].as_str().unwrap().into(),
                        address: h["address"].as_str().unwrap().into(),
                        port: h["port"].as_u64().unwrap_or(22) as u16,
                    })
                    .collect(),
            }
        }

        /// Run a shell command on `host` as root, for inspection by the tests.
        pub fn sh(&self, host: &Host, script: &str) -> Output {
            self.ssh(host, script)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run ssh")
        }

        /// Run `script` on `host` as root with `input` as its stdin, whatever
        /// its exit.
        pub fn run_input(&self, host: &Host, script: &str, input: &[u8]) -> Output {
            use std::io::Write;
            let mut child = self
                .ssh(host, script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run ssh");
            // A command that stops reading early closes the pipe: not an error here.
            let _ = child.stdin.take().unwrap().write_all(input);
            child.wait_with_output().expect("wait for ssh")
        }

        /// Like [`Rig::sh_ok`], with `input` as the command's stdin: how a test
        /// puts a file of this repository on a host.
        pub fn sh_input(&self, host: &Host, script: &str, input: &[u8]) -> String {
            let out = self.run_input(host, script, input);
            assert!(
                out.status.success(),
                "on {}: {script}\nstderr: {}",
                host.name,
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }

        /// Start `script` on `host` as root, its output piped: a process that
        /// runs beside the calls a test makes.
        pub fn spawn(&self, host: &Host, script: &str) -> std::process::Child {
            self.ssh(host, script)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run ssh")
        }

        fn ssh(&self, host: &Host, script: &str) -> Command {
            let mut command = Command::new("ssh");
            command
                .args(["-F", "none", "-i"])
                .arg(&self.identity)
                .args([
                    "-o",
                    "IdentitiesOnly=yes",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "StrictHostKeyChecking=yes",
                ])
                .arg("-o")
                .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()))
                .arg("-o")
                .arg(format!("ControlPath={}", self.mux_path().display()))
                .args([
                    // The tests' own looks at a host share one connection per
                    // host (a fresh handshake costs tens of milliseconds of CPU
                    // on each side, thousands of times a run); a master that
                    // an outage ended is replaced by the next command.
                    "-o",
                    "ControlMaster=auto",
                    "-o",
                    "ControlPersist=60",
                    "-o",
                    "LogLevel=ERROR",
                    &format!("root@{}", host.address),
                    script,
                ]);
            command
        }

        /// Where the tests' shared connections to this rig's hosts listen:
        /// beside the rig's client key, in its private directory; `%C`
        /// names the host.
        fn mux_path(&self) -> PathBuf {
            self.identity
                .parent()
                .expect("the identity lies in the rig's client directory")
                .join("mux-%C")
        }

        /// Like [`Rig::sh`], returning trimmed stdout and failing on a nonzero exit.
        pub fn sh_ok(&self, host: &Host, script: &str) -> String {
            let out = self.sh(host, script);
            assert!(
                out.status.success(),
                "on {}: {script}\nstdout: {}\nstderr: {}",
                host.name,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    }
}

/// The fault relay (`tests/rig/relay.mjs`) in front of a rig host's sshd: a
/// link with latency, stalls and cuts, since this kernel has no `netem`.
pub mod relay {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{ChildStdin, Stdio};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::rig::{Host, Rig};
    use super::*;

    /// A running relay, ended when dropped.
    pub struct Relay {
        child: Child,
        stdin: Arc<Mutex<ChildStdin>>,
        _dir: tempfile::TempDir,
        /// The host as seen through the relay (127.0.0.1, the relay's port).
        pub host: Host,
        /// known_hosts naming the host's own key under the relay's address.
        pub known_hosts: PathBuf,
    }

    impl Relay {
        /// A relay to `host` holding each chunk `delay_ms` plus up to
        /// `jitter_ms` in each direction.
        pub fn start(rig: &Rig, host: &Host, delay_ms: u32, jitter_ms: u32) -> Relay {
            let mut child = Command::new(&rig.node)
                .arg(repo_root().join("tests/rig/relay.mjs"))
                .args(["--to", &format!("{}:{}", host.address, host.port)])
                .args(["--delay-ms", &delay_ms.to_string()])
                .args(["--jitter-ms", &jitter_ms.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start tests/rig/relay.mjs");
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let first = lines.next().and_then(Result::ok).unwrap_or_default();
            let port: u16 = first
                .strip_prefix("listening ")
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or_else(|| panic!("the relay said {first:?}"));
            // Its answers (`ok <command>`) are drained, never awaited.
            std::thread::spawn(move || for _ in lines {});
            let known = std::fs::read_to_string(&rig.known_hosts).unwrap();
            let key = known
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{} ", host.address)))
                .unwrap_or_else(|| {
                    panic!(
                        "no key of {} in {}",
                        host.address,
                        rig.known_hosts.display()
                    )
                });
            let dir = tempfile::tempdir().unwrap();
            let known_hosts = dir.path().join("known_hosts");
            std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {key}\n")).unwrap();
            Relay {
                stdin: Arc::new(Mutex::new(child.stdin.take().unwrap())),
                child,
                _dir: dir,
                host: Host {
                    name: host.name.clone(),
                    address: "127.0.0.1".into(),
                    port,
                },
                known_hosts,
            }
        }

        /// One command (`delay <ms> [<jitter>]`, `stall <up|down|both> <ms>`, `cut`).
        pub fn command(&self, command: &str) {
            let mut stdin = self.stdin.lock().unwrap();
            writeln!(stdin, "{command}")
                .and_then(|_| stdin.flush())
                .expect("the relay ended");
        }

        /// Stall a random direction for `stall` at random points, one every
        /// `every.0` to `every.1`, until the returned guard is stopped.
        pub fn stall_randomly(&self, stall: Duration, every: (Duration, Duration)) -> Stalls {
            let stop = Arc::new(AtomicBool::new(false));
            let count = Arc::new(AtomicUsize::new(0));
            let (stdin, done, sent) = (self.stdin.clone(), stop.clone(), count.clone());
            let mut x = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1;
            let thread = std::thread::spawn(move || {
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let span = (every.1 - every.0).as_millis() as u64 + 1;
                while !done.load(Ordering::SeqCst) {
                    let wait = every.0 + Duration::from_millis(next() % span);
                    let until = std::time::Instant::now() + wait;
                    while std::time::Instant::now() < until {
                        if done.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let direction = ["up", "down", "both"][(next() % 3) as usize];
                    let mut stdin = stdin.lock().unwrap();
                    if writeln!(stdin, "stall {direction} {}", stall.as_millis()).is_err() {
                        return;
                    }
                    let _ = stdin.flush();
                    sent.fetch_add(1, Ordering::SeqCst);
                }
            });
            Stalls {
                stop,
                count,
                thread: Some(thread),
            }
        }
    }

    impl Drop for Relay {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Random stalls under way; [`Stalls::stop`] ends them.
    pub struct Stalls {
        stop: Arc<AtomicBool>,
        count: Arc<AtomicUsize>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Stalls {
        /// End the stalls; how many were sent.
        pub fn stop(mut self) -> usize {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            self.count.load(Ordering::SeqCst)
        }
    }

    impl Drop for Stalls {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    /// The host's link taken down (its host-side veth, as the rig made it)
    /// until dropped: a link that went away, packets dropped, not refused.
    pub struct LinkDown(String);

    impl LinkDown {
        /// Take `host`'s link down now.
        pub fn take(host: &Host) -> LinkDown {
            let dev = format!("veth-{}", host.name);
            let status = Command::new("ip")
                .args(["link", "set", &dev, "down"])
                .status()
                .unwrap();
            assert!(status.success(), "ip link set {dev} down");
            LinkDown(dev)
        }
    }

    impl Drop for LinkDown {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["link", "set", &self.0, "up"])
                .status();
        }
    }
}

/// What another account on a host sees of everyone's processes: a watcher that
/// polls `/proc/*/cmdline` and `/proc/*/environ` as that account, as a
/// model-chosen command of an Agent could, and whether what it saw reveals a
/// secret (as it is, or inside any base64 run).
pub mod watch {
    use super::rig::{Host, Rig};

    /// The watcher, run as `python3 -c WATCHER <stop file>`: it polls until the
    /// stop file exists (or ten minutes pass), then prints every distinct
    /// argument vector and environment it could read, as a JSON list.
    const WATCHER: &str = r#"
import json, os, sys, time
stop, me, seen = sys.argv[1], os.getpid(), set()
deadline = time.time() + 600
while not os.path.exists(stop) and time.time() < deadline:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        for name in ("cmdline", "environ"):
            try:
                with open("/proc/%s/%s" % (pid, name), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if data:
                seen.add(data)
print(json.dumps(sorted(d.replace(b"\0", b" ").decode("utf-8", "replace") for d in seen)))
"#;

    /// A watcher running on a host as one account.
    pub struct Watcher<'a> {
        rig: &'a Rig,
        host: &'a Host,
        stop: String,
        child: std::process::Child,
    }

    /// Start watching `host`'s processes as `account`.
    pub fn start<'a>(rig: &'a Rig, host: &'a Host, account: &str) -> Watcher<'a> {
        let stop = format!("/run/occ-watch-stop-{}", std::process::id());
        rig.sh_ok(host, &format!("rm -f {stop}"));
        let quoted = WATCHER.replace('\'', "'\"'\"'");
        let child = rig.spawn(
            host,
            &format!("exec runuser -u {account} -- python3 -c '{quoted}' {stop}"),
        );
        // Give it its first pass before anything is called.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Watcher {
            rig,
            host,
            stop,
            child,
        }
    }

    impl Watcher<'_> {
        /// Stop watching: every distinct command line and environment seen.
        pub fn finish(self) -> Vec<String> {
            self.rig.sh_ok(self.host, &format!("touch {}", self.stop));
            let out = self.child.wait_with_output().expect("the watcher");
            self.rig.sh_ok(self.host, &format!("rm -f {}", self.stop));
            assert!(
                out.status.success(),
                "the watcher failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).expect("the watcher's JSON list")
        }
    }

    /// The first text of `seen` that holds `secret`, as it is or in the bytes
    /// any run of base64 characters in it decodes to (at every alignment).
    pub fn reveals<'s>(seen: &'s [String], secret: &str) -> Option<&'s str> {
        use base64::Engine as _;
        let engine = &base64::engine::general_purpose::STANDARD_NO_PAD;
        let decoded_holds = |run: &str| {
            (0..4).any(|skip| {
                let part: String = run.chars().skip(skip).collect();
                let part = &part[..part.len() - part.len() % 4];
                engine
                    .decode(part.trim_end_matches('='))
                    .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(secret))
            })
        };
        seen.iter().map(String::as_str).find(|text| {
            text.contains(secret)
                || text
                    .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
                    .filter(|run| run.len() >= 16)
                    .any(decoded_holds)
        })
    }

    #[cfg(test)]
    mod tests {
        use super::reveals;
        use base64::Engine as _;

        #[test]
        fn a_secret_is_found_as_it_is_and_inside_base64() {
            let secret = "wsetup-secret-91f2";
            let doc = format!("{{\"note\":\"{secret}\",\"x\":1}}");
            let b64 = base64::engine::general_purpose::STANDARD.encode(&doc);
            for text in [
                format!("node - {b64} tail"),
                format!("prefix{secret}suffix"),
            ] {
                assert!(
                    reveals(std::slice::from_ref(&text), secret).is_some(),
                    "{text}"
                );
            }
            assert!(
                reveals(
                    &["node -e loader".into(), b64.replace('A', "B")],
                    "nothing-here"
                )
                .is_none()
            );
        }
    }
}
