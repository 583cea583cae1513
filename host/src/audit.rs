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

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// An append-only JSON-lines file.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
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
    pub fn open(path: &Path) -> Result<AuditLog, String> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => {
                    "is a symlink; the audit log is never written through a link".to_string()
                }
                _ => format!("cannot open the audit log: {e}"),
            })?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot stat the audit log: {e}"))?;
        let uid = current_uid();
        if !meta.is_file() {
            return Err("is not a regular file".into());
        }
        if meta.uid() != uid {
            return Err(format!(
                "is owned by uid {}, not by this user ({uid})",
                meta.uid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(format!(
                "has mode {:o}; other users could read or change the audit trail (chmod 600 it)",
                meta.mode() & 0o777
            ));
        }
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record as one line.
    pub fn write(&self, record: &Value) -> std::io::Result<()> {
        let mut line = record.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(line.as_bytes())
    }
}

/// The uid of this process.
pub(crate) fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // /proc/self is owned by the effective uid; this avoids an unsafe libc call.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
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
        Audit { log, base }
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
        log.write(&Value::Object(record))
            .map_err(|source| AuditError {
                path: log.path.clone(),
                source,
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
    fn a_symlink_or_a_shared_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        let link = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(AuditLog::open(&link).unwrap_err().contains("symlink"));
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(AuditLog::open(&target).unwrap_err().contains("mode 644"));
    }
}
