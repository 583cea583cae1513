//! The Agent's systemd gateway unit, rendered byte for byte.
//!
//! The helper writes the text as given and refuses to touch a unit that does not
//! begin with the ownership header, so the header here and the one in
//! `helper/README.md` must stay identical. Every interpolated value is checked once
//! more for what systemd would interpret (`%` specifiers, `$` variables, quotes,
//! backslash escapes and line breaks), although the configuration, IDs and
//! placeholders were already validated: the unit runs as root-managed service
//! configuration, so this last check is cheap insurance.

use crate::error::Error;
use crate::ids::AgentIds;
use crate::layout::Layout;
use crate::placeholders::Placeholder;

/// The first line of every unit this driver owns.
pub const OWNERSHIP_LINE: &str = "# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.";

/// What the unit is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct UnitSpec<'a> {
    pub agent: &'a AgentIds,
    pub layout: &'a Layout,
    pub node_path: &'a str,
    pub openclaw_path: &'a str,
    pub port: u16,
    pub placeholders: &'a [Placeholder],
    pub needs_password: bool,
}

/// The three header lines the helper checks before it overwrites, stops or removes
/// a unit.
pub fn ownership_header(namespace_id: &str, agent_id: &str) -> String {
    format!("{OWNERSHIP_LINE}\n# OCC-Namespace: {namespace_id}\n# OCC-Agent: {agent_id}\n")
}

/// Renders the unit file.
pub fn render(spec: &UnitSpec<'_>) -> Result<String, Error> {
    let UnitSpec {
        agent,
        layout,
        port,
        ..
    } = *spec;
    let values = [
        ("namespace.id", agent.namespace_id.as_str()),
        ("agentId", &agent.agent_id),
        ("account", &agent.account),
        ("nodePath", spec.node_path),
        ("openclawPath", spec.openclaw_path),
        ("agentDir", &layout.agent_dir),
    ];
    for (field, value) in values {
        check(field, value)?;
    }
    for placeholder in spec.placeholders {
        check("placeholder name", &placeholder.name)?;
        check(
            &format!("placeholder {}", placeholder.name),
            &placeholder.value,
        )?;
    }

    let mut unit = ownership_header(&agent.namespace_id, &agent.agent_id);
    let mut lines: Vec<String> = vec![
        String::new(),
        "[Unit]".into(),
        format!(
            "Description=OpenClaw gateway of OCC Agent {}",
            agent.agent_hash
        ),
        "After=network-online.target".into(),
        "Wants=network-online.target".into(),
        String::new(),
        "[Service]".into(),
        format!(
            "ExecStart={} {} gateway --port {port}",
            spec.node_path, spec.openclaw_path
        ),
        format!("User={}", agent.account),
        format!("Group={}", agent.account),
        format!("Environment=\"HOME={}\"", layout.home),
        format!("Environment=\"OPENCLAW_STATE_DIR={}\"", layout.state),
        format!(
            "Environment=\"OPENCLAW_CONFIG_PATH={}\"",
            layout.current_config
        ),
        format!("Environment=\"OPENCLAW_GATEWAY_PORT={port}\""),
    ];
    lines.extend(
        spec.placeholders
            .iter()
            .map(|p| format!("Environment=\"{}={}\"", p.name, p.value)),
    );
    if spec.needs_password {
        lines.push(format!("EnvironmentFile={}", layout.gateway_password_env));
    }
    lines.extend([
        // `-`: the operator file is optional and never created by the driver.
        format!("EnvironmentFile=-{}", layout.operator_env),
        format!("WorkingDirectory={}", layout.home),
        "Restart=always".into(),
        "RestartSec=2".into(),
        "KillSignal=SIGTERM".into(),
        "TimeoutStopSec=30".into(),
        "NoNewPrivileges=true".into(),
        "PrivateTmp=true".into(),
    ]);
    lines.extend(sandbox(layout, port));
    lines.extend([
        String::new(),
        "[Install]".into(),
        "WantedBy=multi-user.target".into(),
    ]);
    for line in lines {
        unit.push_str(&line);
        unit.push('\n');
    }
    Ok(unit)
}

/// The sandbox every gateway runs in, beyond the spec's `NoNewPrivileges` and
/// `PrivateTmp`. Agents share a host, so one Agent's gateway (or whatever it runs)
/// must not read, stall or spoof another. Each line was tried with the real gateway
/// (it reaches `/readyz` 200 and keeps its state across a restart under all of them);
/// `helper/README.md` gives the reason for each. Left out on purpose:
/// `MemoryDenyWriteExecute=` (V8 compiles code at run time) and `ProcSubset=pid`
/// (Node reads `/proc/cpuinfo`, `/proc/meminfo` and `/proc/stat`).
fn sandbox(layout: &Layout, port: u16) -> Vec<String> {
    vec![
        // Read-only host: the gateway writes only its own home and state (and the
        // private /tmp); the snapshot it reads stays root's.
        "ProtectSystem=strict".into(),
        format!("ReadWritePaths={} {}", layout.home, layout.state),
        "ProtectHome=yes".into(),
        // No host devices; its own /dev/shm and IPC namespace, so nothing it puts in
        // shared memory is visible to, or left behind for, another account.
        "PrivateDevices=yes".into(),
        "TemporaryFileSystem=/dev/shm:mode=1777".into(),
        "PrivateIPC=yes".into(),
        "RemoveIPC=yes".into(),
        // Other accounts' processes, root's helper runs (whose argument carries the
        // snapshot) included, are invisible in its /proc.
        "ProtectProc=invisible".into(),
        "ProtectKernelTunables=yes".into(),
        "ProtectKernelModules=yes".into(),
        "ProtectKernelLogs=yes".into(),
        "ProtectControlGroups=yes".into(),
        "ProtectClock=yes".into(),
        "ProtectHostname=yes".into(),
        "RestrictSUIDSGID=yes".into(),
        "RestrictRealtime=yes".into(),
        "RestrictNamespaces=yes".into(),
        "LockPersonality=yes".into(),
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK".into(),
        "SystemCallArchitectures=native".into(),
        "SystemCallFilter=@system-service".into(),
        "SystemCallErrorNumber=EPERM".into(),
        "CapabilityBoundingSet=".into(),
        "UMask=0077".into(),
        // It may bind its own port only: a sibling's port stays free for its owner.
        // Enforced where systemd has its BPF framework; the helper's readiness check
        // (the listener must belong to the Agent's account) holds everywhere.
        "SocketBindDeny=any".into(),
        format!("SocketBindAllow=tcp:{port}"),
    ]
}

fn check(field: &str, value: &str) -> Result<(), Error> {
    let reason = if value.contains('%') {
        "systemd expands `%` specifiers"
    } else if value.contains('$') {
        "systemd expands `$` variables"
    } else if value.contains('"') {
        "a quote would end the quoted value"
    } else if value.contains('\\') {
        "systemd interprets backslash escapes"
    } else if value.chars().any(char::is_control) {
        "a line break or control character would end the line"
    } else {
        return Ok(());
    };
    Err(Error::UnsafeUnitValue {
        field: field.to_owned(),
        value: value.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn placeholders() -> Vec<Placeholder> {
        crate::placeholders::admit(vec![
            ("SLACK_BOT_TOKEN".into(), "opaque-cfg:slack.bot".into()),
            ("IAM_SESSION".into(), "opaque-iam-7f3a".into()),
        ])
        .unwrap()
    }

    fn spec<'a>(
        agent: &'a AgentIds,
        layout: &'a Layout,
        placeholders: &'a [Placeholder],
        needs_password: bool,
    ) -> UnitSpec<'a> {
        UnitSpec {
            agent,
            layout,
            node_path: "/usr/bin/node",
            openclaw_path: "/opt/openclaw/current/dist/index.js",
            port: 18800,
            placeholders,
            needs_password,
        }
    }

    #[test]
    fn unit_with_password_matches_golden() {
        let (agent, layout) = (testing::agent_ids(), testing::layout());
        let unit = render(&spec(&agent, &layout, &[], true)).unwrap();
        testing::golden("unit-password.service", &unit);
    }

    #[test]
    fn unit_with_placeholders_and_no_password_matches_golden() {
        let (agent, layout) = (testing::agent_ids(), testing::layout());
        let placeholders = placeholders();
        let unit = render(&spec(&agent, &layout, &placeholders, false)).unwrap();
        testing::golden("unit-trusted-proxy-placeholders.service", &unit);
    }

    #[test]
    fn unit_never_sets_the_log_level_and_starts_with_the_header() {
        let (agent, layout) = (testing::agent_ids(), testing::layout());
        let placeholders = placeholders();
        for needs_password in [true, false] {
            let unit = render(&spec(&agent, &layout, &placeholders, needs_password)).unwrap();
            assert!(!unit.contains("OPENCLAW_LOG_LEVEL"));
            assert!(unit.starts_with(&ownership_header("ns-1", "agent-1")));
            assert_eq!(
                unit.contains("gateway-password.env"),
                needs_password,
                "{unit}"
            );
        }
        assert_eq!(
            ownership_header("ns-1", "agent-1"),
            "# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.\n\
             # OCC-Namespace: ns-1\n# OCC-Agent: agent-1\n"
        );
    }

    #[test]
    fn the_sandbox_keeps_the_spec_directives_and_confines_writes_and_binds() {
        let (agent, layout) = (testing::agent_ids(), testing::layout());
        let unit = render(&spec(&agent, &layout, &[], true)).unwrap();
        let service: Vec<&str> = unit
            .lines()
            .skip_while(|l| *l != "[Service]")
            .take_while(|l| *l != "[Install]")
            .collect();
        for directive in [
            "Restart=always",
            "RestartSec=2",
            "KillSignal=SIGTERM",
            "TimeoutStopSec=30",
            "NoNewPrivileges=true",
            "PrivateTmp=true",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateDevices=yes",
            "RemoveIPC=yes",
            "ProtectProc=invisible",
            "CapabilityBoundingSet=",
            "SocketBindDeny=any",
            "SocketBindAllow=tcp:18800",
        ] {
            assert_eq!(
                service.iter().filter(|l| **l == directive).count(),
                1,
                "{directive} once in [Service]"
            );
        }
        // The only writable paths are the Agent's own home and state.
        let writable: Vec<&str> = service
            .iter()
            .filter_map(|l| l.strip_prefix("ReadWritePaths="))
            .flat_map(|v| v.split(' '))
            .collect();
        assert_eq!(writable, [layout.home.as_str(), layout.state.as_str()]);
        // V8 compiles code at run time: this would stop the gateway.
        assert!(!unit.contains("MemoryDenyWriteExecute"));
    }

    #[test]
    fn values_systemd_would_interpret_are_refused() {
        let layout = testing::layout();
        let cases = [
            ("/usr/bin/%n", "systemd expands `%` specifiers"),
            ("/usr/bin/$N", "systemd expands `$` variables"),
            ("/usr/bin/\"n", "a quote would end the quoted value"),
            ("/usr/bin/\\n", "systemd interprets backslash escapes"),
            (
                "/usr/bin/n\nExecStartPre=/bin/sh",
                "a line break or control character would end the line",
            ),
        ];
        for (node_path, reason) in cases {
            let agent = testing::agent_ids();
            let mut spec = spec(&agent, &layout, &[], true);
            spec.node_path = node_path;
            let err = render(&spec).unwrap_err();
            assert_eq!(err.code(), "unsafe-unit-value");
            assert_eq!(
                err.to_string(),
                format!("nodePath: {node_path:?} cannot be written into a systemd unit ({reason})")
            );
        }
        let mut agent = testing::agent_ids();
        agent.agent_id = "agent\n[Service]".into();
        let err = render(&spec(&agent, &layout, &[], true)).unwrap_err();
        assert!(err.to_string().starts_with("agentId: "), "{err}");
    }
}
