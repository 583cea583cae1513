//! `occ-driver-host`: inspect, check and call OCC Compute Driver components.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use occ_driver_host::ssh_exec::SshMode;
use occ_driver_host::{
    CallError, CallOptions, ComponentCache, Driver, DriverOptions, HelperLine, Installation,
    Limits, Method, Runtime, imports, present,
};
use serde_json::{Value, json};

mod serve;

const AFTER_HELP: &str = "\
Examples:
  # What does a component import, and would this host grant it?
  occ-driver-host inspect target/wasm32-wasip2/release/guest_ssh_driver.wasm

  # Validate an installation and its driver configuration; touches no host.
  occ-driver-host check /etc/occ/installation.yaml

  # One contract call; the result is JSON on stdout.
  occ-driver-host call preflight --installation /etc/occ/installation.yaml
  occ-driver-host call ensureNamespace --installation inst.yaml \\
      --params '{\"namespace\": {\"id\": \"ns-1\", \"name\": \"stable\"}}'
  occ-driver-host call prepareRevision --installation inst.yaml --params @revision.json

  # Serve the contract over JSON-RPC 2.0 on stdio (for a controller).
  occ-driver-host serve --installation inst.yaml

Exit status: 0 success; 1 the host could not load the driver or read input;
2 usage; 75 the driver failed and a retry may succeed; 65 the driver refused
and an operator must change something first.";

/// Load OCC Compute Drivers as sandboxed WebAssembly components and call them.
///
/// A driver component may run commands only on the hosts its installation
/// grants, by alias, through the host's own ssh client; it has no files,
/// sockets or environment. Compiled components are cached on disk.
#[derive(Parser)]
#[command(name = "occ-driver-host", version, after_help = AFTER_HELP)]
struct Cli {
    /// Directory of precompiled components [default: $OCC_DRIVER_CACHE or ~/.cache/occ-driver-host].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the component every time instead of using the cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Load this component instead of the installation's drivers.compute.component.
    #[arg(long, global = true, value_name = "FILE")]
    component: Option<PathBuf>,
    /// Run against the hosts and append every exec to FILE (a recording for --ssh-replay).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        conflicts_with = "ssh_replay"
    )]
    ssh_record: Option<PathBuf>,
    /// Answer every exec from a recording made with --ssh-record; connect to no host.
    #[arg(long, global = true, value_name = "FILE")]
    ssh_replay: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a component's SHA-256, size, world, imports (granted or refused) and exports.
    Inspect {
        /// The component file (.wasm).
        component: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate an installation and its driver's configuration without touching any host.
    Check {
        /// The installation YAML (the OCC Installation document plus drivers.compute.component).
        installation: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Call one contract method and print its JSON result.
    #[command(
        after_help = "Methods: validateConfiguration, preflight, ensureNamespace, bindAgent, validateHarnessAuth,\n\
prepareRevision, activateRevision, deactivateRevision, stopRevision, retireRevision, deleteNamespace.\n\
Revision methods take {\"revision\": {...}, \"binding\": {\"namespace\": {...}, \"agent\": {...}}}: a one-shot\n\
call has no earlier bindAgent, so pass the binding with the revision."
    )]
    Call {
        /// The contract method, as OCC names it (e.g. prepareRevision).
        method: String,
        /// The installation YAML.
        #[arg(long, short = 'i')]
        installation: PathBuf,
        /// The params object as JSON, or @FILE to read it from a file, or @- for stdin.
        #[arg(long, short = 'p', default_value = "{}")]
        params: String,
        /// Append a JSON line per capability call to this file.
        #[arg(long, value_name = "FILE")]
        audit_log: Option<PathBuf>,
        /// Print only the JSON result (no progress), also on a terminal.
        #[arg(long)]
        json: bool,
    },
    /// Serve the contract as JSON-RPC 2.0 (newline-delimited) on stdio or a Unix socket.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn cache(cli: &Cli) -> Result<Option<ComponentCache>> {
    if cli.no_cache {
        return Ok(None);
    }
    let dir = cli
        .cache_dir
        .clone()
        .unwrap_or_else(ComponentCache::default_dir);
    Ok(Some(ComponentCache::open(&dir).with_context(|| {
        format!("component cache {}", dir.display())
    })?))
}

fn load_installation(path: &std::path::Path, component: &Option<PathBuf>) -> Result<Installation> {
    Ok(Installation::load_with_component(
        path,
        component.as_deref(),
    )?)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let cache = cache(&cli)?;
    let component = cli.component.clone();
    let ssh = match (&cli.ssh_record, &cli.ssh_replay) {
        (Some(path), _) => SshMode::Record(path.clone()),
        (None, Some(path)) => SshMode::Replay(path.clone()),
        (None, None) => SshMode::Live,
    };
    let runtime = Arc::new(Runtime::new(Limits::default())?);
    match cli.command {
        Command::Inspect { component, json } => inspect(&runtime, &component, cache.as_ref(), json),
        Command::Check { installation, json } => {
            let installation = load_installation(&installation, &component)?;
            let driver = Driver::open(
                runtime,
                installation,
                &DriverOptions {
                    cache,
                    ..Default::default()
                },
            )?;
            let tokio = tokio::runtime::Runtime::new()?;
            let result = tokio.block_on(driver.call_json(
                Method::ValidateConfiguration,
                &json!({}),
                CallOptions::default(),
            ));
            let inst = driver.installation();
            match result {
                Ok(v) => {
                    if json {
                        println!(
                            "{}",
                            json!({"ok": true, "installation": inst.path, "component": inst.component, "warnings": v["warnings"]})
                        );
                    } else {
                        println!("{}: ok", inst.path.display());
                        println!(
                            "  driver {} from {}",
                            inst.driver_id,
                            inst.component.display()
                        );
                        for w in v["warnings"].as_array().into_iter().flatten() {
                            println!(
                                "  warning {}: {}",
                                w["code"].as_str().unwrap_or(""),
                                w["message"].as_str().unwrap_or("")
                            );
                        }
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => Ok(report_error(&e, json)),
            }
        }
        Command::Call {
            method,
            installation,
            params,
            audit_log,
            json,
        } => {
            let m = Method::from_name(&method).with_context(|| {
                format!(
                    "unknown method {method:?}; one of: {}",
                    Method::ALL.map(Method::name).join(", ")
                )
            })?;
            let params = read_params(&params)?;
            let installation = load_installation(&installation, &component)?;
            let options = DriverOptions {
                cache,
                audit_log,
                ssh,
            };
            let driver = Driver::open(runtime, installation, &options)?;
            let progress = Progress::new(!json && std::io::stderr().is_terminal());
            let mut options = CallOptions::default();
            let sink = progress.clone();
            options.progress = Arc::new(move |host, line| sink.line(host, line));
            let tokio = tokio::runtime::Runtime::new()?;
            let result = tokio.block_on(async {
                let cancel = options.cancel.clone();
                tokio::spawn(async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        cancel.cancel();
                    }
                });
                driver.call_json(m, &params, options).await
            });
            progress.finish();
            match present(m, result) {
                Ok(v) => {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                    let failure = v.get("failure").and_then(Value::as_str);
                    Ok(match failure {
                        Some("retryable") => ExitCode::from(75),
                        Some(_) => ExitCode::from(65),
                        None => ExitCode::SUCCESS,
                    })
                }
                Err(e) => Ok(report_error(&e, json)),
            }
        }
        Command::Serve(args) => {
            let installation = load_installation(&args.installation, &component)?;
            serve::run(
                runtime,
                DriverOptions {
                    cache,
                    audit_log: args.audit_log.clone(),
                    ssh,
                },
                installation,
                args,
            )
        }
    }
}

fn report_error(e: &CallError, json: bool) -> ExitCode {
    let v = serde_json::to_value(e).unwrap_or_default();
    if json || !std::io::stderr().is_terminal() {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    let host = e
        .host
        .as_deref()
        .map(|h| format!(" [host {h}]"))
        .unwrap_or_default();
    eprintln!(
        "error ({}, {}){host}: {}",
        serde_json::to_value(e.failure)
            .unwrap_or_default()
            .as_str()
            .unwrap_or(""),
        e.code,
        e.message
    );
    ExitCode::from(e.failure.exit_code() as u8)
}

fn read_params(arg: &str) -> Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some("-") => {
            std::io::read_to_string(std::io::stdin()).context("reading params from stdin")?
        }
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading params from {path}"))?
        }
        None => arg.to_string(),
    };
    let v: Value = serde_json::from_str(&text).context("--params is not valid JSON")?;
    if !v.is_object() {
        bail!("--params must be a JSON object");
    }
    Ok(v)
}

fn inspect(
    runtime: &Runtime,
    path: &std::path::Path,
    cache: Option<&ComponentCache>,
    json: bool,
) -> Result<ExitCode> {
    let c = runtime.compile(path, cache)?;
    let refused = imports::refused(c.imports.iter().map(String::as_str));
    let conforming = refused.is_empty()
        && c.exports
            .iter()
            .any(|e| e == imports::COMPUTE_DRIVER_EXPORT);
    if json {
        let v = json!({
            "component": c.path,
            "sha256": c.sha256,
            "size": c.size,
            "world": if conforming { Value::from(imports::WORLD) } else { Value::Null },
            "loadable": conforming,
            "imports": c.imports.iter().map(|i| json!({"name": i, "granted": imports::is_granted(i)})).collect::<Vec<_>>(),
            "exports": c.exports,
            "fromCache": c.from_cache,
            "loadMs": c.load_time.as_secs_f64() * 1000.0,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("component  {}", c.path.display());
        println!("sha256     {}", c.sha256);
        println!("size       {} bytes", c.size);
        println!(
            "world      {}",
            if conforming {
                imports::WORLD.to_string()
            } else {
                "none (does not conform to the driver world)".into()
            }
        );
        println!("imports");
        for i in &c.imports {
            println!(
                "  {} {i}",
                if imports::is_granted(i) {
                    "granted"
                } else {
                    "REFUSED"
                }
            );
        }
        println!("exports");
        for e in &c.exports {
            println!("  {e}");
        }
    }
    if !refused.is_empty() {
        eprintln!(
            "error: this host refuses to load {}: it imports {}",
            path.display(),
            refused.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Progress of long operations: on a terminal, one line rewritten in place with
/// the step and elapsed time; otherwise one plain line per step.
#[derive(Clone)]
struct Progress {
    tty: bool,
    started: Instant,
    state: Arc<Mutex<Option<String>>>,
}

impl Progress {
    fn new(tty: bool) -> Progress {
        Progress {
            tty,
            started: Instant::now(),
            state: Arc::new(Mutex::new(None)),
        }
    }

    fn line(&self, host: &str, line: &str) {
        let Some(event) = HelperLine::parse(line) else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let HelperLine::Progress { step, message } = event {
            let message = message.or(step).unwrap_or_else(|| "working".into());
            let text = format!("{host}: {message}");
            if !self.tty {
                eprintln!("[{:>5.1}s] {text}", self.started.elapsed().as_secs_f64());
            }
            *state = Some(text);
        }
        if let (true, Some(text)) = (self.tty, state.as_ref()) {
            let mut err = std::io::stderr();
            let elapsed = self.started.elapsed().as_secs_f64();
            let _ = write!(err, "\r\x1b[2K{text} ({elapsed:.0} s)");
            let _ = err.flush();
        }
    }

    fn finish(&self) {
        if self.tty && self.state.lock().map(|s| s.is_some()).unwrap_or(false) {
            eprintln!();
        }
    }
}
