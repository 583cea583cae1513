//! `inspect`: what a component is and asks for, before anything runs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use occ_driver_host::world;
use occ_driver_host::world::ssh_compute_driver::helper_of;
use occ_driver_host::world::ssh_sandbox_backend::scripts_of;
use serde_json::{Value, json};

use super::{EXIT_LOCAL, Setup};

/// Arguments of `inspect`.
#[derive(clap::Args)]
pub(crate) struct InspectArgs {
    /// The component file (.wasm).
    component: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also check the component (and this binary) against a release's
    /// manifest.json (`cargo xtask dist`): fails unless the component is one of
    /// the release's, byte for byte.
    #[arg(long, value_name = "FILE")]
    release_manifest: Option<PathBuf>,
}

/// What a release manifest says of a component and of this binary.
#[derive(Debug)]
struct Release {
    /// "guest_ssh_driver.wasm of occ-driver-host 0.2.0, commit ...".
    component: String,
    /// Whether this very binary is the release's.
    binary_matches: bool,
    binary_sha256: String,
}

/// Finds the component of SHA-256 `sha256` in the release manifest at `path`.
fn release_check(path: &std::path::Path, sha256: &str) -> Result<Release> {
    let text = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let m: Value = serde_json::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a release manifest: {e}", path.display()))?;
    let release = format!(
        "occ-driver-host {}, commit {}",
        m["version"].as_str().unwrap_or("?"),
        m["commit"].as_str().unwrap_or("?")
    );
    let components = m["components"].as_array().cloned().unwrap_or_default();
    let Some(found) = components.iter().find(|c| c["sha256"] == sha256) else {
        let known: Vec<String> = components
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["file"].as_str().unwrap_or("?"),
                    c["sha256"].as_str().unwrap_or("?")
                )
            })
            .collect();
        anyhow::bail!(
            "the component's SHA-256 {sha256} is none of the components of {release} in {}: {}",
            path.display(),
            known.join(", ")
        );
    };
    let me = std::env::current_exe()
        .and_then(std::fs::read)
        .unwrap_or_default();
    let binary_sha256 = occ_ssh_target::digest::sha256_hex(&me);
    Ok(Release {
        component: format!("{} of {release}", found["file"].as_str().unwrap_or("?")),
        binary_matches: m["binary"]["sha256"] == binary_sha256.as_str(),
        binary_sha256,
    })
}

fn unserved_version_ok(c: &occ_driver_host::runtime::CompiledComponent) -> bool {
    world::unserved_version(c.imports.iter().chain(&c.exports).map(String::as_str)).is_none()
}

pub(crate) fn run(setup: &Setup, args: InspectArgs) -> Result<ExitCode> {
    let c = setup.runtime.compile(&args.component, setup.cache())?;
    let world = world::identify(c.exports.iter().map(String::as_str));
    let granted = |import: &str| world.is_some_and(|w| w.grants(import));
    let refused: Vec<&String> = c.imports.iter().filter(|i| !granted(i)).collect();
    let loadable = world.is_some() && refused.is_empty() && unserved_version_ok(&c);
    let helper = helper_of(&c);
    let bytes = std::fs::read(&c.path)?;
    let producers = occ_driver_host::runtime::component::producers(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", c.path.display()))?;
    let unserved = world::unserved_version(c.imports.iter().chain(&c.exports).map(String::as_str));
    let scripts = scripts_of(&c);
    let release = match &args.release_manifest {
        Some(path) => match release_check(path, &c.sha256) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("error: {}: {e:#}", args.component.display());
                return Ok(ExitCode::from(EXIT_LOCAL));
            }
        },
        None => None,
    };
    if args.json {
        let v = json!({
            "component": c.path,
            "sha256": c.sha256,
            "size": c.size,
            "helper": helper.as_ref().map(|(bytes, sha)| json!({"sha256": sha, "size": bytes.len()})),
            "scripts": scripts.iter().map(|s| json!({"name": s.name, "sha256": s.sha256, "size": s.size, "interpreter": s.interpreter})).collect::<Vec<_>>(),
            "world": world.map(|w| Value::from(w.named(&c))).unwrap_or(Value::Null),
            "loadable": loadable,
            "imports": c.imports.iter().map(|i| json!({"name": i, "granted": granted(i)})).collect::<Vec<_>>(),
            "exports": c.exports,
            "producers": producers,
            "fromCache": c.from_cache,
            "loadMs": c.load_time.as_secs_f64() * 1000.0,
            "release": release.as_ref().map(|r| json!({
                "component": r.component,
                "binaryMatches": r.binary_matches,
                "binarySha256": r.binary_sha256,
            })),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("component  {}", c.path.display());
        println!("sha256     {}", c.sha256);
        println!("size       {} bytes", c.size);
        if let Some(r) = &release {
            println!("release    {} (byte for byte)", r.component);
            println!(
                "binary     {} {}",
                r.binary_sha256,
                if r.binary_matches {
                    "is the release's occ-driver-host"
                } else {
                    "is NOT the release's occ-driver-host (a build of its own)"
                }
            );
        }
        match &helper {
            Some((bytes, sha)) => println!(
                "helper     sha256 {sha} ({} bytes; approve it with drivers.compute.approvedHelpers)",
                bytes.len()
            ),
            None if scripts.is_empty() => println!("helper     none (no occ:helper section)"),
            None => {}
        }
        for s in &scripts {
            println!(
                "script     {} sha256 {} ({} bytes, {}; approve it with drivers.sandbox.approvedScripts)",
                s.name,
                s.sha256,
                s.size,
                s.interpreter.unwrap_or("no interpreter line: never runs")
            );
        }
        match world {
            Some(w) => println!("world      {}", w.named(&c)),
            None => println!("world      none (it exports none of this host's worlds)"),
        }
        println!("imports");
        for i in &c.imports {
            println!("  {} {i}", if granted(i) { "granted" } else { "REFUSED" });
        }
        println!("exports");
        for e in &c.exports {
            println!("  {e}");
        }
        println!("producers  (rebuild and compare: docs/auditing.md, \"Rebuilding a component\")");
        for p in &producers {
            println!("  {:<13} {} {}", p.field, p.name, p.version);
        }
    }
    if let Some((found, name)) = &unserved {
        eprintln!(
            "error: this host refuses to load {}: it was built for {}@{found} (it names {name}); \
             this host serves {}@{}",
            args.component.display(),
            world::PACKAGE,
            world::PACKAGE,
            world::served_versions().join(", @")
        );
        return Ok(ExitCode::from(EXIT_LOCAL));
    }
    if !loadable {
        let why = if world.is_none() {
            format!(
                "it exports none of {}",
                world::WORLDS
                    .iter()
                    .map(|w| w.export)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "it imports {}",
                refused
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        eprintln!(
            "error: this host refuses to load {}: {why}",
            args.component.display()
        );
        return Ok(ExitCode::from(EXIT_LOCAL));
    }
    Ok(ExitCode::SUCCESS)
}
