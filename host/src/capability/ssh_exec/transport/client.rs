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
    pub fn verify(path: &str) -> Result<SshClient, ClientError> {
        let configured = || path.to_string();
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(ClientError::NotAbsolute {
                configured: configured(),
            });
        }
        let resolved = std::fs::canonicalize(given).map_err(|source| ClientError::Resolve {
            configured: configured(),
            source,
        })?;
        let meta = std::fs::metadata(&resolved).map_err(|source| ClientError::Stat {
            configured: configured(),
            source,
        })?;
        if meta.is_dir() {
            return Err(ClientError::Directory {
                configured: configured(),
            });
        }
        if !meta.is_file() {
            return Err(ClientError::NotAFile {
                configured: configured(),
            });
        }
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(ClientError::NotExecutable {
                configured: configured(),
                mode: meta.permissions().mode() & 0o7777,
            });
        }
        trusted_chain(path, &resolved)?;
        let version = version_of(path, &resolved)?;
        Ok(SshClient {
            configured: configured(),
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

/// Why a client an installation names is not one this host runs. Every
/// message starts with the path as the installation wrote it.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The path is relative: what it names would depend on the working
    /// directory.
    #[error("{configured:?}: must be an absolute path")]
    NotAbsolute {
        /// The path as configured.
        configured: String,
    },
    /// The path cannot be resolved (it does not exist, or a directory on
    /// the way cannot be searched).
    #[error("{configured:?}: {source}")]
    Resolve {
        /// The path as configured.
        configured: String,
        /// Why.
        source: std::io::Error,
    },
    /// The resolved client cannot be examined.
    #[error("{configured:?}: {source}")]
    Stat {
        /// The path as configured.
        configured: String,
        /// Why.
        source: std::io::Error,
    },
    /// It names a directory.
    #[error("{configured:?}: is a directory, not an OpenSSH client")]
    Directory {
        /// The path as configured.
        configured: String,
    },
    /// It names a device, a pipe or a socket.
    #[error("{configured:?}: is not a regular file")]
    NotAFile {
        /// The path as configured.
        configured: String,
    },
    /// No one may execute it.
    #[error("{configured:?}: is not executable (mode {mode:o})")]
    NotExecutable {
        /// The path as configured.
        configured: String,
        /// Its mode's permission bits.
        mode: u32,
    },
    /// The client or a directory above it cannot be examined.
    #[error("{configured:?}: {}: {source}", path.display())]
    ChainStat {
        /// The path as configured.
        configured: String,
        /// The client or the directory that cannot be examined.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The client or a directory above it belongs to another user, or others
    /// may write it.
    #[error(
        "{configured:?}: {} (owner uid {owner}, mode {mode:o}) could be replaced by another user; \
         it and every directory above it must belong to root or this user and be writable by no one else",
        path.display()
    )]
    Replaceable {
        /// The path as configured.
        configured: String,
        /// The client or the directory at fault.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode's permission bits.
        mode: u32,
    },
    /// `<client> -V` cannot be started, or its output cannot be captured.
    #[error("{configured:?}: cannot run it: {source}")]
    Run {
        /// The path as configured.
        configured: String,
        /// Why.
        source: std::io::Error,
    },
    /// `<client> -V` did not exit within its bound (`VERSION_BOUND`).
    #[error(
        "{configured:?}: `-V` did not answer within {} s; an OpenSSH client prints its version at once",
        VERSION_BOUND.as_secs()
    )]
    NoAnswer {
        /// The path as configured.
        configured: String,
    },
    /// What `<client> -V` printed cannot be read back.
    #[error("{configured:?}: {source}")]
    Output {
        /// The path as configured.
        configured: String,
        /// Why.
        source: std::io::Error,
    },
    /// `<client> -V` failed.
    #[error(
        "{configured:?}: is not an OpenSSH client: `{} -V` exited with {status} printing {shown:?}; \
         an OpenSSH client prints OpenSSH_<version>",
        program.display()
    )]
    Failed {
        /// The path as configured.
        configured: String,
        /// The resolved client.
        program: PathBuf,
        /// How it exited.
        status: std::process::ExitStatus,
        /// The first line it printed, shortened and escaped.
        shown: String,
    },
    /// `<client> -V` succeeded and printed nothing.
    #[error(
        "{configured:?}: is not an OpenSSH client: `{} -V` printed nothing; \
         an OpenSSH client prints OpenSSH_<version>",
        program.display()
    )]
    Silent {
        /// The path as configured.
        configured: String,
        /// The resolved client.
        program: PathBuf,
    },
    /// `<client> -V` printed something other than an OpenSSH banner.
    #[error(
        "{configured:?}: is not an OpenSSH client: `{} -V` printed {shown:?}; \
         an OpenSSH client prints OpenSSH_<version>",
        program.display()
    )]
    NotOpenSsh {
        /// The path as configured.
        configured: String,
        /// The resolved client.
        program: PathBuf,
        /// The first line it printed, shortened and escaped.
        shown: String,
    },
    /// It is an OpenSSH older than the transport needs (`MIN_VERSION`).
    #[error(
        "{configured:?}: is OpenSSH {major}.{minor}; the transport needs OpenSSH {}.{} or later",
        MIN_VERSION.0,
        MIN_VERSION.1
    )]
    TooOld {
        /// The path as configured.
        configured: String,
        /// Its major version.
        major: u32,
        /// Its minor version.
        minor: u32,
    },
}

/// The client and every directory above it belong to root or this user and
/// are writable by no one else (a world-writable directory only with its
/// sticky bit, as `/tmp` has it): whoever could replace the client would run
/// with the installation's keys. `configured` is the path as the installation
/// wrote it, for the error.
fn trusted_chain(configured: &str, resolved: &Path) -> Result<(), ClientError> {
    use std::os::unix::fs::MetadataExt;
    let uid = crate::uid::current_uid();
    let mut at = Some(resolved);
    while let Some(path) = at {
        let meta = std::fs::metadata(path).map_err(|source| ClientError::ChainStat {
            configured: configured.to_string(),
            path: path.to_path_buf(),
            source,
        })?;
        let owner_ok = meta.uid() == 0 || meta.uid() == uid;
        let sticky = meta.is_dir() && meta.mode() & 0o1000 != 0;
        let writable = meta.mode() & 0o022 != 0 && !sticky;
        if !owner_ok || writable {
            return Err(ClientError::Replaceable {
                configured: configured.to_string(),
                path: path.to_path_buf(),
                owner: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
        at = path.parent();
    }
    Ok(())
}

/// Run `<client> -V` (no input, a bound, its whole process group killed at
/// the bound; output to a file, so that a program that forks cannot hold a
/// pipe open) and return its banner when it is OpenSSH's. `configured` is the
/// path as the installation wrote it, for the error.
fn version_of(configured: &str, program: &Path) -> Result<String, ClientError> {
    use std::os::unix::process::CommandExt;
    let run = |source| ClientError::Run {
        configured: configured.to_string(),
        source,
    };
    let mut out = tempfile::tempfile().map_err(run)?;
    let mut child = std::process::Command::new(program)
        .arg("-V")
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().map_err(run)?)
        .stderr(out.try_clone().map_err(run)?)
        .process_group(0)
        .spawn()
        .map_err(run)?;
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
                return Err(ClientError::NoAnswer {
                    configured: configured.to_string(),
                });
            }
        }
    };
    // Whatever it left running goes with its group.
    kill_group(&child);
    let output = |source| ClientError::Output {
        configured: configured.to_string(),
        source,
    };
    let mut text = String::new();
    out.rewind().map_err(output)?;
    let mut bytes = Vec::new();
    out.take(VERSION_OUTPUT)
        .read_to_end(&mut bytes)
        .map_err(output)?;
    text.push_str(String::from_utf8_lossy(&bytes).trim());
    let banner = text.lines().next().unwrap_or_default().to_string();
    let shown = crate::runtime::escape_control_head(&banner, 120);
    let not_one = || ClientError::NotOpenSsh {
        configured: configured.to_string(),
        program: program.to_path_buf(),
        shown: shown.clone(),
    };
    if !status.success() {
        return Err(ClientError::Failed {
            configured: configured.to_string(),
            program: program.to_path_buf(),
            status,
            shown,
        });
    }
    let Some(version) = banner.strip_prefix("OpenSSH_") else {
        return Err(if banner.is_empty() {
            ClientError::Silent {
                configured: configured.to_string(),
                program: program.to_path_buf(),
            }
        } else {
            not_one()
        });
    };
    match parse_version(version) {
        Some(v) if v >= MIN_VERSION => Ok(banner),
        Some((major, minor)) => Err(ClientError::TooOld {
            configured: configured.to_string(),
            major,
            minor,
        }),
        None => Err(not_one()),
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
