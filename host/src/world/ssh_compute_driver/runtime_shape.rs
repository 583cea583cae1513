//! An Agent's runtime in OCC's shapes (`AgentRuntimeDescription`,
//! `AgentRuntimeLogChunk`, `AgentDeploymentDiagnostics` of
//! `packages/contracts/src/index.ts`), built by the host from what the
//! driver's `agent-runtime` export returned. The host writes what is its own
//! (the revision, the observation time, the source list, the role and cluster
//! of an SSH host's gateway) and holds the driver's records to OCC's bounds:
//! a record out of them fails the call naming the field, never reaches the
//! controller.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::bindings::runtime::exports::occ::compute0_4_0::agent_runtime as wit;
use super::params::LogRequest;
use crate::error::{CallError, Code};

/// OCC's bounds: events per pod, checks per diagnosis.
const MAX_EVENTS: usize = 100;
const MAX_CHECKS: usize = 32;
/// Bounds on the driver's own strings: a name, a reason or time; a message;
/// the retention notice.
const MAX_NAME: usize = 256;
const MAX_MESSAGE: usize = 4096;
/// Gateway units per revision: one.
const MAX_PODS: usize = 1;

/// Now, as RFC 3339 UTC with milliseconds (`2026-12-06T07:48:57.123Z`).
pub(crate) fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

fn invalid(what: &str) -> CallError {
    CallError::host(
        Code::InvalidRuntimeRecord,
        format!(
            "the driver's {what}; the call returns nothing rather than pass it to the controller"
        ),
    )
}

fn name(value: &str, field: &str) -> Result<(), CallError> {
    if value.is_empty() || value.len() > MAX_NAME || value.chars().any(char::is_control) {
        return Err(invalid(&format!(
            "{field} is empty, control characters or over {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

/// An RFC 3339 UTC time as the helper writes it: `YYYY-MM-DDTHH:MM:SS[.f]Z`.
fn time(value: &Option<String>, field: &str) -> Result<(), CallError> {
    let Some(t) = value else { return Ok(()) };
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let ok = b.len() >= 20
        && b.len() <= 30
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b.last() == Some(&b'Z')
        && (b.len() == 20 || (b[19] == b'.' && digits(20..b.len() - 1) && b.len() > 21));
    if !ok {
        return Err(invalid(&format!(
            "{field} {t:?} is not an RFC 3339 UTC time"
        )));
    }
    Ok(())
}

fn invocation(uid: &str, field: &str) -> Result<(), CallError> {
    if uid.len() != 32
        || !uid
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(invalid(&format!(
            "{field} {uid:?} is not a systemd invocation id"
        )));
    }
    Ok(())
}

/// The request as the driver's export takes it.
pub(crate) fn log_request(r: &LogRequest) -> wit::LogRequest {
    wit::LogRequest {
        pod: r.pod.clone(),
        pod_uid: r.pod_uid.clone(),
        previous: r.previous,
        tail_lines: r.tail_lines,
        since_seconds: r.since_seconds,
        limit_bytes: r.limit_bytes,
    }
}

fn container_state(s: wit::ContainerState) -> &'static str {
    match s {
        wit::ContainerState::Waiting => "waiting",
        wit::ContainerState::Running => "running",
        wit::ContainerState::Terminated => "terminated",
        wit::ContainerState::Unknown => "unknown",
    }
}

fn check_state(s: wit::CheckState) -> &'static str {
    match s {
        wit::CheckState::Succeeded => "succeeded",
        wit::CheckState::Failed => "failed",
        wit::CheckState::Unknown => "unknown",
    }
}

/// OCC's `AgentRuntimeDescription` of `revision_id`: the gateway units the
/// driver described, and the one `gateway` source they are read through.
pub(crate) fn description(
    revision_id: &str,
    observed_at: &str,
    d: wit::RuntimeDescription,
) -> Result<Value, CallError> {
    if d.pods.len() > MAX_PODS {
        return Err(invalid(&format!(
            "description lists {} gateway units; an Agent has one",
            d.pods.len()
        )));
    }
    if d.retention.is_empty() || d.retention.len() > MAX_MESSAGE {
        return Err(invalid("retention notice is empty or too long"));
    }
    let mut pods = Vec::new();
    let mut source_pods = Vec::new();
    for p in d.pods {
        name(&p.name, "pod.name")?;
        invocation(&p.uid, "pod.uid")?;
        name(&p.phase, "pod.phase")?;
        time(&p.created_at, "pod.createdAt")?;
        if p.events.len() > MAX_EVENTS {
            return Err(invalid(&format!(
                "pod lists {} events, over {MAX_EVENTS}",
                p.events.len()
            )));
        }
        let mut containers = Vec::new();
        for c in &p.containers {
            name(&c.name, "container.name")?;
            time(&c.started_at, "container.startedAt")?;
            if let Some(r) = &c.reason {
                name(r, "container.reason")?;
            }
            let last = match &c.last_termination {
                Some(t) => {
                    time(&t.finished_at, "container.lastTermination.finishedAt")?;
                    if let Some(r) = &t.reason {
                        name(r, "container.lastTermination.reason")?;
                    }
                    json!({"reason": t.reason, "exitCode": t.exit_code, "finishedAt": t.finished_at})
                }
                None => Value::Null,
            };
            containers.push(json!({
                "name": c.name,
                "state": container_state(c.state),
                "reason": c.reason,
                "ready": c.ready,
                "restartCount": c.restart_count,
                "startedAt": c.started_at,
                "lastTermination": last,
            }));
        }
        let gateway = p.containers.iter().find(|c| c.name == "gateway");
        let mut events = Vec::new();
        for e in &p.events {
            name(&e.reason, "event.reason")?;
            time(&e.last_observed_at, "event.lastObservedAt")?;
            if e.message.len() > MAX_MESSAGE {
                return Err(invalid("event.message is over 4096 bytes"));
            }
            events.push(json!({
                "type": match e.type_ { wit::EventType::Normal => "Normal", wit::EventType::Warning => "Warning" },
                "container": e.container,
                "reason": e.reason,
                "message": e.message,
                "count": e.count.max(1),
                "lastObservedAt": e.last_observed_at,
            }));
        }
        source_pods.push(json!({
            "name": p.name,
            "uid": p.uid,
            "container": "gateway",
            "restartCount": gateway.map_or(0, |c| c.restart_count),
        }));
        pods.push(json!({
            "role": "gateway",
            "cluster": "control",
            "name": p.name,
            "uid": p.uid,
            "phase": p.phase,
            "ready": p.ready,
            "createdAt": p.created_at,
            "containers": containers,
            "events": events,
        }));
    }
    let mut source = json!({
        "id": "gateway",
        "kind": "container",
        "pods": source_pods,
        "available": !pods.is_empty(),
        "retention": d.retention,
    });
    if pods.is_empty() {
        source["unavailableCode"] = json!("NO_POD");
    }
    Ok(json!({
        "revisionId": revision_id,
        "observedAt": observed_at,
        "pods": pods,
        "sources": [source],
    }))
}

/// How many bytes a line costs on the link: its text as JSON carries it, and
/// a newline. The helper cuts by the same count.
pub(crate) fn line_bytes(raw: &str) -> usize {
    Value::String(raw.to_string()).to_string().len() - 2 + 1
}

/// OCC's `AgentRuntimeLogChunk`, held to the request's bounds.
pub(crate) fn chunk(
    request: &LogRequest,
    observed_at: &str,
    c: wit::LogChunk,
) -> Result<Value, CallError> {
    if c.lines.len() > request.tail_lines as usize {
        return Err(invalid(&format!(
            "log read returned {} lines, over the {} asked",
            c.lines.len(),
            request.tail_lines
        )));
    }
    let bytes: usize = c.lines.iter().map(|l| line_bytes(&l.raw)).sum();
    // The last line may be cut inside its text, which saves its newline.
    if bytes > request.limit_bytes as usize + 1 {
        return Err(invalid(&format!(
            "log read returned {bytes} bytes of lines, over the {} asked",
            request.limit_bytes
        )));
    }
    name(&c.stream.pod, "stream.pod")?;
    invocation(&c.stream.pod_uid, "stream.podUid")?;
    let mut lines = Vec::with_capacity(c.lines.len());
    for l in c.lines {
        time(&l.time, "line.time")?;
        lines.push(json!({"time": l.time, "raw": l.raw}));
    }
    Ok(json!({
        "stream": {
            "source": "gateway",
            "pod": c.stream.pod,
            "podUid": c.stream.pod_uid,
            "container": "gateway",
            "restartCount": c.stream.restart_count,
        },
        "observedAt": observed_at,
        "lines": lines,
        "truncated": c.truncated,
    }))
}

/// OCC's identifier of a check's component, name and code.
fn identifier(value: &str, field: &str) -> Result<(), CallError> {
    let ok = (1..=64).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._~:@-".contains(&b));
    if !ok {
        return Err(invalid(&format!(
            "{field} {value:?} is not an identifier OCC accepts ([A-Za-z0-9._~:@-], 1 to 64)"
        )));
    }
    Ok(())
}

/// OCC's `AgentDeploymentDiagnostics` of `revision_id`.
pub(crate) fn diagnostics(
    revision_id: &str,
    observed_at: &str,
    checks: Vec<wit::DiagnosticCheck>,
) -> Result<Value, CallError> {
    if checks.len() > MAX_CHECKS {
        return Err(invalid(&format!(
            "diagnosis has {} checks, over {MAX_CHECKS}",
            checks.len()
        )));
    }
    let mut out = Vec::with_capacity(checks.len());
    for c in checks {
        identifier(&c.component, "check.component")?;
        identifier(&c.check, "check.check")?;
        time(&c.checked_at, "check.checkedAt")?;
        let mut v = json!({
            "component": c.component,
            "check": c.check,
            "state": check_state(c.state),
            "checkedAt": c.checked_at,
        });
        if let Some(code) = c.code {
            identifier(&code, "check.code")?;
            v["code"] = json!(code);
        }
        out.push(v);
    }
    Ok(json!({"revisionId": revision_id, "observedAt": observed_at, "checks": out}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_rfc3339_utc() {
        let t = now_rfc3339();
        assert!(time(&Some(t.clone()), "now").is_ok(), "{t}");
        assert!(t.starts_with("20"), "{t}");
    }

    #[test]
    fn times_and_identifiers_outside_occs_rules_are_refused() {
        for bad in [
            "2026-12-06 07:48:57Z",
            "2026-12-06T07:48:57",
            "2026-12-06T07:48:57.Z",
            "x",
        ] {
            assert!(time(&Some(bad.into()), "t").is_err(), "{bad}");
        }
        for good in ["2026-12-06T07:48:57Z", "2026-12-06T07:48:57.123456Z"] {
            assert!(time(&Some(good.into()), "t").is_ok(), "{good}");
        }
        assert!(identifier("unit-active", "c").is_ok());
        assert!(identifier("UNIT ACTIVE", "c").is_err());
        assert!(identifier(&"a".repeat(65), "c").is_err());
        assert!(invocation("f305315cd6ce4aceb4f28d27bacc6262", "u").is_ok());
        assert!(invocation("../../etc/passwd", "u").is_err());
    }

    fn request(tail: u32, limit: u32) -> LogRequest {
        serde_json::from_value(json!({
            "source": "gateway", "pod": "u.service", "podUid": "f305315cd6ce4aceb4f28d27bacc6262",
            "container": "gateway", "previous": false, "tailLines": tail, "limitBytes": limit,
        }))
        .unwrap()
    }

    fn lines(raws: &[&str]) -> wit::LogChunk {
        wit::LogChunk {
            stream: wit::LogStream {
                pod: "u.service".into(),
                pod_uid: "f305315cd6ce4aceb4f28d27bacc6262".into(),
                restart_count: 0,
            },
            lines: raws
                .iter()
                .map(|r| wit::LogLine {
                    time: None,
                    raw: r.to_string(),
                })
                .collect(),
            truncated: false,
        }
    }

    /// A driver cannot send the controller more than it asked for.
    #[test]
    fn a_chunk_over_the_requests_bounds_is_refused() {
        assert!(chunk(&request(2, 100), "t", lines(&["a", "b"])).is_ok());
        let e = chunk(&request(1, 100), "t", lines(&["a", "b"])).unwrap_err();
        assert!(
            e.message.contains("2 lines, over the 1 asked"),
            "{}",
            e.message
        );
        let e = chunk(&request(10, 5), "t", lines(&["abcdef"])).unwrap_err();
        assert!(e.message.contains("over the 5 asked"), "{}", e.message);
        // Escapes count as they cross: six bytes for one control character.
        assert_eq!(line_bytes("\u{1b}"), 7);
        let v = chunk(&request(10, 100), "t", lines(&["x"])).unwrap();
        assert_eq!(v["stream"]["source"], "gateway");
        assert_eq!(v["stream"]["container"], "gateway");
    }
}
