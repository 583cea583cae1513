//! `logs` and `diagnose`: an Agent's gateway log and the diagnosis of its
//! deployment for an operator without OCC, through the same driver methods
//! OCC's Console calls (describeAgentRuntime, readAgentRuntimeLogs,
//! diagnoseAgentDeployment) and the same grants and audit records.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use occ_driver_host::{CallError, CallOptions, Method};
use serde_json::{Value, json};

use super::{Opened, Setup, report_error, report_load_error};

const AGENT_HELP: &str = "The Agent is named as OCC's ComputeAgentRevisionBinding: a JSON object\n\
{\"namespace\": Namespace, \"agent\": Agent, \"revision\": AgentRevision}, or the params of its\n\
one-shot revision call ({\"binding\": {...}, \"revision\": {...}}) (the revision the\n\
controller activated, with its configuration: the diagnosis compares the snapshot on the\n\
host with it). Every read goes through the driver's approved helper and is recorded in\n\
the audit log like any other call; nothing on the host changes.";

/// Arguments of `logs`.
#[derive(clap::Args)]
#[command(after_help = format!("{AGENT_HELP}\n\n\
Lines print as `<time> <line>`, oldest first, as journalctl prints the unit's own output.\n\
The gateway's current invocation is read unless --previous; with --follow the log is read\n\
again every --interval, a restart of the gateway shown as a line of its own on stderr.\n\n\
Example:\n  occ-driver-host logs -i installation.yaml --agent @agent.json --tail 50 --follow"))]
pub(crate) struct LogsArgs {
    /// The installation YAML [default: $OCC_CONFIG_PATH].
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// The Agent: JSON, or @FILE.
    #[arg(long, value_name = "JSON|@FILE")]
    agent: String,
    /// At most this many of the newest lines (1 to 1000).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1000))]
    tail: u32,
    /// Only lines of the last this many seconds.
    #[arg(long, value_name = "SECONDS")]
    since: Option<u32>,
    /// The invocation before the current one (the gateway before its last restart).
    #[arg(long)]
    previous: bool,
    /// At most this many bytes of lines (1 to 1048576).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    limit_bytes: u32,
    /// Keep reading new lines until interrupted.
    #[arg(long, short = 'f')]
    follow: bool,
    /// Seconds between reads with --follow.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=60))]
    interval: u64,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print each read's chunk as OCC receives it (JSON) instead of lines.
    #[arg(long)]
    json: bool,
}

/// Arguments of `diagnose`.
#[derive(clap::Args)]
#[command(after_help = format!("{AGENT_HELP}\n\n\
Prints one line per check: its state, component/check and, when it did not succeed, its\n\
code (docs/occ.md lists them). Exit status 0 when every check succeeded, 1 when one failed\n\
or could not be made, 75/65 when the diagnosis itself failed (retryable/permanent)."))]
pub(crate) struct DiagnoseArgs {
    /// The installation YAML [default: $OCC_CONFIG_PATH].
    #[arg(long, short = 'i', env = "OCC_CONFIG_PATH")]
    installation: PathBuf,
    /// The Agent: JSON, or @FILE.
    #[arg(long, value_name = "JSON|@FILE")]
    agent: String,
    /// Append a JSON line per capability call to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print OCC's AgentDeploymentDiagnostics (JSON) instead of lines.
    #[arg(long)]
    json: bool,
}

fn read_agent(arg: &str) -> Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading --agent from {path}"))?
        }
        None => arg.to_string(),
    };
    let mut v: Value = serde_json::from_str(&text).context("--agent is not valid JSON")?;
    // The params of a one-shot revision call name the Agent as well.
    if let Some(binding) = v.get("binding").cloned() {
        v["namespace"] = binding["namespace"].clone();
        v["agent"] = binding["agent"].clone();
    }
    for key in ["namespace", "agent", "revision"] {
        if !v.get(key).is_some_and(Value::is_object) {
            bail!(
                "--agent: {key} is missing (it takes {{\"namespace\", \"agent\", \"revision\"}})"
            );
        }
    }
    Ok(json!({"namespace": v["namespace"], "agent": v["agent"], "revision": v["revision"]}))
}

/// The driver an installation selects, which must be a compute driver.
fn open_compute(
    setup: &Setup,
    installation: &std::path::Path,
    audit_log: Option<PathBuf>,
    json: bool,
) -> Result<std::result::Result<occ_driver_host::Driver, ExitCode>> {
    match setup.open_any(installation, audit_log, false) {
        Ok(Opened::Compute(driver)) => Ok(Ok(driver)),
        Ok(Opened::Sandbox(_)) => bail!(
            "{}: selects a sandbox backend; logs and diagnose read a compute driver's Agents",
            installation.display()
        ),
        Err(e) => report_load_error(e, json).map(Err),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn logs(setup: &Setup, args: LogsArgs) -> Result<ExitCode> {
    let binding = read_agent(&args.agent)?;
    let tokio = tokio::runtime::Runtime::new()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupt = cancel.clone();
    let driver = match tokio.block_on(async {
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.cancel();
            }
        });
        open_compute(setup, &args.installation, args.audit_log.clone(), args.json)
    })? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let call = |method: Method, params: Value| {
        let options = CallOptions {
            cancel: cancel.clone(),
            ..CallOptions::default()
        };
        tokio.block_on(driver.call_json(method, &params, options))
    };
    // The stream: the gateway unit describeAgentRuntime lists now.
    let describe = || -> Result<(String, String), CallError> {
        let mut params = binding.clone();
        params["options"] = json!({"source": "gateway", "events": false});
        let d = call(Method::DescribeAgentRuntime, params)?;
        match d.pointer("/sources/0/pods/0") {
            Some(pod) => Ok((
                pod["name"].as_str().unwrap_or_default().to_string(),
                pod["uid"].as_str().unwrap_or_default().to_string(),
            )),
            None => Err(CallError::host(
                occ_driver_host::Code::NoPod,
                format!(
                    "revision {}: no gateway unit runs it now ({})",
                    binding["revision"]["id"],
                    d.pointer("/sources/0/retention")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ),
            )),
        }
    };
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut last_time: Option<String> = None;
    let mut since = args.since;
    let mut current: Option<String> = None;
    let mut first = true;
    loop {
        let (pod, uid) = match describe() {
            Ok(p) => p,
            Err(e) if args.follow && !cancel.is_cancelled() && e.code == "no-pod" => {
                std::thread::sleep(Duration::from_secs(args.interval));
                continue;
            }
            Err(e) => return Ok(report_error(&e, args.json)),
        };
        if current.as_ref().is_some_and(|c| *c != uid) {
            eprintln!("-- {pod} restarted: invocation {uid} --");
            // The new invocation is read from its start.
            since = None;
            seen.clear();
        }
        current = Some(uid.clone());
        // --tail bounds the first read; a follow read takes all that came since.
        let tail = if first { args.tail } else { 1000 };
        first = false;
        let mut request = json!({
            "source": "gateway", "pod": pod, "podUid": uid, "container": "gateway",
            "previous": args.previous, "tailLines": tail, "limitBytes": args.limit_bytes,
        });
        if let Some(s) = since {
            request["sinceSeconds"] = json!(s.max(1));
        }
        let mut params = binding.clone();
        params["request"] = request;
        let chunk = match call(Method::ReadAgentRuntimeLogs, params) {
            Ok(c) => c,
            Err(e) => return Ok(report_error(&e, args.json)),
        };
        if args.json {
            println!("{}", serde_json::to_string(&chunk)?);
        } else {
            for line in chunk["lines"].as_array().into_iter().flatten() {
                let time = line["time"].as_str().unwrap_or("-").to_string();
                let raw = line["raw"].as_str().unwrap_or_default().to_string();
                // A follow read overlaps the last one by a few seconds.
                if last_time.as_deref().is_some_and(|t| time.as_str() < t)
                    || !seen.insert((time.clone(), raw.clone()))
                {
                    continue;
                }
                println!("{time} {raw}");
                last_time = Some(time);
            }
            // Only lines at the newest time printed can come again.
            seen.retain(|(t, _)| last_time.as_deref().is_none_or(|l| t.as_str() >= l));
            if chunk["truncated"] == json!(true) {
                eprintln!("-- cut at {} bytes (--limit-bytes) --", args.limit_bytes);
            }
        }
        if !args.follow || args.previous || cancel.is_cancelled() {
            break;
        }
        let started = unix_now();
        std::thread::sleep(Duration::from_secs(args.interval));
        if cancel.is_cancelled() {
            break;
        }
        since = Some((unix_now() - started + args.interval + 2) as u32);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn diagnose(setup: &Setup, args: DiagnoseArgs) -> Result<ExitCode> {
    let binding = read_agent(&args.agent)?;
    let tokio = tokio::runtime::Runtime::new()?;
    let driver = match tokio.block_on(async {
        open_compute(setup, &args.installation, args.audit_log.clone(), args.json)
    })? {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    let result = tokio.block_on(driver.call_json(
        Method::DiagnoseAgentDeployment,
        &binding,
        CallOptions::default(),
    ));
    drop(driver);
    drop(tokio);
    let d = match result {
        Ok(d) => d,
        Err(e) => return Ok(report_error(&e, args.json)),
    };
    let checks = d["checks"].as_array().cloned().unwrap_or_default();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        println!(
            "revision {} observed at {}",
            d["revisionId"],
            d["observedAt"].as_str().unwrap_or("")
        );
        for c in &checks {
            println!(
                "{:<9} {}/{}{}",
                c["state"].as_str().unwrap_or("?"),
                c["component"].as_str().unwrap_or("?"),
                c["check"].as_str().unwrap_or("?"),
                c["code"]
                    .as_str()
                    .map(|code| format!(" ({code})"))
                    .unwrap_or_default()
            );
        }
    }
    let all_succeeded = checks.iter().all(|c| c["state"] == "succeeded");
    Ok(if all_succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
