//! The private `ssh_config` every master connection uses: the spec's fixed
//! options plus the grant's files and timeout, whatever the operator's own ssh
//! configuration says.

use super::grant::SshGrant;

/// The fixed client options. Beyond the spec's list (BatchMode,
/// StrictHostKeyChecking, IdentitiesOnly, the explicit files, ConnectTimeout,
/// LogLevel=ERROR) they close every other door an ssh client has: agents,
/// forwarding, password prompts, host key updates, global known-hosts files.
pub const SSH_OPTIONS: &[(&str, &str)] = &[
    ("BatchMode", "yes"),
    ("StrictHostKeyChecking", "yes"),
    ("IdentitiesOnly", "yes"),
    ("IdentityAgent", "none"),
    ("GlobalKnownHostsFile", "/dev/null"),
    ("UpdateHostKeys", "no"),
    ("PasswordAuthentication", "no"),
    ("KbdInteractiveAuthentication", "no"),
    ("ForwardAgent", "no"),
    ("ForwardX11", "no"),
    ("ClearAllForwardings", "yes"),
    ("PermitLocalCommand", "no"),
    ("ProxyCommand", "none"),
    ("ServerAliveInterval", "15"),
    ("ServerAliveCountMax", "3"),
    ("LogLevel", "ERROR"),
];

/// Render the private client configuration. `Host *` applies it whatever the
/// destination.
pub fn render_ssh_config(grant: &SshGrant) -> String {
    let mut out = String::from(
        "# Written by occ-driver-host for one driver; removed when it exits.\nHost *\n",
    );
    for (k, v) in SSH_OPTIONS {
        out.push_str(&format!("  {k} {v}\n"));
    }
    out.push_str(&format!(
        "  IdentityFile \"{}\"\n",
        grant.identity_file.display()
    ));
    out.push_str(&format!(
        "  UserKnownHostsFile \"{}\"\n",
        grant.known_hosts_file.display()
    ));
    out.push_str(&format!(
        "  ConnectTimeout {}\n",
        grant.connect_timeout.as_secs()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn client_config_fixes_every_option() {
        let grant = SshGrant::from_configuration(&json!({
            "ssh": {"identityFile": "/etc/openclaw/ssh/id_ed25519", "knownHostsFile": "/etc/openclaw/ssh/known_hosts", "connectTimeoutSeconds": 10},
            "hosts": {"stable": {"address": "203.0.113.10", "user": "root"}},
            "runtime": {"nodePath": "/usr/bin/node"},
        }), &[])
        .unwrap();
        let text = render_ssh_config(&grant);
        for needle in [
            "BatchMode yes",
            "StrictHostKeyChecking yes",
            "IdentitiesOnly yes",
            "LogLevel ERROR",
            "IdentityFile \"/etc/openclaw/ssh/id_ed25519\"",
            "UserKnownHostsFile \"/etc/openclaw/ssh/known_hosts\"",
            "ConnectTimeout 10",
            "ProxyCommand none",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
    }
}
