'use strict';
// Files: typed lookups that refuse symlinks, atomic writes and directories, markers,
// and the free space a write needs (a full disk is `disk-full`, naming the file).

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const { HelperError, MARKER_FORMAT, ROOT_GID, ROOT_UID, TEMP_PREFIX } = require('./constants');
const { guard } = require('./session');

function lstatOrNull(p) {
  try {
    return fs.lstatSync(p);
  } catch (error) {
    if (error.code === 'ENOENT') return null;
    throw error;
  }
}

// A directory of the tree, or null when absent; a symlink or another kind is refused.
function expectDir(p) {
  const st = lstatOrNull(p);
  if (!st) return null;
  if (st.isSymbolicLink()) {
    throw new HelperError('unexpected-symlink', `${p} is a symlink where a directory is expected`);
  }
  if (!st.isDirectory()) {
    throw new HelperError('foreign-marker', `${p} is not a directory`);
  }
  return st;
}

function expectFile(p) {
  const st = lstatOrNull(p);
  if (!st) return null;
  if (st.isSymbolicLink()) {
    throw new HelperError('unexpected-symlink', `${p} is a symlink where a file is expected`);
  }
  if (!st.isFile()) {
    throw new HelperError('foreign-marker', `${p} is not a regular file`);
  }
  return st;
}

// Operator settings (the root, the unit directory) are trusted and may be symlinks.
function operatorDirExists(p) {
  try {
    return fs.statSync(p).isDirectory();
  } catch (error) {
    if (error.code === 'ENOENT') return false;
    throw error;
  }
}

function readMarker(p, code = 'foreign-marker') {
  const st = expectFile(p);
  if (!st) return null;
  if (st.uid !== ROOT_UID) {
    throw new HelperError(code, `${p} is owned by uid ${st.uid}, not by the SSH account`);
  }
  let value;
  try {
    value = JSON.parse(fs.readFileSync(p, 'utf8'));
  } catch {
    throw new HelperError(code, `${p} is not valid JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HelperError(code, `${p} is not a JSON object`);
  }
  checkFormat(value, p, code);
  return value;
}

// A marker without a format is format 1 (the first releases wrote none). One newer than
// this helper writes was written by a later release: refused before anything changes,
// naming the release to roll forward to; a rollback never rewrites what it cannot read.
function checkFormat(marker, p, code) {
  if (marker.format === undefined) return;
  if (!Number.isSafeInteger(marker.format) || marker.format < 1) {
    throw new HelperError(code, `${p}: format ${JSON.stringify(marker.format)} is not a marker format`);
  }
  if (marker.format > MARKER_FORMAT) {
    const by = marker.writtenBy !== null && typeof marker.writtenBy === 'object' &&
      typeof marker.writtenBy.implementation === 'string' ? marker.writtenBy.implementation : 'a later release';
    throw new HelperError('newer-format',
      `${p} is marker format ${marker.format}, written by ${by}; this helper reads formats 1 to ` +
      `${MARKER_FORMAT}: roll forward to at least ${by}`);
  }
}

function checkFields(marker, expected, file, code) {
  for (const [key, value] of Object.entries(expected)) {
    if (marker[key] !== value) {
      throw new HelperError(code,
        `${file}: ${key} is ${JSON.stringify(marker[key])}, expected ${JSON.stringify(value)}`);
    }
  }
}

function tempName(dir, base) {
  return path.join(dir, `${TEMP_PREFIX}${base}-${crypto.randomBytes(6).toString('hex')}`);
}

function fsyncDir(dir) {
  const fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// Writes one file with exact mode and owner; no fsync of the directory (callers do).
function writeNewFile(file, data, mode, uid, gid) {
  const fd = fs.openSync(file,
    fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, mode);
  try {
    fs.writeFileSync(fd, data);
    fs.fchownSync(fd, uid, gid);
    fs.fchmodSync(fd, mode);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// Temp file in the same directory, fsync, rename: readers see the old or the new
// content, never a torn file, whatever ends the helper.
function writeAtomic(file, data, mode, uid = ROOT_UID, gid = ROOT_GID) {
  const dir = path.dirname(file);
  const temp = tempName(dir, path.basename(file));
  try {
    writeNewFile(temp, data, mode, uid, gid);
    fs.renameSync(temp, file);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw writing(error, file);
  }
  fsyncDir(dir);
}

// Free bytes for an unprivileged account on the filesystem of `p` (its nearest
// existing ancestor), or null if that cannot be read.
const NEARLY_FULL_BYTES = 1024 * 1024;

function freeBytes(p) {
  for (let dir = p; ; dir = path.dirname(dir)) {
    try {
      const st = fs.statfsSync(dir);
      return st.bavail * st.bsize;
    } catch (error) {
      if (error.code !== 'ENOENT' || dir === path.dirname(dir)) return null;
    }
  }
}

// The file a failed write was for (its final name, not the temp one), for the report.
function writing(error, file) {
  if (error && typeof error === 'object' && !(error instanceof HelperError) && !error.writing) error.writing = file;
  return error;
}

// A write that failed for want of space (ENOSPC) or quota (EDQUOT): retryable, naming
// the file and what is left on its filesystem. What was half-written stays under a
// temp name only, removed on the spot or swept by the next locked run.
const DISK_FULL = new Set(['ENOSPC', 'EDQUOT']);

function diskFullMessage(error) {
  const file = error.writing || error.path || null;
  const bytes = freeBytes(file ? path.dirname(file) : '/');
  const free = bytes === null ? '' : `; ${Math.floor(bytes / 1024)} KiB free on its filesystem`;
  const what = error.code === 'EDQUOT' ? 'the disk quota is exhausted' : 'the disk is full';
  return `${what} (${error.code}) writing ${file || 'a file'}${free}: free space there, then retry`;
}

function makeDir(p, mode, uid = ROOT_UID, gid = ROOT_GID) {
  fs.mkdirSync(p, { mode });
  fs.chownSync(p, uid, gid);
  fs.chmodSync(p, mode);
}

// Builds a directory under a temp name and renames it into place, so a directory that
// exists is always complete (its marker included).
function createDirAtomic(finalPath, mode, uid, gid, build) {
  const parent = path.dirname(finalPath);
  const temp = tempName(parent, path.basename(finalPath));
  try {
    makeDir(temp, mode, uid, gid);
    build(temp);
    fsyncDir(temp);
    fs.renameSync(temp, finalPath);
  } catch (error) {
    fs.rmSync(temp, { recursive: true, force: true });
    throw writing(error, finalPath);
  }
  fsyncDir(parent);
}

// Renames first so that the path disappears atomically; a helper killed during the
// recursive removal leaves only a temp entry that a later locked run sweeps.
function removeTree(p) {
  const parent = path.dirname(p);
  const temp = tempName(parent, `del-${path.basename(p)}`);
  fs.renameSync(p, temp);
  fsyncDir(parent);
  fs.rmSync(temp, { recursive: true, force: true });
}

function removeFile(p) {
  fs.unlinkSync(p);
  fsyncDir(path.dirname(p));
}

// Under the host lock no other helper is writing, so any temp entry left in a
// directory is debris from a helper that was killed mid-write.
function sweep(dir, prefix = TEMP_PREFIX) {
  if (!operatorDirExists(dir)) return;
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix)) continue;
    guard(`remove stale ${name}`);
    fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  }
}

module.exports = {
  lstatOrNull, expectDir, expectFile, operatorDirExists, readMarker, checkFields, tempName,
  fsyncDir, writeNewFile, writeAtomic, NEARLY_FULL_BYTES, freeBytes, DISK_FULL, diskFullMessage,
  makeDir, createDirAtomic, removeTree, removeFile, sweep,
};
