//! The sandbox configuration: OpenClaw's `agents.defaults.sandbox` block, as
//! JSON (`{"agents": {"defaults": {"sandbox": {...}}}}`).
//!
//! Parsing is closed: every object admits only OpenClaw's keys, and every error
//! names the key path from `agents`. Keys that belong to other backends are
//! accepted with a warning that they do not apply (`docker`, `prune`, and the
//! browser's settings), except where ignoring them would surprise: mounts
//! (`docker.binds`) and browser sandboxing (`browser.enabled`) are refused.
//!
//! Defaults are the spec's: `ssh.command` `ssh`, `ssh.workspaceRoot`
//! `/tmp/openclaw-sandboxes`, `ssh.strictHostKeyChecking` and
//! `ssh.updateHostKeys` true; and OpenClaw's: `scope` `agent`,
//! `workspaceAccess` `none`, `mode` `off`.

use occ_ssh_target::quoted;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::model::Warning;

/// `ssh.command` when absent.
pub use occ_ssh_target::client::DEFAULT_COMMAND as DEFAULT_SSH_COMMAND;
/// `ssh.workspaceRoot` when absent.
pub use occ_ssh_target::layout::DEFAULT_WORKSPACE_ROOT;
/// The backend ids this component answers to: OpenClaw's built-in name, and the
/// name its plugin registers (`occ-ssh`), so a configuration can select either.
pub const BACKEND_IDS: &[&str] = &["ssh", "occ-ssh"];

const ROOT: &str = "agents.defaults.sandbox";

/// `mode`: which sessions OpenClaw sandboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    NonMain,
    All,
}

/// `scope` and `workspaceAccess`, as the host reads them too.
pub use occ_ssh_target::layout::Access;
pub use occ_ssh_target::scope::Scope;

/// `ssh.command`, by its form: the default client or an absolute path.
pub use occ_ssh_target::client::Command as SshCommand;

/// `ssh.target`, parsed: `user@host[:port]`.
pub use occ_ssh_target::Target;

/// `ssh`: where the sandbox lives and how to reach it. The host owns the
/// credentials; the component only checks that they are well formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    pub target: Target,
    /// The target exactly as configured: OpenClaw's config label.
    pub target_label: String,
    /// `ssh.command`: the client the host runs (it checks that it is one).
    pub command: SshCommand,
    pub workspace_root: String,
    pub strict_host_key_checking: bool,
    pub update_host_keys: bool,
}

/// The parsed and validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub mode: Mode,
    pub backend: String,
    pub scope: Scope,
    pub workspace_access: Access,
    pub ssh: Ssh,
    /// What the configuration says that does not apply here.
    pub warnings: Vec<Warning>,
}

const SANDBOX_KEYS: &[&str] = &[
    "mode",
    "backend",
    "workspaceAccess",
    "sessionToolsVisibility",
    "scope",
    "perSession",
    "workspaceRoot",
    "docker",
    "ssh",
    "browser",
    "prune",
];

const SSH_KEYS: &[&str] = &[
    "target",
    "command",
    "workspaceRoot",
    "strictHostKeyChecking",
    "updateHostKeys",
    "identityFile",
    "certificateFile",
    "knownHostsFile",
    "identityData",
    "certificateData",
    "knownHostsData",
];

/// A JSON object and the key path it sits at.
struct Object<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Object<'a> {
    fn at(path: String, value: Option<&'a Value>) -> Result<Object<'a>, Error> {
        match value {
            Some(Value::Object(map)) => Ok(Object { path, map }),
            Some(_) => Err(Error::config(&path, "must be an object")),
            None => Err(Error::config(&path, "required")),
        }
    }

    /// `path.key`, naming the key as written when it is a plain word and
    /// quoted, cut short, otherwise: a refusal stays one short line whatever
    /// a document's keys hold (control characters, dots, 10 KB names).
    fn key(&self, key: &str) -> String {
        let plain = !key.is_empty()
            && key.len() <= occ_ssh_target::MAX_QUOTED
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let key = if plain { key.to_string() } else { quoted(key) };
        if self.path.is_empty() {
            key
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Every key must be one of `allowed`; the first other key (sorted) fails.
    fn closed(&self, allowed: &[&str]) -> Result<(), Error> {
        let mut keys: Vec<&String> = self.map.keys().collect();
        keys.sort();
        match keys.into_iter().find(|k| !allowed.contains(&k.as_str())) {
            Some(unknown) => Err(Error::config(
                self.key(unknown),
                format!("unknown key (expected one of: {})", allowed.join(", ")),
            )),
            None => Ok(()),
        }
    }

    fn object(&self, key: &str) -> Result<Option<Object<'a>>, Error> {
        match self.map.get(key) {
            None => Ok(None),
            v => Object::at(self.key(key), v).map(Some),
        }
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, Error> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Error::config(self.key(key), "must be a string")),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, Error> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(Error::config(self.key(key), "must be true or false")),
        }
    }

    fn one_of<T: Copy>(&self, key: &str, choices: &[(&str, T)]) -> Result<Option<T>, Error> {
        let Some(value) = self.string(key)? else {
            return Ok(None);
        };
        choices
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, v)| Some(*v))
            .ok_or_else(|| {
                let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
                Error::config(
                    self.key(key),
                    format!(
                        "must be one of {} (found {})",
                        names.join(", "),
                        quoted(value)
                    ),
                )
            })
    }
}

impl Config {
    /// Parse and validate the configuration document.
    pub fn parse(json: &str) -> Result<Config, Error> {
        let doc: Value = serde_json::from_str(json)
            .map_err(|e| Error::config("configuration", format!("not valid JSON: {e}")))?;
        // Key paths start at `agents`, as OpenClaw names them.
        let top = match &doc {
            Value::Object(map) => Object {
                path: String::new(),
                map,
            },
            _ => return Err(Error::config("configuration", "must be an object")),
        };
        // The document holds OpenClaw's block and nothing else.
        let agents = single(&top, "agents")?;
        let defaults = single(&agents, "defaults")?;
        let sandbox = single(&defaults, "sandbox")?;
        sandbox.closed(SANDBOX_KEYS)?;
        let mut warnings = Vec::new();

        let mode = sandbox
            .one_of(
                "mode",
                &[
                    ("off", Mode::Off),
                    ("non-main", Mode::NonMain),
                    ("all", Mode::All),
                ],
            )?
            .unwrap_or(Mode::Off);
        if mode == Mode::Off {
            warnings.push(Warning::new(
                "sandbox-off",
                format!(
                    "{ROOT}.mode is \"off\": OpenClaw sandboxes no session with this configuration"
                ),
            ));
        }
        let backend = match sandbox.string("backend")? {
            None => BACKEND_IDS[0].to_string(),
            Some(b) => {
                let id = b.trim().to_lowercase();
                if !BACKEND_IDS.contains(&id.as_str()) {
                    return Err(Error::config(
                        sandbox.key("backend"),
                        format!(
                            "this component is the SSH backend (\"ssh\", or \"occ-ssh\" as a plugin); found {}",
                            quoted(b)
                        ),
                    ));
                }
                id
            }
        };
        let legacy_per_session = sandbox.boolean("perSession")?;
        let scope = sandbox
            .one_of("scope", Scope::NAMES)?
            .unwrap_or(Scope::default_for(legacy_per_session));
        let workspace_access = sandbox
            .one_of("workspaceAccess", Access::NAMES)?
            .unwrap_or(Access::DEFAULT);
        sandbox.one_of("sessionToolsVisibility", &[("spawned", ()), ("all", ())])?;
        sandbox.string("workspaceRoot")?;

        if let Some(docker) = sandbox.object("docker")? {
            if let Some(binds) = docker.map.get("binds")
                && binds.as_array().is_none_or(|b| !b.is_empty())
            {
                return Err(Error::config(
                    docker.key("binds"),
                    "the ssh backend mounts nothing into the sandbox; remove the binds",
                ));
            }
            if !docker.map.is_empty() {
                warnings.push(Warning::new(
                    "does-not-apply",
                    format!("{}.* does not apply to the ssh backend", docker.path),
                ));
            }
        }
        if let Some(browser) = sandbox.object("browser")? {
            if browser.boolean("enabled")? == Some(true) {
                return Err(Error::config(
                    browser.key("enabled"),
                    "browser sandboxing is not supported on the ssh backend",
                ));
            }
            if browser.map.keys().any(|k| k != "enabled") {
                warnings.push(Warning::new(
                    "does-not-apply",
                    format!("{}.* does not apply to the ssh backend", browser.path),
                ));
            }
        }
        if sandbox.object("prune")?.is_some_and(|p| !p.map.is_empty()) {
            warnings.push(Warning::new(
                "does-not-apply",
                format!(
                    "{ROOT}.prune does not apply to the ssh backend: a remote workspace lives until it is removed or recreated"
                ),
            ));
        }

        let ssh = Object::at(sandbox.key("ssh"), sandbox.map.get("ssh"))?;
        let ssh = parse_ssh(&ssh)?;
        Ok(Config {
            mode,
            backend,
            scope,
            workspace_access,
            ssh,
            warnings,
        })
    }
}

/// `parent.<key>`, which must be the only key of `parent`.
fn single<'a>(parent: &Object<'a>, key: &str) -> Result<Object<'a>, Error> {
    parent.closed(&[key])?;
    Object::at(parent.key(key), parent.map.get(key))
}

fn parse_ssh(ssh: &Object<'_>) -> Result<Ssh, Error> {
    ssh.closed(SSH_KEYS)?;
    let target_label = ssh
        .string("target")?
        .ok_or_else(|| Error::config(ssh.key("target"), "required: user@host[:port]"))?;
    let target =
        occ_ssh_target::parse(target_label).map_err(|why| Error::config(ssh.key("target"), why))?;
    // The form only: whether the path is an OpenSSH client the host checks,
    // before it connects, and it runs that client whatever this says.
    let command = occ_ssh_target::client::parse_command(ssh.string("command")?)
        .map_err(|why| Error::config(ssh.key("command"), why))?;
    let workspace_root = match ssh.string("workspaceRoot")? {
        None => DEFAULT_WORKSPACE_ROOT.to_string(),
        Some(root) => occ_ssh_target::layout::normalize_workspace_root(root)
            .map_err(|why| Error::config(ssh.key("workspaceRoot"), why))?,
    };
    for key in ["identityFile", "certificateFile", "knownHostsFile"] {
        if let Some(path) = ssh.string(key)? {
            check_local_path(path).map_err(|why| Error::config(ssh.key(key), why))?;
        }
    }
    for key in ["identityData", "certificateData", "knownHostsData"] {
        check_secret_input(ssh, key)?;
    }
    Ok(Ssh {
        target,
        target_label: target_label.trim().to_string(),
        command,
        workspace_root,
        strict_host_key_checking: ssh.boolean("strictHostKeyChecking")?.unwrap_or(true),
        update_host_keys: ssh.boolean("updateHostKeys")?.unwrap_or(true),
    })
}

/// A local file the host reads (`~` is the host's home): nonempty, without line
/// breaks or double quotes (it is written into an ssh_config line).
fn check_local_path(path: &str) -> Result<(), String> {
    if path.trim().is_empty() {
        return Err("must be a nonempty path".into());
    }
    if path
        .chars()
        .any(|c| c == '\r' || c == '\n' || c == '"' || c == '\0')
    {
        return Err("must not contain line breaks, NUL or double quotes".into());
    }
    Ok(())
}

/// An inline string (the host writes it to a private file) or a SecretRef
/// `{"source": "env", "provider": "default", "id": "NAME"}` the host resolves.
fn check_secret_input(ssh: &Object<'_>, key: &str) -> Result<(), Error> {
    match ssh.map.get(key) {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Object(_)) => {
            let r = Object::at(ssh.key(key), ssh.map.get(key))?;
            r.closed(&["source", "provider", "id"])?;
            r.one_of("source", &[("env", ()), ("file", ()), ("exec", ())])?
                .ok_or_else(|| Error::config(r.key("source"), "required"))?;
            match r.string("id")? {
                Some(id) if !id.is_empty() => Ok(()),
                _ => Err(Error::config(r.key("id"), "required: a nonempty string")),
            }
        }
        Some(_) => Err(Error::config(
            ssh.key(key),
            "must be a string or a SecretRef {source, provider, id}",
        )),
    }
}

#[cfg(test)]
mod tests;
