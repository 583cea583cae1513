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
    ExecBackend, ExecError, ExecOutput, ExecRequest, InputStream, OutputSink, OutputStream, Serve,
};
pub use client::{ClientError, SshClient};
pub use grant::{
    Credential, ExecBounds, ExecPolicy, GrantError, HostGrant, HostKeys, LocalFileError, SshGrant,
};
pub use host::{MAX_COMMAND_LINE, command_line_len, interpreter_of};
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
        // The name as an error shows it: made only for an error.
        let shown =
            || crate::runtime::escape_control(&program.chars().take(64).collect::<String>());
        let Some((text, _)) = self.shipped(program) else {
            let shown = shown();
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
                        shown()
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
                    ExecError::Refused(format!("script {:?} is not UTF-8 text", shown()))
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

/// Chooses, per exec (the argument vector that runs, and stdin), where its
/// output streams: a sink for the execs whose output is the caller's, none for
/// the others (they collect theirs).
pub type OutputSelector = Arc<dyn Fn(&[String], &[u8]) -> Option<OutputSink> + Send + Sync>;

/// Chooses, per exec (the argument vector that runs, and its stdin), an open
/// standard input that follows `stdin`: what a caller writes while the command
/// runs. It is given only to an exec whose output streams (see
/// [`OutputSelector`]), and it ends when that output has ended: nobody reads
/// a finished command's input.
pub type InputSelector =
    Arc<dyn Fn(&[String], &[u8]) -> Option<InputStream<'static>> + Send + Sync>;

/// One exec the grant allowed, as a world's [`Admission`] sees it.
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

/// A world's say over each exec of one call, after the grant allowed it: it
/// refuses the exec (the returned reason names what was refused), or says
/// what runs ([`Admitted`]).
pub type Admission = Arc<dyn Fn(ExecAsk<'_>) -> Result<Admitted, String> + Send + Sync>;

/// What a world's admission lets run.
#[derive(Debug, Clone, PartialEq)]
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
}

/// Chooses, per admitted argument vector, whether a long-lived worker may
/// answer it instead of a run of its own ([`Serve`]); only asked for an exec
/// that streams neither its input nor its output.
pub type ServeSelector = Arc<dyn Fn(&[String]) -> Option<Serve> + Send + Sync>;

/// The capability's state for one call.
pub struct SshExecState {
    exec: Arc<SshExec>,
    scope: Scope,
    lines: LineSink,
    admission: Option<Admission>,
    output: Option<OutputSelector>,
    input: Option<InputSelector>,
    serve: Option<ServeSelector>,
}

impl SshExecState {
    /// State for one call of `scope`, with stdout lines going to `lines`.
    pub fn new(exec: Arc<SshExec>, scope: Scope, lines: LineSink) -> SshExecState {
        SshExecState {
            exec,
            scope,
            lines,
            admission: None,
            output: None,
            input: None,
            serve: None,
        }
    }

    /// Let each exec of this call through `admission` (after the grant): it
    /// refuses, or says what runs and what the audit names it by.
    pub fn with_admission(mut self, admission: Admission) -> SshExecState {
        self.admission = Some(admission);
        self
    }

    /// Stream the output of this call's execs where `select` says (see
    /// [`ExecRequest::output`]); the others collect theirs.
    pub fn with_output(mut self, select: OutputSelector) -> SshExecState {
        self.output = Some(select);
        self
    }

    /// Let a long-lived worker answer the execs `select` chooses (see
    /// [`ServeSelector`]).
    pub fn with_serve(mut self, select: ServeSelector) -> SshExecState {
        self.serve = Some(select);
        self
    }

    /// Give the execs `select` chooses an open stdin (see [`InputSelector`]).
    pub fn with_input(mut self, select: InputSelector) -> SshExecState {
        self.input = Some(select);
        self
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
mod tests {
    use super::*;

    fn exec(policy: ExecPolicy) -> SshExec {
        let dir = std::env::temp_dir().join(format!("occ-shipped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        let mut grant = SshGrant {
            policy,
            ..SshGrant::none()
        };
        grant.hosts.insert(
            "h1".into(),
            HostGrant {
                address: "192.0.2.1".into(),
                port: 22,
                user: "root".into(),
                node_path: "/opt/node/bin/node".into(),
            },
        );
        SshExec::open(grant, &SshMode::Replay(empty)).unwrap()
    }

    /// WIT 0.3.0's `run`: the host builds what runs from the text it read
    /// from the component, by the program's name; a name the component does
    /// not ship, the helper with a stdin of the component's, or another
    /// program than the helper where only the helper runs, is refused.
    #[test]
    fn run_builds_the_exec_of_a_shipped_program_from_the_hosts_own_text() {
        let helper: &[u8] = b"#!/usr/bin/env node\n";
        let drivers = exec(ExecPolicy::NodeHelper {
            approved: vec![Sha256::of(helper)],
        })
        .with_shipped([(SHIPPED_HELPER, helper)]);
        let (argv, stdin) = drivers
            .program_exec("h1", "helper", vec!["b3A=".into()], &[])
            .unwrap();
        assert_eq!(argv, ["/opt/node/bin/node", "-", "b3A="]);
        assert_eq!(stdin, helper);
        let refused = |r: Result<(Vec<String>, &[u8]), ExecError>| match r {
            Err(ExecError::Refused(m)) => m,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            refused(drivers.program_exec("h1", "/bin/sh", vec![], &[])),
            "the component ships no program \"/bin/sh\" (it ships helper)"
        );
        assert!(
            refused(drivers.program_exec("h1", "helper", vec![], b"x"))
                .contains("run it with no stdin, not 1 bytes")
        );
        assert!(matches!(
            drivers.program_exec("h9", "helper", vec![], &[]),
            Err(ExecError::UnknownHost(h)) if h == "h9"
        ));
        // A component that ships another program beside the helper still
        // runs only the helper; the refusal shows the name escaped.
        let two = exec(ExecPolicy::NodeHelper {
            approved: vec![Sha256::of(helper)],
        })
        .with_shipped([
            (SHIPPED_HELPER, helper),
            ("sh\u{1b}", b"#!/bin/sh\n".as_slice()),
        ]);
        assert_eq!(
            refused(two.program_exec("h1", "sh\u{1b}", vec![], &[])),
            "on h1 only the helper runs, not \"sh\\\\u{1b}\""
        );

        let script: &[u8] = b"#!/usr/bin/env python3\nprint(1)\n";
        let scripts = exec(ExecPolicy::PinnedScripts {
            approved: BTreeMap::from([("exec".to_string(), Sha256::of(script))]),
        })
        .with_shipped([("exec", script), ("preflight", b"#!/bin/sh\n".as_slice())]);
        let (argv, stdin) = scripts
            .program_exec("target", "exec", vec!["a".into()], b"in")
            .unwrap();
        assert_eq!(
            argv,
            [
                "python3",
                "-c",
                "#!/usr/bin/env python3\nprint(1)\n",
                "exec",
                "a"
            ]
        );
        assert_eq!(stdin, b"in");
        assert_eq!(
            refused(scripts.program_exec("target", "helper", vec![], &[])),
            "the component ships no program \"helper\" (it ships exec, preflight)"
        );
        let latin1 = exec(ExecPolicy::PinnedScripts {
            approved: BTreeMap::new(),
        })
        .with_shipped([("exec", b"#!/bin/sh\n\xe9\n".as_slice())]);
        assert_eq!(
            refused(latin1.program_exec("target", "exec", vec![], &[])),
            "script \"exec\" is not UTF-8 text"
        );
        let none = exec(ExecPolicy::PinnedScripts {
            approved: BTreeMap::new(),
        });
        assert_eq!(
            refused(none.program_exec("target", "exec\u{1b}[2J", vec![], &[])),
            "the component ships no program \"exec\\\\u{1b}[2J\": it ships none"
        );
    }

    /// Only what the policy approves is approved at load; a text that merely
    /// carries an approved name is not recognized as the shipped one.
    #[test]
    fn shipped_programs_are_approved_once_by_their_hash() {
        let helper: &[u8] = b"#!/usr/bin/env node\n";
        let approved = Sha256::of(helper);
        let helpers = exec(ExecPolicy::NodeHelper {
            approved: vec![approved.clone()],
        })
        .with_shipped([(SHIPPED_HELPER, helper)]);
        assert!(helpers.ships_approved(SHIPPED_HELPER));
        assert!(helpers.is_shipped_approved(SHIPPED_HELPER, helper));
        assert!(!helpers.is_shipped_approved(SHIPPED_HELPER, b"#!/usr/bin/env node\n "));
        let unapproved = exec(ExecPolicy::NodeHelper {
            approved: vec![Sha256::parse(&"0".repeat(64)).unwrap()],
        })
        .with_shipped([(SHIPPED_HELPER, helper)]);
        assert!(!unapproved.ships_approved(SHIPPED_HELPER));

        // Hashed once, at load: a run of the shipped helper is audited with
        // that hash; any other stdin is hashed for its own record.
        let (text, sha256) = helpers.shipped(SHIPPED_HELPER).unwrap();
        assert_eq!(sha256, &approved);
        let shipped = helpers.shipped(SHIPPED_HELPER);
        let audited = |stdin: &[u8]| host::stdin_sha256(shipped, stdin);
        assert_eq!(audited(text), approved.as_str());
        assert_eq!(audited(b"x"), occ_ssh_target::digest::sha256_hex(b"x"));
        assert_eq!(
            host::stdin_sha256(None, text),
            approved.as_str(),
            "a 0.2.0 exec carrying the text is hashed, with the same result"
        );

        let script: &[u8] = b"#!/bin/sh\nexit 0\n";
        let scripts = exec(ExecPolicy::PinnedScripts {
            approved: BTreeMap::from([("exec".to_string(), Sha256::of(script))]),
        })
        .with_shipped([("exec", script), ("workspace", script)]);
        assert!(scripts.ships_approved("exec"));
        // The same text under a name the installation does not approve.
        assert!(!scripts.ships_approved("workspace"));
        assert!(!scripts.is_shipped_approved("workspace", script));
    }

    /// A script in the vector is recorded with the hash taken at load when
    /// it is the shipped text, byte for byte; a text of the same length that
    /// differs (a hostile component's, through WIT 0.2.0) with its own.
    #[test]
    fn an_audited_script_argument_is_the_load_time_hash_only_for_the_shipped_text() {
        let text = format!("#!/usr/bin/env python3\n{}\n", "#".repeat(400));
        let forged = text.replacen('#', "x", 2);
        assert_eq!(forged.len(), text.len());
        let scripts = exec(ExecPolicy::PinnedScripts {
            approved: BTreeMap::new(),
        })
        .with_shipped([("workspace", text.as_bytes())]);
        let shipped = scripts.shipped("workspace");
        let sha = |t: &str| occ_ssh_target::digest::sha256_hex(t.as_bytes());
        for script in [&text, &forged] {
            let argv = ["python3", "-c", script, "workspace", "stat"].map(str::to_string);
            let audited = host::audited_argv(&argv, shipped);
            assert_eq!(audited[2]["sha256"], sha(script));
            assert_eq!(audited[2]["length"], script.len());
            assert_eq!(audited[4], "stat");
        }
    }
}
