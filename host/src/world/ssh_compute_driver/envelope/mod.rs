//! What the approved helper acts on besides the component's policy: the
//! envelope the host writes for every helper run.
//!
//! Pinning the helper proves which program runs as root on a host; it does not
//! bound what that program is asked to do. So the component sends only its
//! policy, an operation `{"version", "op", "deadlineMs"}` (plus, for `prepare`,
//! the controller's document), and the host appends a second argument the
//! component never sees: the envelope, built from the trusted installation
//! ([`TrustedRuntime`]: driver id and implementation, root, unit directory,
//! runtime user, port range, the host's Node.js and OpenClaw paths) and from
//! the call the controller made ([`Subjects`]: Namespace, Agent and
//! ServicePrincipal, revision and the SHA-256 of its configuration, the
//! placeholders the controller's `beforeWorkloadStart` returned in this call,
//! and the workspace setup the controller passed with a prepare or an
//! activation).
//! The helper takes those values from the envelope alone
//! (`helper/README.md`).
//!
//! Before anything runs, the host refuses (and the capability audits) an
//! operation that is not one of the method's ([`Method::helper_ops`]), on a
//! host other than the call's Namespace's, carrying any field that is not
//! policy, whose document is not the controller's, or that comes before the
//! hook the spec orders ahead of it (`method::required_hook`).

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use occ_ssh_target::digest::sha256_hex;
use serde_json::{Map, Value, json};

use super::method::{HelperOp, Method, required_hook};
use crate::capability::hooks::AcceptedHooks;
use crate::capability::ssh_exec::grant::{self, GrantError};
use crate::capability::ssh_exec::{Admission, Admitted, ExecAsk};

pub use occ_ssh_target::helper::PROTOCOL_VERSION;
/// The bounds of an operation's `deadlineMs` (the helper's own deadline).
const DEADLINE_MS: std::ops::RangeInclusive<u64> = 1_000..=occ_ssh_target::helper::MAX_DEADLINE_MS;
/// Where units go when `runtime.systemdUnitDirectory` is omitted.
const DEFAULT_UNIT_DIRECTORY: &str = "/etc/systemd/system";
/// Bound on `runtime.user`; accounts use its first 19 characters.
const MAX_USER_PREFIX: usize = 255;
/// Gateways run as unprivileged accounts, which cannot bind below this.
const MIN_GATEWAY_PORT: u64 = 1024;

/// Node.js and the OpenClaw entrypoint on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    /// `hosts.<alias>.nodePath`, else `runtime.nodePath`.
    pub node_path: String,
    /// `hosts.<alias>.openclawPath`, else `runtime.openclawPath`.
    pub openclaw_path: String,
}

/// The trusted installation's settings the helper acts on, read once when the
/// driver is opened, with the rules the grant applies to the same document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedRuntime {
    /// `drivers.compute.id`.
    pub driver_id: String,
    /// The implementation OCC records on revisions.
    pub implementation: String,
    /// `runtime.root`.
    pub root: String,
    /// `runtime.systemdUnitDirectory`.
    pub unit_directory: String,
    /// `runtime.user`, the prefix of every Agent account.
    pub user: String,
    /// `network.gatewayPortRange`, inclusive.
    pub port_range: (u16, u16),
    /// Each alias's executables.
    pub hosts: BTreeMap<String, HostPaths>,
    /// `drivers.compute.maxSessions`: what preflight compares with each
    /// host's sshd `MaxSessions`.
    pub max_sessions: usize,
}

impl TrustedRuntime {
    /// Nothing to act on: no host, so every helper run is refused.
    pub fn none() -> TrustedRuntime {
        TrustedRuntime {
            driver_id: String::new(),
            implementation: String::new(),
            root: String::new(),
            unit_directory: String::new(),
            user: String::new(),
            port_range: (0, 0),
            hosts: BTreeMap::new(),
            max_sessions: grant::DEFAULT_MAX_SESSIONS,
        }
    }

    /// Read `runtime`, `network` and each host's paths from the driver
    /// configuration, for the driver the installation selected.
    pub fn from_configuration(
        cfg: &Value,
        driver_id: &str,
        implementation: &str,
    ) -> Result<TrustedRuntime, GrantError> {
        let root = grant::object("configuration", Some(cfg))?;
        let runtime = grant::object("configuration.runtime", root.get("runtime"))?;
        let text = |key: &str| -> Result<String, GrantError> {
            grant::path(&format!("configuration.runtime.{key}"), runtime.get(key))
                .map(|p| p.to_string_lossy().into_owned())
        };
        let node_path = text("nodePath")?;
        let openclaw_path = text("openclawPath")?;
        let unit_directory = match runtime.get("systemdUnitDirectory") {
            None => DEFAULT_UNIT_DIRECTORY.to_string(),
            Some(_) => text("systemdUnitDirectory")?,
        };
        let user = grant::string("configuration.runtime.user", runtime.get("user"))?;
        check_user(&user)?;
        let network = grant::object("configuration.network", root.get("network"))?;
        let range = grant::object(
            "configuration.network.gatewayPortRange",
            network.get("gatewayPortRange"),
        )?;
        let port = |key: &str| -> Result<u16, GrantError> {
            let n = grant::integer(
                &format!("configuration.network.gatewayPortRange.{key}"),
                range.get(key),
                MIN_GATEWAY_PORT,
                u16::MAX.into(),
            )?;
            Ok(u16::try_from(n).expect("bounded to u16"))
        };
        let (start, end) = (port("start")?, port("end")?);
        if start > end {
            return Err(GrantError {
                path: "configuration.network.gatewayPortRange".into(),
                reason: format!("start {start} is greater than end {end}"),
            });
        }
        let hosts = grant::object("configuration.hosts", root.get("hosts"))?;
        let mut paths = BTreeMap::new();
        for (alias, host) in hosts {
            let at = format!("configuration.hosts.{alias}");
            let host = grant::object(&at, Some(host))?;
            let own = |key: &str, default: &str| -> Result<String, GrantError> {
                match host.get(key) {
                    None => Ok(default.to_string()),
                    v => grant::path(&format!("{at}.{key}"), v)
                        .map(|p| p.to_string_lossy().into_owned()),
                }
            };
            paths.insert(
                alias.clone(),
                HostPaths {
                    node_path: own("nodePath", &node_path)?,
                    openclaw_path: own("openclawPath", &openclaw_path)?,
                },
            );
        }
        Ok(TrustedRuntime {
            driver_id: driver_id.to_string(),
            implementation: implementation.to_string(),
            root: text("root")?,
            unit_directory,
            user,
            port_range: (start, end),
            hosts: paths,
            max_sessions: grant::DEFAULT_MAX_SESSIONS,
        })
    }
}

/// The prefix of every Agent account: of a Linux user name's characters, other
/// than `root`. Accounts take its first 19 characters (the spec's rule), so it
/// may be longer than a user name.
fn check_user(user: &str) -> Result<(), GrantError> {
    let mut chars = user.chars();
    let valid = (1..=MAX_USER_PREFIX).contains(&user.len())
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid || user == "root" {
        return Err(GrantError {
            path: "configuration.runtime.user".into(),
            reason: format!(
                "must be a Linux user name prefix other than root: lowercase letters, digits, \
                 `_` and `-`, starting with a letter or `_`, at most {MAX_USER_PREFIX} characters"
            ),
        });
    }
    Ok(())
}

/// The Namespace a call acts for, as the controller passed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSubject {
    /// `namespace.id`.
    pub id: String,
    /// The name, which places it on the host of that alias.
    pub name: String,
}

/// The Agent a call acts for, from the binding the call runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSubject {
    /// `agent.id`.
    pub id: String,
    /// `agent.servicePrincipalId`.
    pub service_principal_id: String,
}

/// The revision a call acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionSubject {
    /// `revision.id`.
    pub id: String,
    /// `revision.revision`.
    pub number: u64,
    /// `<harness id>/<mode>`, e.g. `openclaw/embedded`.
    pub harness: String,
    /// SHA-256 of the controller's `revision.configuration`, as the host passed
    /// it to the driver (canonical JSON: see `params::canonical_json`).
    pub configuration_sha256: String,
}

/// Whom one call acts for: what the controller passed, never what the driver
/// made up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subjects {
    /// The call's Namespace (every method that touches a host has one).
    pub namespace: Option<NamespaceSubject>,
    /// The bound Agent of an Agent or revision call.
    pub agent: Option<AgentSubject>,
    /// The revision of a revision call, when its binding owns it.
    pub revision: Option<RevisionSubject>,
    /// OCC's `context.workspaceSetup` of a prepare or activate call, checked
    /// (`params::RevisionContext::workspace_setup`): the documents the helper
    /// delivers into the Agent's workspace.
    pub workspace_setup: Option<Value>,
    /// Whether a runtime description lists the unit's events
    /// (`options.events` of describeAgentRuntime).
    pub events: Option<bool>,
    /// OCC's `AgentRuntimeLogRequest` of a log read, checked
    /// (`params::LogRequest`): the unit, the invocation and the bounds.
    pub log_request: Option<Value>,
    /// `revision.harness.version` of a diagnosis: the OpenClaw version the
    /// revision was committed for, which the host's installed one must be.
    pub harness_version: Option<String>,
}

/// The admission of every helper run of one call of `method`.
pub fn admission(
    method: Method,
    trusted: Arc<TrustedRuntime>,
    subjects: Subjects,
    accepted: AcceptedHooks,
) -> Arc<dyn Admission> {
    Arc::new(HelperRuns {
        method,
        trusted,
        subjects,
        accepted,
    })
}

/// The helper runs of one call: each one's operation checked against the
/// call's method and run with the envelope the host writes. Their output is
/// collected for the component, on a session of their own.
struct HelperRuns {
    method: Method,
    trusted: Arc<TrustedRuntime>,
    subjects: Subjects,
    accepted: AcceptedHooks,
}

impl Admission for HelperRuns {
    fn admit(&self, ask: ExecAsk<'_>) -> Result<Admitted, String> {
        admit(
            self.method,
            &self.trusted,
            &self.subjects,
            &self.accepted,
            ask,
        )
    }
}

/// Checks one helper run and returns its argv with the envelope appended,
/// and the helper operation for its audit records (decoded here once: the
/// envelope after it is the host's, and the log keeps both arguments only as
/// length and SHA-256 when long).
fn admit(
    method: Method,
    trusted: &TrustedRuntime,
    subjects: &Subjects,
    accepted: &AcceptedHooks,
    ask: ExecAsk<'_>,
) -> Result<Admitted, String> {
    // The grant let through `[<nodePath>, "-", <base64>]` with the approved helper.
    let [program, dash, operation] = ask.argv else {
        return Err("a helper run is [<nodePath>, \"-\", <operation>]".into());
    };
    let sent = decode(operation)?;
    let name = sent.get("op").and_then(Value::as_str).unwrap_or_default();
    let op = HelperOp::from_name(name)
        .ok_or_else(|| format!("operation.op {name:?} is not a helper operation"))?;
    let ops = method.helper_ops();
    if !ops.contains(&op) {
        return Err(format!(
            "{method} may run {} on a host, not {}",
            list(ops),
            op.name()
        ));
    }
    if sent.get("version").and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
        return Err(format!(
            "operation.version must be {PROTOCOL_VERSION}, the protocol of this host"
        ));
    }
    for key in sent.keys() {
        if !["version", "op", "deadlineMs"].contains(&key.as_str())
            && !op.policy_fields().contains(&key.as_str())
        {
            return Err(format!(
                "operation.{key}: not a field the driver may send in {}; the host supplies \
                 what the helper acts on",
                op.name()
            ));
        }
    }
    if let Some(deadline) = sent.get("deadlineMs")
        && !deadline.as_u64().is_some_and(|d| DEADLINE_MS.contains(&d))
    {
        return Err(format!(
            "operation.deadlineMs must be an integer from {} to {}",
            DEADLINE_MS.start(),
            DEADLINE_MS.end()
        ));
    }
    let paths = trusted
        .hosts
        .get(ask.alias)
        .ok_or_else(|| format!("host {:?} is not in the installation", ask.alias))?;
    let namespace = match (&subjects.namespace, op) {
        (_, HelperOp::Probe) => None,
        (Some(ns), _) if ns.name == ask.alias => Some(ns),
        (Some(ns), _) => {
            return Err(format!(
                "this {method} call is for Namespace {:?}, placed on host {:?}, not on {:?}",
                ns.id, ns.name, ask.alias
            ));
        }
        (None, _) => return Err(format!("this {method} call names no Namespace")),
    };
    let needs_agent = !matches!(
        op,
        HelperOp::Probe | HelperOp::EnsureNamespace | HelperOp::DeleteNamespace
    );
    let needs_revision = needs_agent && !matches!(op, HelperOp::DeleteAgent);
    if needs_agent && subjects.agent.is_none() {
        return Err(format!("this {method} call names no bound Agent"));
    }
    if needs_revision && subjects.revision.is_none() {
        return Err(format!(
            "this {method} call names no revision of its bound Agent"
        ));
    }
    let accepted = accepted.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(hook) = required_hook(op)
        && !accepted.hooks.contains(&hook)
    {
        return Err(format!(
            "{} runs only after the controller accepted {} in this call",
            op.name(),
            hook.name()
        ));
    }
    if op == HelperOp::Prepare {
        let revision = subjects.revision.as_ref().expect("checked above");
        let document = sent
            .get("configuration")
            .and_then(Value::as_str)
            .ok_or("operation.configuration: the controller's document is required")?;
        if sha256_hex(document.as_bytes()) != revision.configuration_sha256 {
            return Err(format!(
                "operation.configuration is not revision {:?}'s configuration as the controller \
                 passed it",
                revision.id
            ));
        }
    }

    let mut envelope = Map::new();
    envelope.insert("version".into(), json!(PROTOCOL_VERSION));
    envelope.insert("method".into(), json!(method.name()));
    envelope.insert(
        "ops".into(),
        json!(ops.iter().map(|o| o.name()).collect::<Vec<_>>()),
    );
    envelope.insert("host".into(), json!(ask.alias));
    envelope.insert(
        "driver".into(),
        json!({"id": trusted.driver_id, "implementation": trusted.implementation}),
    );
    envelope.insert(
        "runtime".into(),
        json!({
            "root": trusted.root,
            "unitDirectory": trusted.unit_directory,
            "nodePath": paths.node_path,
            "openclawPath": paths.openclaw_path,
            "user": trusted.user,
        }),
    );
    envelope.insert(
        "gatewayPortRange".into(),
        json!({"start": trusted.port_range.0, "end": trusted.port_range.1}),
    );
    if let Some(ns) = namespace {
        envelope.insert("namespace".into(), json!({"id": ns.id, "name": ns.name}));
    }
    if needs_agent && let Some(agent) = &subjects.agent {
        envelope.insert(
            "agent".into(),
            json!({"id": agent.id, "servicePrincipalId": agent.service_principal_id}),
        );
    }
    if needs_revision && let Some(revision) = &subjects.revision {
        envelope.insert(
            "revision".into(),
            json!({
                "id": revision.id,
                "number": revision.number,
                "harness": revision.harness,
                "configurationSha256": revision.configuration_sha256,
            }),
        );
    }
    if op == HelperOp::Activate {
        let environment = accepted
            .launch_environment
            .ok_or("activate runs only with what beforeWorkloadStart returned in this call")?;
        let map: Map<String, Value> = environment
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        envelope.insert("launchEnvironment".into(), Value::Object(map));
    }
    if matches!(op, HelperOp::Prepare | HelperOp::Activate)
        && let Some(setup) = &subjects.workspace_setup
    {
        envelope.insert("workspaceSetup".into(), setup.clone());
    }
    if op == HelperOp::Probe {
        // What preflight compares each host's sshd with: the sessions this
        // host keeps open on one connection.
        envelope.insert("maxSessions".into(), json!(trusted.max_sessions));
    }
    if op == HelperOp::Diagnose
        && let Some(version) = &subjects.harness_version
    {
        envelope.insert("harnessVersion".into(), json!(version));
    }
    if op == HelperOp::DescribeRuntime {
        envelope.insert("events".into(), json!(subjects.events.unwrap_or(true)));
    }
    let mut audit = Map::new();
    audit.insert("operation".into(), Value::String(op.name().to_string()));
    if op == HelperOp::ReadLogs {
        let request = subjects
            .log_request
            .as_ref()
            .ok_or("read-logs runs only with the controller's log request")?;
        envelope.insert("logRequest".into(), request.clone());
        // Which stream and how much of it: the read's record names both.
        audit.insert("logRequest".into(), request.clone());
    }
    let envelope = Value::Object(envelope).to_string();
    Ok(Admitted::new(
        vec![
            program.clone(),
            dash.clone(),
            operation.clone(),
            BASE64.encode(envelope),
        ],
        audit,
    ))
}

fn decode(operation: &str) -> Result<Map<String, Value>, String> {
    let bytes = BASE64
        .decode(operation)
        .map_err(|_| "the operation argument is not base64".to_string())?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err("the operation argument is not a JSON object".into()),
    }
}

fn list(ops: &[HelperOp]) -> String {
    if ops.is_empty() {
        return "nothing".into();
    }
    ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests;
