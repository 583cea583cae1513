//! The audit log: one JSON line per event, for every capability call a driver
//! makes and every component the host loads.
//!
//! The log is a sink: capabilities and worlds write to it, it imports none of
//! them. Each effect is written twice, a `begin` record before it starts (if
//! that write fails, the effect does not happen) and an `end` record with its
//! outcome; an effect dropped mid-flight (cancellation, the call's wall-clock
//! bound) gets its `end` record, `"error": "cancelled"`, when it is dropped. A
//! failed write fails the call: an operator who asked for an audit trail never
//! gets effects without one.
//!
//! Every record carries `unixTimeMs`, `event` and, for call events, the driver
//! (component file stem and SHA-256), the call's id and its contract method.
//!
//! Records are chained: each carries `prevSha256`, the SHA-256 of the line
//! before it (without its newline), and the first line of a file carries
//! [`GENESIS`]. A deleted, inserted, reordered or edited line breaks the chain
//! at the next line, and `occ-driver-host audit` names that line. Writers
//! take an exclusive `flock` on the file for each record and re-read the last
//! line when another process appended since, so several hosts appending to
//! one log still form one chain.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::uid::current_uid;

pub mod read;

/// What the first record of a log names as the line before it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The SHA-256 that the line after `line` carries as `prevSha256`: of the
/// line's bytes, without its newline.
pub fn chain_hash(line: &[u8]) -> String {
    occ_ssh_target::digest::sha256_hex(line)
}

/// An append-only JSON-lines file.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Chain>,
}

/// The file and where its chain ends, as this process last saw it.
struct Chain {
    file: File,
    /// The file's length after the last line this process read or wrote.
    len: u64,
    /// The chain hash of that line ([`GENESIS`] for an empty file).
    last: String,
}

impl Chain {
    /// Re-read the end of the chain when the file is not as this process left
    /// it (another process appended). A last line without its newline (a
    /// writer died mid-record) is refused: the chain would continue from a
    /// record no reader can check.
    fn sync(&mut self, path: &Path) -> std::io::Result<()> {
        let len = self.file.metadata()?.len();
        if len == self.len {
            return Ok(());
        }
        let (last, len) = last_line_hash(&mut self.file, len)
            .map_err(|message| std::io::Error::other(format!("{}: {message}", path.display())))?;
        self.last = last;
        self.len = len;
        Ok(())
    }
}

/// The chain hash of the last line of `file` (of length `len`), read from the
/// end backwards so that a long log costs no more than its last record.
fn last_line_hash(file: &mut File, len: u64) -> Result<(String, u64), TailError> {
    if len == 0 {
        return Ok((GENESIS.to_string(), 0));
    }
    const CHUNK: u64 = 64 * 1024;
    let mut tail: Vec<u8> = Vec::new();
    let mut start = len;
    loop {
        let from = start.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (start - from) as usize];
        file.seek(SeekFrom::Start(from))
            .and_then(|_| file.read_exact(&mut chunk))
            .map_err(TailError::Read)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = from;
        if tail.last() != Some(&b'\n') {
            return Err(TailError::Unterminated);
        }
        let body = &tail[..tail.len() - 1];
        if let Some(nl) = body.iter().rposition(|b| *b == b'\n') {
            return Ok((chain_hash(&body[nl + 1..]), len));
        }
        if start == 0 {
            return Ok((chain_hash(body), len));
        }
    }
}

/// Why the end of a log's chain cannot be found.
#[derive(Debug, thiserror::Error)]
enum TailError {
    /// The end of the file cannot be read.
    #[error("cannot read the end of the audit log: {0}")]
    Read(std::io::Error),
    /// The last record has no newline: a writer stopped mid-record.
    #[error(
        "the last record has no newline (a writer stopped mid-record); \
         check the log with `occ-driver-host audit` and move it aside"
    )]
    Unterminated,
}

/// Why an audit log cannot be opened: each refusal protects the trail.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path is a symbolic link.
    #[error("is a symlink; the audit log is never written through a link")]
    Symlink,
    /// It cannot be opened or created.
    #[error("cannot open the audit log: {0}")]
    Open(std::io::Error),
    /// It cannot be examined.
    #[error("cannot stat the audit log: {0}")]
    Stat(std::io::Error),
    /// It is a directory, a device or a pipe.
    #[error("is not a regular file")]
    NotAFile,
    /// Another user owns it.
    #[error("is owned by uid {owner}, not by this user ({uid})")]
    Owner {
        /// Its owner.
        owner: u32,
        /// This process's user.
        uid: u32,
    },
    /// Other users may read or write it (the mode's permission bits).
    #[error("has mode {0:o}; other users could read or change the audit trail (chmod 600 it)")]
    Mode(u32),
    /// Its last record cannot be read, or ends mid-record.
    #[error("{0}")]
    Chain(std::io::Error),
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .finish()
    }
}

impl AuditLog {
    /// Open `path` for appending, creating it with mode 0600. A symlink is not
    /// followed, and an existing file must be a regular file of this user that
    /// no other user can read or write: the log names hosts and commands.
    pub fn open(path: &Path) -> Result<AuditLog, OpenError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        // Read too: the chain continues from the last line already there.
        let file = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => OpenError::Symlink,
                _ => OpenError::Open(e),
            })?;
        let meta = file.metadata().map_err(OpenError::Stat)?;
        let uid = current_uid();
        if !meta.is_file() {
            return Err(OpenError::NotAFile);
        }
        if meta.uid() != uid {
            return Err(OpenError::Owner {
                owner: meta.uid(),
                uid,
            });
        }
        if meta.mode() & 0o077 != 0 {
            return Err(OpenError::Mode(meta.mode() & 0o777));
        }
        let mut chain = Chain {
            file,
            len: u64::MAX,
            last: GENESIS.to_string(),
        };
        chain.sync(path).map_err(OpenError::Chain)?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(chain),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record as one line, chained to the line before it.
    pub fn write(&self, record: &Value) -> std::io::Result<()> {
        use rustix::fs::{FlockOperation, flock};
        let mut chain = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // The lock is released when this guard's scope ends, whatever happens.
        flock(&chain.file, FlockOperation::LockExclusive)?;
        let written = (|| {
            chain.sync(&self.path)?;
            let mut record = record.clone();
            if let Value::Object(fields) = &mut record {
                fields.insert("prevSha256".into(), json!(chain.last));
            }
            let line = record.to_string();
            let mut bytes = line.clone().into_bytes();
            bytes.push(b'\n');
            if let Err(e) = chain.file.write_all(&bytes) {
                // A record cut short (a full disk) would end the chain for
                // every later writer: take its bytes back, under the lock.
                let before = chain.len;
                return Err(match chain.file.set_len(before) {
                    Ok(()) => e,
                    Err(t) => std::io::Error::new(
                        e.kind(),
                        format!("{e}; and a record is left cut short (truncating it back: {t})"),
                    ),
                });
            }
            chain.last = chain_hash(line.as_bytes());
            chain.len = chain.file.metadata()?.len();
            Ok(())
        })();
        let unlocked = flock(&chain.file, FlockOperation::Unlock);
        written.and(unlocked.map_err(std::io::Error::from))
    }
}

/// Milliseconds since the Unix epoch: sortable, and free of time-zone questions.
pub fn unix_time_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as u64
}

/// One call's view of the audit log: the fields every record of the call carries.
#[derive(Clone, Default)]
pub struct Audit {
    log: Option<Arc<AuditLog>>,
    base: Map<String, Value>,
    /// The first record of this view (one call) that could not be written.
    lost: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("enabled", &self.log.is_some())
            .finish()
    }
}

/// Why an audit record could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the audit log {path}: {source}")]
pub struct AuditError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl Audit {
    /// An audit view writing to `log` (none: auditing is off) with `base`
    /// fields in every record.
    pub fn new(log: Option<Arc<AuditLog>>, base: Map<String, Value>) -> Audit {
        Audit {
            log,
            base,
            lost: Arc::default(),
        }
    }

    /// Which record of this view could not be written, and why, if one could
    /// not: the call that made it fails with [`crate::Code::AuditUnavailable`], whatever its
    /// driver made of the capability's error.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether records are written at all.
    pub fn enabled(&self) -> bool {
        self.log.is_some()
    }

    /// Write one record: the base fields, `event`, then `fields`.
    pub fn event(&self, event: &str, fields: Value) -> Result<(), AuditError> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        let mut record = Map::new();
        record.insert("unixTimeMs".into(), json!(unix_time_ms()));
        record.insert("event".into(), json!(event));
        record.extend(self.base.clone());
        if let Value::Object(extra) = fields {
            record.extend(extra);
        }
        let record = Value::Object(record);
        log.write(&record).map_err(|source| {
            let error = AuditError {
                path: log.path.clone(),
                source,
            };
            let mut what = format!("its {event} record");
            if let Some(capability) = record.get("capability").and_then(Value::as_str) {
                what = format!("the {event} record of its {capability}");
                if let Some(host) = record.get("host").and_then(Value::as_str) {
                    what.push_str(&format!(" on {host}"));
                }
            }
            let effect = match event {
                "begin" => " (which therefore did not run)",
                "end" => " (which had run)",
                _ => "",
            };
            self.lost
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| format!("the call lost {what}{effect}: {error}"));
            error
        })
    }

    /// Write the `begin` record of an effect and return the span whose `end`
    /// closes it. The effect must not start when this fails.
    pub fn begin(&self, capability: &str, fields: Value) -> Result<AuditSpan, AuditError> {
        let mut fields = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        fields.insert("capability".into(), json!(capability));
        let fields = Value::Object(fields);
        self.event("begin", fields.clone())?;
        Ok(AuditSpan {
            audit: self.clone(),
            fields,
            started: Instant::now(),
            done: false,
        })
    }
}

/// An effect in flight: its `end` record is written by [`AuditSpan::end`], or
/// as cancelled when the span is dropped first.
#[derive(Debug)]
pub struct AuditSpan {
    audit: Audit,
    fields: Value,
    started: Instant,
    done: bool,
}

impl AuditSpan {
    /// Write the `end` record with the effect's outcome.
    pub fn end(mut self, outcome: Value) -> Result<(), AuditError> {
        self.done = true;
        self.write_end(outcome)
    }

    fn write_end(&self, outcome: Value) -> Result<(), AuditError> {
        let mut fields = self.fields.clone();
        if let (Value::Object(f), Value::Object(o)) = (&mut fields, outcome) {
            f.extend(o);
            f.insert(
                "durationMs".into(),
                json!(self.started.elapsed().as_millis() as u64),
            );
        }
        self.audit.event("end", fields)
    }
}

impl Drop for AuditSpan {
    fn drop(&mut self) {
        if !self.done
            && let Err(e) = self.write_end(json!({"error": "cancelled"}))
        {
            tracing::error!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_and_end_bracket_every_effect_and_a_drop_counts_as_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = Arc::new(AuditLog::open(&path).unwrap());
        let mut base = Map::new();
        base.insert("method".into(), json!("preflight"));
        let audit = Audit::new(Some(log), base);
        let span = audit.begin("ssh-exec", json!({"host": "stable"})).unwrap();
        span.end(json!({"exitStatus": 0})).unwrap();
        drop(audit.begin("ssh-exec", json!({"host": "canary"})).unwrap());
        let records: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let events: Vec<(&str, &str)> = records
            .iter()
            .map(|r| (r["event"].as_str().unwrap(), r["host"].as_str().unwrap()))
            .collect();
        assert_eq!(
            events,
            [
                ("begin", "stable"),
                ("end", "stable"),
                ("begin", "canary"),
                ("end", "canary")
            ]
        );
        assert_eq!(records[1]["exitStatus"], 0);
        assert_eq!(records[3]["error"], "cancelled");
        assert!(records.iter().all(|r| r["method"] == "preflight"));
    }

    #[test]
    fn writers_of_one_file_form_one_chain_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let first = AuditLog::open(&path).unwrap();
        let second = AuditLog::open(&path).unwrap();
        for i in 0..3 {
            first.write(&json!({"n": i, "by": "first"})).unwrap();
            second.write(&json!({"n": i, "by": "second"})).unwrap();
        }
        drop((first, second));
        let reopened = AuditLog::open(&path).unwrap();
        reopened.write(&json!({"n": 9})).unwrap();
        let chain = read::verify(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(chain.records.len(), 7);
        assert_eq!(chain.records[0].1["prevSha256"], GENESIS);
    }

    #[test]
    fn a_log_cut_inside_a_record_is_not_written_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path)
            .unwrap()
            .write(&json!({"n": 1}))
            .unwrap();
        let log = AuditLog::open(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"n\":");
        std::fs::write(&path, &bytes).unwrap();
        let e = log.write(&json!({"n": 2})).unwrap_err();
        assert!(e.to_string().contains("no newline"), "{e}");
        assert!(
            AuditLog::open(&path)
                .unwrap_err()
                .to_string()
                .contains("no newline")
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing was appended");
    }

    #[test]
    fn a_symlink_or_a_shared_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        let link = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(
            AuditLog::open(&link)
                .unwrap_err()
                .to_string()
                .contains("symlink")
        );
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            AuditLog::open(&target)
                .unwrap_err()
                .to_string()
                .contains("mode 644")
        );
    }
}
