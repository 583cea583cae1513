//! The runtime's lifecycle (describe, ensure, remove, recreate), seeding, and
//! the refreshes of the scope's skills and staged inputs before each operation.

use serde_json::Value;

use super::{Backend, Effects, FS_TIMEOUT_MS, SEED_TIMEOUT_MS, exec_error};
use crate::error::{Code, Error};
use crate::model::{Ensured, Level, Root, Seeding};
use crate::scripts::{self, Failure, Run, WORKSPACE};
use occ_ssh_target::envelope::{
    ArgValue, INPUTS, INPUTS_ABSENT, MAX_STAGED_NAMES, SKILLS, is_staged_input,
};

impl<'e, E: Effects> Backend<'e, E> {
    /// OpenClaw's refresh of the scope's materialized skills, as its SSH
    /// backend runs it before a command, a shell script and each filesystem
    /// operation (with workspaceAccess `rw`): the remote
    /// `<workspace>/.openclaw/sandbox-skills` becomes a copy of the local
    /// skills workspace, or empty while there is none. The workspace is
    /// seeded first if it does not exist.
    pub fn refresh_skills(&mut self) -> Result<(), Error> {
        if !self.skills {
            return Ok(());
        }
        const WHAT: &str = "refresh skills";
        let target = self.target().to_string();
        let summary = self
            .effects
            .summary(Root::Skills)
            .map_err(|e| exec_error(e, WHAT, &target))?;
        let run = Self::workspace(SKILLS, &[]);
        self.seeded(WHAT, |b| {
            if summary.directories == 0 {
                b.effects.exec(&run, &[], FS_TIMEOUT_MS)
            } else {
                b.effects.upload(Root::Skills, &run, SEED_TIMEOUT_MS)
            }
        })?;
        Ok(())
    }

    /// The files OpenClaw staged for the scope's turns since the workspace
    /// was seeded (a user's inbound media, in the local workspace's
    /// `media/inbound/openclaw-staged-<id>/`, which the agent is told to
    /// read at that relative path) reach the remote workspace before each
    /// operation: each staged directory the remote lacks is sent whole and
    /// put in place; one the remote has is left as it is. Without staged
    /// inputs nothing runs on the target.
    pub fn refresh_inputs(&mut self) -> Result<(), Error> {
        const WHAT: &str = "refresh staged inputs";
        let target = self.target().to_string();
        let local: Vec<String> = self
            .effects
            .entries(Root::Inputs)
            .map_err(|e| exec_error(e, WHAT, &target))?
            .into_iter()
            .filter(|n| is_staged_input(n))
            .collect();
        let mut absent = Vec::new();
        for asked in local.chunks(MAX_STAGED_NAMES) {
            let list = asked.join(",");
            let run = Self::workspace(INPUTS_ABSENT, &[ArgValue::Staged(&list)]);
            let out = self.seeded(WHAT, |b| b.effects.exec(&run, &[], FS_TIMEOUT_MS))?;
            let answer = scripts::json(&out, WHAT)?;
            let names = answer["absent"].as_array().ok_or_else(|| {
                Error::new(
                    Code::Remote,
                    format!("{WHAT}: {target} answered no list of absent directories"),
                )
            })?;
            // Only what was asked about is sent, whatever the answer holds.
            absent.extend(
                asked
                    .iter()
                    .filter(|n| names.iter().any(|a| a.as_str() == Some(n.as_str())))
                    .cloned(),
            );
        }
        if absent.is_empty() {
            return Ok(());
        }
        let run = Self::workspace(INPUTS, &[]);
        self.seeded(WHAT, |b| {
            b.effects
                .upload_entries(Root::Inputs, &absent, &run, SEED_TIMEOUT_MS)
        })?;
        Ok(())
    }

    /// Run a script and read its outcome.
    fn run(
        &mut self,
        run: &Run,
        stdin: &[u8],
        timeout_ms: u32,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let target = self.target().to_string();
        let out = self
            .effects
            .exec(run, stdin, timeout_ms)
            .map_err(|e| exec_error(e, what, &target))?;
        scripts::outcome(out, run.script.interpreter(), what, &target)
    }

    /// A runtime operation (no seeding), answered with JSON.
    fn runtime_op(
        &mut self,
        op: &str,
        args: &[ArgValue<'_>],
        stdin: &[u8],
        timeout_ms: u32,
        what: &str,
    ) -> Result<Value, Error> {
        match self.run(&Self::workspace(op, args), stdin, timeout_ms, what) {
            Ok(stdout) => scripts::json(&stdout, what),
            Err(Failure::Error(e)) => Err(e),
            Err(Failure::NoRuntime) => Err(Error::new(
                Code::Remote,
                format!("{what}: the runtime root is gone"),
            )),
        }
    }

    /// Whether the runtime root exists as a directory.
    fn exists(&mut self) -> Result<bool, Error> {
        let v = self.runtime_op("describe", &[], &[], FS_TIMEOUT_MS, "describe runtime")?;
        if v["exists"] != Value::Bool(true) {
            return Ok(false);
        }
        match v["kind"].as_str() {
            Some("directory") => Ok(true),
            kind => Err(Error::new(
                Code::Exists,
                format!(
                    "the runtime root {} on {} is a {}, not a directory; remove it or recreate the sandbox",
                    self.layout.runtime_root,
                    self.target(),
                    kind.unwrap_or("file")
                ),
            )),
        }
    }

    pub fn describe(&mut self) -> Result<crate::model::RuntimeInfo, Error> {
        let running = self.exists()?;
        Ok(self.layout.info(running))
    }

    /// Adopt the runtime root, or seed it.
    pub fn ensure(&mut self) -> Result<Ensured, Error> {
        if self.exists()? {
            return Ok(Ensured {
                runtime: self.layout.info(true),
                seeding: Seeding::Existing,
            });
        }
        let seeding = self.seed()?;
        Ok(Ensured {
            runtime: self.layout.info(true),
            seeding,
        })
    }

    /// Stage every mount from its local root and publish the stage.
    ///
    /// Each root is walked once, as it streams: a local tree that cannot
    /// be sent (a socket, a link out of it, past the grant's bounds) stops
    /// its upload, naming the path, and the stage is discarded; nothing is
    /// published, and the target is as it was.
    fn seed(&mut self) -> Result<Seeding, Error> {
        let target = self.target().to_string();
        self.effects.log(
            Level::Info,
            &format!("seeding {} on {target}", self.layout.runtime_root),
        );
        let random = self.effects.random_hex();
        let stage = self.layout.stage_name(&random);
        self.runtime_op(
            "stage",
            &[ArgValue::Stage(&stage)],
            &[],
            FS_TIMEOUT_MS,
            "stage the workspace",
        )?;
        let published = self.fill_and_publish(&stage);
        if published.is_err() {
            // The publish removes its own stage; an upload that failed leaves it.
            if let Err(e) = self.runtime_op(
                "discard",
                &[ArgValue::Stage(&stage)],
                &[],
                FS_TIMEOUT_MS,
                "discard the stage",
            ) {
                self.effects.log(
                    Level::Warn,
                    &format!("could not remove the stage {stage}: {e}"),
                );
            }
        }
        published
    }

    fn fill_and_publish(&mut self, stage: &str) -> Result<Seeding, Error> {
        let target = self.target().to_string();
        for (mount, root) in self.layout.seeds() {
            let run = Self::workspace(
                "unpack",
                &[ArgValue::Stage(stage), ArgValue::Mount(mount.name())],
            );
            let out = self
                .effects
                .upload(root, &run, SEED_TIMEOUT_MS)
                .map_err(|e| exec_error(e, "seed", &target))?;
            let made = scripts::outcome(out, WORKSPACE.interpreter(), "seed", &target).map_err(
                |f| match f {
                    Failure::Error(e) => e,
                    Failure::NoRuntime => Error::new(Code::Remote, "seed: the stage is gone"),
                },
            )?;
            // The unpack's answer counts what it made.
            if let Ok(made) = serde_json::from_slice::<Value>(&made) {
                self.effects.log(
                    Level::Info,
                    &format!(
                        "seeded {} of {} on {target}: {} files, {} bytes",
                        mount.name(),
                        self.layout.runtime_root,
                        made["files"],
                        made["bytes"]
                    ),
                );
            }
        }
        let v = self.runtime_op(
            "publish",
            &[ArgValue::Stage(stage)],
            &[],
            FS_TIMEOUT_MS,
            "publish the workspace",
        )?;
        match v["result"].as_str() {
            Some("published") => Ok(Seeding::Seeded),
            Some("adopted") => Ok(Seeding::Adopted),
            other => Err(Error::new(
                Code::Remote,
                format!("publish: unexpected answer {other:?}"),
            )),
        }
    }

    /// Delete the runtime root; false when there was none.
    pub fn remove_runtime(&mut self) -> Result<bool, Error> {
        let v = self.runtime_op(
            "remove-runtime",
            &[],
            &[],
            SEED_TIMEOUT_MS,
            "remove runtime",
        )?;
        Ok(v["removed"] == Value::Bool(true))
    }

    /// Delete the runtime root and seed it again.
    pub fn recreate(&mut self) -> Result<Ensured, Error> {
        self.remove_runtime()?;
        self.ensure()
    }
}
