//! Recorded SSH for driver authors: test a driver component with no hosts,
//! deterministically.
//!
//! `--ssh-record FILE` runs against the real hosts and appends one JSON line per
//! exec to FILE: the host alias, the argument vector, the SHA-256 of stdin, and
//! what came back (exit status, stdout, stderr tail) or the error. `--ssh-replay
//! FILE` answers each exec from FILE instead, in order, without opening any
//! connection. A replayed exec must match its recorded host, argv and stdin hash
//! exactly; anything else (another operation, a changed helper, an extra exec)
//! fails the call with a message that names the exec and the difference, so a
//! change in a driver's behaviour shows up as a failed replay.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use occ_ssh_target::digest::sha256_hex;
use serde_json::{Value, json};

use super::backend::{ExecBackend, ExecError, ExecFuture, ExecOutput, ExecRun};

/// One recorded exec.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The host alias.
    pub host: String,
    /// The argument vector.
    pub argv: Vec<String>,
    /// SHA-256 of stdin, hex.
    pub stdin_sha256: String,
    /// What the exec returned.
    pub outcome: Result<ExecOutput, ExecError>,
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut v = json!({"host": self.host, "argv": self.argv, "stdinSha256": self.stdin_sha256});
        match &self.outcome {
            Ok(out) => {
                v["exitStatus"] = json!(out.exit_status);
                v["stdout"] = json!(String::from_utf8_lossy(&out.stdout));
                v["stderrTail"] = json!(String::from_utf8_lossy(&out.stderr_tail));
            }
            Err(e) => v["error"] = error_json(e),
        }
        v
    }

    fn from_json(v: &Value, at: &str) -> Result<Entry, String> {
        let text = |k: &str| -> Result<String, String> {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("{at}: {k} missing"))
        };
        let argv = v
            .get("argv")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .map(|s| s.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| format!("{at}: argv must be an array of strings"))?;
        let outcome = match v.get("error") {
            Some(e) => Err(error_from_json(e).ok_or_else(|| format!("{at}: unknown error {e}"))?),
            None => Ok(ExecOutput {
                exit_status: v
                    .get("exitStatus")
                    .and_then(Value::as_i64)
                    .map(|s| s as i32),
                stdout: text("stdout")?.into_bytes(),
                stderr_tail: v
                    .get("stderrTail")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .as_bytes()
                    .to_vec(),
            }),
        };
        Ok(Entry {
            host: text("host")?,
            argv,
            stdin_sha256: text("stdinSha256")?,
            outcome,
        })
    }
}

/// An error as `{"kind", "detail"?}`, with the kinds the audit log uses.
fn error_json(e: &ExecError) -> Value {
    let mut v = json!({"kind": e.code()});
    match e {
        ExecError::UnknownHost(s)
        | ExecError::Refused(s)
        | ExecError::Connect(s)
        | ExecError::Auth(s)
        | ExecError::HostKey(s)
        | ExecError::Io(s) => v["detail"] = json!(s),
        ExecError::OutputTooLarge(n) => v["detail"] = json!(n),
        ExecError::Timeout | ExecError::Cancelled => {}
    }
    v
}

fn error_from_json(v: &Value) -> Option<ExecError> {
    let detail = || {
        v.get("detail")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Some(match v.get("kind")?.as_str()? {
        "unknown-host" => ExecError::UnknownHost(detail()),
        "refused" => ExecError::Refused(detail()),
        "connect" => ExecError::Connect(detail()),
        "auth" => ExecError::Auth(detail()),
        "host-key" => ExecError::HostKey(detail()),
        "timeout" => ExecError::Timeout,
        "cancelled" => ExecError::Cancelled,
        "output-too-large" => ExecError::OutputTooLarge(v.get("detail")?.as_u64()?),
        "io" => ExecError::Io(detail()),
        _ => return None,
    })
}

/// Runs execs on another backend (the hosts) and appends each to a file.
pub struct Recording<B> {
    inner: B,
    file: Mutex<File>,
}

impl<B> Recording<B> {
    /// Record `inner`'s execs into `path` (created 0600, appended to).
    pub fn create(inner: B, path: &Path) -> std::io::Result<Recording<B>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Recording {
            inner,
            file: Mutex::new(file),
        })
    }

    fn record(&self, entry: &Entry) {
        let mut line = entry.to_json().to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::error!("cannot write the ssh recording: {e}");
        }
    }
}

impl<B: ExecBackend> ExecBackend for Recording<B> {
    fn exec<'a>(&'a self, req: ExecRun<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            if req.stdin_stream.is_some() {
                return Err(ExecError::Refused(
                    "a recording holds each exec's stdin hash; streamed input cannot be recorded"
                        .into(),
                ));
            }
            let host = req.alias.to_string();
            let argv = req.argv.to_vec();
            let stdin_sha256 = sha256_hex(req.stdin);
            let outcome = self.inner.exec(req).await;
            self.record(&Entry {
                host,
                argv,
                stdin_sha256,
                outcome: outcome.clone(),
            });
            outcome
        })
    }

    fn kind(&self) -> &'static str {
        "recording"
    }
}

/// Why a recording cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The recording.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is no recorded exec: `<file>:<line>: <what is wrong>`.
    #[error("{0}")]
    Entry(String),
}

/// Answers execs from a recording, in order.
pub struct Replay {
    path: PathBuf,
    state: Mutex<(usize, VecDeque<Entry>)>,
}

impl Replay {
    /// Read a recording.
    pub fn load(path: &Path) -> Result<Replay, ReplayError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let entries = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                let at = format!("{}:{}", path.display(), i + 1);
                let v: Value = serde_json::from_str(l).map_err(|e| format!("{at}: {e}"))?;
                Entry::from_json(&v, &at)
            })
            .collect::<Result<VecDeque<_>, String>>()
            .map_err(ReplayError::Entry)?;
        Ok(Replay {
            path: path.to_path_buf(),
            state: Mutex::new((1, entries)),
        })
    }

    fn answer(&self, host: &str, argv: &[String], stdin: &[u8]) -> Result<ExecOutput, ExecError> {
        let (n, entry) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let n = state.0;
            state.0 += 1;
            (n, state.1.pop_front())
        };
        let Some(entry) = entry else {
            return Err(ExecError::Io(format!(
                "replay {}: exec #{n} on {host} ({}) has no recording left",
                self.path.display(),
                argv.first().map(String::as_str).unwrap_or("")
            )));
        };
        let differs = if entry.host != host {
            Some(format!("host {host}, recorded {}", entry.host))
        } else if entry.argv != argv {
            let k = entry
                .argv
                .iter()
                .zip(argv)
                .position(|(a, b)| a != b)
                .unwrap_or(entry.argv.len().min(argv.len()));
            Some(format!("argv differs at position {k}"))
        } else if entry.stdin_sha256 != sha256_hex(stdin) {
            Some("stdin differs (another helper version?)".into())
        } else {
            None
        };
        match differs {
            Some(what) => Err(ExecError::Io(format!(
                "replay {}: exec #{n} on {host}: {what}",
                self.path.display()
            ))),
            None => entry.outcome,
        }
    }
}

impl ExecBackend for Replay {
    fn exec<'a>(&'a self, req: ExecRun<'a>) -> ExecFuture<'a> {
        if req.stdin_stream.is_some() {
            return Box::pin(async {
                Err(ExecError::Refused(
                    "a replay answers by stdin hash; streamed input cannot be replayed".into(),
                ))
            });
        }
        let answer = self.answer(req.alias, req.argv, req.stdin);
        if let Ok(out) = &answer {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                (req.on_line)(line);
            }
        }
        Box::pin(async move { answer })
    }

    fn kind(&self) -> &'static str {
        "replay"
    }

    fn is_offline(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_json() {
        let cases = [
            Ok(ExecOutput {
                exit_status: Some(0),
                stdout: b"{\"event\":\"result\"}\n".to_vec(),
                stderr_tail: vec![],
            }),
            Ok(ExecOutput {
                exit_status: None,
                stdout: vec![],
                stderr_tail: b"killed".to_vec(),
            }),
            Err(ExecError::Timeout),
            Err(ExecError::HostKey("stable: mismatch".into())),
            Err(ExecError::OutputTooLarge(4096)),
        ];
        for outcome in cases {
            let e = Entry {
                host: "stable".into(),
                argv: vec!["node".into(), "-".into()],
                stdin_sha256: "ab".into(),
                outcome,
            };
            assert_eq!(Entry::from_json(&e.to_json(), "t").unwrap(), e);
        }
    }

    #[test]
    fn replay_answers_in_order_and_names_every_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let argv = vec!["node".to_string(), "-".to_string(), "b3A=".to_string()];
        let ok = Ok(ExecOutput {
            exit_status: Some(0),
            stdout: b"done\n".to_vec(),
            stderr_tail: vec![],
        });
        let lines: Vec<String> = [ok, Err(ExecError::Timeout)]
            .into_iter()
            .map(|outcome| {
                Entry {
                    host: "stable".into(),
                    argv: argv.clone(),
                    stdin_sha256: sha256_hex(b"helper"),
                    outcome,
                }
                .to_json()
                .to_string()
            })
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let replay = Replay::load(&path).unwrap();
        assert_eq!(
            replay.answer("stable", &argv, b"helper").unwrap().stdout,
            b"done\n"
        );
        assert!(matches!(
            replay.answer("stable", &argv, b"helper"),
            Err(ExecError::Timeout)
        ));
        let Err(ExecError::Io(m)) = replay.answer("stable", &argv, b"helper") else {
            panic!()
        };
        assert!(
            m.contains("exec #3 on stable") && m.contains("no recording left"),
            "{m}"
        );

        let mismatches: [(&str, Vec<String>, &[u8], &str); 3] = [
            (
                "canary",
                argv.clone(),
                b"helper",
                "host canary, recorded stable",
            ),
            (
                "stable",
                vec!["node".into(), "-".into(), "other".into()],
                b"helper",
                "argv differs at position 2",
            ),
            ("stable", argv.clone(), b"helper v2", "stdin differs"),
        ];
        for (host, a, stdin, expected) in mismatches {
            let replay = Replay::load(&path).unwrap();
            let Err(ExecError::Io(m)) = replay.answer(host, &a, stdin) else {
                panic!("{expected}")
            };
            assert!(m.contains(expected), "{expected} not in {m}");
        }
    }
}
