//! Reading an audit log back: the chain checked line by line, then what the
//! drivers did, per driver and host, for `occ-driver-host audit`.
//!
//! A log is refused whole at the first line that is not where the chain says
//! it must be: an edited line breaks the hash its successor carries, a deleted
//! or inserted one the successor's `prevSha256`, a cut tail leaves a line
//! without its newline. Nothing is summarised from a log that fails.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{GENESIS, chain_hash};

/// Why a log is not an intact chain. Each names the line (counted from 1).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainError {
    /// The line is not one JSON object.
    #[error("line {line}: not a JSON object: {message}")]
    NotJson {
        /// The line.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// The line has no `prevSha256`: written by a host that did not chain
    /// its records, or stripped.
    #[error("line {line}: no prevSha256; every record of a chained log names the line before it")]
    Unchained {
        /// The line.
        line: usize,
    },
    /// The first line names a predecessor: the lines before it are gone.
    #[error(
        "line 1: prevSha256 is {found}, not the start of a log ({GENESIS}): the records before it were removed"
    )]
    HeadMissing {
        /// What the line carries.
        found: String,
    },
    /// The line does not follow the one before it.
    #[error(
        "line {line}: prevSha256 is {found}, but line {} hashes to {expected}: line {} was edited, or lines between were deleted or inserted",
        line - 1,
        line - 1
    )]
    Broken {
        /// The line.
        line: usize,
        /// The chain hash of the line before.
        expected: String,
        /// What the line carries.
        found: String,
    },
    /// The last line has no newline: the log was cut inside a record.
    #[error("line {line}: no newline at the end: the log was truncated inside this record")]
    Truncated {
        /// The line.
        line: usize,
    },
    /// The caller's anchor is not a line of the log.
    #[error(
        "the log holds no line hashing to {head}: the records up to that head were removed or changed"
    )]
    HeadNotFound {
        /// The anchor.
        head: String,
    },
}

/// A log whose chain holds, as records with their line numbers.
#[derive(Debug)]
pub struct Chain {
    /// Every record, in order, with its line number.
    pub records: Vec<(usize, Map<String, Value>)>,
    /// The chain hash of the last line (what the next record will carry);
    /// [`GENESIS`] for an empty log.
    pub head: String,
    /// The chain hash of every line, in order.
    hashes: Vec<String>,
}

impl Chain {
    /// Whether a line of the log hashes to `head`: an anchor noted earlier
    /// (`audit` prints it) proves that no record up to it was removed since,
    /// which the chain alone cannot show of the log's tail.
    pub fn contains(&self, head: &str) -> bool {
        head == GENESIS || self.hashes.iter().any(|h| h == head)
    }
}

/// Check the chain of a whole log.
pub fn verify(bytes: &[u8]) -> Result<Chain, ChainError> {
    let mut records = Vec::new();
    let mut hashes = Vec::new();
    let mut expected = GENESIS.to_string();
    let mut rest = bytes;
    let mut line = 0;
    while !rest.is_empty() {
        line += 1;
        let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
            return Err(ChainError::Truncated { line });
        };
        let text = &rest[..nl];
        rest = &rest[nl + 1..];
        let record: Map<String, Value> =
            serde_json::from_slice(text).map_err(|e| ChainError::NotJson {
                line,
                message: e.to_string(),
            })?;
        let Some(found) = record.get("prevSha256").and_then(Value::as_str) else {
            return Err(ChainError::Unchained { line });
        };
        if found != expected {
            let found = found.to_string();
            return Err(if line == 1 {
                ChainError::HeadMissing { found }
            } else {
                ChainError::Broken {
                    line,
                    expected,
                    found,
                }
            });
        }
        expected = chain_hash(text);
        hashes.push(expected.clone());
        records.push((line, record));
    }
    Ok(Chain {
        records,
        head: expected,
        hashes,
    })
}

/// Which records a summary counts. Every filter that is set must match.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Records at or after this time (Unix milliseconds).
    pub since_ms: Option<u64>,
    /// Records before this time (Unix milliseconds).
    pub until_ms: Option<u64>,
    /// A driver: its SHA-256 or a prefix of it, or its name (file stem).
    pub driver: Option<String>,
    /// A host alias.
    pub host: Option<String>,
    /// A call id.
    pub call_id: Option<String>,
}

impl Filter {
    fn matches(&self, r: &Map<String, Value>) -> bool {
        let s = |k: &str| r.get(k).and_then(Value::as_str);
        let time = r.get("unixTimeMs").and_then(Value::as_u64).unwrap_or(0);
        self.since_ms.is_none_or(|t| time >= t)
            && self.until_ms.is_none_or(|t| time < t)
            && self.driver.as_deref().is_none_or(|d| {
                s("driver") == Some(d) || s("driverSha256").is_some_and(|h| h.starts_with(d))
            })
            && self.host.as_deref().is_none_or(|h| s("host") == Some(h))
            && self
                .call_id
                .as_deref()
                .is_none_or(|c| s("callId") == Some(c))
    }
}

/// What one driver did on one host (or, with no host, through the host
/// process itself: loads and lifecycle hooks).
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// The driver's SHA-256.
    pub driver_sha256: String,
    /// The driver's name (component file stem).
    pub driver: String,
    /// The host alias, if the records name one.
    pub host: Option<String>,
    /// How often the component was loaded (records without a host).
    pub loads: u64,
    /// What ran, one row per operation and mode.
    pub runs: Vec<Run>,
    /// What was refused, one row per capability and reason.
    pub refusals: Vec<Refusal>,
}

/// One kind of effect: a helper operation, a script operation, a hook, an
/// upload, counted apart when replayed.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// `ssh-exec`, `lifecycle-hooks` or `local-workspace`.
    pub capability: String,
    /// The pinned script, for a sandbox script run.
    pub script: Option<String>,
    /// The helper or script operation, the hook, or the uploaded root.
    pub operation: String,
    /// Whether the execs were answered from a recording (`--ssh-replay`)
    /// instead of a host.
    pub replayed: bool,
    /// How many finished.
    pub count: u64,
    /// How many began and have no end record (the host stopped mid-effect).
    pub unfinished: u64,
    /// Outcomes and how often: `exit 0`, `exit 3`, `error timeout`, `answered`, ...
    pub outcomes: BTreeMap<String, u64>,
    /// The contract methods that ran it.
    pub methods: Vec<String>,
    /// Total duration of the finished ones, in milliseconds.
    pub total_ms: u64,
    /// The longest.
    pub max_ms: u64,
}

/// One reason for refusals, and how often it was given.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The capability that refused.
    pub capability: String,
    /// The refusal's message, as the host audited it.
    pub reason: String,
    /// How often.
    pub count: u64,
    /// The contract methods whose calls were refused.
    pub methods: Vec<String>,
}

/// What a chain's records, filtered, say the drivers did.
pub fn summarise<'a>(
    records: impl IntoIterator<Item = &'a Map<String, Value>>,
    filter: &Filter,
) -> Vec<Group> {
    type GroupKey = (String, String, Option<String>);
    type RunKey = (String, Option<String>, String, bool);
    let mut groups: BTreeMap<GroupKey, (Group, BTreeMap<RunKey, Run>)> = BTreeMap::new();
    for r in records.into_iter().filter(|r| filter.matches(r)) {
        let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
        let key = (
            s("driverSha256").unwrap_or_default(),
            s("driver").unwrap_or_default(),
            s("host"),
        );
        let (group, runs) = groups.entry(key.clone()).or_insert_with(|| {
            (
                Group {
                    driver_sha256: key.0.clone(),
                    driver: key.1.clone(),
                    host: key.2.clone(),
                    loads: 0,
                    runs: Vec::new(),
                    refusals: Vec::new(),
                },
                BTreeMap::new(),
            )
        });
        let method = s("method").unwrap_or_default();
        let capability = s("capability").unwrap_or_default();
        match s("event").as_deref() {
            Some("load") => group.loads += 1,
            Some("refused") => {
                let reason = s("message").unwrap_or_else(|| "(no message)".into());
                match group
                    .refusals
                    .iter_mut()
                    .find(|f| f.capability == capability && f.reason == reason)
                {
                    Some(f) => {
                        f.count += 1;
                        add_method(&mut f.methods, &method);
                    }
                    None => group.refusals.push(Refusal {
                        capability,
                        reason,
                        count: 1,
                        methods: vec![method],
                    }),
                }
            }
            Some(event @ ("begin" | "end" | "upload")) => {
                let operation = s("operation")
                    .or_else(|| s("hook"))
                    .or_else(|| s("root"))
                    .unwrap_or_else(|| "(not named)".into());
                let replayed = s("backend").as_deref() == Some("replay");
                let run = runs
                    .entry((capability.clone(), s("script"), operation.clone(), replayed))
                    .or_insert_with(|| Run {
                        capability,
                        script: s("script"),
                        operation,
                        replayed,
                        count: 0,
                        unfinished: 0,
                        outcomes: BTreeMap::new(),
                        methods: Vec::new(),
                        total_ms: 0,
                        max_ms: 0,
                    });
                add_method(&mut run.methods, &method);
                if event == "begin" {
                    run.unfinished += 1;
                    continue;
                }
                if event == "end" {
                    run.unfinished = run.unfinished.saturating_sub(1);
                }
                run.count += 1;
                *run.outcomes.entry(outcome(r)).or_default() += 1;
                let ms = r.get("durationMs").and_then(Value::as_u64).unwrap_or(0);
                run.total_ms += ms;
                run.max_ms = run.max_ms.max(ms);
            }
            _ => {}
        }
    }
    groups
        .into_values()
        .map(|(mut group, runs)| {
            group.runs = runs.into_values().collect();
            group
        })
        .collect()
}

fn add_method(methods: &mut Vec<String>, method: &str) {
    if !methods.iter().any(|m| m == method) {
        methods.push(method.to_string());
    }
}

/// One end record's outcome, as a short label.
fn outcome(r: &Map<String, Value>) -> String {
    if let Some(status) = r.get("exitStatus").and_then(Value::as_i64) {
        return format!("exit {status}");
    }
    if let Some(error) = r.get("error").and_then(Value::as_str) {
        return format!("error {error}");
    }
    if let Some(outcome) = r.get("outcome").and_then(Value::as_str) {
        return outcome.to_string();
    }
    "unknown".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chained(records: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut prev = GENESIS.to_string();
        for r in records {
            let mut r = r.clone();
            r["prevSha256"] = json!(prev);
            let line = r.to_string();
            prev = chain_hash(line.as_bytes());
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out
    }

    fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn join(lines: &[Vec<u8>]) -> Vec<u8> {
        lines
            .iter()
            .flat_map(|l| [l.as_slice(), b"\n"].concat())
            .collect()
    }

    fn sample() -> Vec<Value> {
        (0..4)
            .map(|i| json!({"unixTimeMs": 1000 + i, "event": "load", "driverSha256": "ab", "n": i}))
            .collect()
    }

    #[test]
    fn every_kind_of_tampering_names_its_line() {
        let log = chained(&sample());
        let chain = verify(&log).unwrap();
        assert_eq!(chain.records.len(), 4);
        assert_eq!(chain.head, chain_hash(&lines(&log)[3]));
        assert!(chain.contains(&chain.head));

        let mut edited = lines(&log);
        edited[1] = String::from_utf8(edited[1].clone())
            .unwrap()
            .replace("\"n\":1", "\"n\":7")
            .into_bytes();
        let e = verify(&join(&edited)).unwrap_err();
        assert!(matches!(e, ChainError::Broken { line: 3, .. }), "{e}");
        assert!(e.to_string().contains("line 2 was edited"), "{e}");

        let mut deleted = lines(&log);
        deleted.remove(2);
        assert!(matches!(
            verify(&join(&deleted)).unwrap_err(),
            ChainError::Broken { line: 3, .. }
        ));

        let mut swapped = lines(&log);
        swapped.swap(1, 2);
        assert!(matches!(
            verify(&join(&swapped)).unwrap_err(),
            ChainError::Broken { line: 2, .. }
        ));

        let headless = join(&lines(&log)[1..]);
        assert!(matches!(
            verify(&headless).unwrap_err(),
            ChainError::HeadMissing { .. }
        ));

        let cut = &log[..log.len() - 5];
        assert_eq!(verify(cut).unwrap_err(), ChainError::Truncated { line: 4 });

        let mut garbage = lines(&log);
        garbage.insert(1, b"not json".to_vec());
        assert!(matches!(
            verify(&join(&garbage)).unwrap_err(),
            ChainError::NotJson { line: 2, .. }
        ));

        let unchained = format!("{}\n", json!({"event": "load"}));
        assert_eq!(
            verify(unchained.as_bytes()).unwrap_err(),
            ChainError::Unchained { line: 1 }
        );

        // Dropping whole lines at the end leaves a valid chain; the head
        // noted before shows it.
        let shortened = join(&lines(&log)[..3]);
        let short = verify(&shortened).unwrap();
        assert!(!short.contains(&chain.head));
    }

    #[test]
    fn a_summary_counts_per_driver_and_host_and_keeps_replays_apart() {
        let base = |event: &str, extra: Value| {
            let mut r = json!({"unixTimeMs": 5000, "event": event, "driver": "d", "driverSha256": "abc123",
                               "callId": "c1", "method": "preflight", "capability": "ssh-exec", "host": "stable"});
            r.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            r.as_object().unwrap().clone()
        };
        let records = [
            base("begin", json!({"operation": "probe", "backend": "live"})),
            base(
                "end",
                json!({"operation": "probe", "backend": "live", "exitStatus": 0, "durationMs": 30}),
            ),
            base("begin", json!({"operation": "probe", "backend": "replay"})),
            base(
                "end",
                json!({"operation": "probe", "backend": "replay", "exitStatus": 3, "durationMs": 2}),
            ),
            base(
                "begin",
                json!({"operation": "probe", "backend": "live", "callId": "c2"}),
            ),
            base(
                "refused",
                json!({"message": "preflight may run probe on a host, not prepare"}),
            ),
            base(
                "refused",
                json!({"message": "preflight may run probe on a host, not prepare", "host": "canary"}),
            ),
        ];
        let groups = summarise(records.iter(), &Filter::default());
        assert_eq!(groups.len(), 2);
        let stable = groups
            .iter()
            .find(|g| g.host.as_deref() == Some("stable"))
            .unwrap();
        assert_eq!(stable.runs.len(), 2);
        let live = stable.runs.iter().find(|r| !r.replayed).unwrap();
        assert_eq!(
            (live.count, live.unfinished, live.total_ms),
            (1, 1, 30),
            "{live:?}"
        );
        assert_eq!(live.outcomes.get("exit 0"), Some(&1));
        let replayed = stable.runs.iter().find(|r| r.replayed).unwrap();
        assert_eq!(replayed.outcomes.get("exit 3"), Some(&1));
        assert_eq!(stable.refusals.len(), 1);
        assert_eq!(stable.refusals[0].count, 1);

        let only_c2 = Filter {
            call_id: Some("c2".into()),
            ..Filter::default()
        };
        let groups = summarise(records.iter(), &only_c2);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].runs[0].unfinished, 1);
        assert_eq!(groups[0].runs[0].count, 0);

        for (filter, expected) in [
            (
                Filter {
                    host: Some("canary".into()),
                    ..Filter::default()
                },
                1,
            ),
            (
                Filter {
                    driver: Some("abc".into()),
                    ..Filter::default()
                },
                2,
            ),
            (
                Filter {
                    driver: Some("other".into()),
                    ..Filter::default()
                },
                0,
            ),
            (
                Filter {
                    since_ms: Some(5001),
                    ..Filter::default()
                },
                0,
            ),
            (
                Filter {
                    until_ms: Some(5001),
                    ..Filter::default()
                },
                2,
            ),
        ] {
            assert_eq!(
                summarise(records.iter(), &filter).len(),
                expected,
                "{filter:?}"
            );
        }
    }
}
