//! The private `ssh_config` every master connection uses: the fixed options
//! plus the grant's credentials, host key checking and timeout, whatever the
//! operator's own ssh configuration says.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::capability::ssh_exec::grant::{Credential, SshGrant};

/// The fixed client options. Beyond the spec's list (BatchMode,
/// StrictHostKeyChecking, IdentitiesOnly, the explicit files, ConnectTimeout,
/// LogLevel=ERROR) they close every other door an ssh client has: agents,
/// forwarding, password prompts, global known-hosts files. Host key checking and
/// updates are the grant's ([`crate::capability::ssh_exec::grant::HostKeys`]).
pub const SSH_OPTIONS: &[(&str, &str)] = &[
    ("BatchMode", "yes"),
    ("IdentitiesOnly", "yes"),
    ("IdentityAgent", "none"),
    ("GlobalKnownHostsFile", "/dev/null"),
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

/// Where ssh reads each credential: the grant's files as named, inline ones
/// from the private files [`ClientFiles::materialize`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// The identity.
    pub identity: Option<PathBuf>,
    /// The certificate.
    pub certificate: Option<PathBuf>,
    /// The known hosts.
    pub known_hosts: Option<PathBuf>,
}

/// Inline key material as ssh reads it: no byte order mark, LF line endings,
/// a final newline; a key pasted into one line with literal `\n` (as
/// environment variables often carry it) gets its line breaks back.
fn normalize(text: &str, key: bool) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = text.replace("\r\n", "\n").replace('\r', "\n");
    if key && !out.trim_end().contains('\n') && out.contains("\\n") {
        out = out.replace("\\n", "\n");
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The file names inline credentials take in a private directory.
const INLINE_NAMES: [&str; 3] = ["identity", "certificate.pub", "known_hosts"];

impl ClientFiles {
    /// Where ssh will read each credential, writing nothing: inline ones at
    /// their names in `dir`, which [`ClientFiles::materialize`] writes and
    /// [`ClientFiles::remove_inline`] removes.
    pub fn plan(grant: &SshGrant, dir: &Path) -> ClientFiles {
        let place = |c: &Option<Credential>, name: &str| match c {
            None => None,
            Some(Credential::File(path)) => Some(path.clone()),
            Some(Credential::Inline(_)) => Some(dir.join(name)),
        };
        ClientFiles {
            identity: place(&grant.identity, INLINE_NAMES[0]),
            certificate: place(&grant.certificate, INLINE_NAMES[1]),
            known_hosts: place(&grant.known_hosts, INLINE_NAMES[2]),
        }
    }

    /// Whether the grant has any inline credential (then a handshake needs
    /// its files written first).
    pub fn any_inline(grant: &SshGrant) -> bool {
        [&grant.identity, &grant.certificate, &grant.known_hosts]
            .iter()
            .any(|c| matches!(c, Some(Credential::Inline(_))))
    }

    /// Remove the inline credentials' files from `dir`; absent ones are fine.
    pub fn remove_inline(dir: &Path) -> std::io::Result<()> {
        for name in INLINE_NAMES {
            match std::fs::remove_file(dir.join(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Resolve the grant's credentials, writing inline ones into `dir` (which
    /// must be private to this user) as files of mode 0600.
    pub fn materialize(grant: &SshGrant, dir: &Path) -> std::io::Result<ClientFiles> {
        let place =
            |c: &Option<Credential>, name: &str, key: bool| -> std::io::Result<Option<PathBuf>> {
                match c {
                    None => Ok(None),
                    Some(Credential::File(path)) => Ok(Some(path.clone())),
                    Some(Credential::Inline(text)) => {
                        use std::os::unix::fs::OpenOptionsExt;
                        let path = dir.join(name);
                        let mut file = std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                            .open(&path)?;
                        file.write_all(normalize(text, key).as_bytes())?;
                        Ok(Some(path))
                    }
                }
            };
        Ok(ClientFiles {
            identity: place(&grant.identity, "identity", true)?,
            certificate: place(&grant.certificate, "certificate.pub", true)?,
            known_hosts: place(&grant.known_hosts, "known_hosts", false)?,
        })
    }
}

/// Render the private client configuration. `Host *` applies it whatever the
/// destination.
pub fn render_ssh_config(grant: &SshGrant, files: &ClientFiles) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = String::from(
        "# Written by occ-driver-host for one driver; removed when it exits.\nHost *\n",
    );
    for (k, v) in SSH_OPTIONS {
        out.push_str(&format!("  {k} {v}\n"));
    }
    out.push_str(&format!(
        "  StrictHostKeyChecking {}\n  UpdateHostKeys {}\n",
        yes_no(grant.host_keys.strict),
        yes_no(grant.host_keys.update)
    ));
    if let Some(path) = &files.identity {
        out.push_str(&format!("  IdentityFile \"{}\"\n", path.display()));
    }
    if let Some(path) = &files.certificate {
        out.push_str(&format!("  CertificateFile \"{}\"\n", path.display()));
    }
    match &files.known_hosts {
        Some(path) => out.push_str(&format!("  UserKnownHostsFile \"{}\"\n", path.display())),
        // Unchecked keys are not recorded anywhere either.
        None if !grant.host_keys.strict => out.push_str("  UserKnownHostsFile /dev/null\n"),
        None => {}
    }
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
        let dir = tempfile::tempdir().unwrap();
        let text = render_ssh_config(
            &grant,
            &ClientFiles::materialize(&grant, dir.path()).unwrap(),
        );
        for needle in [
            "BatchMode yes",
            "StrictHostKeyChecking yes",
            "UpdateHostKeys no",
            "IdentitiesOnly yes",
            "LogLevel ERROR",
            "IdentityFile \"/etc/openclaw/ssh/id_ed25519\"",
            "UserKnownHostsFile \"/etc/openclaw/ssh/known_hosts\"",
            "ConnectTimeout 10",
            "ProxyCommand none",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
        // File credentials are used where they are: nothing was written.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn inline_credentials_become_private_files() {
        use std::os::unix::fs::PermissionsExt;
        let mut grant = SshGrant::from_configuration(
            &json!({
                "ssh": {"identityFile": "/k", "knownHostsFile": "/h"},
                "hosts": {"stable": {"address": "203.0.113.10", "user": "root"}},
                "runtime": {"nodePath": "/usr/bin/node"},
            }),
            &[],
        )
        .unwrap();
        grant.identity = Some(Credential::Inline(
            "\u{feff}-----BEGIN KEY-----\\nabc\\n-----END KEY-----".into(),
        ));
        grant.known_hosts = None;
        grant.host_keys.strict = false;
        let dir = tempfile::tempdir().unwrap();
        let files = ClientFiles::materialize(&grant, dir.path()).unwrap();
        let identity = files.identity.clone().unwrap();
        assert_eq!(identity, dir.path().join("identity"));
        assert_eq!(
            std::fs::read_to_string(&identity).unwrap(),
            "-----BEGIN KEY-----\nabc\n-----END KEY-----\n"
        );
        let mode = std::fs::metadata(&identity).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = render_ssh_config(&grant, &files);
        assert!(text.contains("StrictHostKeyChecking no"), "{text}");
        assert!(text.contains("UserKnownHostsFile /dev/null"), "{text}");
        // The inline text is nowhere but in its file.
        assert!(!format!("{grant:?}").contains("abc"));
        // A second materialization into the same directory refuses to reuse files.
        assert!(ClientFiles::materialize(&grant, dir.path()).is_err());
        // The plan names the same paths and writes nothing; removing leaves none.
        assert_eq!(ClientFiles::plan(&grant, dir.path()), files);
        assert!(ClientFiles::any_inline(&grant));
        ClientFiles::remove_inline(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        ClientFiles::remove_inline(dir.path()).unwrap();
        assert_eq!(ClientFiles::plan(&grant, dir.path()), files);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
