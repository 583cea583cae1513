//! The audit log: one JSON line for every capability call a driver makes.
//!
//! A record names the driver (its component's SHA-256), the contract method in
//! progress, the host alias, the argument vector, the length and SHA-256 of stdin
//! (the helper source and anything else sent, without its bytes), the exit status
//! or error, and the duration. An exec dropped mid-flight (cancellation, the call's
//! wall-clock bound) is recorded as `cancelled` when it is dropped.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::bindings::occ::compute::ssh_exec::{ExecError, ExecOutput};
use crate::context::CallContext;

/// An append-only JSON-lines file.
pub struct AuditLog {
    file: Mutex<File>,
}

impl AuditLog {
    /// Open (create, mode 0600) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(AuditLog {
            file: Mutex::new(file),
        })
    }

    /// Append one record. A failure to write is logged, not fatal: the effect
    /// already happened and must still be reported to the controller.
    pub fn write(&self, record: &Value) {
        let mut line = record.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::error!("cannot write the audit log: {e}");
        }
    }
}

/// An exec in flight; written when finished, or as cancelled when dropped first.
pub(crate) struct ExecRecord {
    audit: Option<Arc<AuditLog>>,
    base: Value,
    started: Instant,
    done: bool,
}

/// Milliseconds since the Unix epoch: sortable, and free of time-zone questions.
fn unix_time_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as u64
}

impl ExecRecord {
    pub(crate) fn begin(
        ctx: &CallContext,
        host: &str,
        argv: &[String],
        stdin: &[u8],
    ) -> ExecRecord {
        ExecRecord {
            audit: ctx.audit.clone(),
            base: json!({
                "unixTimeMs": unix_time_ms(),
                "driver": ctx.driver,
                "driverSha256": ctx.driver_sha256,
                "method": ctx.method,
                "capability": "ssh-exec",
                "host": host,
                "argv": argv,
                "stdinLength": stdin.len(),
                "stdinSha256": crate::ssh_exec::sha256_hex(stdin),
            }),
            started: Instant::now(),
            done: false,
        }
    }

    pub(crate) fn finish(&mut self, result: &Result<ExecOutput, ExecError>) {
        self.done = true;
        let outcome = match result {
            Ok(out) => json!({"exitStatus": out.exit_status, "stdoutLength": out.stdout.len()}),
            Err(e) => json!({"error": exec_error_code(e), "message": format!("{e:?}")}),
        };
        self.write(outcome);
    }

    fn write(&self, outcome: Value) {
        let Some(audit) = &self.audit else { return };
        let mut record = self.base.clone();
        if let (Some(r), Value::Object(o)) = (record.as_object_mut(), outcome) {
            r.extend(o);
            r.insert(
                "durationMs".into(),
                json!(self.started.elapsed().as_millis() as u64),
            );
        }
        audit.write(&record);
    }
}

impl Drop for ExecRecord {
    fn drop(&mut self) {
        if !self.done {
            self.write(json!({"error": "cancelled"}));
        }
    }
}

/// A stable name for each exec error, for records and messages.
pub(crate) fn exec_error_code(e: &ExecError) -> &'static str {
    match e {
        ExecError::UnknownHost(_) => "unknown-host",
        ExecError::Connect(_) => "connect",
        ExecError::HostKey(_) => "host-key",
        ExecError::Timeout => "timeout",
        ExecError::Cancelled => "cancelled",
        ExecError::OutputTooLarge(_) => "output-too-large",
        ExecError::Io(_) => "io",
    }
}
