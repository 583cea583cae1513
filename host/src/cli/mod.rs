//! The command line: global options, one module per command, and the one place
//! that turns an outcome into an exit status.

mod audit;
mod call;
mod check;
mod inspect;
mod progress;
mod relay;
mod runtime;
mod schema;
mod serve;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use occ_driver_host::capability::ssh_exec::SshMode;
use occ_driver_host::open::OpenOptions;
pub(crate) use occ_driver_host::open::Opened;
use occ_driver_host::{CallError, Code, ComponentCache, Limits, LoadError, Runtime};

/// The host could not load the driver or read its input.
pub(crate) const EXIT_LOCAL: u8 = 1;

const AFTER_HELP: &str = "\
Examples:
  # What does a component import, and would this host grant it?
  occ-driver-host inspect target/wasm32-wasip2/release/guest_ssh_driver.wasm

  # Validate an installation and its driver configuration; touches no host.
  # It also prints the approvedHelpers line to add once the helper is audited.
  occ-driver-host check /etc/occ/installation.yaml

  # The JSON Schema of a driver's configuration, for a controller to show.
  occ-driver-host schema guest_ssh_driver.wasm

  # One contract call; the result is JSON on stdout.
  occ-driver-host call preflight --installation /etc/occ/installation.yaml
  occ-driver-host call ensureNamespace --installation inst.yaml \\
      --params '{\"namespace\": {\"id\": \"ns-1\", \"name\": \"stable\"}}'
  occ-driver-host call prepareRevision --installation inst.yaml --params @revision.json

  # Serve the contract over JSON-RPC 2.0 on stdio (for a controller).
  occ-driver-host serve --installation inst.yaml

  # OpenClaw's SSH sandbox backend: the world is the component's.
  occ-driver-host call ensureRuntime -i sandbox.yaml \\
      --params '{\"scope\": {\"workspaceDir\": \"~/.openclaw/workspace\", \"sessionKey\": \"agent:main:main\"}}'
  occ-driver-host serve -i sandbox.yaml --listen /run/occ/sandbox.sock

  # What drivers did, from an audit log (refused if a line was changed).
  occ-driver-host audit /var/log/occ/compute-audit.jsonl --host stable --since 7d

Exit status: 0 success; 1 the host could not load the driver or read input;
2 usage; 75 the driver failed and a retry may succeed; 65 the driver refused
and an operator must change something first.";

/// Load OCC drivers as sandboxed WebAssembly components and call them.
///
/// Two kinds of component: an OCC Compute Driver (drivers.compute) and
/// OpenClaw's SSH sandbox backend (drivers.sandbox); the component's exports
/// say which. A component may run only what its installation approved (the
/// helper, or the sandbox's scripts), only on the hosts it grants, through the
/// host's own ssh client; it has no files, sockets or environment of its own.
/// Compiled components are cached on disk.
#[derive(Parser)]
#[command(name = "occ-driver-host", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Directory of precompiled components [default: $OCC_DRIVER_CACHE, $XDG_CACHE_HOME/occ-driver-host or ~/.cache/occ-driver-host].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the component every time instead of using the cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Load this component instead of the one the installation names
    /// (drivers.compute.component or drivers.sandbox.component).
    #[arg(long, global = true, value_name = "FILE", env = "OCC_DRIVER_COMPONENT")]
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
    pub(crate) verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a component's SHA-256, size, world, imports (granted or refused) and exports.
    Inspect(inspect::InspectArgs),
    /// Validate an installation and its driver's configuration without touching any host.
    Check(check::CheckArgs),
    /// Print the JSON Schema of a compute driver component's configuration (the sandbox backend has none: OpenClaw's sandbox block configures it).
    Schema(schema::SchemaArgs),
    /// Call one contract method and print its JSON result.
    Call(call::CallArgs),
    /// Serve the contract as JSON-RPC 2.0 (newline-delimited) on stdio or a Unix socket.
    Serve(serve::ServeArgs),
    /// Print an Agent's gateway log (the unit's own output), once or following it.
    Logs(runtime::LogsArgs),
    /// Check an Agent's deployment on its host: one line per check, as OCC's Console shows it.
    Diagnose(runtime::DiagnoseArgs),
    /// Run one sandbox exec through a serving host's socket, as if it were the command.
    Relay(relay::RelayArgs),
    /// Check an audit log's chain and summarise what drivers did, per driver and host.
    #[command(after_help = audit::AFTER_HELP)]
    Audit(audit::AuditArgs),
}

impl Cli {
    /// Whether the command only reads and prints: it runs nothing on a host
    /// and holds no pipe or socket but its own stdout (`inspect`, `schema`,
    /// `audit`).
    pub(crate) fn only_prints(&self) -> bool {
        matches!(
            self.command,
            Command::Inspect(_) | Command::Schema(_) | Command::Audit(_)
        )
    }
}

/// The commit this binary was built from (host/build.rs).
pub(crate) const COMMIT: &str = env!("OCC_BUILD_COMMIT");

/// `-V`: the version and the commit on one line.
pub(crate) fn short_version() -> String {
    format!("{} (commit {COMMIT})", env!("CARGO_PKG_VERSION"))
}

/// `--version`: the version, the commit and every WIT world this host
/// serves at each version; the npm packages carry the same version
/// (`cargo xtask dist` checks it).
pub(crate) fn long_version() -> String {
    let mut text = format!(
        "{}\ncommit: {COMMIT}\nWIT packages served:",
        env!("CARGO_PKG_VERSION")
    );
    for version in occ_driver_host::world::served_versions() {
        let worlds: Vec<&str> = occ_driver_host::world::WORLDS
            .iter()
            .filter(|w| w.versions.contains(&version))
            .map(|w| w.name.rsplit('/').next().unwrap_or(w.name))
            .collect();
        text.push_str(&format!(
            "\n  {}@{version} (worlds: {})",
            occ_driver_host::world::PACKAGE,
            worlds.join(", ")
        ));
    }
    text
}

pub(crate) fn init_tracing(verbose: u8) {
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

/// What every command that opens a driver shares.
pub(crate) struct Setup {
    pub(crate) runtime: Arc<Runtime>,
    cache: Option<ComponentCache>,
    component: Option<PathBuf>,
    pub(crate) ssh: SshMode,
}

impl Setup {
    fn new(cli: &Cli) -> Result<Setup> {
        let cache = if cli.no_cache {
            None
        } else {
            let dir = match &cli.cache_dir {
                Some(dir) => dir.clone(),
                None => ComponentCache::default_dir()?,
            };
            Some(
                ComponentCache::open(&dir)
                    .with_context(|| format!("component cache {}", dir.display()))?,
            )
        };
        let ssh = match (&cli.ssh_record, &cli.ssh_replay) {
            (Some(path), _) => SshMode::Record(path.clone()),
            (None, Some(path)) => SshMode::Replay(path.clone()),
            (None, None) => SshMode::Live,
        };
        Ok(Setup {
            runtime: Arc::new(Runtime::new(Limits::default())?),
            cache,
            component: cli.component.clone(),
            ssh,
        })
    }

    pub(crate) fn cache(&self) -> Option<&ComponentCache> {
        self.cache.as_ref()
    }

    /// Open the installation's component for the world its exports name: the
    /// command line's component, or the one the document's only selection
    /// (`drivers.compute` or `drivers.sandbox`) names.
    pub(crate) fn open_any(
        &self,
        installation: &Path,
        audit_log: Option<PathBuf>,
        require_bind: bool,
    ) -> Result<Opened, LoadError> {
        let options = OpenOptions {
            component: self.component.clone(),
            cache: self.cache.clone(),
            audit_log,
            ssh: self.ssh.clone(),
            require_bind,
        };
        occ_driver_host::open::open(self.runtime.clone(), installation, &options)
    }
}

pub(crate) fn run(cli: Cli) -> Result<ExitCode> {
    // A relay loads nothing: it only speaks to a host that does.
    if let Command::Relay(args) = cli.command {
        return relay::run(args);
    }
    // Nor does reading an audit log.
    if let Command::Audit(args) = cli.command {
        return audit::run(args);
    }
    let ctx = Setup::new(&cli)?;
    match cli.command {
        Command::Inspect(args) => inspect::run(&ctx, args),
        Command::Check(args) => check::run(&ctx, args),
        Command::Schema(args) => schema::run(&ctx, args),
        Command::Call(args) => call::run(&ctx, args),
        Command::Serve(args) => serve::run(&ctx, args),
        Command::Logs(args) => runtime::logs(&ctx, args),
        Command::Diagnose(args) => runtime::diagnose(&ctx, args),
        Command::Relay(_) | Command::Audit(_) => unreachable!("handled above"),
    }
}

/// Report a failed open: a driver refusing its configuration is the driver's
/// verdict (65), anything else the host's own failure (1).
pub(crate) fn report_load_error(e: LoadError, json: bool) -> Result<ExitCode> {
    match e {
        LoadError::Configuration { error, .. } => Ok(report_error(&error, json)),
        LoadError::AuditLog(message) => Ok(report_error(
            &CallError::host(Code::AuditUnavailable, message),
            json,
        )),
        other => Err(other.into()),
    }
}

/// Print a call error (JSON on stdout when asked or not on a terminal, one
/// line for people on stderr) and choose the exit status.
pub(crate) fn report_error(e: &CallError, json: bool) -> ExitCode {
    use std::io::IsTerminal;
    let v = serde_json::to_value(e).unwrap_or_default();
    if json || !std::io::stderr().is_terminal() {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    let host = e
        .host
        .as_deref()
        .map(|h| format!(" [host {h}]"))
        .unwrap_or_default();
    let failure = v["failure"].as_str().unwrap_or_default();
    eprintln!("error ({failure}, {}){host}: {}", e.code, e.message);
    ExitCode::from(e.failure.exit_code())
}
