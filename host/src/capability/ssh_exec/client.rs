//! The OpenSSH client the transport runs, for the master connection and every
//! exec over it: `ssh` from `PATH` by default, or a path the trusted
//! installation names (the sandbox's `agents.defaults.sandbox.ssh.command`).
//!
//! A named client is checked once, when the grant is read and before any
//! connection: it must be an executable regular file that belongs to root or
//! this user and that no one else can replace, and `<client> -V` must answer
//! as OpenSSH does (`OpenSSH_<major>.<minor>...`, 7.3 or later: the
//! transport's options need it). The grant then holds the resolved path, so a
//! symbolic link swapped afterwards does not change what runs, and the
//! component, which only names a host alias, cannot pick another binary.

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default client, looked up in `PATH`.
pub const SYSTEM_CLIENT: &str = "ssh";

/// The oldest OpenSSH whose client takes every option the transport sets
/// (`IdentityAgent none` came with 7.3).
const MIN_VERSION: (u32, u32) = (7, 3);

/// How long `<client> -V` may take: a client answers at once; a program that
/// does not is not one.
const VERSION_BOUND: Duration = Duration::from_secs(5);

/// How much of `-V`'s output is read.
const VERSION_OUTPUT: u64 = 4096;

/// The client of a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshClient {
    /// What the installation said (`ssh`, or the path as written).
    pub configured: String,
    /// What runs: `ssh` (from `PATH`) or the checked client's resolved path.
    pub program: PathBuf,
    /// The checked client's `-V` banner (none for `ssh` from `PATH`).
    pub version: Option<String>,
}

impl SshClient {
    /// `ssh` from `PATH`, unchecked, as every grant ran it before clients
    /// could be named.
    pub fn system() -> SshClient {
        SshClient {
            configured: SYSTEM_CLIENT.into(),
            program: PathBuf::from(SYSTEM_CLIENT),
            version: None,
        }
    }

    /// Check that `path` names an OpenSSH client this host may run with the
    /// installation's keys. The reason, when it does not, names the path.
    pub fn verify(path: &str) -> Result<SshClient, String> {
        let at = |why: String| format!("{path:?}: {why}");
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(at("must be an absolute path".into()));
        }
        let resolved = std::fs::canonicalize(given).map_err(|e| at(e.to_string()))?;
        let meta = std::fs::metadata(&resolved).map_err(|e| at(e.to_string()))?;
        if meta.is_dir() {
            return Err(at("is a directory, not an OpenSSH client".into()));
        }
        if !meta.is_file() {
            return Err(at("is not a regular file".into()));
        }
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(at(format!(
                "is not executable (mode {:o})",
                meta.permissions().mode() & 0o7777
            )));
        }
        trusted_chain(&resolved).map_err(at)?;
        let version = version_of(&resolved).map_err(at)?;
        Ok(SshClient {
            configured: path.to_string(),
            program: resolved,
            version: Some(version),
        })
    }

    /// A `std` command running this client (for the synchronous cleanup).
    pub fn std_command(&self) -> std::process::Command {
        std::process::Command::new(&self.program)
    }

    /// A Tokio command running this client.
    pub fn command(&self) -> tokio::process::Command {
        tokio::process::Command::new(&self.program)
    }
}

/// The client and every directory above it belong to root or this user and
/// are writable by no one else (a world-writable directory only with its
/// sticky bit, as `/tmp` has it): whoever could replace the client would run
/// with the installation's keys.
fn trusted_chain(resolved: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let uid = crate::audit::current_uid();
    let mut at = Some(resolved);
    while let Some(path) = at {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let owner_ok = meta.uid() == 0 || meta.uid() == uid;
        let sticky = meta.is_dir() && meta.mode() & 0o1000 != 0;
        let writable = meta.mode() & 0o022 != 0 && !sticky;
        if !owner_ok || writable {
            return Err(format!(
                "{} (owner uid {}, mode {:o}) could be replaced by another user; \
                 it and every directory above it must belong to root or this user and be writable by no one else",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        at = path.parent();
    }
    Ok(())
}

/// Run `<client> -V` (no input, a bound, its whole process group killed at
/// the bound; output to a file, so that a program that forks cannot hold a
/// pipe open) and return its banner when it is OpenSSH's.
fn version_of(program: &Path) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let mut out = tempfile::tempfile().map_err(|e| format!("cannot run it: {e}"))?;
    let mut child = std::process::Command::new(program)
        .arg("-V")
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().map_err(|e| format!("cannot run it: {e}"))?)
        .stderr(out.try_clone().map_err(|e| format!("cannot run it: {e}"))?)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < VERSION_BOUND => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                kill_group(&child);
                let _ = child.wait();
                return Err(format!(
                    "`-V` did not answer within {} s; an OpenSSH client prints its version at once",
                    VERSION_BOUND.as_secs()
                ));
            }
        }
    };
    // Whatever it left running goes with its group.
    kill_group(&child);
    let mut text = String::new();
    out.rewind().map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    out.take(VERSION_OUTPUT)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    text.push_str(String::from_utf8_lossy(&bytes).trim());
    let banner = text.lines().next().unwrap_or_default().to_string();
    let shown = crate::runtime::escape_control(&banner.chars().take(120).collect::<String>());
    let not_one = |why: &str| {
        format!(
            "is not an OpenSSH client: `{} -V` {why}; an OpenSSH client prints OpenSSH_<version>",
            program.display()
        )
    };
    if !status.success() {
        return Err(not_one(&format!("exited with {status} printing {shown:?}")));
    }
    let Some(version) = banner.strip_prefix("OpenSSH_") else {
        return Err(not_one(&if banner.is_empty() {
            "printed nothing".to_string()
        } else {
            format!("printed {shown:?}")
        }));
    };
    match parse_version(version) {
        Some(v) if v >= MIN_VERSION => Ok(banner),
        Some((major, minor)) => Err(format!(
            "is OpenSSH {major}.{minor}; the transport needs OpenSSH {}.{} or later",
            MIN_VERSION.0, MIN_VERSION.1
        )),
        None => Err(not_one(&format!("printed {shown:?}"))),
    }
}

/// Kill the process group `child` leads (it was started as its own group).
fn kill_group(child: &std::process::Child) {
    let group = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
}

/// `9.2p1 Debian...` as `(9, 2)`.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, rest) = text.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("9.2p1 Debian-2+deb12u10"), Some((9, 2)));
        assert_eq!(parse_version("7.3"), Some((7, 3)));
        assert_eq!(parse_version("10.0p2"), Some((10, 0)));
        assert_eq!(parse_version("x.2"), None);
        assert_eq!(parse_version("9"), None);
        assert!(parse_version("7.2p1").unwrap() < MIN_VERSION);
    }
}
