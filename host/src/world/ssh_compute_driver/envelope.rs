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

/// The helper protocol this host speaks: the operation's and the envelope's
/// `version`.
pub const PROTOCOL_VERSION: u64 = 2;
/// The bounds of an operation's `deadlineMs` (the helper's own deadline, below
/// the transport's 180 s).
const DEADLINE_MS: std::ops::RangeInclusive<u64> = 1_000..=175_000;
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
}

/// The admission of every helper run of one call of `method`.
pub fn admission(
    method: Method,
    trusted: Arc<TrustedRuntime>,
    subjects: Subjects,
    accepted: AcceptedHooks,
) -> Admission {
    Arc::new(move |ask: ExecAsk<'_>| admit(method, &trusted, &subjects, &accepted, ask))
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
    let envelope = Value::Object(envelope).to_string();
    let mut audit = Map::new();
    audit.insert("operation".into(), Value::String(op.name().to_string()));
    Ok(Admitted {
        argv: vec![
            program.clone(),
            dash.clone(),
            operation.clone(),
            BASE64.encode(envelope),
        ],
        audit,
    })
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
mod tests {
    use super::*;
    use crate::capability::hooks::{Accepted, Hook};

    fn trusted() -> Arc<TrustedRuntime> {
        let cfg = json!({
            "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts"},
            "hosts": {
                "stable": {"address": "203.0.113.10", "user": "root"},
                "canary": {"address": "203.0.113.11", "user": "root", "nodePath": "/opt/node24/bin/node"},
            },
            "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js",
                        "user": "openclaw", "root": "/var/lib/openclaw-enterprise"},
            "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
        });
        Arc::new(TrustedRuntime::from_configuration(&cfg, "compute-ssh", "occ/ssh").unwrap())
    }

    const DOCUMENT: &str = r#"{"gateway":{"mode":"local"}}"#;

    fn subjects() -> Subjects {
        Subjects {
            namespace: Some(NamespaceSubject {
                id: "ns-1".into(),
                name: "stable".into(),
            }),
            agent: Some(AgentSubject {
                id: "agent-1".into(),
                service_principal_id: "sp-1".into(),
            }),
            revision: Some(RevisionSubject {
                id: "rev-1".into(),
                number: 1,
                harness: "openclaw/embedded".into(),
                configuration_sha256: sha256_hex(DOCUMENT.as_bytes()),
            }),
            workspace_setup: None,
        }
    }

    fn op(body: Value) -> Vec<String> {
        vec![
            "/usr/bin/node".into(),
            "-".into(),
            BASE64.encode(body.to_string()),
        ]
    }

    fn run(
        method: Method,
        subjects: Subjects,
        accepted: Accepted,
        alias: &str,
        argv: &[String],
    ) -> Result<Value, String> {
        let admit = admission(
            method,
            trusted(),
            subjects,
            Arc::new(std::sync::Mutex::new(accepted)),
        );
        let admitted = admit(ExecAsk {
            alias,
            argv,
            stdin: b"",
            streamed: None,
        })?;
        let sent: Value = serde_json::from_slice(&BASE64.decode(&argv[2]).unwrap()).unwrap();
        assert_eq!(
            admitted.audit.get("operation"),
            sent.get("op"),
            "the audit names the operation the driver sent"
        );
        let out = admitted.argv;
        assert_eq!(&out[..3], argv, "the component's argv is kept as it is");
        assert_eq!(out.len(), 4);
        Ok(serde_json::from_slice(&BASE64.decode(&out[3]).unwrap()).unwrap())
    }

    #[test]
    fn the_envelope_names_the_installation_and_the_call() {
        let prepare = op(
            json!({"version": 2, "op": "prepare", "deadlineMs": 170000, "configuration": DOCUMENT}),
        );
        let envelope = run(
            Method::PrepareRevision,
            subjects(),
            Accepted::default(),
            "stable",
            &prepare,
        )
        .unwrap();
        assert_eq!(
            envelope,
            json!({
                "version": 2, "method": "prepareRevision", "ops": ["prepare"], "host": "stable",
                "driver": {"id": "compute-ssh", "implementation": "occ/ssh"},
                "runtime": {"root": "/var/lib/openclaw-enterprise", "unitDirectory": "/etc/systemd/system",
                            "nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/current/dist/index.js",
                            "user": "openclaw"},
                "gatewayPortRange": {"start": 18800, "end": 18899},
                "namespace": {"id": "ns-1", "name": "stable"},
                "agent": {"id": "agent-1", "servicePrincipalId": "sp-1"},
                "revision": {"id": "rev-1", "number": 1, "harness": "openclaw/embedded",
                             "configurationSha256": sha256_hex(DOCUMENT.as_bytes())},
            })
        );
        // Preflight probes any host, with that host's own paths and no subjects.
        let probe = op(json!({"version": 2, "op": "probe"}));
        let envelope = run(
            Method::Preflight,
            Subjects::default(),
            Accepted::default(),
            "canary",
            &probe,
        )
        .unwrap();
        assert_eq!(envelope["runtime"]["nodePath"], "/opt/node24/bin/node");
        assert_eq!(envelope["ops"], json!(["probe"]));
        assert!(envelope.get("namespace").is_none() && envelope.get("agent").is_none());
        // An Agent operation without a revision carries none.
        let delete = op(json!({"version": 2, "op": "delete-agent"}));
        let envelope = run(
            Method::DeleteAgentRuntimeCredentials,
            subjects(),
            Accepted::default(),
            "stable",
            &delete,
        )
        .unwrap();
        assert!(envelope.get("revision").is_none());
        assert_eq!(envelope["agent"]["id"], "agent-1");
    }

    #[test]
    fn activation_carries_what_the_controller_returned_and_only_after_it_accepted() {
        let activate = op(json!({"version": 2, "op": "activate"}));
        let err = run(
            Method::ActivateRevision,
            subjects(),
            Accepted::default(),
            "stable",
            &activate,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "activate runs only after the controller accepted beforeWorkloadStart in this call"
        );
        let accepted = Accepted {
            hooks: vec![Hook::BeforeWorkloadStart],
            launch_environment: Some(vec![("IAM_SESSION".into(), "opaque-iam-7f3a".into())]),
        };
        let envelope = run(
            Method::ActivateRevision,
            subjects(),
            accepted,
            "stable",
            &activate,
        )
        .unwrap();
        assert_eq!(
            envelope["launchEnvironment"],
            json!({"IAM_SESSION": "opaque-iam-7f3a"})
        );
        assert_eq!(envelope["ops"], json!(["inspect-agent", "activate"]));
    }

    /// The controller's workspace setup rides with prepare and activate only,
    /// in the envelope the host writes; a component cannot send one of its own.
    #[test]
    fn the_workspace_setup_rides_in_the_envelope_of_prepare_and_activate() {
        let setup = json!({"id": "s-1", "namespaceId": "ns-1", "agentId": "agent-1", "completed": false,
                           "files": {"SOUL.md": "calm"}});
        let with_setup = Subjects {
            workspace_setup: Some(setup.clone()),
            ..subjects()
        };
        let all = Accepted {
            hooks: vec![Hook::BeforeWorkloadStart, Hook::BeforeWorkloadStop],
            launch_environment: Some(Vec::new()),
        };
        let prepare = op(json!({"version": 2, "op": "prepare", "configuration": DOCUMENT}));
        let envelope = run(
            Method::PrepareRevision,
            with_setup.clone(),
            all.clone(),
            "stable",
            &prepare,
        )
        .unwrap();
        assert_eq!(envelope["workspaceSetup"], setup);
        let activate = op(json!({"version": 2, "op": "activate"}));
        let envelope = run(
            Method::ActivateRevision,
            with_setup.clone(),
            all.clone(),
            "stable",
            &activate,
        )
        .unwrap();
        assert_eq!(envelope["workspaceSetup"], setup);
        let inspect = op(json!({"version": 2, "op": "inspect-agent"}));
        let envelope = run(
            Method::ActivateRevision,
            with_setup.clone(),
            all.clone(),
            "stable",
            &inspect,
        )
        .unwrap();
        assert!(envelope.get("workspaceSetup").is_none());
        let stop = op(json!({"version": 2, "op": "stop"}));
        let envelope = run(
            Method::StopRevision,
            with_setup,
            all.clone(),
            "stable",
            &stop,
        )
        .unwrap();
        assert!(envelope.get("workspaceSetup").is_none());
        let forged = op(
            json!({"version": 2, "op": "prepare", "configuration": DOCUMENT,
                               "workspaceSetup": {"id": "s-9", "namespaceId": "ns-9", "agentId": "victim"}}),
        );
        let err = run(Method::PrepareRevision, subjects(), all, "stable", &forged).unwrap_err();
        assert!(
            err.starts_with("operation.workspaceSetup: not a field"),
            "{err}"
        );
    }

    /// What a component carrying the approved helper might try, field by field:
    /// each is refused before any ssh process starts.
    #[test]
    fn whatever_is_not_policy_is_refused() {
        let all_hooks = Accepted {
            hooks: vec![
                Hook::BeforeWorkloadStart,
                Hook::BeforeWorkloadStop,
                Hook::BeforeNamespaceDelete,
            ],
            launch_environment: Some(Vec::new()),
        };
        let prepare = |extra: Value| {
            let mut body = json!({"version": 2, "op": "prepare", "configuration": DOCUMENT});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            op(body)
        };
        let cases: Vec<(Method, &str, Vec<String>, &str)> = vec![
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"root": "/etc"})),
                "operation.root: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"unitDirectory": "/tmp"})),
                "operation.unitDirectory: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"portRange": {"start": 22, "end": 22}})),
                "operation.portRange: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"snapshot": "{}"})),
                "operation.snapshot: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"namespace": {"id": "ns-2"}})),
                "operation.namespace: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"agent": {"account": "root"}})),
                "operation.agent: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"revision": {"id": "rev-9"}})),
                "operation.revision: not a field",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"configuration": "{\"gateway\":{\"auth\":{\"mode\":\"none\"}}}"})),
                "operation.configuration is not revision \"rev-1\"'s configuration",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"deadlineMs": 999_999})),
                "operation.deadlineMs must be",
            ),
            (
                Method::PrepareRevision,
                "stable",
                prepare(json!({"version": 1})),
                "operation.version must be 2",
            ),
            (
                Method::PrepareRevision,
                "canary",
                prepare(json!({})),
                "placed on host \"stable\", not on \"canary\"",
            ),
            (
                Method::PrepareRevision,
                "stable",
                op(json!({"version": 2, "op": "delete-namespace"})),
                "prepareRevision may run prepare on a host, not delete-namespace",
            ),
            (
                Method::ActivateRevision,
                "stable",
                op(
                    json!({"version": 2, "op": "activate", "unit": {"text": "[Service]\nExecStartPre=+/bin/sh -c id"}}),
                ),
                "operation.unit: not a field",
            ),
            (
                Method::ActivateRevision,
                "stable",
                op(json!({"version": 2, "op": "activate", "port": 22})),
                "operation.port: not a field",
            ),
            (
                Method::Preflight,
                "stable",
                op(json!({"version": 2, "op": "probe", "nodePath": "/bin/sh"})),
                "operation.nodePath: not a field",
            ),
            (
                Method::Preflight,
                "stable",
                op(json!({"version": 2, "op": "ensure-namespace"})),
                "preflight may run probe on a host, not ensure-namespace",
            ),
            (
                Method::StopRevision,
                "stable",
                op(json!({"version": 2, "op": "retire"})),
                "stopRevision may run stop on a host, not retire",
            ),
            (
                Method::BindAgent,
                "stable",
                op(json!({"version": 2, "op": "probe"})),
                "bindAgent may run nothing on a host, not probe",
            ),
            (
                Method::ValidateConfiguration,
                "stable",
                op(json!({"version": 2, "op": "probe"})),
                "validateConfiguration may run nothing",
            ),
            (
                Method::EnsureNamespace,
                "stable",
                op(json!({"version": 2, "op": "reboot"})),
                "operation.op \"reboot\" is not a helper operation",
            ),
        ];
        for (method, alias, argv, expected) in cases {
            let err = run(method, subjects(), all_hooks.clone(), alias, &argv).unwrap_err();
            assert!(err.contains(expected), "{method} {alias}: {err}");
        }
        // A call acts only for its own subjects: one whose binding did not own its
        // revision names none, and nothing runs.
        let err = run(
            Method::StopRevision,
            Subjects::default(),
            all_hooks.clone(),
            "stable",
            &op(json!({"version": 2, "op": "stop"})),
        )
        .unwrap_err();
        assert_eq!(err, "this stopRevision call names no Namespace");
        // Stop, retire and Namespace deletion follow their hook.
        for (method, name) in [
            (Method::StopRevision, "stop"),
            (Method::RetireRevision, "retire"),
            (Method::DeleteNamespace, "delete-namespace"),
        ] {
            let err = run(
                method,
                subjects(),
                Accepted::default(),
                "stable",
                &op(json!({"version": 2, "op": name})),
            )
            .unwrap_err();
            assert!(
                err.contains("runs only after the controller accepted"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_trusted_runtime_is_read_with_the_grants_rules() {
        let t = trusted();
        assert_eq!(t.unit_directory, "/etc/systemd/system");
        assert_eq!(t.port_range, (18800, 18899));
        assert_eq!(t.hosts["stable"].node_path, "/usr/bin/node");
        assert_eq!(t.hosts["canary"].node_path, "/opt/node24/bin/node");
        assert_eq!(
            t.hosts["canary"].openclaw_path,
            "/opt/openclaw/current/dist/index.js"
        );
        let base = json!({
            "hosts": {"stable": {"address": "203.0.113.10", "user": "root"}},
            "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/o/index.js",
                        "user": "openclaw", "root": "/var/lib/oe"},
            "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
        });
        let with = |pointer: &str, value: Value| {
            let mut v = base.clone();
            *v.pointer_mut(pointer).unwrap() = value;
            TrustedRuntime::from_configuration(&v, "compute-ssh", "occ/ssh")
                .map_err(|e| e.to_string())
        };
        // The spec takes the first 19 characters of a longer runtime user.
        assert!(
            with(
                "/runtime/user",
                json!("a-forty-character-runtime-user-prefix-xx")
            )
            .is_ok()
        );
        for (pointer, value, expected) in [
            (
                "/runtime/root",
                json!("/var/lib/a b"),
                "configuration.runtime.root: ",
            ),
            (
                "/runtime/user",
                json!("root"),
                "configuration.runtime.user: ",
            ),
            (
                "/network/gatewayPortRange/start",
                json!(80),
                "configuration.network.gatewayPortRange.start: ",
            ),
            (
                "/hosts/stable",
                json!({"address": "x", "user": "root", "openclawPath": "/o/%n"}),
                "configuration.hosts.stable.openclawPath: ",
            ),
        ] {
            let err = with(pointer, value).unwrap_err();
            assert!(err.starts_with(expected), "{pointer}: {err}");
        }
    }
}
