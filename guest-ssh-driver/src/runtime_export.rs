//! The `agent-runtime` export (WIT 0.4.0): an Agent's runtime described, its
//! gateway's log read and its deployment diagnosed, each one helper read of
//! the revision the controller named. The helper's result is mapped onto the
//! WIT records here; a field missing or of the wrong type is the helper's
//! protocol broken (`invalid-helper-result`), never a guess.

use serde_json::{Map, Value};

use crate::bindings::exports::occ::compute0_4_0::agent_runtime::{
    CheckState, ContainerState, ContainerStatus, DiagnosticCheck, EventType, Guest, LogChunk,
    LogLine, LogRequest, LogStream, PodStatus, RuntimeDescription, RuntimeEvent, Termination,
};
use crate::bindings::occ::compute0_2_0::types as wit;
use crate::component::{Component, with_revision};
use crate::error::Error;
use crate::operation::Op;

/// A field of the helper's result read as `T`, or the protocol error naming it.
struct Fields<'a> {
    op: Op,
    map: &'a Map<String, Value>,
}

fn broken(op: Op, detail: String) -> Error {
    Error::HelperProtocol {
        host: String::new(),
        op: op.name(),
        detail,
    }
}

impl<'a> Fields<'a> {
    fn of(op: Op, value: &'a Value, what: &str) -> Result<Self, Error> {
        match value {
            Value::Object(map) => Ok(Fields { op, map }),
            _ => Err(broken(op, format!("{what} is not an object"))),
        }
    }

    fn string(&self, key: &str) -> Result<String, Error> {
        self.map
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| broken(self.op, format!("{key} is not a string")))
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, Error> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(broken(self.op, format!("{key} is not a string or null"))),
        }
    }

    fn boolean(&self, key: &str) -> Result<bool, Error> {
        self.map
            .get(key)
            .and_then(Value::as_bool)
            .ok_or_else(|| broken(self.op, format!("{key} is not a boolean")))
    }

    fn count(&self, key: &str) -> Result<u32, Error> {
        self.map
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| broken(self.op, format!("{key} is not a count")))
    }

    fn list(&self, key: &str) -> Result<&'a Vec<Value>, Error> {
        self.map
            .get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| broken(self.op, format!("{key} is not a list")))
    }
}

fn termination(op: Op, v: &Value) -> Result<Option<Termination>, Error> {
    if v.is_null() {
        return Ok(None);
    }
    let f = Fields::of(op, v, "lastTermination")?;
    let exit_code = match f.map.get("exitCode") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| broken(op, "lastTermination.exitCode is not an integer".into()))?,
        ),
    };
    Ok(Some(Termination {
        reason: f.opt_string("reason")?,
        exit_code,
        finished_at: f.opt_string("finishedAt")?,
    }))
}

fn container(op: Op, v: &Value) -> Result<ContainerStatus, Error> {
    let f = Fields::of(op, v, "container")?;
    let state = match f.string("state")?.as_str() {
        "waiting" => ContainerState::Waiting,
        "running" => ContainerState::Running,
        "terminated" => ContainerState::Terminated,
        _ => ContainerState::Unknown,
    };
    Ok(ContainerStatus {
        name: f.string("name")?,
        state,
        reason: f.opt_string("reason")?,
        ready: f.boolean("ready")?,
        restart_count: f.count("restartCount")?,
        started_at: f.opt_string("startedAt")?,
        last_termination: termination(op, f.map.get("lastTermination").unwrap_or(&Value::Null))?,
    })
}

fn event(op: Op, v: &Value) -> Result<RuntimeEvent, Error> {
    let f = Fields::of(op, v, "event")?;
    Ok(RuntimeEvent {
        type_: match f.string("type")?.as_str() {
            "Warning" => EventType::Warning,
            _ => EventType::Normal,
        },
        container: f.opt_string("container")?,
        reason: f.string("reason")?,
        message: f.string("message")?,
        count: f.count("count")?,
        last_observed_at: f.opt_string("lastObservedAt")?,
    })
}

fn pod(op: Op, v: &Value) -> Result<PodStatus, Error> {
    let f = Fields::of(op, v, "pod")?;
    Ok(PodStatus {
        name: f.string("name")?,
        uid: f.string("uid")?,
        phase: f.string("phase")?,
        ready: f.boolean("ready")?,
        created_at: f.opt_string("createdAt")?,
        containers: f
            .list("containers")?
            .iter()
            .map(|c| container(op, c))
            .collect::<Result<_, _>>()?,
        events: f
            .list("events")?
            .iter()
            .map(|e| event(op, e))
            .collect::<Result<_, _>>()?,
    })
}

fn description(result: &Map<String, Value>) -> Result<RuntimeDescription, Error> {
    let op = Op::DescribeRuntime;
    let f = Fields { op, map: result };
    let pods = f
        .list("pods")?
        .iter()
        .map(|p| pod(op, p))
        .collect::<Result<_, _>>()?;
    let source = f
        .list("sources")?
        .first()
        .ok_or_else(|| broken(op, "sources is empty".into()))?;
    let retention = Fields::of(op, source, "source")?.string("retention")?;
    Ok(RuntimeDescription { pods, retention })
}

fn chunk(result: &Map<String, Value>) -> Result<LogChunk, Error> {
    let op = Op::ReadLogs;
    let f = Fields { op, map: result };
    let stream = Fields::of(op, f.map.get("stream").unwrap_or(&Value::Null), "stream")?;
    let lines = f
        .list("lines")?
        .iter()
        .map(|l| {
            let l = Fields::of(op, l, "line")?;
            Ok(LogLine {
                time: l.opt_string("time")?,
                raw: l.string("raw")?,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok(LogChunk {
        stream: LogStream {
            pod: stream.string("pod")?,
            pod_uid: stream.string("podUid")?,
            restart_count: stream.count("restartCount")?,
        },
        lines,
        truncated: f.boolean("truncated")?,
    })
}

fn check(v: &Value) -> Result<DiagnosticCheck, Error> {
    let op = Op::Diagnose;
    let f = Fields::of(op, v, "check")?;
    Ok(DiagnosticCheck {
        component: f.string("component")?,
        check: f.string("check")?,
        state: match f.string("state")?.as_str() {
            "succeeded" => CheckState::Succeeded,
            "failed" => CheckState::Failed,
            _ => CheckState::Unknown,
        },
        checked_at: f.opt_string("checkedAt")?,
        code: f.opt_string("code")?,
    })
}

impl Guest for Component {
    fn describe_agent_runtime(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
        // The helper takes `events` from the host's envelope, as it takes the
        // Agent: the component has nothing to add to it.
        _events: bool,
    ) -> Result<RuntimeDescription, wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| {
            d.read_runtime(Op::DescribeRuntime, b, r)
                .and_then(|result| description(&result))
        })
    }

    fn read_agent_runtime_logs(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
        _request: LogRequest,
    ) -> Result<LogChunk, wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| {
            d.read_runtime(Op::ReadLogs, b, r)
                .and_then(|result| chunk(&result))
        })
    }

    fn diagnose_agent_deployment(
        driver: wit::Selection,
        binding: Option<wit::AgentBinding>,
        revision: wit::Revision,
    ) -> Result<Vec<DiagnosticCheck>, wit::DriverError> {
        with_revision(driver, binding, revision, |d, b, r| {
            d.diagnose(b, r)?.iter().map(check).collect()
        })
    }
}
