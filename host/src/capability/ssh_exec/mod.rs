//! The `ssh-exec` capability: run an argument vector on a host the installation
//! granted, by alias.
//!
//! - [`grant`]: the typed grant read from the installation (identity and
//!   known-hosts files, connect timeout, each alias's address, port, user and
//!   Node.js) and the [`grant::ExecBounds`] of every exec.
//! - [`backend`]: where an allowed exec goes, chosen once when the driver is
//!   opened: [`live::LiveSsh`] (the hosts), [`record::Recording`] (the hosts,
//!   recorded) or [`record::Replay`] (a recording alone).
//! - [`config`]: the private `ssh_config` with the fixed options.
//! - [`client`]: the OpenSSH client the transport runs, and the check of one
//!   an installation names; `transport::master`: a control master run with it, and
//!   each exec a mux session over its socket, opened in this process.
//! - `host.rs`: the WIT `Host` implementation, which checks the grant right
//!   before every effect and writes the audit records.
//!
//! One exec crosses these as: an [`ExecAsk`] (what the component asked), the
//! grant's check, the world's [`Admission`], which refuses it or returns
//! [`Admitted`] (what runs, and how: its audit fields, output sink, open
//! stdin and worker), and an [`ExecRun`] (the admitted exec with its host
//! and bound) that the [`ExecBackend`] runs.
//!
//! A driver names hosts by alias and never sees an address, a key or a file.

pub mod backend;
pub mod grant;
mod host;
pub mod record;
pub mod seal;
mod transport;

pub use transport::{client, config, live};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

pub use backend::{
    ExecBackend, ExecError, ExecOutput, ExecRun, InputStream, OutputSink, OutputStream, Serve,
};
pub use client::{ClientError, SshClient};
pub use grant::{
    Credential, ExecBounds, ExecPolicy, GrantError, HostGrant, HostKeys, LocalFileError, SshGrant,
};
pub use host::interpreter_of;
pub use seal::{MAX_COMMAND_LINE, command_line_len};
pub use transport::master::remote_command;

use super::Scope;
use occ_ssh_target::digest::Sha256;

/// The generated bindings of the `ssh-exec` interface, shared with the worlds
/// that import it.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        interfaces: "import occ:compute/ssh-exec@0.2.0;",
        imports: { default: async },
    });

    /// `occ:compute/ssh-exec@0.3.0`: `run`, a shipped program by name. Its
    /// types are 0.2.0's, so both versions share one Rust type for each.
    pub(crate) mod v0_3 {
        wasmtime::component::bindgen!({
            path: ["../wit/0.2.0", "../wit/0.3.0"],
            interfaces: "import occ:compute/ssh-exec@0.3.0;",
            imports: { default: async },
            with: {
                "occ:compute/ssh-exec@0.2.0": super::occ::compute::ssh_exec,
            },
        });
    }
}

/// Where execs go: the hosts, the hosts with a recording, or a recording alone.
#[derive(Debug, Clone, Default)]
pub enum SshMode {
    /// Run on the granted hosts.
    #[default]
    Live,
    /// Run on the granted hosts and append each exec to this file.
    Record(PathBuf),
    /// Answer each exec from this recording; connect to nothing.
    Replay(PathBuf),
}

/// The capability as opened for one driver: its grant and its backend, shared
/// by every call.
pub struct SshExec {
    grant: SshGrant,
    backend: Box<dyn ExecBackend>,
    /// The programs the component ships, by name ([`SHIPPED_HELPER`] for a
    /// driver's helper): their exact text, which `run` (WIT 0.3.0) runs, its
    /// SHA-256 and whether the policy approves it, decided once, at load, so
    /// that a run of one of them is neither hashed nor compared again.
    shipped: BTreeMap<String, Shipped>,
}

/// One program a component ships.
#[derive(Debug, Clone)]
struct Shipped {
    text: Vec<u8>,
    sha256: Sha256,
    approved: bool,
}

/// Why the SSH capability cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The private control directory cannot be prepared.
    #[error("cannot prepare ssh: {0}")]
    Prepare(std::io::Error),
    /// The recording cannot be created.
    #[error("ssh recording {}: {source}", path.display())]
    Recording {
        /// Where it was to be written.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The recording to replay cannot be read.
    #[error(transparent)]
    Replay(#[from] record::ReplayError),
}

/// The name a driver's shipped helper is approved under in
/// [`SshExec::with_shipped`] and run by.
pub use occ_ssh_target::programs::HELPER as SHIPPED_HELPER;

impl std::fmt::Debug for SshExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshExec")
            .field("hosts", &self.grant.hosts.keys())
            .field("backend", &self.backend.kind())
            .finish()
    }
}

impl SshExec {
    /// Open the capability over `grant` in `mode`.
    pub fn open(grant: SshGrant, mode: &SshMode) -> Result<SshExec, OpenError> {
        let backend: Box<dyn ExecBackend> = match mode {
            SshMode::Live => {
                Box::new(live::LiveSsh::new(grant.clone()).map_err(OpenError::Prepare)?)
            }
            SshMode::Record(path) => {
                let live = live::LiveSsh::new(grant.clone()).map_err(OpenError::Prepare)?;
                Box::new(record::Recording::create(live, path).map_err(|source| {
                    OpenError::Recording {
                        path: path.clone(),
                        source,
                    }
                })?)
            }
            SshMode::Replay(path) => Box::new(record::Replay::load(path)?),
        };
        Ok(SshExec {
            grant,
            backend,
            shipped: BTreeMap::new(),
        })
    }

    /// Keep the programs the component ships (`(name, text)`), the texts
    /// `run` runs, hash each once and decide, once, which of them the policy
    /// approves. A run of a shipped program is then known by its name; an
    /// exec carrying one of them byte for byte (WIT 0.2.0) by its text. A
    /// program the policy does not approve is still refused at each exec with
    /// the reason, as any other text is.
    pub fn with_shipped<'a>(
        mut self,
        programs: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> SshExec {
        for (name, text) in programs {
            let sha256 = Sha256::of(text);
            let approved = self.grant.policy.approves(name, &sha256);
            self.shipped.insert(
                name.to_string(),
                Shipped {
                    text: text.to_vec(),
                    sha256,
                    approved,
                },
            );
        }
        self
    }

    /// Whether the component ships `name` and the policy approves it.
    pub fn ships_approved(&self, name: &str) -> bool {
        self.shipped.get(name).is_some_and(|s| s.approved)
    }

    /// The text of the program the component ships as `name`, when the
    /// policy approves it.
    pub fn approved_text(&self, name: &str) -> Option<&[u8]> {
        self.shipped
            .get(name)
            .filter(|s| s.approved)
            .map(|s| s.text.as_slice())
    }

    /// The program the component ships as `name` and its SHA-256, taken at
    /// load.
    pub fn shipped(&self, name: &str) -> Option<(&[u8], &Sha256)> {
        self.shipped
            .get(name)
            .map(|s| (s.text.as_slice(), &s.sha256))
    }

    /// Whether `text` is the approved program the component ships as `name`
    /// (a WIT 0.2.0 exec carries the text; a 0.3.0 run names it).
    fn is_shipped_approved(&self, name: &str, text: &[u8]) -> bool {
        self.shipped
            .get(name)
            .is_some_and(|s| s.approved && s.text == text)
    }

    /// The names of the programs the component ships, sorted.
    pub fn shipped_names(&self) -> Vec<&str> {
        self.shipped.keys().map(String::as_str).collect()
    }

    /// The argument vector and stdin that run the program the component
    /// ships as `program` with `args` (and `stdin`) on `alias`: WIT 0.3.0's
    /// `run`, built from the text the host read from the component at load,
    /// so that no program text crosses the boundary (the helper's stdin is
    /// that text itself, not a copy). The exec then goes through the same
    /// checks as any other, the policy's included.
    pub(crate) fn program_exec<'a>(
        &'a self,
        alias: &str,
        program: &str,
        args: Vec<String>,
        stdin: &'a [u8],
    ) -> Result<(Vec<String>, &'a [u8]), ExecError> {
        let Some((text, _)) = self.shipped(program) else {
            let shown = crate::runtime::escape_control_head(program, 64);
            let ships = self.shipped_names();
            return Err(ExecError::Refused(if ships.is_empty() {
                format!("the component ships no program {shown:?}: it ships none")
            } else {
                format!(
                    "the component ships no program {shown:?} (it ships {})",
                    ships.join(", ")
                )
            }));
        };
        match &self.grant.policy {
            ExecPolicy::NodeHelper { .. } => {
                if program != SHIPPED_HELPER {
                    return Err(ExecError::Refused(format!(
                        "on {alias} only the helper runs, not {:?}",
                        crate::runtime::escape_control_head(program, 64)
                    )));
                }
                if !stdin.is_empty() {
                    return Err(ExecError::Refused(format!(
                        "the helper reads itself from stdin: run it with no stdin, not {} bytes",
                        stdin.len()
                    )));
                }
                let Some(host) = self.grant.hosts.get(alias) else {
                    return Err(ExecError::UnknownHost(alias.to_string()));
                };
                let mut argv = vec![host.node_path.clone(), "-".to_string()];
                argv.extend(args);
                Ok((argv, text))
            }
            ExecPolicy::PinnedScripts { .. } => {
                let script = std::str::from_utf8(text).map_err(|_| {
                    ExecError::Refused(format!(
                        "script {:?} is not UTF-8 text",
                        crate::runtime::escape_control_head(program, 64)
                    ))
                })?;
                let interpreter = interpreter_of(script).unwrap_or_default();
                let mut argv = vec![
                    interpreter.to_string(),
                    "-c".to_string(),
                    script.to_string(),
                    program.to_string(),
                ];
                argv.extend(args);
                Ok((argv, stdin))
            }
        }
    }

    /// The grant.
    pub fn grant(&self) -> &SshGrant {
        &self.grant
    }

    /// `live`, `recording` or `replay`.
    pub fn backend_kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Whether execs are answered without any host.
    pub fn is_offline(&self) -> bool {
        self.backend.is_offline()
    }
}

/// Receives each complete stdout line of a running exec, with its host alias.
pub type LineSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// One exec the grant allowed, as a world's [`Admission`] sees it: what the
/// component asked for.
#[derive(Debug, Clone, Copy)]
pub struct ExecAsk<'a> {
    /// The granted alias.
    pub alias: &'a str,
    /// The argument vector the component asked for.
    pub argv: &'a [String],
    /// Its standard input.
    pub stdin: &'a [u8],
    /// The local root streamed after `stdin` (as the `local-workspace` WIT
    /// names it), for an upload.
    pub streamed: Option<&'a str>,
}

/// A world's say over each exec of one call, after the grant allowed it,
/// decided once per exec: it refuses the exec (the reason names what was
/// refused), or says all of what runs and how ([`Admitted`]). Each world
/// implements it once for the execs of a call; nothing after it reads the
/// argument vector again.
pub trait Admission: Send + Sync {
    /// Refuse `ask`, or say what runs: the argument vector, what the audit
    /// names it by, where its output streams, its open stdin and whether a
    /// long-lived worker answers it.
    fn admit(&self, ask: ExecAsk<'_>) -> Result<Admitted, String>;
}

/// What a world's admission lets run, and how: the whole plan of one exec.
pub struct Admitted {
    /// The argument vector that runs: the component's with what the host
    /// writes for the call, an envelope of the trusted installation's
    /// settings and the call's own subjects, which the approved programs act
    /// on instead of anything the component chose.
    pub argv: Vec<String>,
    /// What the exec's audit records name it by (`operation`, and `script`
    /// for a pinned script), read where the admission read the request, so
    /// that an auditor sees which operation ran without the arguments, which
    /// the log keeps only as a length and SHA-256 once they are long.
    pub audit: serde_json::Map<String, serde_json::Value>,
    /// Where its output streams as it comes, when it is the caller's; none
    /// collects it (up to the grant's cap) for the component.
    pub output: Option<OutputSink>,
    /// An open standard input that follows the exec's stdin: what a caller
    /// writes while the command runs. Taken only by an exec whose output
    /// streams and whose stdin streams nothing else, and it ends when that
    /// output has ended: nobody reads a finished command's input.
    pub input: Option<InputStream<'static>>,
    /// A long-lived worker may answer it instead of a run of its own
    /// ([`Serve`]); taken only by a command, or by an exec that streams
    /// neither its input nor its output.
    pub serve: Option<Serve>,
}

impl Admitted {
    /// `argv` named by `audit`, run on a session of its own with its output
    /// collected.
    pub fn new(argv: Vec<String>, audit: serde_json::Map<String, serde_json::Value>) -> Admitted {
        Admitted {
            argv,
            audit,
            output: None,
            input: None,
            serve: None,
        }
    }
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted")
            .field("argv", &self.argv)
            .field("audit", &self.audit)
            .field("output", &self.output.is_some())
            .field("input", &self.input.is_some())
            .field("serve", &self.serve.is_some())
            .finish()
    }
}

/// The capability's state for one call.
pub struct SshExecState {
    exec: Arc<SshExec>,
    scope: Scope,
    lines: LineSink,
    admission: Arc<dyn Admission>,
}

impl SshExecState {
    /// State for one call of `scope`, with stdout lines going to `lines` and
    /// each exec, after the grant, through the world's `admission`.
    pub fn new(
        exec: Arc<SshExec>,
        scope: Scope,
        lines: LineSink,
        admission: Arc<dyn Admission>,
    ) -> SshExecState {
        SshExecState {
            exec,
            scope,
            lines,
            admission,
        }
    }
}

struct HasSshExec;

impl HasData for HasSshExec {
    type Data<'a> = &'a mut SshExecState;
}

/// Link `occ:compute/ssh-exec`, at every version this host serves (0.2.0's
/// `exec` and 0.3.0's `run`), with `get` projecting the store's data onto the
/// call's [`SshExecState`].
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut SshExecState,
) -> wasmtime::Result<()> {
    bindings::occ::compute::ssh_exec::add_to_linker::<T, HasSshExec>(linker, get)?;
    bindings::v0_3::occ::compute0_3_0::ssh_exec::add_to_linker::<T, HasSshExec>(linker, get)
}

#[cfg(test)]
mod tests;
