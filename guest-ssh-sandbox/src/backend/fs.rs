//! The filesystem bridge (read, write, create, stat, list, mkdirp, remove,
//! rename) and what is built on it: edit, apply_patch and media reads.

use serde_json::Value;

use super::{Backend, DEFAULT_MEDIA_BYTES, Effects, MAX_FILE_BYTES};
use crate::edit;
use crate::error::{Code, Error};
use crate::media;
use crate::model::{
    CreateOutcome, DirEntry, EditResult, FileKind, FileRef, FileStat, Media, Mount, PatchResult,
    ResolvedPath, TextEdit,
};
use crate::patch::{self, Hunk};
use crate::paths::{resolve, resolve_writable};
use crate::scripts;
use occ_ssh_target::envelope::ArgValue::{self, Count, Flag, Path};

impl<'e, E: Effects> Backend<'e, E> {
    fn workspace_json(
        &mut self,
        op: &str,
        args: &[ArgValue<'_>],
        stdin: &[u8],
        what: &str,
    ) -> Result<Value, Error> {
        let out = self.workspace_op(op, args, stdin, what)?;
        scripts::json(&out, what)
    }

    /// A path an operation may change: in a writable mount, and not in one
    /// of OpenClaw's protected skills directories (`skills/`,
    /// `.agents/skills/`, `.openclaw/sandbox-skills/skills/` of each mount)
    /// while that directory exists on the target; with `descendants`
    /// (a recursive remove, a rename) not holding one either. As OpenClaw's
    /// bridge, the directory's existence is asked only for a path that lies
    /// in or above one.
    fn writable(
        &mut self,
        file: &FileRef,
        action: &str,
        descendants: bool,
    ) -> Result<ResolvedPath, Error> {
        let r = resolve_writable(&self.layout, file, action)?;
        for root in PROTECTED_SKILLS {
            let under = r.relative_path == root || r.relative_path.starts_with(&format!("{root}/"));
            let above = descendants
                && (r.relative_path.is_empty()
                    || root.starts_with(&format!("{}/", r.relative_path)));
            if !(under || above) {
                continue;
            }
            let at = ResolvedPath {
                relative_path: root.to_string(),
                ..r.clone()
            };
            if self.stat_at(&at)?.is_some() {
                return Err(Error::read_only(action, &r.container_path));
            }
        }
        Ok(r)
    }

    pub fn resolve(&self, file: &FileRef) -> Result<ResolvedPath, Error> {
        resolve(&self.layout, file, "access")
    }

    fn bound(max_bytes: Option<u64>) -> u64 {
        max_bytes.map_or(MAX_FILE_BYTES, |m| m.min(MAX_FILE_BYTES))
    }

    fn read_at(&mut self, r: &ResolvedPath, limit: u64) -> Result<Vec<u8>, Error> {
        self.workspace_op(
            "read",
            &[
                ArgValue::Mount(r.mount.name()),
                Path(&r.relative_path),
                Count(limit),
            ],
            &[],
            "read",
        )
        .map_err(|e| match e.code {
            Code::NotFound => Error::new(
                Code::NotFound,
                format!("Sandbox file not found: {}", r.container_path),
            )
            .at(&r.container_path),
            _ => e,
        })
    }

    pub fn read_file(&mut self, file: &FileRef, max_bytes: Option<u64>) -> Result<Vec<u8>, Error> {
        let r = resolve(&self.layout, file, "read files")?;
        self.read_at(&r, Self::bound(max_bytes))
    }

    fn check_size(data: &[u8], path: &str) -> Result<(), Error> {
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::new(
                Code::TooLarge,
                format!("{path}: {} bytes exceed the bridge's bound of {MAX_FILE_BYTES} bytes per write", data.len()),
            )
            .at(path));
        }
        Ok(())
    }

    fn write_at(&mut self, r: &ResolvedPath, data: &[u8], mkdir: bool) -> Result<(), Error> {
        Self::check_size(data, &r.container_path)?;
        self.workspace_op(
            "write",
            &[
                ArgValue::Mount(r.mount.name()),
                Path(&r.relative_path),
                Flag(mkdir),
            ],
            data,
            "write",
        )?;
        Ok(())
    }

    pub fn write_file(&mut self, file: &FileRef, data: &[u8], mkdir: bool) -> Result<(), Error> {
        let r = self.writable(file, "write files", false)?;
        self.write_at(&r, data, mkdir)
            .map_err(|e| e.or_read_only("write files", &r.container_path))
    }

    fn create_at(
        &mut self,
        r: &ResolvedPath,
        data: &[u8],
        mkdir: bool,
    ) -> Result<CreateOutcome, Error> {
        Self::check_size(data, &r.container_path)?;
        let v = self.workspace_json(
            "create",
            &[
                ArgValue::Mount(r.mount.name()),
                Path(&r.relative_path),
                Flag(mkdir),
            ],
            data,
            "create",
        )?;
        match v["result"].as_str() {
            Some("created") => Ok(CreateOutcome::Created),
            Some("exists") => Ok(CreateOutcome::Exists),
            other => Err(Error::new(
                Code::Remote,
                format!("create: unexpected answer {other:?}"),
            )),
        }
    }

    pub fn create_file_exclusive(
        &mut self,
        file: &FileRef,
        data: &[u8],
        mkdir: bool,
    ) -> Result<CreateOutcome, Error> {
        let r = self.writable(file, "create files", false)?;
        self.create_at(&r, data, mkdir)
            .map_err(|e| e.or_read_only("create files", &r.container_path))
    }

    pub fn mkdirp(&mut self, dir: &FileRef) -> Result<(), Error> {
        let r = self.writable(dir, "create directories", false)?;
        self.workspace_op(
            "mkdirp",
            &[ArgValue::Mount(r.mount.name()), Path(&r.relative_path)],
            &[],
            "mkdirp",
        )
        .map_err(|e| e.or_read_only("create directories", &r.container_path))?;
        Ok(())
    }

    fn remove_at(&mut self, r: &ResolvedPath, recursive: bool, force: bool) -> Result<(), Error> {
        if r.relative_path.is_empty() {
            return Err(Error::new(
                Code::InvalidPath,
                format!("cannot remove the mount root {}", r.container_path),
            )
            .at(&r.container_path));
        }
        self.workspace_op(
            "remove",
            &[
                ArgValue::Mount(r.mount.name()),
                Path(&r.relative_path),
                Flag(recursive),
                Flag(force),
            ],
            &[],
            "remove",
        )?;
        Ok(())
    }

    pub fn remove(&mut self, file: &FileRef, recursive: bool, force: bool) -> Result<(), Error> {
        let r = self.writable(file, "remove files", recursive)?;
        self.remove_at(&r, recursive, force)
            .map_err(|e| e.or_read_only("remove files", &r.container_path))
    }

    pub fn rename(&mut self, from: &FileRef, to: &FileRef) -> Result<(), Error> {
        let from = self.writable(from, "rename files", true)?;
        let to = self.writable(to, "rename files", true)?;
        if from.relative_path.is_empty() || to.relative_path.is_empty() {
            return Err(Error::new(Code::InvalidPath, "cannot rename a mount root"));
        }
        self.workspace_op(
            "rename",
            &[
                ArgValue::Mount(from.mount.name()),
                Path(&from.relative_path),
                ArgValue::Mount(to.mount.name()),
                Path(&to.relative_path),
            ],
            &[],
            "rename",
        )
        .map_err(|e| {
            let at = if e.path() == Some(to.relative_path.as_str()) {
                &to.container_path
            } else {
                &from.container_path
            };
            e.or_read_only("rename files", at)
        })?;
        Ok(())
    }

    fn stat_at(&mut self, r: &ResolvedPath) -> Result<Option<FileStat>, Error> {
        let v = self.workspace_json(
            "stat",
            &[ArgValue::Mount(r.mount.name()), Path(&r.relative_path)],
            &[],
            "stat",
        )?;
        if v["exists"] != Value::Bool(true) {
            return Ok(None);
        }
        Ok(Some(FileStat {
            kind: FileKind::parse(v["kind"].as_str().unwrap_or("other")),
            size: v["size"].as_u64().unwrap_or(0),
            mtime_ms: v["mtimeMs"].as_u64().unwrap_or(0),
            mode: v["mode"].as_u64().unwrap_or(0) as u32,
        }))
    }

    pub fn stat(&mut self, file: &FileRef) -> Result<Option<FileStat>, Error> {
        let r = resolve(&self.layout, file, "stat files")?;
        self.stat_at(&r)
    }

    pub fn read_directory(&mut self, dir: &FileRef) -> Result<Vec<DirEntry>, Error> {
        let r = resolve(&self.layout, dir, "list directories")?;
        let v = self.workspace_json(
            "readdir",
            &[ArgValue::Mount(r.mount.name()), Path(&r.relative_path)],
            &[],
            "read directory",
        )?;
        Ok(v["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| DirEntry {
                name: e["name"].as_str().unwrap_or_default().to_string(),
                kind: FileKind::parse(e["kind"].as_str().unwrap_or("other")),
            })
            .collect())
    }

    // --- built on the bridge -----------------------------------------------------------

    fn read_text(&mut self, r: &ResolvedPath) -> Result<String, Error> {
        let bytes = self.read_at(r, MAX_FILE_BYTES)?;
        String::from_utf8(bytes).map_err(|_| {
            Error::new(
                Code::InvalidPath,
                format!("{} is not UTF-8 text", r.container_path),
            )
            .at(&r.container_path)
        })
    }

    pub fn edit(&mut self, file: &FileRef, edits: &[TextEdit]) -> Result<EditResult, Error> {
        let r = self.writable(file, "edit files", false)?;
        let text = self.read_text(&r)?;
        let (new, replacements) = edit::apply(&text, edits, &r.container_path)?;
        self.write_at(&r, new.as_bytes(), false)
            .map_err(|e| e.or_read_only("edit files", &r.container_path))?;
        Ok(EditResult {
            replacements,
            path: r.container_path,
        })
    }

    /// Plan the whole patch against the files (every hunk checked) before
    /// changing anything, then apply it in order.
    pub fn apply_patch(
        &mut self,
        patch_text: &str,
        cwd: Option<&str>,
    ) -> Result<PatchResult, Error> {
        enum Step {
            Create(ResolvedPath, String),
            Write(ResolvedPath, String),
            Remove(ResolvedPath),
        }
        let hunks = patch::parse(patch_text)?;
        let at = |path: &str| FileRef {
            path: path.to_string(),
            cwd: cwd.map(str::to_string),
        };
        let display = |r: &ResolvedPath| {
            if r.relative_path.is_empty() {
                r.container_path.clone()
            } else {
                r.relative_path.clone()
            }
        };
        // What each touched path will hold (None: absent), as planned so far.
        let mut planned: std::collections::BTreeMap<(Mount, String), Option<String>> =
            Default::default();
        let mut steps = Vec::new();
        let mut result = PatchResult::default();
        for hunk in &hunks {
            match hunk {
                Hunk::Add { path, contents } => {
                    let r = self.writable(&at(path), "create files", false)?;
                    if self.planned_contents(&mut planned, &r)?.is_some() {
                        return Err(Error::new(
                            Code::Exists,
                            format!("Cannot create {}: the file already exists. Use \"*** Update File: {}\" to change it, or delete it earlier in the same patch.", display(&r), display(&r)),
                        )
                        .at(&r.container_path));
                    }
                    planned.insert((r.mount, r.relative_path.clone()), Some(contents.clone()));
                    push_unique(&mut result.added, display(&r));
                    steps.push(Step::Create(r, contents.clone()));
                }
                Hunk::Delete { path } => {
                    let r = self.writable(&at(path), "remove files", false)?;
                    if self.planned_contents(&mut planned, &r)?.is_none() {
                        return Err(Error::new(
                            Code::NotFound,
                            format!(
                                "Sandbox path not found; cannot remove files: {}",
                                display(&r)
                            ),
                        )
                        .at(&r.container_path));
                    }
                    planned.insert((r.mount, r.relative_path.clone()), None);
                    push_unique(&mut result.deleted, display(&r));
                    steps.push(Step::Remove(r));
                }
                Hunk::Update {
                    path,
                    move_to,
                    chunks,
                } => {
                    let r = self.writable(&at(path), "write files", false)?;
                    let Some(old) = self.planned_contents(&mut planned, &r)? else {
                        return Err(Error::new(
                            Code::NotFound,
                            format!("Failed to read file to update {}: not found", display(&r)),
                        )
                        .at(&r.container_path));
                    };
                    let new = patch::apply_chunks(&old, chunks, &display(&r))?;
                    match move_to {
                        Some(dest) => {
                            let d = self.writable(&at(dest), "write files", false)?;
                            if (d.mount, &d.relative_path) == (r.mount, &r.relative_path) {
                                if !patch::same_contents(&old, &new) {
                                    planned.insert(
                                        (r.mount, r.relative_path.clone()),
                                        Some(new.clone()),
                                    );
                                    push_unique(&mut result.modified, display(&r));
                                    steps.push(Step::Write(r, new));
                                }
                                continue;
                            }
                            if self.planned_contents(&mut planned, &d)?.is_some() {
                                return Err(Error::new(
                                    Code::Exists,
                                    format!("Cannot create {}: the file already exists. Delete it earlier in the same patch to replace it.", display(&d)),
                                )
                                .at(&d.container_path));
                            }
                            planned.insert((d.mount, d.relative_path.clone()), Some(new.clone()));
                            planned.insert((r.mount, r.relative_path.clone()), None);
                            push_unique(&mut result.modified, display(&d));
                            steps.push(Step::Create(d, new));
                            steps.push(Step::Remove(r));
                        }
                        None => {
                            if !patch::same_contents(&old, &new) {
                                planned
                                    .insert((r.mount, r.relative_path.clone()), Some(new.clone()));
                                push_unique(&mut result.modified, display(&r));
                                steps.push(Step::Write(r, new));
                            }
                        }
                    }
                }
            }
        }
        for step in steps {
            match step {
                Step::Create(r, contents) => {
                    if self.create_at(&r, contents.as_bytes(), true)? == CreateOutcome::Exists {
                        return Err(Error::new(
                            Code::Exists,
                            format!(
                                "Cannot create {}: the file appeared while the patch was applied",
                                display(&r)
                            ),
                        )
                        .at(&r.container_path));
                    }
                }
                Step::Write(r, contents) => self.write_at(&r, contents.as_bytes(), false)?,
                Step::Remove(r) => self.remove_at(&r, false, false)?,
            }
        }
        Ok(result)
    }

    /// A path's contents as the patch plan has them: planned, else read (None
    /// when absent).
    fn planned_contents(
        &mut self,
        planned: &mut std::collections::BTreeMap<(Mount, String), Option<String>>,
        r: &ResolvedPath,
    ) -> Result<Option<String>, Error> {
        let key = (r.mount, r.relative_path.clone());
        if let Some(known) = planned.get(&key) {
            return Ok(known.clone());
        }
        let contents = match self.stat_at(r)? {
            None => None,
            Some(s) if s.kind == FileKind::Directory => {
                return Err(Error::new(
                    Code::IsADirectory,
                    format!("{} is a directory", r.container_path),
                )
                .at(&r.container_path));
            }
            Some(_) => Some(self.read_text(r)?),
        };
        planned.insert(key, contents.clone());
        Ok(contents)
    }

    pub fn read_media(&mut self, file: &FileRef, max_bytes: Option<u64>) -> Result<Media, Error> {
        let r = resolve(&self.layout, file, "read media")?;
        let limit = max_bytes.unwrap_or(DEFAULT_MEDIA_BYTES).min(MAX_FILE_BYTES);
        let data = self.read_at(&r, limit)?;
        Ok(Media {
            mime_type: media::sniff(&data).map(str::to_string),
            data,
            container_path: r.container_path,
        })
    }
}

/// OpenClaw's read-only skills directories, relative to each mount.
const PROTECTED_SKILLS: [&str; 3] = [
    "skills",
    ".agents/skills",
    ".openclaw/sandbox-skills/skills",
];

fn push_unique(list: &mut Vec<String>, value: String) {
    if !list.contains(&value) {
        list.push(value);
    }
}
