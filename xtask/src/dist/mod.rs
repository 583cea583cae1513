//! `cargo xtask dist --out DIR`: the release, as the npm packages each
//! platform installs extensions from, and a manifest of every hash in it.
//!
//! - `occ-driver-host-<os>-<cpu>-<libc>`: the stripped host binary alone, with
//!   npm's `os`, `cpu` and `libc` fields and no scripts (esbuild's pattern):
//!   a package manager installs the one that fits the machine and skips the
//!   others.
//! - `occ-driver-host-compute`: OCC's Compute Driver package, its folder
//!   (`host/node/compute/`) as its `package.json` lists it, with the driver
//!   component, the platform package as an exact-version optional dependency
//!   and `occ-driver-host-rpc` (`host/node/rpc/`, what both packages share)
//!   bundled inside.
//! - `occ-driver-host-openclaw`: the OpenClaw plugin (`@occ/openclaw-sandbox-ssh`
//!   before 0.3.0), its folder
//!   (`host/node/openclaw-plugin/`) with the sandbox component, and both
//!   `occ-driver-host-rpc` and the platform package bundled inside its
//!   tarball: OpenClaw installs a plugin tarball with `npm install` in the
//!   plugin's directory, and our packages are on no registry to fetch from.
//!
//! Every tarball holds `package/<path>` entries in byte order of their paths,
//! with npm's fixed time (1985-10-26T08:15:00Z), owner 0, mode 0644 or 0755
//! and no user or group names, gzip-compressed with no time or name in its
//! header: the same commit gives the same bytes wherever it is built
//! (`tests/reproducible.sh`). The binary is built with the same path remaps as
//! the components, no debug information and no incremental state.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use occ_ssh_target::digest::sha256_hex;
use serde_json::{Value, json};

use crate::host::{output, triple};
use crate::{Build, run};
use package::{Entry, check_manifest, file, tarball, tarball_name};

mod package;

/// A machine the host binary is built for, and the npm package that carries it.
#[derive(Debug)]
struct Platform {
    triple: &'static str,
    package: &'static str,
    os: &'static str,
    cpu: &'static str,
    libc: &'static str,
    label: &'static str,
}

/// The platforms a release can be built for: the triple of the machine that
/// builds it picks one. The Node packages name the same packages
/// (`host/node/host-binary.mjs`).
const PLATFORMS: &[Platform] = &[Platform {
    triple: "x86_64-unknown-linux-gnu",
    package: "occ-driver-host-linux-x64-gnu",
    os: "linux",
    cpu: "x64",
    libc: "glibc",
    label: "Linux x64 (glibc)",
}];

const COMPUTE_PACKAGE: &str = "occ-driver-host-compute";
const PLUGIN_PACKAGE: &str = "occ-driver-host-openclaw";
/// What both bundle (`host/node/rpc/`): the JSON-RPC peer and where the
/// binary is.
const RPC_PACKAGE: &str = "occ-driver-host-rpc";

pub(crate) fn main(build: &Build, args: &[String]) -> ExitCode {
    let mut out = None;
    let mut cargo_args = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--out" => out = rest.next().map(PathBuf::from),
            "-h" | "--help" => {
                println!("{HELP}");
                return ExitCode::SUCCESS;
            }
            // Passed to both cargo builds.
            "--offline" | "--locked" | "--frozen" => cargo_args.push(arg.clone()),
            other => {
                eprintln!("xtask dist: unknown argument {other:?}\n\n{HELP}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("xtask dist: --out DIR is required\n\n{HELP}");
        return ExitCode::from(2);
    };
    match dist(build, &out, &cargo_args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask dist: {e}");
            ExitCode::from(1)
        }
    }
}

const HELP: &str = "\
cargo xtask dist --out DIR [--offline] [--locked] [--frozen]

Builds the components and the stripped host binary of this checkout and
writes into DIR:
  occ-driver-host-<platform>-<version>.tgz   the host binary (npm os/cpu/libc)
  occ-driver-host-compute-<version>.tgz      OCC's Compute Driver package
  occ-driver-host-openclaw-<version>.tgz     the OpenClaw plugin (binary inside)
  manifest.json                              every tarball's, component's,
                                             helper's and script's SHA-256
The same commit gives the same bytes in any clone (tests/reproducible.sh).
Verify a component against it: occ-driver-host inspect --release-manifest
DIR/manifest.json COMPONENT.";

fn step(text: &str) {
    eprintln!("dist: {text}");
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_json(path: &Path) -> Result<Value, String> {
    serde_json::from_slice(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// The newest `GLIBC_x.y[.z]` symbol version the binary asks for: the oldest
/// glibc it runs on. The names sit in its dynamic string table.
fn glibc_floor(binary: &[u8]) -> Option<String> {
    let needle = b"GLIBC_";
    let mut best: Option<Vec<u32>> = None;
    let mut i = 0;
    while let Some(at) = binary[i..].windows(needle.len()).position(|w| w == needle) {
        let start = i + at + needle.len();
        let end = binary[start..]
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'.'))
            .map_or(binary.len(), |n| start + n);
        let parts: Option<Vec<u32>> = std::str::from_utf8(&binary[start..end])
            .ok()
            .filter(|s| !s.is_empty())
            .map(|s| s.split('.').map(|p| p.parse().ok()).collect())
            .unwrap_or(None);
        if let Some(parts) = parts
            && best.as_ref().is_none_or(|b| parts > *b)
        {
            best = Some(parts);
        }
        i = end.max(start);
    }
    best.map(|v| v.iter().map(u32::to_string).collect::<Vec<_>>().join("."))
}

/// What `occ-driver-host inspect --json` says of a component.
fn inspect(binary: &Path, component: &Path) -> Result<Value, String> {
    let text = output(
        Command::new(binary)
            .args(["--no-cache", "inspect", "--json"])
            .arg(component),
    )?;
    serde_json::from_str(&text).map_err(|e| format!("inspect {}: {e}", component.display()))
}

fn dist(build: &Build, out: &Path, cargo_args: &[String]) -> Result<(), String> {
    let version = env!("CARGO_PKG_VERSION");
    let commit = build.commit()?;
    let triple = triple()?;
    let platform = PLATFORMS
        .iter()
        .find(|p| p.triple == triple)
        .ok_or_else(|| {
            format!(
                "no platform package is defined for {triple}; the release is built on {}",
                PLATFORMS
                    .iter()
                    .map(|p| p.triple)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    // One folder per package, each shipped as it stands.
    let node = build.workspace.join("host/node");
    let compute_dir = node.join("compute");
    let plugin_dir = node.join("openclaw-plugin");
    let rpc_dir = node.join("rpc");
    let compute_json = compute_dir.join("package.json");
    let plugin_json = plugin_dir.join("package.json");
    let rpc_json = rpc_dir.join("package.json");
    let compute_manifest = read_json(&compute_json)?;
    let plugin_manifest = read_json(&plugin_json)?;
    let rpc_manifest = read_json(&rpc_json)?;
    // Before a build of minutes: the packages must agree with the host.
    check_manifest(
        &compute_json,
        &compute_manifest,
        COMPUTE_PACKAGE,
        version,
        Some(platform),
    )?;
    check_manifest(
        &plugin_json,
        &plugin_manifest,
        PLUGIN_PACKAGE,
        version,
        Some(platform),
    )?;
    check_manifest(&rpc_json, &rpc_manifest, RPC_PACKAGE, version, None)?;

    step(&format!("components (commit {commit})"));
    let status = run(build.components(crate::SHIPPED, cargo_args));
    if status != ExitCode::SUCCESS {
        return Err("building the components failed".into());
    }
    step(&format!(
        "host binary for {triple}, stripped: the one `cargo xtask host` built and the \
         tests ran (a build of minutes only when none was made)"
    ));
    let host = build.host_cargo(
        "build",
        &[
            &["-p".to_string(), "occ-driver-host".to_string()],
            cargo_args,
        ]
        .concat(),
    )?;
    if run(host) != ExitCode::SUCCESS {
        return Err("building the host binary failed".into());
    }
    let binary_path = build.host_binary()?;
    let wasm = build.target.join("wasm32-wasip2/release");
    let driver_path = wasm.join("guest_ssh_driver.wasm");
    let sandbox_path = wasm.join("guest_ssh_sandbox.wasm");
    let template_path = wasm.join("inventory_driver.wasm");

    // The binary says what it is, and that is what the packages say.
    let says = output(Command::new(&binary_path).arg("--version"))?;
    let first = says.lines().next().unwrap_or_default();
    if first != format!("occ-driver-host {version}") || !says.contains(&format!("commit: {commit}"))
    {
        return Err(format!(
            "{} --version says {says:?}, not version {version} of commit {commit}",
            binary_path.display()
        ));
    }
    let wit: Vec<String> = says
        .lines()
        .skip_while(|l| !l.starts_with("WIT packages served"))
        .skip(1)
        .map(|l| l.trim().to_string())
        .collect();

    let binary = read(&binary_path)?;
    let binary_sha256 = sha256_hex(&binary);
    let glibc = glibc_floor(&binary);
    let driver = read(&driver_path)?;
    let sandbox = read(&sandbox_path)?;
    let template = read(&template_path)?;
    let driver_inspect = inspect(&binary_path, &driver_path)?;
    let sandbox_inspect = inspect(&binary_path, &sandbox_path)?;
    let template_inspect = inspect(&binary_path, &template_path)?;

    // The platform package: the binary and a package.json that says where it runs.
    let platform_manifest = json!({
        "name": platform.package,
        "version": version,
        "description": format!(
            "The occ-driver-host binary for {}{}: installed by occ-driver-host-compute and occ-driver-host-openclaw",
            platform.label,
            glibc.as_ref().map(|g| format!(", glibc {g} or later")).unwrap_or_default()
        ),
        "os": [platform.os],
        "cpu": [platform.cpu],
        "libc": [platform.libc],
        "files": ["bin/occ-driver-host"],
        "preferUnplugged": true,
        "license": compute_manifest.get("license").cloned().unwrap_or(Value::Null),
    });
    let pretty = |v: &Value| {
        let mut text = serde_json::to_vec_pretty(v).expect("JSON");
        text.push(b'\n');
        text
    };
    let platform_entries = || {
        vec![
            file("package.json", pretty(&platform_manifest)),
            Entry {
                path: "bin/occ-driver-host".into(),
                bytes: binary.clone(),
                executable: true,
            },
        ]
    };

    // A package's folder as its package.json lists it, with `built` (a
    // component, by file name) taken from the build instead.
    let folder = |dir: &Path, manifest: &Value, json: &Path, built: (&str, &[u8])| {
        let mut entries = vec![file("package.json", read(json)?)];
        for name in manifest["files"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            let bytes = if name == built.0 {
                built.1.to_vec()
            } else {
                read(&dir.join(name))?
            };
            entries.push(file(name, bytes));
        }
        if !entries.iter().any(|e| e.path == built.0) {
            return Err(format!(
                "{}: files must list {}, the component the package loads",
                json.display(),
                built.0
            ));
        }
        Ok::<_, String>(entries)
    };
    // The shared package, bundled into both under node_modules/.
    let mut rpc = vec![file("package.json", read(&rpc_json)?)];
    for name in rpc_manifest["files"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        rpc.push(file(name, read(&rpc_dir.join(name))?));
    }
    fn bundled(package: &str, entries: Vec<Entry>) -> Vec<Entry> {
        entries
            .into_iter()
            .map(|e| Entry {
                path: format!("node_modules/{package}/{}", e.path),
                ..e
            })
            .collect()
    }

    // OCC's package: its folder, the component, the shared package bundled
    // (its manifest says so); OCC installs the platform package beside it.
    if compute_manifest["bundleDependencies"] != json!([RPC_PACKAGE]) {
        return Err(format!(
            "{}: bundleDependencies must be [{RPC_PACKAGE:?}]: the package carries what it imports",
            compute_json.display()
        ));
    }
    let mut compute = folder(
        &compute_dir,
        &compute_manifest,
        &compute_json,
        ("guest_ssh_driver.wasm", &driver),
    )?;
    compute.extend(bundled(RPC_PACKAGE, rpc.clone()));

    // The plugin: its folder, the component, and both the shared package and
    // the platform package bundled, so that OpenClaw's offline install of the
    // one tarball runs.
    let mut plugin_out = plugin_manifest.clone();
    plugin_out["bundleDependencies"] = json!([RPC_PACKAGE, platform.package]);
    let mut plugin = folder(
        &plugin_dir,
        &plugin_manifest,
        &plugin_json,
        ("guest_ssh_sandbox.wasm", &sandbox),
    )?;
    plugin[0] = file("package.json", pretty(&plugin_out));
    plugin.extend(bundled(RPC_PACKAGE, rpc));
    plugin.extend(bundled(platform.package, platform_entries()));

    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut packages = Vec::new();
    for (name, entries) in [
        (platform.package, platform_entries()),
        (COMPUTE_PACKAGE, compute),
        (PLUGIN_PACKAGE, plugin),
    ] {
        let bytes = tarball(entries)?;
        let file_name = tarball_name(name, version);
        let path = out.join(&file_name);
        // Written whole under a temporary name, then renamed: a failed run
        // leaves no partial tarball under a release name.
        let partial = out.join(format!(".{file_name}.partial"));
        std::fs::File::create(&partial)
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        packages.push(json!({
            "name": name,
            "version": version,
            "file": file_name,
            "sha256": sha256_hex(&bytes),
            "size": bytes.len(),
        }));
    }

    let component = |file_name: &str, bytes: &[u8], seen: &Value| {
        let mut c = json!({
            "file": file_name,
            "sha256": sha256_hex(bytes),
            "size": bytes.len(),
            "world": seen["world"],
        });
        if !seen["helper"].is_null() {
            c["helper"] = seen["helper"].clone();
        }
        let scripts: BTreeMap<String, Value> = seen["scripts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or_default().to_string(),
                    json!({"sha256": s["sha256"], "size": s["size"]}),
                )
            })
            .collect();
        if !scripts.is_empty() {
            c["scripts"] = json!(scripts);
        }
        c
    };
    let manifest = json!({
        "release": "occ-driver-host",
        "version": version,
        "commit": commit,
        "wit": wit,
        "platform": {
            "triple": platform.triple,
            "package": platform.package,
            "os": platform.os,
            "cpu": platform.cpu,
            "libc": platform.libc,
            "glibcFloor": glibc,
        },
        "binary": {
            "path": format!("{}/bin/occ-driver-host", platform.package),
            "sha256": binary_sha256,
            "size": binary.len(),
        },
        "components": [
            component("guest_ssh_driver.wasm", &driver, &driver_inspect),
            component("guest_ssh_sandbox.wasm", &sandbox, &sandbox_inspect),
            // The template driver ships as source to copy; its bytes are listed
            // so that an author can check a rebuild of it.
            component("inventory_driver.wasm", &template, &template_inspect),
        ],
        "packages": packages,
    });
    let manifest_path = out.join("manifest.json");
    std::fs::write(&manifest_path, pretty(&manifest))
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;

    println!(
        "occ-driver-host {version} (commit {commit}) for {}",
        platform.label
    );
    println!(
        "  binary   {}  {:>10} bytes  glibc {} or later",
        binary_sha256,
        binary.len(),
        glibc.as_deref().unwrap_or("(none)")
    );
    for c in manifest["components"].as_array().into_iter().flatten() {
        println!(
            "  {:<22} {}  {:>8} bytes",
            c["file"].as_str().unwrap_or_default(),
            c["sha256"].as_str().unwrap_or_default(),
            c["size"]
        );
        if let Some(h) = c.get("helper") {
            println!("    helper {}", h["sha256"].as_str().unwrap_or_default());
        }
        for (name, s) in c["scripts"].as_object().into_iter().flatten() {
            println!(
                "    script {name:<9} {}",
                s["sha256"].as_str().unwrap_or_default()
            );
        }
    }
    for p in &packages {
        println!(
            "  {}  {}  {:>10} bytes",
            p["sha256"].as_str().unwrap_or_default(),
            out.join(p["file"].as_str().unwrap_or_default()).display(),
            p["size"]
        );
    }
    println!("  manifest {}", manifest_path.display());
    Ok(())
}

#[cfg(test)]
mod tests;
