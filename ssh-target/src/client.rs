//! `sandbox.ssh.command`: which SSH client runs the transport, as OpenClaw
//! names it (`command.trim() || "ssh"` becomes the program it spawns).
//!
//! The form is checked here, by the component and the host alike; only the
//! host can tell whether the path is an OpenSSH client, and it checks that
//! before any connection (`capability::ssh_exec::client` in the host).

use crate::quoted;

/// The client's name when `ssh.command` is absent or empty.
pub const DEFAULT_COMMAND: &str = "ssh";

/// What `ssh.command` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `ssh` from the host's `PATH` (absent, empty, or `ssh`).
    Default,
    /// An absolute path, trimmed as OpenClaw trims it.
    Path(String),
}

/// Read `ssh.command`: `ssh` (or nothing) is the default client, anything
/// else must be an absolute path. A relative name other than `ssh` would be
/// looked up in whatever `PATH` the host happens to have, so it is refused;
/// so is a path holding control characters, which no operator means.
pub fn parse_command(value: Option<&str>) -> Result<Command, String> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Command::Default);
    };
    if value == DEFAULT_COMMAND {
        return Ok(Command::Default);
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "{}: an OpenSSH client's path must not hold control characters",
            quoted(value)
        ));
    }
    if !value.starts_with('/') {
        return Err(format!(
            "{}: name `ssh` (from the host's PATH) or the absolute path of an OpenSSH client, not a relative name",
            quoted(value)
        ));
    }
    Ok(Command::Path(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_and_absolute_paths_only() {
        let cases: &[(Option<&str>, Result<Command, &str>)] = &[
            (None, Ok(Command::Default)),
            (Some(""), Ok(Command::Default)),
            (Some("  "), Ok(Command::Default)),
            (Some("ssh"), Ok(Command::Default)),
            (Some(" ssh\t"), Ok(Command::Default)),
            (
                Some(" /opt/openssh/bin/ssh "),
                Ok(Command::Path("/opt/openssh/bin/ssh".into())),
            ),
            (Some("myssh"), Err("\"myssh\": name `ssh`")),
            (Some("bin/ssh"), Err("\"bin/ssh\": name `ssh`")),
            (Some("./ssh"), Err("\"./ssh\": name `ssh`")),
            (Some("~/bin/ssh"), Err("\"~/bin/ssh\": name `ssh`")),
            (Some("ssh -v"), Err("\"ssh -v\": name `ssh`")),
            (Some("/usr/bin/ssh\n-v"), Err("must not hold control")),
        ];
        for (value, expected) in cases {
            match (parse_command(*value), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{value:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{value:?}: {got}"),
                (got, want) => panic!("{value:?}: expected {want:?}, got {got:?}"),
            }
        }
        for long in ["x".repeat(10_000), format!("/{}x", "\n".repeat(10_000))] {
            let e = parse_command(Some(&long)).unwrap_err();
            assert!(e.len() < 300, "{e}");
        }
    }
}
