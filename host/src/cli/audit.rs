//! `audit`: read an audit log back, refuse it if its chain is broken, and say
//! per driver and host what ran, how often, how it ended and what was refused.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use occ_driver_host::audit::read::{self, Filter, Group};
use serde_json::json;

pub(crate) const AFTER_HELP: &str = "\
The log is the file a host wrote with --audit-log. Each record carries the
SHA-256 of the line before it (prevSha256), so an edited, deleted, inserted or
reordered line, or a file cut inside a record, is refused with the number of
the first line that does not fit; nothing is summarised from such a log. Lines
removed from the end leave a shorter chain that is still whole: note the head
this command prints, and pass it to --head later to prove that nothing up to
it is gone.

What is counted: every helper operation (compute drivers) and every script
operation (sandbox backends) by host alias, the controller's lifecycle hooks
and the component loads (no host), each with its outcomes (exit status, error
kind, the hook's answer), durations and the contract methods that ran it;
execs answered from a recording (--ssh-replay) are counted apart from live
ones; refusals with their reasons. A begin record without its end is counted
as unfinished: the host stopped while the effect ran.

Examples:
  # Everything in a log.
  occ-driver-host audit /var/log/occ/compute-audit.jsonl

  # What one driver did on host stable in the last seven days, for a script.
  occ-driver-host audit audit.jsonl --driver 9c1e4f --host stable --since 7d --json

  # One call, by the id the controller gave it.
  occ-driver-host audit audit.jsonl --call op-2026-12-01-0042

  # A window of time: Unix milliseconds, a UTC date or time, or an age.
  occ-driver-host audit audit.jsonl --since 2026-11-30 --until 2026-12-01T12:00:00Z

  # Prove the log still holds the head noted yesterday.
  occ-driver-host audit audit.jsonl --head 3f2a...

Exit status: 0 the chain is whole (and holds --head); 1 it is not, or the log
cannot be read; 2 usage.";

/// Arguments of `audit`.
#[derive(clap::Args)]
pub(crate) struct AuditArgs {
    /// The audit log (JSON lines, as --audit-log writes it).
    log: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Only records at or after this time: Unix milliseconds, YYYY-MM-DD,
    /// YYYY-MM-DDTHH:MM:SSZ (UTC), or an age such as 90m, 24h, 7d.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only records before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only this driver: its SHA-256 (or a prefix) or its name.
    #[arg(long, value_name = "SHA256|NAME")]
    driver: Option<String>,
    /// Only this host alias.
    #[arg(long, value_name = "ALIAS")]
    host: Option<String>,
    /// Only this call id.
    #[arg(long = "call", value_name = "ID")]
    call_id: Option<String>,
    /// Refuse the log unless one of its lines hashes to this head (printed by
    /// an earlier run): the records up to it are all still there.
    #[arg(long, value_name = "SHA256")]
    head: Option<String>,
}

pub(crate) fn run(args: AuditArgs) -> Result<ExitCode> {
    let now = occ_driver_host::audit::unix_time_ms();
    let filter = Filter {
        since_ms: args
            .since
            .as_deref()
            .map(|t| parse_time(t, now).with_context(|| format!("--since {t:?}")))
            .transpose()?,
        until_ms: args
            .until
            .as_deref()
            .map(|t| parse_time(t, now).with_context(|| format!("--until {t:?}")))
            .transpose()?,
        driver: args.driver.clone(),
        host: args.host.clone(),
        call_id: args.call_id.clone(),
    };
    let bytes = std::fs::read(&args.log)
        .with_context(|| format!("cannot read the audit log {}", args.log.display()))?;
    let chain = read::verify(&bytes)
        .with_context(|| format!("{}: refused, its chain is broken", args.log.display()))?;
    if let Some(head) = &args.head
        && !chain.contains(head)
    {
        return Err(read::ChainError::HeadNotFound { head: head.clone() })
            .with_context(|| format!("{}: refused", args.log.display()));
    }
    let groups = read::summarise(chain.records.iter().map(|(_, r)| r), &filter);
    if args.json {
        let v = json!({
            "log": args.log,
            "records": chain.records.len(),
            "head": chain.head,
            "groups": groups,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!(
            "{}",
            render(&args.log, chain.records.len(), &chain.head, &groups)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The text report.
fn render(log: &std::path::Path, records: usize, head: &str, groups: &[Group]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {records} records, chain whole, head {head}",
        log.display()
    );
    if groups.is_empty() {
        let _ = writeln!(out, "no records match");
    }
    for g in groups {
        let host = g.host.as_deref().unwrap_or("(no host)");
        let name = if g.driver.is_empty() {
            "(unnamed)"
        } else {
            &g.driver
        };
        let _ = writeln!(out, "\ndriver {name} {}  host {host}", g.driver_sha256);
        if g.loads > 0 {
            let _ = writeln!(out, "  loaded {} times", g.loads);
        }
        for r in &g.runs {
            let what = match (&r.script, r.capability.as_str()) {
                (Some(script), _) => format!("script {script} {}", r.operation),
                (None, "ssh-exec") => format!("helper {}", r.operation),
                (None, "lifecycle-hooks") => format!("hook {}", r.operation),
                (None, "local-workspace") => format!("upload {}", r.operation),
                (None, other) => format!("{other} {}", r.operation),
            };
            let mode = if r.replayed { "replayed" } else { "live" };
            let outcomes = r
                .outcomes
                .iter()
                .map(|(o, n)| format!("{o} x{n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mean = r.total_ms.checked_div(r.count).unwrap_or(0);
            let _ = write!(
                out,
                "  {what:<32} {mode:<8} {:>5} runs  {outcomes}",
                r.count
            );
            if r.count > 0 {
                let _ = write!(out, "  mean {mean} ms, max {} ms", r.max_ms);
            }
            if r.unfinished > 0 {
                let _ = write!(out, "  {} unfinished", r.unfinished);
            }
            let _ = writeln!(out, "  [{}]", r.methods.join(", "));
        }
        for f in &g.refusals {
            let _ = writeln!(
                out,
                "  refused {} x{} [{}]: {}",
                f.capability,
                f.count,
                f.methods.join(", "),
                f.reason
            );
        }
    }
    out
}

/// A point in time as Unix milliseconds: digits (milliseconds), a UTC date
/// `YYYY-MM-DD`, a UTC time `YYYY-MM-DDTHH:MM:SSZ`, or an age before `now`
/// (`30s`, `90m`, `24h`, `7d`).
fn parse_time(text: &str, now_ms: u64) -> Result<u64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().context("too large");
    }
    if let Some(unit) = text.chars().last()
        && let Some(scale) = match unit {
            's' => Some(1_000u64),
            'm' => Some(60_000),
            'h' => Some(3_600_000),
            'd' => Some(86_400_000),
            _ => None,
        }
        && let Ok(n) = text[..text.len() - 1].parse::<u64>()
    {
        return Ok(now_ms.saturating_sub(n.saturating_mul(scale)));
    }
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => {
            let Some(time) = time.strip_suffix('Z') else {
                bail!("a time must be UTC and end in Z (YYYY-MM-DDTHH:MM:SSZ)");
            };
            (date, Some(time))
        }
        None => (text, None),
    };
    let numbers = |s: &str, n: usize| -> Option<Vec<u64>> {
        let parts: Vec<&str> = s.split(if s.contains(':') { ':' } else { '-' }).collect();
        (parts.len() == n && parts.iter().all(|p| !p.is_empty() && p.len() <= 4))
            .then(|| parts.iter().map(|p| p.parse().ok()).collect())
            .flatten()
    };
    let usage = "not a time: give Unix milliseconds, YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or an age (90m, 24h, 7d)";
    let Some(ymd) = numbers(date, 3) else {
        bail!(usage);
    };
    let hms = match time {
        Some(t) => numbers(t, 3).context(usage)?,
        None => vec![0, 0, 0],
    };
    let (y, m, d) = (ymd[0], ymd[1], ymd[2]);
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
        || hms[0] > 23
        || hms[1] > 59
        || hms[2] > 60
    {
        bail!("out of range: {usage}");
    }
    let days = days_from_civil(y as i64, m as i64, d as i64);
    Ok((days as u64 * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_every_form_and_nonsense_refused() {
        let now = 1_764_590_400_000; // 2025-12-01T12:00:00Z
        for (text, expected) in [
            ("0", 0),
            ("1764590400000", now),
            ("2025-12-01T12:00:00Z", now),
            ("2025-12-01", now - 12 * 3_600_000),
            ("1970-01-01", 0),
            ("2000-03-01", 951_868_800_000),
            ("90m", now - 90 * 60_000),
            ("7d", now - 7 * 86_400_000),
            ("30s", now - 30_000),
        ] {
            assert_eq!(parse_time(text, now).unwrap(), expected, "{text}");
        }
        for bad in [
            "",
            "yesterday",
            "2025-13-01",
            "2025-12-01T12:00:00",
            "2025-12-01T25:00:00Z",
            "12-01",
            "7w",
            "-5d",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad:?} accepted");
        }
    }
}
