//! Reading a local workspace for a seed: a walk that never leaves the root, and
//! the tar stream it becomes.
//!
//! The walk opens every directory relative to its parent's descriptor without
//! following links, checks that what it opened is what it listed (a directory
//! or file swapped for a link while it reads is refused, never followed), and
//! sends directories, regular files and symbolic links whose target stays
//! inside the root. Anything else is refused, naming the path: the seed is the
//! workspace exactly, or nothing. The archive is plain ustar with PAX records
//! for long names and large sizes, which any `tarfile` reads.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};

/// What a local root holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Regular files.
    pub files: u64,
    /// Directories, the root included.
    pub directories: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Bytes of the regular files.
    pub bytes: u64,
}

/// Bounds of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes of regular files.
    pub max_bytes: u64,
    /// Entries (files, directories, links).
    pub max_entries: u64,
}

/// Why a walk stopped.
#[derive(Debug)]
pub enum WalkError {
    /// The tree cannot be sent as it is; the message names the path.
    Refused(String),
    /// Writing the archive failed (the reader went away).
    Write(std::io::Error),
}

fn refused(message: impl Into<String>) -> WalkError {
    WalkError::Refused(message.into())
}

/// A path of the walk, relative to the root, for messages.
fn shown(rel: &[u8]) -> String {
    crate::runtime::escape_control(&String::from_utf8_lossy(rel))
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut rel = prefix.to_vec();
    if !rel.is_empty() {
        rel.push(b'/');
    }
    rel.extend_from_slice(name);
    rel
}

/// One entry as the walk hands it over.
enum Node {
    Dir {
        mode: u32,
        mtime: i64,
    },
    File {
        mode: u32,
        mtime: i64,
        size: u64,
        fd: OwnedFd,
    },
    Link {
        target: Vec<u8>,
    },
}

/// Receives every entry of a walk, the root first.
type Visit<'v> = dyn FnMut(&[u8], Node) -> Result<(), WalkError> + 'v;

fn same(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

struct Walk<'a> {
    root: &'a Path,
    /// The top-level entries the walk keeps; all of them when `None`.
    only: Option<&'a [String]>,
    bounds: Bounds,
    summary: Summary,
    entries: u64,
}

/// Whether a link at `rel` pointing to `target` stays inside the root, read
/// lexically from the link's own directory (the target does not start with `/`
/// and no `..` climbs above the root).
pub fn link_stays_inside(rel: &[u8], target: &[u8]) -> bool {
    if target.is_empty() || target.starts_with(b"/") {
        return false;
    }
    let mut depth = rel.split(|b| *b == b'/').count() as i64 - 1;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

/// How deep a seed may go below the root. The walk holds one descriptor per
/// level it is in, so the bound keeps a deep tree from exhausting the host's
/// descriptors (and a 1,500-deep chain from failing half-way); a deeper
/// workspace is refused, naming the path, before anything is sent.
pub const MAX_DEPTH: usize = 256;

/// How many files with more than one link one seed may hold: each is kept
/// open until the walk has met all of its names.
pub const MAX_HARD_LINKED: usize = 512;

/// One directory the walk is in: its descriptor, its path and what is left of
/// its (sorted) listing.
struct Level {
    fd: OwnedFd,
    prefix: Vec<u8>,
    names: std::vec::IntoIter<CString>,
}

/// A regular file with more than one link: how many of its names the walk met.
struct HardLinked {
    rel: Vec<u8>,
    nlink: u64,
    seen: u64,
}

impl Walk<'_> {
    fn count(&mut self, rel: &[u8]) -> Result<(), WalkError> {
        self.entries += 1;
        if self.entries > self.bounds.max_entries {
            return Err(refused(format!(
                "more than {} entries (at {}): over the host's bound for one seed",
                self.bounds.max_entries,
                shown(rel)
            )));
        }
        Ok(())
    }

    fn listing(fd: &OwnedFd, prefix: &[u8]) -> Result<std::vec::IntoIter<CString>, WalkError> {
        let mut names: Vec<CString> = Dir::read_from(fd)
            .map_err(|e| changed(prefix, e))?
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect();
        names.sort();
        Ok(names.into_iter())
    }

    /// Every entry below `rootfd`, depth first, without recursion: the stack
    /// of open levels is bounded by [`MAX_DEPTH`].
    fn tree(&mut self, rootfd: OwnedFd, visit: &mut Visit<'_>) -> Result<(), WalkError> {
        let mut linked: std::collections::HashMap<(u64, u64), HardLinked> = Default::default();
        let mut deferred: Vec<(Vec<u8>, Node)> = Vec::new();
        let mut names = Self::listing(&rootfd, b"")?;
        if let Some(only) = self.only {
            let all: Vec<CString> = names.collect();
            for wanted in only {
                if !all.iter().any(|n| n.as_bytes() == wanted.as_bytes()) {
                    return Err(refused(format!(
                        "{} holds no entry {}",
                        self.root.display(),
                        shown(wanted.as_bytes())
                    )));
                }
            }
            names = all
                .into_iter()
                .filter(|n| only.iter().any(|w| w.as_bytes() == n.as_bytes()))
                .collect::<Vec<_>>()
                .into_iter();
        }
        let mut stack = vec![Level {
            fd: rootfd,
            prefix: Vec::new(),
            names,
        }];
        while let Some(level) = stack.last_mut() {
            let depth = stack_depth(level);
            let Some(name) = level.names.next() else {
                stack.pop();
                continue;
            };
            let dirfd = &level.fd;
            let rel = join(&level.prefix, name.as_bytes());
            self.count(&rel)?;
            let st = rustix::fs::statat(dirfd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| changed(&rel, e))?;
            let mode = st.st_mode & 0o777;
            let mtime = st.st_mtime as i64;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    if depth >= MAX_DEPTH {
                        return Err(refused(format!(
                            "{} is more than {MAX_DEPTH} directories deep: over the host's bound for one seed",
                            shown(&rel)
                        )));
                    }
                    let fd = rustix::fs::openat(
                        dirfd,
                        name.as_c_str(),
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| changed(&rel, e))?;
                    if !same(&st, &rustix::fs::fstat(&fd).map_err(|e| changed(&rel, e))?) {
                        return Err(refused(format!(
                            "{} was replaced while it was read",
                            shown(&rel)
                        )));
                    }
                    self.summary.directories += 1;
                    visit(&rel, Node::Dir { mode, mtime })?;
                    let names = Self::listing(&fd, &rel)?;
                    stack.push(Level {
                        fd,
                        prefix: rel,
                        names,
                    });
                }
                FileType::RegularFile => {
                    let fd = rustix::fs::openat(
                        dirfd,
                        name.as_c_str(),
                        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                        Mode::empty(),
                    )
                    .map_err(|e| changed(&rel, e))?;
                    let opened = rustix::fs::fstat(&fd).map_err(|e| changed(&rel, e))?;
                    if !same(&st, &opened)
                        || FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile
                    {
                        return Err(refused(format!(
                            "{} was replaced while it was read",
                            shown(&rel)
                        )));
                    }
                    let size = opened.st_size as u64;
                    self.summary.files += 1;
                    self.summary.bytes += size;
                    if self.summary.bytes > self.bounds.max_bytes {
                        return Err(refused(format!(
                            "more than {} bytes of files (at {}): over the host's bound for one seed",
                            self.bounds.max_bytes,
                            shown(&rel)
                        )));
                    }
                    let node = Node::File {
                        mode,
                        mtime,
                        size,
                        fd,
                    };
                    if opened.st_nlink > 1 {
                        // Another name of this file may be outside the root: it is
                        // sent only once the walk has met every one of its names,
                        // after the rest of the tree.
                        if deferred.len() >= MAX_HARD_LINKED {
                            return Err(refused(format!(
                                "more than {MAX_HARD_LINKED} hard-linked files (at {}): over the host's bound for one seed",
                                shown(&rel)
                            )));
                        }
                        linked
                            .entry((opened.st_dev, opened.st_ino))
                            .or_insert_with(|| HardLinked {
                                rel: rel.clone(),
                                nlink: opened.st_nlink,
                                seen: 0,
                            })
                            .seen += 1;
                        deferred.push((rel, node));
                    } else {
                        visit(&rel, node)?;
                    }
                }
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(dirfd, name.as_c_str(), Vec::new())
                        .map_err(|e| changed(&rel, e))?;
                    let target = target.as_bytes().to_vec();
                    let escapes = || {
                        refused(format!(
                            "Remote sandbox upload refuses symlink escaping the workspace: {}",
                            shown(&rel)
                        ))
                    };
                    if !link_stays_inside(&rel, &target) {
                        return Err(escapes());
                    }
                    // Lexically inside may still resolve outside through another
                    // link: where it resolves now must be inside too.
                    let path = self.root.join(std::ffi::OsStr::from_bytes(&rel));
                    if let Ok(real) = std::fs::canonicalize(&path)
                        && !real.starts_with(self.root)
                    {
                        return Err(escapes());
                    }
                    self.summary.symlinks += 1;
                    visit(&rel, Node::Link { target })?;
                }
                _ => {
                    return Err(refused(format!(
                        "{} is a socket, device or FIFO; only directories, regular files and links are seeded",
                        shown(&rel)
                    )));
                }
            }
        }
        let mut outside: Vec<&HardLinked> = linked.values().filter(|l| l.seen < l.nlink).collect();
        outside.sort_by(|a, b| a.rel.cmp(&b.rel));
        if let Some(l) = outside.first() {
            return Err(refused(format!(
                "{} is a hard link to a file with a name outside the workspace ({} links, {} inside); \
                 the seed never sends a file from outside",
                shown(&l.rel),
                l.nlink,
                l.seen
            )));
        }
        for (rel, node) in deferred {
            visit(&rel, node)?;
        }
        Ok(())
    }
}

/// How many levels the walk is in at `level`: the root's children are at 1.
fn stack_depth(level: &Level) -> usize {
    if level.prefix.is_empty() {
        1
    } else {
        level.prefix.iter().filter(|b| **b == b'/').count() + 2
    }
}

fn changed(rel: &[u8], e: rustix::io::Errno) -> WalkError {
    refused(format!("{} changed while it was read ({e})", shown(rel)))
}

/// Walk `root` (canonical: no link on its way) and hand every entry to `visit`.
fn walk(
    root: &Path,
    only: Option<&[String]>,
    bounds: Bounds,
    visit: &mut Visit<'_>,
) -> Result<Summary, WalkError> {
    let fd = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| refused(format!("{}: {e}", root.display())))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| refused(format!("{}: {e}", root.display())))?;
    let mut w = Walk {
        root,
        only,
        bounds,
        summary: Summary {
            directories: 1,
            ..Summary::default()
        },
        entries: 0,
    };
    visit(
        b"",
        Node::Dir {
            mode: st.st_mode & 0o777,
            mtime: st.st_mtime as i64,
        },
    )?;
    w.tree(fd, visit)?;
    Ok(w.summary)
}

/// Count what `root` holds, refusing what [`write_tar`] would refuse.
pub fn summarize(root: &Path, bounds: Bounds) -> Result<Summary, WalkError> {
    walk(root, None, bounds, &mut |_, _| Ok(()))
}

const BLOCK: usize = 512;

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

/// A PAX extended header record: `<length> <key>=<value>\n`, the length
/// counting itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut len = body + body.to_string().len();
    if len.to_string().len() != body.to_string().len() {
        len += 1;
    }
    let mut record = format!("{len} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

fn header(name: &[u8], kind: u8, mode: u32, size: u64, mtime: i64, link: &[u8]) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size.min(0o77777777777));
    octal(&mut h[136..148], mtime.clamp(0, 0o77777777777) as u64);
    h[156] = kind;
    let l = link.len().min(100);
    h[157..157 + l].copy_from_slice(&link[..l]);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

fn pad(out: &mut dyn Write, len: u64) -> std::io::Result<()> {
    let rest = (BLOCK - (len % BLOCK as u64) as usize) % BLOCK;
    out.write_all(&[0u8; BLOCK][..rest])
}

fn entry(
    out: &mut dyn Write,
    name: &[u8],
    kind: u8,
    mode: u32,
    size: u64,
    mtime: i64,
    link: &[u8],
) -> std::io::Result<()> {
    let mut pax = Vec::new();
    if name.len() > 100 || !name.is_ascii() {
        pax.extend(pax_record("path", name));
    }
    if link.len() > 100 || !link.is_ascii() {
        pax.extend(pax_record("linkpath", link));
    }
    if size > 0o77777777777 {
        pax.extend(pax_record("size", size.to_string().as_bytes()));
    }
    if !pax.is_empty() {
        out.write_all(&header(
            b"././@PaxHeader",
            b'x',
            0o644,
            pax.len() as u64,
            mtime,
            b"",
        ))?;
        out.write_all(&pax)?;
        pad(out, pax.len() as u64)?;
    }
    out.write_all(&header(name, kind, mode, size, mtime, link))
}

/// Write `root` as a tar archive to `out`; the summary of what was sent.
pub fn write_tar(root: &Path, bounds: Bounds, out: &mut dyn Write) -> Result<Summary, WalkError> {
    write_tar_of(root, None, bounds, out)
}

/// [`write_tar`] of the root directory and, below it, only the top-level
/// entries named in `only` (all when `None`); a name the root does not hold
/// is refused.
pub fn write_tar_of(
    root: &Path,
    only: Option<&[String]>,
    bounds: Bounds,
    out: &mut dyn Write,
) -> Result<Summary, WalkError> {
    let summary = walk(root, only, bounds, &mut |rel, node| match node {
        Node::Dir { mode, mtime } => {
            let name = if rel.is_empty() {
                b"./".to_vec()
            } else {
                join(rel, b"")
            };
            entry(out, &name, b'5', mode, 0, mtime, b"").map_err(WalkError::Write)
        }
        Node::Link { target } => {
            entry(out, rel, b'2', 0o777, 0, 0, &target).map_err(WalkError::Write)
        }
        Node::File {
            mode,
            mtime,
            size,
            fd,
        } => {
            entry(out, rel, b'0', mode, size, mtime, b"").map_err(WalkError::Write)?;
            let mut file = std::fs::File::from(fd).take(size);
            let copied = std::io::copy(&mut file, out).map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => WalkError::Write(e),
                _ => refused(format!("{}: {e}", shown(rel))),
            })?;
            if copied != size {
                return Err(refused(format!("{} shrank while it was read", shown(rel))));
            }
            pad(out, size).map_err(WalkError::Write)
        }
    })?;
    out.write_all(&[0u8; 2 * BLOCK]).map_err(WalkError::Write)?;
    out.flush().map_err(WalkError::Write)?;
    Ok(summary)
}

/// The name of a directory entry, for a test that builds one.
#[cfg(test)]
fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

#[cfg(test)]
mod tests;
