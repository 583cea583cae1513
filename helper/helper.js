'use strict';
// The OCC SSH Compute Driver's host helper: every effect the driver has on a host.
// The host runs it through its loader (`<nodePath> -e <helper/boot.js>`), with this
// source and then the helper's input on stdin, each a frame; the protocol (input,
// operations, events, markers, error codes, unit header) is helper/README.md.
//
// Shape of every mutating operation: parse and validate the operation, take the host
// lock, read what is there, verify ownership of everything it will touch, then act only
// where the host differs, reporting `changed`. Before each mutating step `guard()` checks
// that the SSH session is still open (a failed stdout write closes it), that the
// helper's own deadline has not passed and that the lock is still held.
//
// Assembled from helper/src/ by helper/build.js: edit the modules there, then run
// `node helper/build.js`. Run by the loader (which names its module `occ-ssh-helper`)
// this file is the helper; required as a module (the tests do), it only exports the
// tables and pure functions of `api` in helper/src/main.js.
const RUN_AS_HELPER = module.id === 'occ-ssh-helper';
const SOURCES = {
'constants': function (module, exports, require) {
'use strict';
// The helper's constants: protocol version, bounds and timings, the unit and marker
// names, the error codes that are permanent, and HelperError, the one error a step
// throws with its code. Module of helper/helper.js (helper/build.js assembles it).

const STARTED_AT = Date.now();

const PROTOCOL_VERSION = 2;

// The format of the markers this helper writes. 1: those of the first releases, which
// carried no format (the helper of 0.2.0 and before); 2: each marker names its format
// and who wrote it (\`writtenBy\`). A helper reads every format up to its own and
// refuses, changing nothing, a newer one (helper/README.md, "Markers across releases").
const MARKER_FORMAT = 2;

// The transport kills an operation at 180 s; stopping at 170 s leaves time to report.
const DEFAULT_DEADLINE_MS = 170000;

const MAX_DEADLINE_MS = 175000;

const LOCK_WAIT_SECONDS = 30;

const DEFAULT_READINESS_MS = 120000;

const HEARTBEAT_MS = 1000;

const NODE_MAJOR = 24;

const TRAVERSE_ONLY = 0o711;

const READY_POLL_MS = 500;

const READY_REQUEST_MS = 2000;

// A restart queued with --no-block: how long it may take to run (systemctl's own
// bound when it waits), and how often the queue is looked at meanwhile.
const RESTART_JOB_MS = 90000;

const RESTART_POLL_MS = 50;

// Conflict exit code for flock: distinguishes "waited 30 s" from any other failure.
const FLOCK_TIMEOUT_EXIT = 75;

const TEMP_PREFIX = '.occ-tmp-';

const SAFE_PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const UNIT_PREFIX = 'openclaw-enterprise-gateway-';

const HEADER_FIRST_LINE = '# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.';

const ROOT_UID = typeof process.getuid === 'function' ? process.getuid() : 0;

const ROOT_GID = typeof process.getgid === 'function' ? process.getgid() : 0;

const PERMANENT_CODES = new Set([
  'foreign-marker', 'changed-snapshot', 'unexpected-symlink', 'foreign-unit',
  'foreign-account', 'invalid-operation', 'missing-namespace', 'missing-revision',
  'no-free-port', 'probe-failed', 'superseded', 'revision-conflict', 'newer-format',
]);

class HelperError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

module.exports = {
  STARTED_AT, PROTOCOL_VERSION, MARKER_FORMAT, DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, LOCK_WAIT_SECONDS,
  DEFAULT_READINESS_MS, HEARTBEAT_MS, NODE_MAJOR, TRAVERSE_ONLY, READY_POLL_MS, READY_REQUEST_MS,
  RESTART_JOB_MS, RESTART_POLL_MS, FLOCK_TIMEOUT_EXIT, TEMP_PREFIX, SAFE_PATH_ENV, UNIT_PREFIX,
  HEADER_FIRST_LINE, ROOT_UID, ROOT_GID, PERMANENT_CODES, HelperError,
};
},
'session': function (module, exports, require) {
'use strict';
// The session: output lines, the deadline and the stop conditions every mutating
// step checks first (`guard`): the SSH session closed, the deadline passed, or the
// host lock no longer held.

const { DEFAULT_DEADLINE_MS, HelperError, STARTED_AT } = require('./constants');

const session = {
  deadlineAt: STARTED_AT + DEFAULT_DEADLINE_MS,
  // Set once the helper must stop mutating: session closed, deadline, or a signal.
  stop: null,
  closed: false,
  finished: false,
  controller: new AbortController(),
};

function stopWith(error) {
  if (session.stop) return;
  session.stop = error;
  session.controller.abort(error);
}

function markClosed() {
  if (session.closed) return;
  session.closed = true;
  stopWith(new HelperError('session-closed', 'the SSH session closed'));
}

// Node ignores SIGPIPE, so a write to the closed session pipe fails with EPIPE,
// reported through the callback and the stream's 'error' event; without this
// listener that error would crash the helper in the middle of a step. Called once
// the helper runs (not when a test requires it).
function watchSession() {
  process.stdout.on('error', markClosed);
  process.stderr.on('error', () => {});
}

function emit(event) {
  if (session.closed) return false;
  try {
    process.stdout.write(`${JSON.stringify(event)}\n`, (error) => {
      if (error) markClosed();
    });
  } catch {
    markClosed();
  }
  return !session.closed;
}

function progress(step, message) {
  emit({ event: 'progress', step, message });
}

function remainingMs() {
  return session.deadlineAt - Date.now();
}

// Every mutating step calls this first: no effect after the session closed, after the
// deadline, or once the host lock is no longer held.
function guard(step) {
  if (session.stop) {
    const reason = session.stop;
    throw new HelperError(reason.code, `${reason.message}; not starting: ${step}`);
  }
  if (remainingMs() <= 0) {
    stopWith(new HelperError('deadline', 'the helper deadline passed'));
    throw new HelperError('deadline', `the helper deadline passed; not starting: ${step}`);
  }
  if (lock.required && !lockHeld()) {
    throw new HelperError('command-failed', `the host lock holder exited; not starting: ${step}`);
  }
}

function sleep(ms) {
  const signal = session.controller.signal;
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const lock = { child: null, required: false, exited: false, acquiredAt: null };

function lockHeld() {
  return lock.child !== null && !lock.exited;
}

module.exports = {
  session, stopWith, markClosed, emit, progress, remainingMs, guard, sleep, lock, watchSession,
};
},
'children': function (module, exports, require) {
'use strict';
// Child processes. Argument vectors only; nothing here goes through a shell built from
// input.
// Also systemctl and the state of one unit.

const { spawn } = require('node:child_process');

const { HelperError, SAFE_PATH_ENV } = require('./constants');
const { remainingMs } = require('./session');

// options.as = { uid, gid } runs the command as that account (no supplementary
// groups, cwd / or options.cwd, a bare environment plus options.env): what it does to
// files is then bounded by what the account itself may do, whatever symlinks the
// account planted. options.input is written to its stdin (else stdin is /dev/null).
function run(file, args, options = {}) {
  const timeoutMs = Math.max(1000, Math.min(options.timeoutMs || 60000, remainingMs() + 2000));
  const identity = options.as
    ? { uid: options.as.uid, gid: options.as.gid, cwd: options.cwd || '/',
      env: { PATH: SAFE_PATH_ENV, LC_ALL: 'C', ...(options.env || {}) } }
    : { env: { ...process.env, LC_ALL: 'C', SYSTEMD_PAGER: '', SYSTEMD_COLORS: '0' } };
  return new Promise((resolve, reject) => {
    let child;
    try {
      child = spawn(file, args, { stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], ...identity });
    } catch (error) {
      reject(new HelperError('command-failed', `${file}: ${error.message}`));
      return;
    }
    if (options.input !== undefined) {
      child.stdin.on('error', () => {});
      child.stdin.end(options.input);
    }
    const out = [];
    const err = [];
    let outBytes = 0;
    let errBytes = 0;
    child.stdout.on('data', (chunk) => {
      if (outBytes < 65536) out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk) => {
      if (errBytes < 8192) err.push(chunk);
      errBytes += chunk.length;
    });
    // A step already handed to a command completes on the host; the helper only stops
    // waiting for it when the command itself overruns, which for systemctl does not
    // cancel the job it queued.
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new HelperError('command-failed', `${file}: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = {
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      };
      if ((code !== 0 || signal) && !options.allowFailure) {
        const detail = oneLine(result.stderr) || oneLine(result.stdout) || 'no output';
        const how = signal ? `killed by ${signal}` : `exit ${code}`;
        reject(new HelperError('command-failed', `${file} ${args.join(' ')}: ${how}: ${detail}`));
        return;
      }
      resolve(result);
    });
  });
}

function oneLine(text) {
  return text.replace(/[\x00-\x1f\x7f]+/g, ' ').trim().slice(0, 400);
}

function systemctl(args, timeoutMs) {
  return run('systemctl', args, { timeoutMs: timeoutMs || 90000 });
}

// `systemctl show <options> -- <unit>`, its `Key=value` lines as an object.
async function showUnitProperties(unitName, options) {
  const result = await run('systemctl', ['show', ...options, '--', unitName], { timeoutMs: 20000 });
  const state = {};
  for (const line of result.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) state[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return state;
}

async function unitState(unitName) {
  return showUnitProperties(unitName, [
    '--property=LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload,InvocationID,Job',
  ]);
}

module.exports = { run, oneLine, systemctl, showUnitProperties, unitState };
},
'files': function (module, exports, require) {
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
},
'lock': function (module, exports, require) {
'use strict';
// Host lock: a kernel flock on <root>/.compute-lock held by a child whose stdin is a
// pipe from this helper. Whatever ends the helper (normal exit, crash, SIGKILL) closes
// that pipe, the child's `cat` sees end of file and exits, and the kernel drops the
// lock: there is no stale-lock state for anyone to reclaim.
//
// flock needs only an open descriptor, and a read-only one will do: any account that
// can open the file can hold the lock forever and stall every operation on the host.
// So the file is root's and 0600, which no Agent account can open: a root-owned lock
// with a looser mode is tightened, and one another account owns is refused instead
// of waited on.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const {
  FLOCK_TIMEOUT_EXIT, HelperError, LOCK_WAIT_SECONDS, ROOT_GID, ROOT_UID
} = require('./constants');
const { guard, lock, progress, remainingMs, session } = require('./session');
const { oneLine, run } = require('./children');
const { lstatOrNull } = require('./files');

const LOCK_MODE = 0o600;

// The lock file as it must be: created 0600 when absent; a root-owned one with a
// looser mode (plain `flock` creates it 0644, as OCC's own driver does) is tightened
// in place; one another account owns is refused, naming it.
function checkLockFile(lockPath) {
  for (;;) {
    const st = lstatOrNull(lockPath);
    if (st && st.isSymbolicLink()) {
      throw new HelperError('unexpected-symlink', `${lockPath} is a symlink`);
    }
    if (st && !st.isFile()) {
      throw new HelperError('foreign-marker', `${lockPath} is not a regular file`);
    }
    if (st && st.uid !== ROOT_UID) {
      // Permanent: a retry would meet the same file. Whoever owns it can hold the
      // lock forever and stall every operation here.
      throw new HelperError('foreign-marker',
        `${lockPath} is owned by ${accountNameSync(st.uid)} (uid ${st.uid}), not by the SSH account: ` +
        'that account could hold the host lock and stall every operation here. Check for holders ' +
        `(fuser -v ${lockPath}), then run chown root:root ${lockPath} && chmod 600 ${lockPath}`);
    }
    if (st && (st.mode & 0o7777 & ~LOCK_MODE) !== 0) {
      guard(`chmod 600 ${lockPath}`);
      const fd = fs.openSync(lockPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      try {
        const again = fs.fstatSync(fd);
        if (again.ino !== st.ino || again.uid !== ROOT_UID) continue;
        fs.fchmodSync(fd, LOCK_MODE);
      } finally {
        fs.closeSync(fd);
      }
      progress('lock', `tightened ${lockPath} from ${(st.mode & 0o7777).toString(8)} to 600`);
      continue;
    }
    if (st) return;
    guard('create the host lock file');
    let fd;
    try {
      // O_EXCL: a file another helper created meanwhile is checked on the next turn.
      fd = fs.openSync(lockPath,
        fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, LOCK_MODE);
    } catch (error) {
      if (error.code === 'EEXIST') continue;
      throw error;
    }
    try {
      fs.fchownSync(fd, ROOT_UID, ROOT_GID);
      fs.fchmodSync(fd, LOCK_MODE);
    } finally {
      fs.closeSync(fd);
    }
  }
}

// The name of `uid` from /etc/passwd (the lock check runs before any child process
// may), or `uid N`.
function accountNameSync(uid) {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const fields = line.split(':');
      if (fields.length > 2 && Number(fields[2]) === uid) return `account ${fields[0]}`;
    }
  } catch {
    // no /etc/passwd to read: the uid alone
  }
  return `uid ${uid}`;
}

async function acquireLock(root) {
  guard('take the host lock');
  const lockPath = path.join(root, '.compute-lock');
  checkLockFile(lockPath);
  const waitSeconds = Math.max(1, Math.min(LOCK_WAIT_SECONDS, Math.floor((remainingMs() - 1000) / 1000)));
  const startedAt = Date.now();
  // The shell text is a constant: the lock path reaches flock as its own argument.
  const child = spawn('flock', [
    '-w', String(waitSeconds), '-E', String(FLOCK_TIMEOUT_EXIT), lockPath,
    'sh', '-c', 'echo locked; exec cat >/dev/null',
  ], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.on('error', () => {});
  lock.child = child;
  lock.exited = false;
  await new Promise((resolve, reject) => {
    const signal = session.controller.signal;
    let acquired = false;
    let stdout = '';
    let stderr = '';
    const onAbort = () => {
      child.kill('SIGTERM');
      reject(signal.reason);
    };
    child.stdout.on('data', (chunk) => {
      stdout += chunk.toString('utf8');
      if (!acquired && stdout.includes('locked\n')) {
        acquired = true;
        signal.removeEventListener('abort', onAbort);
        resolve();
      }
    });
    child.stderr.on('data', (chunk) => {
      if (stderr.length < 2000) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => {
      lock.exited = true;
      signal.removeEventListener('abort', onAbort);
      reject(new HelperError('command-failed', `flock: ${error.message}`));
    });
    child.on('exit', (code) => {
      lock.exited = true;
      if (acquired) return;
      signal.removeEventListener('abort', onAbort);
      if (code === FLOCK_TIMEOUT_EXIT) {
        reject(new HelperError('lock-timeout', `${lockPath} stayed locked for ${waitSeconds} s`));
      } else {
        reject(new HelperError('command-failed', `flock ${lockPath}: exit ${code}: ${oneLine(stderr)}`));
      }
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  }).catch((error) => {
    lock.child = null;
    throw error;
  });
  lock.required = true;
  lock.acquiredAt = Date.now();
  progress('lock', `host lock acquired after ${lock.acquiredAt - startedAt} ms`);
}

async function releaseLock() {
  const child = lock.child;
  lock.required = false;
  if (!child) return;
  lock.child = null;
  // How long other operations on this host could not run: the figure the `lock`
  // benchmark (tests/benches/lock.rs) reports, median and p99 per operation.
  if (lock.acquiredAt !== null) {
    progress('unlock', `host lock released after ${Date.now() - lock.acquiredAt} ms held`);
    lock.acquiredAt = null;
  }
  if (!lock.exited) {
    child.stdin.end();
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve();
      }, 2000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

// Once the helper runs (not when a test requires it): whatever ends it, the lock's
// holder does not outlive it.
function releaseLockOnExit() {
  process.on('exit', () => {
    if (lock.child && !lock.exited) lock.child.kill('SIGKILL');
  });
}

module.exports = { acquireLock, releaseLock, releaseLockOnExit };
},
'values': function (module, exports, require) {
'use strict';
// Small rules on values that parsing, rendering and the operations share: the
// refusal of invalid input, hashes as the helper spells them, plain objects with
// closed keys, and the trusted-path pattern.

const crypto = require('node:crypto');

const { HelperError } = require('./constants');

const sha256Hex = (data) => crypto.createHash('sha256').update(data).digest('hex');

const sha12 = (text) => sha256Hex(text).slice(0, 12);

// Trusted operator paths: absolute, normalized, none of whitespace, quotes, control
// characters, shell metacharacters or systemd % and $ expansion.
const SAFE_PATH = /^\/[A-Za-z0-9._+@:/-]*$/;

function invalid(message) {
  return new HelperError('invalid-operation', message);
}

function requireObject(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${name} must be an object`);
  return value;
}

function closedKeys(object, allowed, name) {
  const unknown = Object.keys(object).find((key) => !allowed.includes(key));
  if (unknown !== undefined) {
    throw invalid(`${name}.${unknown} is not a field of ${name}; what is not policy comes from the host's envelope`);
  }
}

const isPlainObject = (value) => value !== null && typeof value === 'object' &&
  Object.getPrototypeOf(value) === Object.prototype;

module.exports = { sha256Hex, sha12, SAFE_PATH, invalid, requireObject, closedKeys, isPlainObject };
},
'render': function (module, exports, require) {
'use strict';
// What the helper renders: the native configuration snapshot, the unit and its
// managed header.

const { HEADER_FIRST_LINE, HelperError } = require('./constants');
const { invalid, isPlainObject, sha12, sha256Hex } = require('./values');

function unitHeader(namespaceId, agentId) {
  return `${HEADER_FIRST_LINE}\n# OCC-Namespace: ${namespaceId}\n# OCC-Agent: ${agentId}\n`;
}

const GATEWAY_PASSWORD_ENV = 'OPENCLAW_GATEWAY_PASSWORD';

const GATEWAY_PASSWORD_REF = Object.freeze({ source: 'env', provider: 'default', id: GATEWAY_PASSWORD_ENV });

// The expression form OCC accepts beside the SecretRef.
const GATEWAY_PASSWORD_EXPRESSION = `\${${GATEWAY_PASSWORD_ENV}}`;

// A number of the controller's document, kept as the text it was written in: a
// double would change what does not fit one (18446744073709551615, 1e400).
class SourceNumber {
  constructor(source) {
    this.source = source;
  }
}

// The controller's document, its numbers as written. JSON.parse gives a reviver
// each number's source text on the Node.js the hosts run (24); where it does not,
// a number a double would change is refused rather than rewritten.
function parseDocument(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value !== 'number') return value;
    if (context && typeof context.source === 'string') return new SourceNumber(context.source);
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) {
      throw invalid(`configuration holds a number (${value}) this Node.js cannot keep exactly`);
    }
    return value;
  });
}

function sameJson(a, b) {
  return canonicalJson(a) === canonicalJson(b);
}

// Pretty JSON with object keys sorted, two-space indentation, a trailing newline: the
// same document always gives the same bytes.
function canonicalJson(value) {
  const write = (v, depth) => {
    const pad = '  '.repeat(depth + 1);
    const close = '  '.repeat(depth);
    if (Array.isArray(v)) {
      if (v.length === 0) return '[]';
      return `[\n${v.map((item) => `${pad}${write(item, depth + 1)}`).join(',\n')}\n${close}]`;
    }
    if (v instanceof SourceNumber) return v.source;
    if (isPlainObject(v)) {
      const keys = Object.keys(v).sort();
      if (keys.length === 0) return '{}';
      return `{\n${keys.map((key) => `${pad}${JSON.stringify(key)}: ${write(v[key], depth + 1)}`).join(',\n')}\n${close}}`;
    }
    return JSON.stringify(v);
  };
  return `${write(value, 0)}\n`;
}

// The snapshot the spec allows for the controller's document: the document itself,
// plus, in password mode (explicit or omitted), the managed SecretRef (whichever
// form OCC accepts the document named it in). Any other gateway authentication is
// refused: the helper never writes a snapshot a gateway would serve without it.
function renderSnapshot(text) {
  let document;
  try {
    document = parseDocument(text);
  } catch (error) {
    if (error instanceof HelperError) throw error;
    throw invalid('configuration is not JSON');
  }
  if (!isPlainObject(document)) throw invalid('configuration must be a JSON object');
  if (document.gateway === undefined) document.gateway = {};
  if (!isPlainObject(document.gateway)) throw invalid('configuration.gateway must be an object');
  if (document.gateway.auth === undefined) document.gateway.auth = {};
  const auth = document.gateway.auth;
  if (!isPlainObject(auth)) throw invalid('configuration.gateway.auth must be an object');
  if (auth.password !== undefined && auth.password !== GATEWAY_PASSWORD_EXPRESSION &&
      !sameJson(auth.password, GATEWAY_PASSWORD_REF)) {
    throw invalid(`configuration.gateway.auth.password must be the managed SecretRef ${JSON.stringify(GATEWAY_PASSWORD_REF)} ` +
      `or ${GATEWAY_PASSWORD_EXPRESSION}`);
  }
  if (auth.mode === undefined || auth.mode === 'password') {
    auth.mode = 'password';
    auth.password = { ...GATEWAY_PASSWORD_REF };
  } else if (auth.mode !== 'trusted-proxy') {
    throw invalid(`configuration.gateway.auth.mode ${JSON.stringify(auth.mode)} is not one SSH Compute serves (password or trusted-proxy)`);
  }
  const rendered = canonicalJson(document);
  return { text: rendered, sha256: sha256Hex(rendered), needsPassword: auth.password !== undefined };
}

// Whether a snapshot's gateway reads the managed password: the unit then loads
// gateway-password.env.
function snapshotNeedsPassword(bytes) {
  try {
    const auth = JSON.parse(bytes.toString('utf8')).gateway.auth;
    return isPlainObject(auth) && auth.password !== undefined;
  } catch {
    return false;
  }
}

// The unit of the spec, rendered from typed fields only: the envelope's runtime paths,
// the account and port of agent.json, the placeholders the controller returned, and
// whether the snapshot needs the managed password. Every value in it has passed a
// check that keeps it to one line without systemd expansion: paths are SAFE_PATH,
// IDs carry no control characters and appear only in comments, the account is
// derived, placeholders follow OCC's rules.
function renderUnit({ namespaceId, agentId, account, agentDir, nodePath, openclawPath, port, placeholders, needsPassword,
  workspace }) {
  const home = `${agentDir}/home`;
  const state = `${agentDir}/state`;
  // An Agent with a completed workspace setup (workspace: its directory): the setup
  // program verifies the workspace before every start, as OCC's driver renders it.
  const setup = workspace === undefined ? [] : [
    `Environment="OPENCLAW_EXECUTABLE=${openclawPath}"`,
    `Environment="OPENCLAW_WORKSPACE_DIR=${workspace}"`,
    `Environment="OPENCLAW_WORKSPACE_SETUP_PATH=${agentDir}/workspace-setup.json"`,
  ];
  return [
    HEADER_FIRST_LINE,
    `# OCC-Namespace: ${namespaceId}`,
    `# OCC-Agent: ${agentId}`,
    '',
    '[Unit]',
    `Description=OpenClaw gateway of OCC Agent ${sha12(agentId)}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    `ExecStart=${nodePath} ${openclawPath} gateway --port ${port}`,
    `User=${account}`,
    `Group=${account}`,
    `Environment="HOME=${home}"`,
    `Environment="OPENCLAW_STATE_DIR=${state}"`,
    `Environment="OPENCLAW_CONFIG_PATH=${agentDir}/current/openclaw.json"`,
    `Environment="OPENCLAW_GATEWAY_PORT=${port}"`,
    ...placeholders.map(([name, value]) => `Environment="${name}=${value}"`),
    ...setup,
    ...(needsPassword ? [`EnvironmentFile=${agentDir}/gateway-password.env`] : []),
    `EnvironmentFile=-${agentDir}/env`,
    ...(workspace === undefined ? [] : [`ExecStartPre=${nodePath} ${agentDir}/workspace-setup.cjs`]),
    `WorkingDirectory=${home}`,
    'Restart=always',
    'RestartSec=2',
    'KillSignal=SIGTERM',
    'TimeoutStopSec=30',
    'NoNewPrivileges=true',
    'PrivateTmp=true',
    // The confinement of helper/README.md ("Unit sandbox"), each directive's reason there.
    'ProtectSystem=strict',
    `ReadWritePaths=${home} ${state}`,
    'ProtectHome=yes',
    'PrivateDevices=yes',
    'TemporaryFileSystem=/dev/shm:mode=1777',
    'PrivateIPC=yes',
    'RemoveIPC=yes',
    'ProtectProc=invisible',
    'ProtectKernelTunables=yes',
    'ProtectKernelModules=yes',
    'ProtectKernelLogs=yes',
    'ProtectControlGroups=yes',
    'ProtectClock=yes',
    'ProtectHostname=yes',
    'RestrictSUIDSGID=yes',
    'RestrictRealtime=yes',
    'RestrictNamespaces=yes',
    'LockPersonality=yes',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'SystemCallArchitectures=native',
    'SystemCallFilter=@system-service',
    'SystemCallErrorNumber=EPERM',
    'CapabilityBoundingSet=',
    'UMask=0077',
    'SocketBindDeny=any',
    `SocketBindAllow=tcp:${port}`,
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

module.exports = { unitHeader, canonicalJson, renderSnapshot, snapshotNeedsPassword, renderUnit };
},
'layout': function (module, exports, require) {
'use strict';
// The layout on the host and who owns it: the paths of a Namespace, an Agent and a
// revision under the runtime root, and the markers that say they are this Driver's.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError, MARKER_FORMAT, ROOT_UID, TRAVERSE_ONLY } = require('./constants');
const { guard } = require('./session');
const {
  checkFields, expectDir, expectFile, lstatOrNull, operatorDirExists, readMarker
} = require('./files');
const { sha256Hex } = require('./values');
const { snapshotNeedsPassword, unitHeader } = require('./render');

function layout(op) {
  const namespaces = path.join(op.root, 'namespaces');
  const nsDir = path.join(namespaces, op.namespace.hash);
  const L = {
    root: op.root,
    accounts: path.join(op.root, 'accounts'),
    namespaces,
    nsDir,
    nsMarker: path.join(nsDir, 'namespace.json'),
    agentsDir: path.join(nsDir, 'agents'),
  };
  if (op.agent) {
    const agentDir = path.join(L.agentsDir, op.agent.hash);
    Object.assign(L, {
      agentDir,
      agentMarker: path.join(agentDir, 'agent.json'),
      home: path.join(agentDir, 'home'),
      state: path.join(agentDir, 'state'),
      passwordFile: path.join(agentDir, 'gateway-password.env'),
      revisions: path.join(agentDir, 'revisions'),
      current: path.join(agentDir, 'current'),
      served: path.join(agentDir, 'served.json'),
      accountMarker: path.join(op.root, 'accounts', `${op.agent.account}.json`),
      unitPath: path.join(op.unitDirectory, op.agent.unitName),
    });
  }
  if (op.agent && op.revision) {
    L.revDir = path.join(L.revisions, op.revision.hash);
    L.revMarker = path.join(L.revDir, 'revision.json');
    L.revConfig = path.join(L.revDir, 'openclaw.json');
  }
  return L;
}

// What owns host state across releases: the Driver id and the implementation without
// its version. OCC names a packaged Driver \`<package>@<version>\`, and every release of
// the package manages what the others deployed (an upgrade, a rollback); another
// package or another Driver id stays foreign. An implementation with no version after
// its last \`@\` (occ/ssh, @scope/pkg, pkg@) is compared whole.
function ownerOf(implementation) {
  const at = implementation.lastIndexOf('@');
  return at > 0 && at < implementation.length - 1 ? implementation.slice(0, at) : implementation;
}

// The exact Driver and Namespace a marker belongs to: two Driver selections sharing a
// root never adopt each other's objects. \`implementation\` is the one the Namespace
// recorded when it was made (set by verifyNamespace), so that every marker below it
// names the same one, whichever release wrote it: a release before these rules, which
// compares it whole, still manages what it deployed after a later one redeployed it.
const namespaceOwner = (op) => ({
  driverId: op.driver.id, implementation: op.recorded ?? op.driver.implementation,
  namespaceId: op.namespace.id, namespaceName: op.namespace.name,
});

const agentOwner = (op) => ({
  ...namespaceOwner(op), agentId: op.agent.id, servicePrincipalId: op.agent.servicePrincipalId,
});

// A marker of \`expected\`'s owner: the same Driver id, the same implementation but for
// its version, and every other field exact.
function checkOwner(marker, expected, file, code) {
  const { implementation, ...exact } = expected;
  if (typeof marker.implementation !== 'string' || ownerOf(marker.implementation) !== ownerOf(implementation)) {
    throw new HelperError(code,
      `${file}: implementation is ${JSON.stringify(marker.implementation)}, expected ${JSON.stringify(ownerOf(implementation))} (any version)`);
  }
  checkFields(marker, exact, file, code);
}

// A marker's text as this helper writes it: its fields, its format and who wrote it
// (the implementation with its version, and the SHA-256 of the helper text the host's
// loader ran, null when the loader named none).
function markerText(op, fields) {
  const writtenBy = { implementation: op.driver.implementation, helper: op.helperSha256 ?? null };
  return `${JSON.stringify({ ...fields, format: MARKER_FORMAT, writtenBy })}\n`;
}

// true when the Namespace tree exists and is ours; false when absent.
function verifyNamespace(op, L, required) {
  if (!operatorDirExists(L.root) || !expectDir(L.namespaces) || !expectDir(L.nsDir)) {
    if (required) throw new HelperError('missing-namespace', `${L.nsDir} does not exist; ensure the Namespace first`);
    return false;
  }
  const marker = readMarker(L.nsMarker);
  if (!marker) throw new HelperError('foreign-marker', `${L.nsDir} has no namespace.json`);
  checkOwner(marker, namespaceOwner(op), L.nsMarker, 'foreign-marker');
  op.recorded = marker.implementation;
  expectDir(L.agentsDir);
  return true;
}

// namespaces/, <nsHash>/ and agents/ are 0711 root:root: an Agent's account can pass
// through to its own directory (whose path it is given) but cannot list them, so it
// learns neither which other Namespaces and Agents exist nor their hashes. Trees made
// before this rule (0755) are tightened; another owner is foreign.
function tightenTree(L) {
  let changed = false;
  for (const dir of [L.namespaces, L.nsDir, L.agentsDir]) {
    const st = expectDir(dir);
    if (!st) continue;
    if (st.uid !== ROOT_UID) throw new HelperError('foreign-marker', `${dir} is owned by uid ${st.uid}, not by the SSH account`);
    if ((st.mode & 0o7777) === TRAVERSE_ONLY) continue;
    guard(`chmod ${TRAVERSE_ONLY.toString(8)} ${dir}`);
    fs.chmodSync(dir, TRAVERSE_ONLY);
    changed = true;
  }
  return changed;
}

// The Agent marker, verified, or null when the Agent directory is absent.
function readAgent(op, L) {
  if (!expectDir(L.agentDir)) return null;
  const marker = readMarker(L.agentMarker);
  if (!marker) throw new HelperError('foreign-marker', `${L.agentDir} has no agent.json`);
  checkOwner(marker, { ...agentOwner(op), account: op.agent.account }, L.agentMarker, 'foreign-marker');
  for (const key of ['uid', 'gid']) {
    if (!Number.isSafeInteger(marker[key]) || marker[key] <= 0) {
      throw new HelperError('foreign-marker', `${L.agentMarker}: ${key} is not a valid id`);
    }
  }
  if (!Number.isSafeInteger(marker.port) || marker.port < 1 || marker.port > 65535) {
    throw new HelperError('foreign-marker', `${L.agentMarker}: port is not a valid port`);
  }
  for (const dir of [L.home, L.state, L.revisions]) expectDir(dir);
  expectFile(L.passwordFile);
  return marker;
}

// current must be a symlink to exactly revisions/<12 hex>; returns that hash or null.
function readCurrent(L) {
  const st = lstatOrNull(L.current);
  if (!st) return null;
  if (!st.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${L.current} is not a symlink`);
  const target = fs.readlinkSync(L.current);
  const match = /^revisions\/([0-9a-f]{12})$/.exec(target);
  if (!match) throw new HelperError('unexpected-symlink', `${L.current} points at ${JSON.stringify(target)}`);
  return match[1];
}

function readServed(op, L) {
  const marker = readMarker(L.served);
  if (!marker) return null;
  checkOwner(marker, agentOwner(op), L.served, 'foreign-marker');
  return marker;
}

function revisionMarker(op, snapshotSha256) {
  return {
    ...agentOwner(op),
    revisionId: op.revision.id,
    revisionNumber: op.revision.number,
    configurationSha256: op.revision.configurationSha256,
    snapshotSha256,
    harness: op.revision.harness,
  };
}

// Verifies an existing revision snapshot: ownership, identity (the revision and the
// controller's document it was prepared from), and the exact bytes, which must still
// hash to what prepare wrote. Returns null when the revision directory is absent,
// else { needsPassword } of the snapshot.
function verifyRevision(op, L, agentGid) {
  if (!expectDir(L.revDir)) return null;
  const marker = readMarker(L.revMarker);
  if (!marker) throw new HelperError('foreign-marker', `${L.revDir} has no revision.json`);
  checkOwner(marker, agentOwner(op), L.revMarker, 'foreign-marker');
  checkFields(marker, {
    revisionId: op.revision.id, revisionNumber: op.revision.number,
    configurationSha256: op.revision.configurationSha256, harness: op.revision.harness,
  }, L.revMarker, 'changed-snapshot');
  const st = expectFile(L.revConfig);
  if (!st) throw new HelperError('changed-snapshot', `${L.revConfig} is missing`);
  if (st.uid !== ROOT_UID || st.gid !== agentGid || (st.mode & 0o7777) !== 0o640) {
    throw new HelperError('changed-snapshot',
      `${L.revConfig} is ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}, expected ${ROOT_UID}:${agentGid} 640`);
  }
  const bytes = fs.readFileSync(L.revConfig);
  // Owner, group and mode can survive an in-place edit by root; the bytes cannot. A
  // gateway is never started, kept or stopped on a document that is not the admitted
  // one, so every operation that relies on the snapshot re-hashes it.
  if (sha256Hex(bytes) !== marker.snapshotSha256) {
    throw new HelperError('changed-snapshot',
      `${L.revConfig} no longer has the snapshotSha256 recorded in ${L.revMarker}: it was changed after prepare`);
  }
  if (op.snapshot !== undefined && !bytes.equals(Buffer.from(op.snapshot.text, 'utf8'))) {
    throw new HelperError('changed-snapshot', `${L.revConfig} differs from the snapshot of the controller's document`);
  }
  return { needsPassword: snapshotNeedsPassword(bytes), text: bytes.toString('utf8') };
}

// The revision the pointer names, verified: { number, id }, or null.
function currentRevision(op, L, currentHash) {
  if (currentHash === null) return null;
  // A symlinked revision directory must not lead the marker read elsewhere.
  if (!expectDir(path.join(L.revisions, currentHash))) return null;
  const marker = readMarker(path.join(L.revisions, currentHash, 'revision.json'));
  if (!marker) return null;
  checkOwner(marker, agentOwner(op), path.join(L.revisions, currentHash, 'revision.json'), 'foreign-marker');
  return Number.isSafeInteger(marker.revisionNumber) ? { number: marker.revisionNumber, id: marker.revisionId } : null;
}

// A revision number names one revision of an Agent: another id under the number of
// the current or served revision is refused (OCC's "Revision number belongs to
// another immutable revision"), in prepare and in activate.
function refuseNumberConflict(op, ...claims) {
  for (const claim of claims) {
    if (claim && claim.number === op.revision.number && claim.id !== op.revision.id) {
      throw new HelperError('revision-conflict',
        `revision number ${op.revision.number} belongs to another revision (${JSON.stringify(claim.id)}) ` +
        `of Agent ${op.agent.id}, not to ${JSON.stringify(op.revision.id)}`);
    }
  }
}

// The unit file's text when present and ours; refuses any other unit at that path.
function readUnit(unitPath, namespaceId, agentId) {
  const st = lstatOrNull(unitPath);
  if (!st) return null;
  if (st.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${unitPath} is a symlink`);
  if (!st.isFile()) throw new HelperError('foreign-unit', `${unitPath} is not a regular file`);
  const text = fs.readFileSync(unitPath, 'utf8');
  if (!text.startsWith(unitHeader(namespaceId, agentId))) {
    throw new HelperError('foreign-unit',
      `${unitPath} does not begin with the ownership header of Namespace ${namespaceId}, Agent ${agentId}`);
  }
  return text;
}

module.exports = {
  layout, ownerOf, namespaceOwner, agentOwner, checkOwner, markerText, verifyNamespace, tightenTree, readAgent, readCurrent,
  readServed, revisionMarker, verifyRevision, currentRevision, refuseNumberConflict, readUnit,
};
},
'leftovers': function (module, exports, require) {
'use strict';
// What an account can leave behind: schedules, processes, files, IPC objects.
//
// An account's uid goes back to the pool when the account is removed, and useradd
// hands it to the next account it makes: anything left behind (a crontab, a process,
// a file in /tmp, a shared-memory segment) would then belong to another Agent. So the
// accounts are denied cron and at from their creation, and removal ends and deletes
// all of it before the user goes.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError } = require('./constants');
const { guard, lock, progress, sleep } = require('./session');
const { run } = require('./children');
const { expectDir, lstatOrNull, removeFile, writeAtomic } = require('./files');

// cron with neither list lets every user schedule (Debian, cronie by default), so its
// deny list is created when absent; at with neither list allows only root, and
// creating an at.deny would open at to every other account, so it is only edited.
// An allow list, when present, decides alone and never names our accounts.
const SCHEDULERS = [
  { deny: '/etc/cron.deny', allow: '/etc/cron.allow', createDeny: true },
  { deny: '/etc/at.deny', allow: '/etc/at.allow', createDeny: false },
];

// Debian: crontabs/<user>, atjobs and atspool under /var/spool/cron; cronie
// /var/spool/cron/<user> and /var/spool/at; SUSE /var/spool/cron/tabs.
const SCHEDULE_DIRS = [
  '/var/spool/cron', '/var/spool/cron/crontabs', '/var/spool/cron/tabs', '/var/spool/cron/atjobs',
  '/var/spool/cron/atspool', '/var/spool/at', '/var/spool/at/spool',
];

// Places any account may write outside its own tree.
const SHARED_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/dev/mqueue', '/run/lock', '/var/crash'];

const PROCESS_ROUNDS = 20;

// The lines of an operator list file (/etc is trusted: a symlink there is followed),
// or null when it is absent.
function readList(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if (error.code === 'ENOENT') return null;
    throw error;
  }
  return text.split('\n').filter((line, i, all) => line !== '' || i < all.length - 1);
}

// Rewrites an operator list atomically with the same owner and mode.
function writeList(file, lines) {
  const target = fs.realpathSync(file);
  const st = fs.statSync(target);
  writeAtomic(target, lines.length ? `${lines.join('\n')}\n` : '', st.mode & 0o7777, st.uid, st.gid);
}

function denySchedulers(name) {
  let changed = false;
  for (const { deny, allow, createDeny } of SCHEDULERS) {
    const lines = readList(deny);
    if (lines === null) {
      if (!createDeny || readList(allow) !== null) continue;
      guard(`create ${deny}`);
      writeAtomic(deny, `${name}\n`, 0o644);
    } else if (lines.some((line) => line.trim() === name)) {
      continue;
    } else {
      guard(`add ${name} to ${deny}`);
      writeList(deny, [...lines, name]);
    }
    progress('deny', `${name} is denied by ${deny}`);
    changed = true;
  }
  return changed;
}

function undenySchedulers(name) {
  for (const { deny } of SCHEDULERS) {
    const lines = readList(deny);
    if (lines === null || !lines.some((line) => line.trim() === name)) continue;
    guard(`remove ${name} from ${deny}`);
    writeList(deny, lines.filter((line) => line.trim() !== name));
  }
}

// Crontabs and at jobs: regular files named after the account or owned by it. These
// directories are root's, so no account can race the removal.
function removeSchedules(account) {
  let changed = false;
  for (const dir of SCHEDULE_DIRS) {
    const st = lstatOrNull(dir);
    if (!st || !st.isDirectory()) continue;
    for (const entry of fs.readdirSync(dir)) {
      const file = path.join(dir, entry);
      const est = lstatOrNull(file);
      if (!est || !est.isFile() || (entry !== account.name && est.uid !== account.uid)) continue;
      guard(`remove ${file}`);
      removeFile(file);
      progress('schedule', `removed ${file} of ${account.name}`);
      changed = true;
    }
  }
  return changed;
}

// Pids of the processes whose real, effective, saved or filesystem uid is the
// account's. Zombies are skipped: they hold nothing and only wait to be reaped.
function processesOf(uid) {
  const pids = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    let status;
    try {
      status = fs.readFileSync(`/proc/${name}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const state = /^State:\s+(\S)/m.exec(status);
    if (state && (state[1] === 'Z' || state[1] === 'X')) continue;
    const ids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    if (ids && ids.slice(1).some((id) => Number(id) === uid)) pids.push(Number(name));
  }
  return pids;
}

// Ends every process of the account, repeating until none remains. kill(-1) made as
// the account reaches all of its processes in one pass the kernel makes under the
// task-list lock, so a process forking meanwhile cannot slip through; SIGKILL from
// root then reaches what the account may no longer signal (a setuid program it ran).
async function endProcesses(account) {
  let changed = false;
  for (let round = 1; ; round++) {
    const pids = processesOf(account.uid);
    if (pids.length === 0) return changed;
    if (round > PROCESS_ROUNDS) {
      throw new HelperError('command-failed',
        `processes of account ${account.name} (uid ${account.uid}) remain: ${pids.slice(0, 10).join(' ')}`);
    }
    guard(`end the processes of ${account.name}`);
    await run(process.execPath, ['-e', 'process.kill(-1, "SIGKILL")'], { as: account, allowFailure: true, timeoutMs: 15000 });
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    progress('processes', `ended ${pids.length} process(es) of ${account.name}`);
    changed = true;
    // SIGKILL is delivered at once but a process takes a moment to exit.
    await sleep(Math.min(50 * round, 500));
  }
}

// Runs find over the given trees as root, read-only: the first path owned by uid.
async function firstOwned(dirs, uid) {
  if (dirs.length === 0) return null;
  const result = await run('find', [...dirs, '-xdev', '-user', String(uid), '-print', '-quit'],
    { allowFailure: true, timeoutMs: 60000 });
  return result.stdout.split('\n')[0] || null;
}

function existingDirs(dirs) {
  return dirs.filter((dir) => {
    const st = lstatOrNull(dir);
    return st !== null && st.isDirectory();
  });
}

// Deletes, as the account itself, what it owns in the given trees: the account can
// delete only its own entries, so no symlink it planted (or swaps in meanwhile) can
// lead the deletion to anything it could not have deleted anyway. Directories it made
// untraversable are opened up first (`-exec ... ;` runs before find descends).
async function deleteAsAccount(account, dirs, select) {
  if (dirs.length === 0) return;
  const as = { as: account, allowFailure: true, timeoutMs: 90000 };
  await run('find', [...dirs, '-xdev', ...select, '-user', String(account.uid), '-type', 'd',
    '!', '-perm', '-u=rwx', '-exec', 'chmod', 'u+rwx', '{}', ';'], as);
  await run('find', [...dirs, '-xdev', ...select, '-delete'], as);
}

async function removeSharedFiles(account) {
  const dirs = existingDirs(SHARED_DIRS);
  if ((await firstOwned(dirs, account.uid)) === null) return;
  guard(`remove the files of ${account.name} in ${dirs.join(' ')}`);
  await deleteAsAccount(account, dirs, ['-user', String(account.uid)]);
  progress('files', `removed files of ${account.name} in shared directories`);
}

// System V IPC objects it owns or created; the gateway's own live in its private IPC
// namespace (PrivateIPC=yes), these could only come from elsewhere.
function ipcObjectsOf(uid) {
  const found = [];
  for (const [kind, flag] of [['shm', '-m'], ['msg', '-q'], ['sem', '-s']]) {
    let text;
    try {
      text = fs.readFileSync(`/proc/sysvipc/${kind}`, 'utf8');
    } catch {
      continue;
    }
    const [header, ...rows] = text.trim().split('\n');
    const columns = header.trim().split(/\s+/);
    const at = (row, column) => Number(row.trim().split(/\s+/)[columns.indexOf(column)]);
    for (const row of rows) {
      if (at(row, 'uid') === uid || at(row, 'cuid') === uid) {
        found.push({ flag, id: String(at(row, kind === 'shm' ? 'shmid' : kind === 'msg' ? 'msqid' : 'semid')) });
      }
    }
  }
  return found;
}

async function removeIpc(account) {
  for (const { flag, id } of ipcObjectsOf(account.uid)) {
    guard(`remove IPC object ${id} of ${account.name}`);
    await run('ipcrm', [flag, id], { allowFailure: true, timeoutMs: 15000 });
    progress('ipc', `removed IPC object ${flag} ${id} of ${account.name}`);
  }
}

// The user goes only when nothing of it runs and nothing it owns is left where the
// helper looked; otherwise a retryable error names what is left, and the marker stays.
async function checkNothingLeft(account) {
  const pids = processesOf(account.uid);
  if (pids.length > 0) {
    throw new HelperError('command-failed', `account ${account.name} still runs processes ${pids.slice(0, 10).join(' ')}`);
  }
  let file = await firstOwned(existingDirs([...SHARED_DIRS, ...SCHEDULE_DIRS]), account.uid);
  // systemd removes a stopped unit's private /tmp in the background: give it a moment.
  for (let round = 1; file && file.includes('/systemd-private-') && round <= 10; round++) {
    await sleep(100 * round);
    file = await firstOwned(existingDirs([...SHARED_DIRS, ...SCHEDULE_DIRS]), account.uid);
  }
  if (file) {
    throw new HelperError('command-failed',
      `${file} is owned by account ${account.name} (uid ${account.uid}) and could not be removed as that account; remove it and retry`);
  }
  const ipc = ipcObjectsOf(account.uid);
  if (ipc.length > 0) {
    throw new HelperError('command-failed', `IPC object ${ipc[0].flag} ${ipc[0].id} of account ${account.name} could not be removed`);
  }
}

// Empties the Agent's home and state as the Agent's account, whose processes have
// ended; the root-owned rest of the tree then goes with removeTree. What the account
// could not delete stays, and is named rather than removed by root.
async function clearAgentTree(L, identity) {
  const dirs = [L.home, L.state].filter((dir) => expectDir(dir));
  if (dirs.length === 0) return;
  guard(`empty ${dirs.join(' and ')} as ${identity.name}`);
  await deleteAsAccount(identity, dirs, ['-mindepth', '1']);
  for (const dir of dirs) {
    const left = fs.readdirSync(dir);
    if (left.length > 0) {
      throw new HelperError('command-failed',
        `${path.join(dir, left[0])} could not be removed as account ${identity.name}; remove it and retry`);
    }
  }
}

module.exports = {
  denySchedulers, undenySchedulers, removeSchedules, endProcesses, removeSharedFiles, removeIpc,
  checkNothingLeft, clearAgentTree,
};
},
'accounts': function (module, exports, require) {
'use strict';
// Accounts.
//
// Each Agent's account is made by one `useradd --system --user-group`, so its user and
// private group appear together, with a GECOS comment that carries a nonce also kept
// in the account marker. A same-named user or group made by anyone else cannot carry
// that nonce: the driver adopts, verifies and removes only accounts it made.

const crypto = require('node:crypto');

const { HelperError } = require('./constants');
const { guard, progress } = require('./session');
const { run } = require('./children');
const { expectDir, makeDir, readMarker, removeFile, writeAtomic } = require('./files');
const { sha12 } = require('./values');
const { agentOwner, checkOwner, markerText, readAgent, verifyNamespace } = require('./layout');
const {
  checkNothingLeft, denySchedulers, endProcesses, removeIpc, removeSchedules, removeSharedFiles,
  undenySchedulers
} = require('./leftovers');

async function lookupAccount(name) {
  const [passwd, group] = await Promise.all([
    run('getent', ['passwd', name], { allowFailure: true, timeoutMs: 15000 }),
    run('getent', ['group', name], { allowFailure: true, timeoutMs: 15000 }),
  ]);
  const parse = (result, what) => {
    if (result.code === 2) return null; // getent: key not found
    if (result.code !== 0) throw new HelperError('command-failed', `getent ${what} ${name}: exit ${result.code}`);
    return result.stdout.trim().split('\n')[0].split(':');
  };
  const pw = parse(passwd, 'passwd');
  const gr = parse(group, 'group');
  return {
    user: pw ? { uid: Number(pw[2]), gid: Number(pw[3]), comment: pw[4] } : null,
    group: gr ? { gid: Number(gr[2]) } : null,
  };
}

function accountFields(op) {
  return { ...agentOwner(op), account: op.agent.account };
}

function newAccountComment() {
  return `occ-ssh ${crypto.randomBytes(12).toString('hex')}`;
}

// The account a marker describes, to act as: { name, uid, gid }.
function accountIdentity(marker) {
  return { name: marker.account, uid: marker.uid, gid: marker.gid };
}

// Describes how an existing system account departs from its marker, or null. Absent
// parts of a completed account are no conflict: an interrupted removal leaves the user
// or group already gone. A marker written before the comment was recorded (no
// `comment`) is checked by its ids alone.
function accountConflict(marker, system) {
  const { user, group } = system;
  const name = marker.account;
  if (marker.uid === null || marker.gid === null) {
    // Pending: the driver ran, or was about to run, one useradd that makes both.
    if (!user) return group ? `group ${name} exists without its user, so useradd --user-group did not make it` : null;
    if (marker.comment === undefined) return `user ${name} exists and the pending marker records no comment to prove it the driver's`;
    if (!group || user.gid !== group.gid) return `user ${name} does not have the private group ${name}`;
  } else {
    if (user && user.uid !== marker.uid) return `user ${name} has uid ${user.uid}`;
    if (user && user.gid !== marker.gid) return `user ${name} has primary gid ${user.gid}`;
    if (group && group.gid !== marker.gid) return `group ${name} has gid ${group.gid}`;
  }
  if (user && marker.comment !== undefined && user.comment !== marker.comment) {
    return `user ${name} has comment ${JSON.stringify(user.comment)}, not the one the driver recorded`;
  }
  return null;
}

// Whether `account` is the name the driver gives the Agent's account: a runtime user
// prefix, then the first 12 hex digits of SHA-256 of "<namespaceId>:<agentId>".
function isAgentAccount(account, namespaceId, agentId) {
  return typeof account === 'string' && /^[a-z_][a-z0-9_-]{0,18}-[0-9a-f]{12}$/.test(account) &&
    account.endsWith(`-${sha12(`${namespaceId}:${agentId}`)}`);
}

// Why the marked account and the system's differ, or null when they are the same.
function accountMismatch(marker, system, name) {
  if (sameAccount(marker, system)) return null;
  return accountConflict(marker, system) || `user or group ${name} is missing`;
}

function sameAccount(marker, system) {
  return Boolean(system.user && system.group && marker.uid !== null && accountConflict(marker, system) === null);
}

// Creates or verifies the Agent's private user and group. The marker is written
// before useradd with null ids and the comment it will give the account, and completed
// after: a helper killed in between leaves a marker that lets the retry finish its own
// account, and only its own, rather than find an unmarked (hence foreign) one.
async function ensureAccount(op, L) {
  if (!expectDir(L.accounts)) {
    guard('create the accounts directory');
    makeDir(L.accounts, 0o700);
  }
  const name = op.agent.account;
  let marker = readMarker(L.accountMarker, 'foreign-account');
  const system = await lookupAccount(name);
  if (marker) {
    checkOwner(marker, accountFields(op), L.accountMarker, 'foreign-account');
    if (marker.uid !== null || marker.gid !== null) {
      const why = accountMismatch(marker, system, name);
      if (why) throw new HelperError('foreign-account', `account ${name} does not match ${L.accountMarker}: ${why}`);
      // An operator may have edited the lists since: the account stays denied.
      const denied = denySchedulers(name);
      return { uid: marker.uid, gid: marker.gid, changed: denied };
    }
    const conflict = accountConflict(marker, system);
    if (conflict) {
      throw new HelperError('foreign-account', `${conflict}; the pending ${L.accountMarker} does not adopt it`);
    }
    if (marker.comment === undefined) {
      guard('record the account comment');
      marker = { ...marker, comment: newAccountComment() };
      writeAtomic(L.accountMarker, markerText(op, marker), 0o600);
    }
  } else if (system.user || system.group) {
    throw new HelperError('foreign-account',
      `${system.user ? 'user' : 'group'} ${name} exists without the ownership marker ${L.accountMarker}`);
  } else {
    guard('record the account marker');
    marker = { ...accountFields(op), uid: null, gid: null, comment: newAccountComment() };
    writeAtomic(L.accountMarker, markerText(op, marker), 0o600);
  }
  if (!system.user) {
    guard('create the account');
    await run('useradd', [
      '--system', '--user-group', '--comment', marker.comment, '--home-dir', L.home,
      '--no-create-home', '--shell', '/usr/sbin/nologin', name,
    ], { timeoutMs: 30000 });
  }
  const created = await lookupAccount(name);
  if (!created.user || !created.group || created.user.gid !== created.group.gid ||
      created.user.comment !== marker.comment) {
    throw new HelperError('command-failed', `account ${name} is incomplete after useradd`);
  }
  denySchedulers(name);
  const ids = { uid: created.user.uid, gid: created.group.gid };
  guard('complete the account marker');
  writeAtomic(L.accountMarker, markerText(op, { ...accountFields(op), ...ids, comment: marker.comment }), 0o600);
  progress('account', `created system account ${name} (uid ${ids.uid}, gid ${ids.gid})`);
  return { ...ids, changed: true };
}

async function verifyAccount(op, L, agent) {
  expectDir(L.accounts);
  const marker = readMarker(L.accountMarker, 'foreign-account');
  if (!marker) throw new HelperError('foreign-account', `${L.accountMarker} is missing for Agent ${op.agent.id}`);
  checkOwner(marker, { ...accountFields(op), uid: agent.uid, gid: agent.gid }, L.accountMarker, 'foreign-account');
  const system = await lookupAccount(op.agent.account);
  const why = accountMismatch(marker, system, op.agent.account);
  if (why) throw new HelperError('foreign-account', `account ${op.agent.account} does not match ${L.accountMarker}: ${why}`);
}

// Refuses before any change when the account a marker names is not the one the driver
// made; returns the system account.
async function checkAccountForRemoval(markerPath, marker) {
  const system = await lookupAccount(marker.account);
  const conflict = accountConflict(marker, system);
  if (conflict) throw new HelperError('foreign-account', `${conflict}, ${markerPath} records otherwise`);
  return system;
}

// The account's user as the driver made it, to act as, or null when it is gone. A
// removed user's uid may already belong to another account: nothing is done as it.
function liveIdentity(marker, system) {
  if (!system.user) return null;
  return { name: marker.account, uid: system.user.uid, gid: system.user.gid };
}

// Ends everything the account runs or has scheduled; safe to repeat.
async function quiesceAccount(markerPath, marker) {
  const system = await checkAccountForRemoval(markerPath, marker);
  const account = liveIdentity(marker, system);
  if (!account) return false;
  const unscheduled = removeSchedules(account);
  return (await endProcesses(account)) || unscheduled;
}

// Removes an account the driver made, once nothing of it is left: its schedules, its
// processes, its files in shared places and its IPC objects go first, and the user
// goes only after a check finds none of them. The deny-list entries go after the
// user, and the marker last, so that an interrupted removal is found and finished.
async function removeAccount(markerPath, pending) {
  let marker = pending;
  const name = marker.account;
  let system = await checkAccountForRemoval(markerPath, marker);
  const account = liveIdentity(marker, system);
  if (account) {
    if (marker.uid === null) {
      // A pending marker whose account was made: record its ids before the user goes,
      // so that a retry can still tell its group from anyone else's.
      guard(`complete ${markerPath}`);
      marker = { ...marker, uid: account.uid, gid: account.gid };
      writeAtomic(markerPath, `${JSON.stringify(marker)}\n`, 0o600);
    }
    removeSchedules(account);
    await endProcesses(account);
    await removeSharedFiles(account);
    await removeIpc(account);
    await checkNothingLeft(account);
    guard(`remove user ${name}`);
    await run('userdel', [name], { timeoutMs: 30000 });
    system = await lookupAccount(name);
  }
  // userdel drops the same-named group itself when USERGROUPS_ENAB is set; look again.
  if (system.group) {
    if (system.group.gid !== marker.gid) throw new HelperError('foreign-account', `group ${name} changed during removal`);
    guard(`remove group ${name}`);
    await run('groupdel', [name], { timeoutMs: 30000 });
  }
  undenySchedulers(name);
  guard(`remove ${markerPath}`);
  removeFile(markerPath);
  progress('account', `removed system account ${name}`);
}

// Reads and verifies everything activate, stop and retire rely on.
async function loadAgent(op, L, { required }) {
  if (!verifyNamespace(op, L, required)) return null;
  const agent = readAgent(op, L);
  if (!agent) {
    if (required) throw new HelperError('missing-revision', `${L.agentDir} does not exist; prepare the revision first`);
    return null;
  }
  await verifyAccount(op, L, agent);
  return agent;
}

module.exports = {
  accountFields, accountIdentity, isAgentAccount, ensureAccount, checkAccountForRemoval,
  quiesceAccount, removeAccount, loadAgent,
};
},
'workspace-setup': function (module, exports, require) {
'use strict';
// Workspace setup: OCC's `context.workspaceSetup`, the four documents its Console
// pre-fills (AGENTS.md, SOUL.md, IDENTITY.md, USER.md), delivered into the Agent's
// OpenClaw workspace as OCC's own SSH driver delivers them, with names and formats
// OCC's worker reads: `<agentDir>/workspace-setup.cjs` (the setup program),
// `<agentDir>/workspace-setup.json` (the completion record), `.oce-workspace-setup.json`
// in the workspace (the program's own marker) and the unit's ExecStartPre.
//
// What differs from OCC's driver is where each part comes from. The documents and
// their identity come from the host's envelope (the controller's call, never the
// component); the program is this helper's own text (pinned with it, never sent by
// anyone); the destination is derived here from trusted values: the Agent directory
// of the call's subjects and the workspace the admitted snapshot names, held inside
// that Agent's own home/ or state/. The program runs as the Agent's account, so
// whatever the account planted on the way (a symlink) leads only where that account
// may write anyway. No document content is ever in an argument, the environment, an
// error or a progress line: it travels on the program's stdin.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const { HelperError, ROOT_UID } = require('./constants');
const { guard, progress } = require('./session');
const { run } = require('./children');
const { acquireLock, releaseLock } = require('./lock');
const {
  NEARLY_FULL_BYTES, expectDir, expectFile, freeBytes, readMarker, writeAtomic
} = require('./files');
const { SAFE_PATH, closedKeys, invalid, isPlainObject, requireObject } = require('./values');
const { verifyRevision } = require('./layout');
const { loadAgent } = require('./accounts');

const WORKSPACE_FILE_NAMES = Object.freeze(['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md']);

const WORKSPACE_FILE_MAX_BYTES = 16 * 1024;

const WORKSPACE_SETUP_FIELDS = ['id', 'namespaceId', 'agentId', 'defaultsId', 'files', 'completed'];

const WORKSPACE_SETUP_ID_MAX = 256;

const WORKSPACE_SETUP_FAILED = 'WORKSPACE_SETUP_FAILED';

// Two runs of OpenClaw's own setup, each a few seconds on a loaded host.
const WORKSPACE_SETUP_TIMEOUT_MS = 150000;

// OCC's WorkspaceSetup (packages/contracts/src/workspace-setup.ts), checked as its
// setup runtime checks it: `completed` with no files (the record of a delivery), or
// not completed with at least one of the four files, each well-formed Unicode without
// NUL and at most 16 KiB.
function checkWorkspaceSetup(value, name) {
  const setup = requireObject(value, name);
  closedKeys(setup, WORKSPACE_SETUP_FIELDS, name);
  for (const key of ['id', 'namespaceId', 'agentId']) {
    const v = setup[key];
    if (typeof v !== 'string' || v.length === 0 || v.length > WORKSPACE_SETUP_ID_MAX || !v.isWellFormed()) {
      throw invalid(`${name}.${key} must be a well-formed string of 1 to ${WORKSPACE_SETUP_ID_MAX} characters`);
    }
  }
  if (setup.defaultsId !== undefined && (typeof setup.defaultsId !== 'string' || !/^[a-f0-9]{64}$/.test(setup.defaultsId))) {
    throw invalid(`${name}.defaultsId must be a SHA-256 digest (64 lowercase hex characters)`);
  }
  if (typeof setup.completed !== 'boolean') throw invalid(`${name}.completed must be a boolean`);
  if (setup.files !== undefined) {
    const files = requireObject(setup.files, `${name}.files`);
    if (setup.completed) throw invalid(`${name}.files: a completed setup carries no files`);
    for (const [file, content] of Object.entries(files)) {
      if (!WORKSPACE_FILE_NAMES.includes(file)) {
        throw invalid(`${name}.files: ${JSON.stringify(file)} is not one of ${WORKSPACE_FILE_NAMES.join(', ')}`);
      }
      if (typeof content !== 'string' || !content.isWellFormed() || content.includes('\0') ||
          Buffer.byteLength(content, 'utf8') > WORKSPACE_FILE_MAX_BYTES) {
        throw invalid(`${name}.files.${file} must be well-formed Unicode without NUL and at most 16 KiB`);
      }
    }
  }
  if (!setup.completed && Object.keys(setup.files || {}).length === 0) {
    throw invalid(`${name}: a setup that is not completed carries at least one file`);
  }
  return setup;
}

// The identity a completion record and the program's marker hold, in OCC's key order.
function workspaceSetupIdentity(setup) {
  return {
    id: setup.id, namespaceId: setup.namespaceId, agentId: setup.agentId,
    ...(setup.defaultsId === undefined ? {} : { defaultsId: setup.defaultsId }),
  };
}

// The workspace the admitted snapshot gives OpenClaw's one (main) Agent, held inside
// this Agent's own home/ or state/: `agents.entries.main.workspace`, else
// `agents.defaults.workspace`, else `<state>/workspace` (OCC's rule). A document with
// an agent list, or entries besides `main`, has no one workspace to set up.
function workspaceDirectory(snapshotText, L) {
  const document = JSON.parse(snapshotText);
  const agents = document.agents === undefined ? {} : document.agents;
  if (!isPlainObject(agents) || agents.list !== undefined ||
      (agents.entries !== undefined && (!isPlainObject(agents.entries) ||
        Object.keys(agents.entries).some((id) => id !== 'main')))) {
    throw invalid('workspace setup supports only the native main Agent: the configuration has agents.list or entries besides main');
  }
  const main = isPlainObject(agents.entries) && isPlainObject(agents.entries.main) ? agents.entries.main : {};
  const defaults = isPlainObject(agents.defaults) ? agents.defaults : {};
  const configured = main.workspace !== undefined ? main.workspace
    : defaults.workspace !== undefined ? defaults.workspace : path.join(L.state, 'workspace');
  if (typeof configured !== 'string' || !SAFE_PATH.test(configured) || path.posix.normalize(configured) !== configured ||
      configured.endsWith('/')) {
    throw invalid('workspace setup needs the configured workspace to be a normalized absolute path without special characters');
  }
  if (![L.home, L.state].some((root) => configured.startsWith(`${root}/`))) {
    throw invalid(`workspace setup writes only inside this Agent's home or state (${L.home}, ${L.state}), ` +
      'not where the configuration puts the workspace');
  }
  return configured;
}

// The setup program. It runs as the Agent's account, with the setup (or its completion
// record) on stdin or at OPENCLAW_WORKSPACE_SETUP_PATH, the workspace at
// OPENCLAW_WORKSPACE_DIR and OpenClaw's entrypoint at OPENCLAW_EXECUTABLE, and
// answers as OCC's setup runtime does: `{"completed":true,"id"}` on stdout, or
// `WORKSPACE_SETUP_FAILED` on stderr and exit 1, never anything of the documents.
//  - A marker `.oce-workspace-setup.json` in the workspace that holds this setup's
//    identity: done (the lost acknowledgement, and every start of the gateway after).
//  - Another marker, or none for a completed setup: failure (the start is blocked).
//  - Otherwise: every supplied file present must be stock (what OpenClaw's setup
//    writes) or already the submitted text; then OpenClaw's own `setup --baseline`
//    creates the workspace without starting a gateway, each supplied file is replaced
//    atomically where it is absent or stock, setup runs again (its bootstrap then sees
//    the submitted profile), the files are read back, and the marker is written last.
// Self-contained: the helper writes this function's own source as the program.
function workspaceSetupProgram() {
  const fs = require('node:fs');
  const path = require('node:path');
  const os = require('node:os');
  const crypto = require('node:crypto');
  const { spawnSync } = require('node:child_process');
  const NAMES = ['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md'];
  const FIELDS = ['id', 'namespaceId', 'agentId', 'defaultsId', 'files', 'completed'];
  const MARKER = '.oce-workspace-setup.json';
  const TEMP = '.oce-workspace-setup.tmp';
  const failed = () => { throw new Error('WORKSPACE_SETUP_FAILED'); };
  const lstat = (p) => {
    try {
      return fs.lstatSync(p);
    } catch (error) {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    }
  };
  // A regular file with one link, read without following a symlink; undefined if absent.
  const readRegular = (file, limit = 32768) => {
    const st = lstat(file);
    if (st === undefined) return undefined;
    if (!st.isFile() || st.nlink !== 1 || st.size > limit) failed();
    const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const opened = fs.fstatSync(fd);
      if (!opened.isFile() || opened.nlink !== 1 || opened.size > limit) failed();
      return fs.readFileSync(fd, 'utf8');
    } finally {
      fs.closeSync(fd);
    }
  };
  // Every existing component of the workspace path is a directory, none a symlink.
  const checkChain = (dir) => {
    let at = '/';
    for (const part of dir.split('/').filter(Boolean)) {
      at = path.join(at, part);
      const st = lstat(at);
      if (st !== undefined && (st.isSymbolicLink() || !st.isDirectory())) failed();
    }
  };
  const replace = (file, text) => {
    const dir = path.dirname(file);
    const temp = path.join(dir, TEMP);
    readRegular(temp);
    fs.rmSync(temp, { force: true });
    try {
      const fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL |
        fs.constants.O_NOFOLLOW, 0o600);
      try {
        fs.writeFileSync(fd, text, 'utf8');
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(temp, file);
      const parent = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      try {
        fs.fsyncSync(parent);
      } finally {
        fs.closeSync(parent);
      }
    } finally {
      fs.rmSync(temp, { force: true });
    }
  };
  // A template as OpenClaw's setup writes it: without its front matter.
  const stockText = (raw) => {
    const text = raw.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
    const open = /^---[^\S\n]*\n/.exec(text);
    if (open === null) return raw;
    const rest = text.slice(open[0].length);
    const close = /(?:^|\n)---[^\S\n]*(?:\n|$)/.exec(rest);
    return close === null ? raw : rest.slice(close.index + close[0].length).replace(/^\s+/, '');
  };

  const delivery = process.env.OPENCLAW_WORKSPACE_SETUP_PATH;
  const raw = fs.readFileSync(delivery === undefined ? 0 : delivery, 'utf8');
  if (Buffer.byteLength(raw) > 400000) failed();
  const setup = JSON.parse(raw);
  if (setup === null || typeof setup !== 'object' || Array.isArray(setup) ||
      Object.keys(setup).some((key) => !FIELDS.includes(key)) ||
      [setup.id, setup.namespaceId, setup.agentId].some((v) => typeof v !== 'string' || v.length === 0 ||
        v.length > 256 || !v.isWellFormed()) ||
      typeof setup.completed !== 'boolean' ||
      (setup.defaultsId !== undefined && (typeof setup.defaultsId !== 'string' || !/^[a-f0-9]{64}$/.test(setup.defaultsId)))) {
    failed();
  }
  const files = setup.files === undefined ? {} : setup.files;
  if (files === null || typeof files !== 'object' || Array.isArray(files) ||
      (setup.completed && setup.files !== undefined) ||
      (!setup.completed && Object.keys(files).length === 0) ||
      Object.entries(files).some(([name, v]) => !NAMES.includes(name) || typeof v !== 'string' ||
        !v.isWellFormed() || v.includes('\0') || Buffer.byteLength(v) > 16384)) {
    failed();
  }
  const workspace = process.env.OPENCLAW_WORKSPACE_DIR;
  if (!workspace || !path.isAbsolute(workspace) || path.resolve(workspace) !== workspace) failed();
  checkChain(workspace);
  const identity = {
    id: setup.id, namespaceId: setup.namespaceId, agentId: setup.agentId,
    ...(setup.defaultsId === undefined ? {} : { defaultsId: setup.defaultsId }),
  };
  const markerPath = path.join(workspace, MARKER);
  const marker = readRegular(markerPath, 4096);
  if (marker !== undefined) {
    if (marker !== JSON.stringify(identity)) failed();
  } else {
    if (setup.completed) failed();
    // The templates of the OpenClaw package the gateway runs: what "stock" means.
    const executable = fs.realpathSync(process.env.OPENCLAW_EXECUTABLE || failed());
    let root = path.dirname(executable);
    let found = false;
    for (let depth = 0; depth < 4 && !found; depth += 1) {
      const manifest = readRegular(path.join(root, 'package.json'), 1 << 20);
      if (manifest !== undefined && JSON.parse(manifest).name === 'openclaw') found = true;
      else root = path.dirname(root);
    }
    if (!found) failed();
    const templates = NAMES.map((name) => [name,
      stockText(fs.readFileSync(path.join(root, 'docs', 'reference', 'templates', name), 'utf8'))]);
    const defaultsId = crypto.createHash('sha256').update(JSON.stringify(templates)).digest('hex');
    if (setup.defaultsId !== undefined && setup.defaultsId !== defaultsId) failed();
    const stock = Object.fromEntries(templates);
    // Every supplied file is checked before anything is created or replaced.
    for (const name of NAMES) {
      const content = readRegular(path.join(workspace, name));
      if (Object.hasOwn(files, name) && content !== undefined && content !== stock[name] && content !== files[name]) failed();
    }
    fs.mkdirSync(workspace, { recursive: true, mode: 0o700 });
    checkChain(workspace);
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'oce-workspace-setup-'));
    try {
      const config = path.join(scratch, 'openclaw.json');
      fs.writeFileSync(config, JSON.stringify({
        agents: { defaults: { workspace }, entries: { main: {} } },
        gateway: { mode: 'local' },
      }), { mode: 0o600 });
      const openclawSetup = () => {
        const result = spawnSync(process.execPath, [executable, 'setup', '--baseline', '--workspace', workspace], {
          env: { ...process.env, OPENCLAW_CONFIG_PATH: config },
          stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, maxBuffer: 1 << 20,
        });
        if (result.error || result.status !== 0) failed();
      };
      openclawSetup();
      for (const [name, text] of Object.entries(files)) {
        const file = path.join(workspace, name);
        const content = readRegular(file);
        if (content === text) continue;
        if (content !== undefined && content !== stock[name]) failed();
        replace(file, text);
      }
      openclawSetup();
      for (const [name, text] of Object.entries(files)) {
        if (readRegular(path.join(workspace, name)) !== text) failed();
      }
      replace(markerPath, JSON.stringify(identity));
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
  // A completed record is the restart guard the unit reads: it stays.
  if (delivery !== undefined && !setup.completed) {
    try {
      fs.unlinkSync(delivery);
    } catch (error) {
      if (!['ENOENT', 'EROFS', 'EACCES', 'EPERM'].includes(error.code)) throw error;
    }
  }
  process.stdout.write(`${JSON.stringify({ completed: true, id: setup.id })}\n`);
}

// The program as written to <agentDir>/workspace-setup.cjs: this helper's own text.
const WORKSPACE_SETUP_SOURCE = `'use strict';
// The OCC SSH Compute Driver's workspace setup program, written by its helper (which
// the operator approved by SHA-256, this text included). It runs as the Agent's
// account: once to deliver the setup, and before every start of the gateway.
try {
  (${workspaceSetupProgram.toString()})();
} catch {
  process.stderr.write('${WORKSPACE_SETUP_FAILED}\\n');
  process.exitCode = 1;
}
`;

// The setup of this call (or the one recorded) for prepare and activate, decided
// before anything changes, as OCC's driver decides it: null when neither the call nor
// the Agent has one; a setup other than the recorded one is refused (an Agent is set
// up once), and so is a workspace outside the Agent's own home and state.
function planWorkspaceSetup(op, L, snapshotText) {
  const recordPath = path.join(L.agentDir, 'workspace-setup.json');
  const saved = expectDir(L.agentDir) ? readMarker(recordPath) : null;
  if (op.workspaceSetup === undefined && saved === null) return null;
  const setup = op.workspaceSetup !== undefined ? op.workspaceSetup : saved;
  if (setup.namespaceId !== op.namespace.id || setup.agentId !== op.agent.id) {
    throw new HelperError('foreign-marker',
      `${recordPath} records the workspace setup of another Agent, not of Agent ${op.agent.id} of Namespace ${op.namespace.id}`);
  }
  if (saved !== null && JSON.stringify(saved) !== JSON.stringify({ ...workspaceSetupIdentity(setup), completed: true })) {
    throw new HelperError('foreign-marker',
      `${recordPath} records another workspace setup than ${JSON.stringify(setup.id)}; ` +
      'an Agent is set up once (OCC keeps the record it completed)');
  }
  return {
    setup, saved, recordPath,
    programPath: path.join(L.agentDir, 'workspace-setup.cjs'),
    workspace: workspaceDirectory(snapshotText, L),
  };
}

// Delivers (or verifies) a planned setup: the program is (re)written from this
// helper's own text, then run as the Agent's account with the setup on stdin; the
// completion record is written once. Called with the host lock held; the program's
// run (a first delivery runs OpenClaw's own setup twice, several seconds) happens
// without it, as it changes nothing but the Agent's own workspace as the Agent's
// own account, and the lock is taken again, and the Agent's markers and snapshot
// checked again, before the record is written. Returns whether anything changed.
async function applyWorkspaceSetup(op, L, account, plan) {
  const { setup, saved, recordPath, programPath, workspace } = plan;
  let changed = false;
  const existing = expectFile(programPath);
  if (!existing || existing.uid !== ROOT_UID || existing.gid !== account.gid || (existing.mode & 0o7777) !== 0o640 ||
      fs.readFileSync(programPath, 'utf8') !== WORKSPACE_SETUP_SOURCE) {
    guard('write the workspace setup program');
    // Root's and group-readable: the Agent's account runs it but cannot change it.
    writeAtomic(programPath, WORKSPACE_SETUP_SOURCE, 0o640, ROOT_UID, account.gid);
    changed = true;
  }
  guard('run the workspace setup');
  progress('workspace-setup', `${saved ? 'verifying' : 'delivering'} workspace setup ${setup.id} as ${account.name}`);
  await releaseLock();
  const result = await run(op.nodePath, [programPath], {
    as: account,
    cwd: L.state,
    env: {
      HOME: L.home,
      OPENCLAW_STATE_DIR: L.state,
      OPENCLAW_CONFIG_PATH: L.revConfig,
      OPENCLAW_EXECUTABLE: op.openclawPath,
      OPENCLAW_WORKSPACE_DIR: workspace,
    },
    input: JSON.stringify(saved !== null ? saved : setup),
    timeoutMs: WORKSPACE_SETUP_TIMEOUT_MS,
    allowFailure: true,
  });
  // The program's output is never passed on: OpenClaw's own may quote the documents.
  // A program that failed where its filesystem has no room left failed for that.
  if (result.code !== 0 && !result.signal) {
    const free = freeBytes(workspace);
    if (free !== null && free < NEARLY_FULL_BYTES) {
      throw new HelperError('disk-full',
        `the workspace setup of Agent ${op.agent.id} at ${workspace} exited ${result.code} with ` +
        `${Math.floor(free / 1024)} KiB free on its filesystem: the disk is full; free space there, then retry`);
    }
  }
  if (result.code !== 0 || result.signal) {
    throw new HelperError('workspace-setup-failed',
      `${WORKSPACE_SETUP_FAILED}: the workspace setup of Agent ${op.agent.id} at ${workspace} ` +
      `${result.signal ? `was killed by ${result.signal}` : `exited ${result.code}`}: ` +
      'a supplied file there is neither stock nor the submitted text, the workspace marker is another setup\'s, ' +
      'or OpenClaw\'s own setup failed; inspect the workspace as the Agent\'s account');
  }
  await acquireLock(L.root);
  // What the record vouches for is still this Agent's, and this revision's snapshot.
  const again = await loadAgent(op, L, { required: true });
  if (again.uid !== account.uid || again.gid !== account.gid || !verifyRevision(op, L, account.gid)) {
    throw new HelperError('superseded', `Agent ${op.agent.id} changed while its workspace setup ran`);
  }
  const now = readMarker(recordPath);
  if (now !== null && JSON.stringify(now) !== JSON.stringify({ ...workspaceSetupIdentity(setup), completed: true })) {
    throw new HelperError('foreign-marker', `${recordPath} records another workspace setup than ${JSON.stringify(setup.id)}`);
  }
  if (saved === null && now === null) {
    guard('record the completed workspace setup');
    writeAtomic(recordPath, JSON.stringify({ ...workspaceSetupIdentity(setup), completed: true }), 0o640,
      ROOT_UID, account.gid);
    progress('workspace-setup', `workspace setup ${setup.id} completed`);
    changed = true;
  }
  return changed;
}

module.exports = {
  WORKSPACE_FILE_NAMES, WORKSPACE_SETUP_FAILED, checkWorkspaceSetup, WORKSPACE_SETUP_SOURCE,
  planWorkspaceSetup, applyWorkspaceSetup,
};
},
'operation': function (module, exports, require) {
'use strict';
// The operation and its envelope: the driver's operation (its policy alone) and the
// host's envelope (the trusted settings and the call's subjects), parsed and checked
// closed; the table of operations and the fields each may carry.

const path = require('node:path');

const { MAX_DEADLINE_MS, PROTOCOL_VERSION, UNIT_PREFIX } = require('./constants');
const { run } = require('./children');
const { SAFE_PATH, closedKeys, invalid, requireObject, sha12, sha256Hex } = require('./values');
const { renderSnapshot } = require('./render');
const { checkWorkspaceSetup } = require('./workspace-setup');

const CONTROL = /[\x00-\x1f\x7f]/;

function requireId(value, name) {
  // Ids go into the unit header lines: a newline would forge another header line.
  if (typeof value !== 'string' || value.length === 0 || value.length > 512 || CONTROL.test(value)) {
    throw invalid(`${name} must be a non-empty string without control characters`);
  }
  return value;
}

function requirePath(value, name) {
  if (typeof value !== 'string' || !SAFE_PATH.test(value) || path.posix.normalize(value) !== value ||
      value === '/' || value.endsWith('/')) {
    throw invalid(`${name} must be a normalized absolute path without special characters`);
  }
  return value;
}

function requireInt(value, name, min, max) {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw invalid(`${name} must be an integer in ${min}..${max}`);
  return value;
}

function requireHash(value, expected, name) {
  if (value !== expected) throw invalid(`${name} is ${JSON.stringify(value)}, expected ${expected}`);
}

// Each operation: whether it acts for an Agent (the envelope must name one) and for
// a revision, and the fields the operation itself may carry besides version, op and
// deadlineMs. Those are the component's policy; everything the helper acts on beyond
// them comes from the envelope the host wrote.
const OPERATIONS = {
  'probe': { namespace: false, agent: false, revision: false, fields: [] },
  'ensure-namespace': { namespace: true, agent: false, revision: false, fields: [] },
  'prepare': { namespace: true, agent: true, revision: true, fields: ['configuration'] },
  'activate': { namespace: true, agent: true, revision: true, fields: [] },
  'deactivate': { namespace: true, agent: true, revision: true, fields: [] },
  'stop': { namespace: true, agent: true, revision: true, fields: [] },
  'retire': { namespace: true, agent: true, revision: true, fields: [] },
  'delete-namespace': { namespace: true, agent: false, revision: false, fields: [] },
  'inspect-agent': { namespace: true, agent: true, revision: false, fields: [] },
  'delete-agent': { namespace: true, agent: true, revision: false, fields: [] },
  'describe-runtime': { namespace: true, agent: true, revision: true, fields: [] },
  'read-logs': { namespace: true, agent: true, revision: true, fields: [] },
  'diagnose': { namespace: true, agent: true, revision: true, fields: [] },
};

const COMMON_FIELDS = ['version', 'op', 'deadlineMs'];

const ENVELOPE_FIELDS = [
  'version', 'method', 'ops', 'host', 'driver', 'runtime', 'gatewayPortRange', 'namespace', 'agent',
  'revision', 'launchEnvironment', 'workspaceSetup', 'events', 'logRequest', 'maxSessions', 'harnessVersion',
];

// The controller's bounds on one log read (OCC asks 1 MiB and at most 1000 lines).
const MAX_LOG_BYTES = 4 << 20;
const MAX_LOG_LINES = 1000;
const MAX_SINCE_SECONDS = 366 * 86400;
const INVOCATION_ID = /^[0-9a-f]{32}$/;

const MIN_GATEWAY_PORT = 1024;

// A runtime user prefix: of a Linux user name's characters, never root; accounts take
// its first 19 characters (the spec's rule), so it may be longer than a user name.
const RUNTIME_USER = /^[a-z_][a-z0-9_-]{0,254}$/;

const ACCOUNT_PREFIX_LENGTH = 19;

// OCC's rules for the placeholders beforeWorkloadStart may return
// (apps/controller/src/drivers/compute/ssh/remote-helper.cjs): the host checks the
// same before the driver sees them; tests/helper/envelope.test.js holds both to one table.
const PLACEHOLDER_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;

const PLACEHOLDER_VALUE = /^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const RESERVED_PLACEHOLDER = /^(?:HOME|PATH|TMPDIR|CODEX_HOME|NODE_OPTIONS|NODE_PATH|BASH_ENV|ENV|LOG_FORMAT|RUST_LOG|XDG_.*|OPENCLAW_.*|OTEL_.*|LD_.*|DYLD_.*)$/;

const MAX_PLACEHOLDERS = 64;

function decodeJson(argument, what) {
  if (typeof argument !== 'string' || argument.length === 0) throw invalid(`missing base64 ${what} argument`);
  let value;
  try {
    value = JSON.parse(Buffer.from(argument, 'base64').toString('utf8'));
  } catch {
    throw invalid(`the ${what} argument is not base64 JSON`);
  }
  return requireObject(value, what);
}

function requireString(value, name) {
  if (typeof value !== 'string') throw invalid(`${name} must be a string`);
  return value;
}

function launchEnvironment(value) {
  const env = requireObject(value, 'envelope.launchEnvironment');
  if (Object.getPrototypeOf(env) !== Object.prototype) throw invalid('envelope.launchEnvironment must be a plain object');
  const names = Object.keys(env).sort();
  if (names.length > MAX_PLACEHOLDERS) {
    throw invalid(`envelope.launchEnvironment has ${names.length} placeholders, more than ${MAX_PLACEHOLDERS}`);
  }
  for (const name of names) {
    if (!PLACEHOLDER_NAME.test(name)) throw invalid(`envelope.launchEnvironment.${name}: the name must match ${PLACEHOLDER_NAME}`);
    if (RESERVED_PLACEHOLDER.test(name)) throw invalid(`envelope.launchEnvironment.${name}: the name is reserved`);
    if (typeof env[name] !== 'string' || !PLACEHOLDER_VALUE.test(env[name])) {
      throw invalid(`envelope.launchEnvironment.${name}: the value must be an opaque reference matching ${PLACEHOLDER_VALUE}`);
    }
  }
  return names.map((name) => [name, env[name]]);
}

// The envelope: what the host took from the trusted installation and from the call the
// controller made. Every value here is checked as an operator setting or an ID is, but
// none of it is the component's to choose.
function parseEnvelope(argument) {
  const env = decodeJson(argument, 'envelope');
  closedKeys(env, ENVELOPE_FIELDS, 'envelope');
  if (env.version !== PROTOCOL_VERSION) throw invalid(`unsupported envelope version ${JSON.stringify(env.version)}`);
  requireId(env.method, 'envelope.method');
  if (!Array.isArray(env.ops) || env.ops.some((op) => !Object.hasOwn(OPERATIONS, op))) {
    throw invalid('envelope.ops must list helper operations');
  }
  requireId(env.host, 'envelope.host');
  const driver = requireObject(env.driver, 'envelope.driver');
  closedKeys(driver, ['id', 'implementation'], 'envelope.driver');
  requireId(driver.id, 'envelope.driver.id');
  requireId(driver.implementation, 'envelope.driver.implementation');
  const runtime = requireObject(env.runtime, 'envelope.runtime');
  closedKeys(runtime, ['root', 'unitDirectory', 'nodePath', 'openclawPath', 'user'], 'envelope.runtime');
  for (const key of ['root', 'unitDirectory', 'nodePath', 'openclawPath']) requirePath(runtime[key], `envelope.runtime.${key}`);
  if (typeof runtime.user !== 'string' || !RUNTIME_USER.test(runtime.user) || runtime.user === 'root') {
    throw invalid('envelope.runtime.user must be a Linux user name prefix other than root');
  }
  const range = requireObject(env.gatewayPortRange, 'envelope.gatewayPortRange');
  closedKeys(range, ['start', 'end'], 'envelope.gatewayPortRange');
  requireInt(range.start, 'envelope.gatewayPortRange.start', MIN_GATEWAY_PORT, 65535);
  requireInt(range.end, 'envelope.gatewayPortRange.end', range.start, 65535);
  if (env.namespace !== undefined) {
    const ns = requireObject(env.namespace, 'envelope.namespace');
    closedKeys(ns, ['id', 'name'], 'envelope.namespace');
    requireId(ns.id, 'envelope.namespace.id');
    requireId(ns.name, 'envelope.namespace.name');
  }
  if (env.agent !== undefined) {
    const agent = requireObject(env.agent, 'envelope.agent');
    closedKeys(agent, ['id', 'servicePrincipalId'], 'envelope.agent');
    requireId(agent.id, 'envelope.agent.id');
    requireId(agent.servicePrincipalId, 'envelope.agent.servicePrincipalId');
  }
  if (env.revision !== undefined) {
    const revision = requireObject(env.revision, 'envelope.revision');
    closedKeys(revision, ['id', 'number', 'harness', 'configurationSha256'], 'envelope.revision');
    requireId(revision.id, 'envelope.revision.id');
    requireInt(revision.number, 'envelope.revision.number', 1, Number.MAX_SAFE_INTEGER);
    requireId(revision.harness, 'envelope.revision.harness');
    if (typeof revision.configurationSha256 !== 'string' || !/^[0-9a-f]{64}$/.test(revision.configurationSha256)) {
      throw invalid('envelope.revision.configurationSha256 must be 64 lowercase hex characters');
    }
  }
  const placeholders = env.launchEnvironment === undefined ? undefined : launchEnvironment(env.launchEnvironment);
  const workspaceSetup = env.workspaceSetup === undefined ? undefined : checkWorkspaceSetup(env.workspaceSetup, 'envelope.workspaceSetup');
  if (env.events !== undefined && typeof env.events !== 'boolean') throw invalid('envelope.events must be a boolean');
  if (env.maxSessions !== undefined) requireInt(env.maxSessions, 'envelope.maxSessions', 1, 64);
  if (env.harnessVersion !== undefined) requireId(env.harnessVersion, 'envelope.harnessVersion');
  const logRequest = env.logRequest === undefined ? undefined : checkLogRequest(env.logRequest);
  return { env, placeholders, workspaceSetup, logRequest };
}

// OCC's AgentRuntimeLogRequest as the host wrote it for this call: which unit and
// invocation, and the bounds of the read.
function checkLogRequest(value) {
  const request = requireObject(value, 'envelope.logRequest');
  closedKeys(request, ['pod', 'podUid', 'previous', 'tailLines', 'sinceSeconds', 'limitBytes'], 'envelope.logRequest');
  requireId(request.pod, 'envelope.logRequest.pod');
  if (typeof request.podUid !== 'string' || !INVOCATION_ID.test(request.podUid)) {
    throw invalid('envelope.logRequest.podUid must be a systemd invocation id (32 lowercase hex characters)');
  }
  if (typeof request.previous !== 'boolean') throw invalid('envelope.logRequest.previous must be a boolean');
  requireInt(request.tailLines, 'envelope.logRequest.tailLines', 1, MAX_LOG_LINES);
  if (request.sinceSeconds !== undefined) requireInt(request.sinceSeconds, 'envelope.logRequest.sinceSeconds', 1, MAX_SINCE_SECONDS);
  requireInt(request.limitBytes, 'envelope.logRequest.limitBytes', 1, MAX_LOG_BYTES);
  return { ...request };
}

// The operation the component sent, checked against the envelope, merged with it into
// the one object every operation below reads. The component chooses only which
// operation runs (among those the envelope lists), deadlineMs and the fields of
// OPERATIONS[op].fields.
function parseOperation(argument, envelopeArgument) {
  const { env, placeholders, workspaceSetup, logRequest } = parseEnvelope(envelopeArgument);
  const sent = decodeJson(argument, 'operation');
  if (sent.version !== PROTOCOL_VERSION) throw invalid(`unsupported protocol version ${JSON.stringify(sent.version)}`);
  const shape = Object.hasOwn(OPERATIONS, sent.op) ? OPERATIONS[sent.op] : null;
  if (!shape) throw invalid(`unknown op ${JSON.stringify(sent.op)}`);
  if (!env.ops.includes(sent.op)) {
    throw invalid(`op ${sent.op} is not one ${env.method} may run (it may run: ${env.ops.join(', ') || 'nothing'})`);
  }
  closedKeys(sent, [...COMMON_FIELDS, ...shape.fields], 'operation');
  if (sent.deadlineMs !== undefined) requireInt(sent.deadlineMs, 'operation.deadlineMs', 1000, MAX_DEADLINE_MS);
  for (const part of ['namespace', 'agent', 'revision']) {
    if (shape[part] && env[part] === undefined) throw invalid(`${sent.op} needs envelope.${part}`);
  }
  const op = {
    op: sent.op,
    method: env.method,
    host: env.host,
    deadlineMs: sent.deadlineMs,
    driver: { ...env.driver },
    root: env.runtime.root,
    unitDirectory: env.runtime.unitDirectory,
    nodePath: env.runtime.nodePath,
    openclawPath: env.runtime.openclawPath,
    runtimeUser: env.runtime.user,
    portRange: { ...env.gatewayPortRange },
  };
  if (shape.namespace) op.namespace = { id: env.namespace.id, name: env.namespace.name, hash: sha12(env.namespace.id) };
  if (shape.agent) {
    const hash = sha12(env.agent.id);
    op.agent = {
      id: env.agent.id,
      hash,
      servicePrincipalId: env.agent.servicePrincipalId,
      account: agentAccountName(env.runtime.user, env.namespace.id, env.agent.id),
      unitName: `${UNIT_PREFIX}${hash}.service`,
    };
  }
  if (shape.revision) {
    op.revision = {
      id: env.revision.id,
      hash: sha12(env.revision.id),
      number: env.revision.number,
      harness: env.revision.harness,
      configurationSha256: env.revision.configurationSha256,
    };
  }
  if (sent.op === 'prepare') {
    // The controller's document, by the hash the host took of it: a component cannot
    // have the helper write another.
    const configuration = requireString(sent.configuration, 'configuration');
    if (sha256Hex(configuration) !== op.revision.configurationSha256) {
      throw invalid('configuration is not the controller\'s revision.configuration (its SHA-256 differs from envelope.revision.configurationSha256)');
    }
    if (op.revision.harness !== 'openclaw/embedded') {
      throw invalid(`envelope.revision.harness is ${op.revision.harness}; SSH Compute prepares only openclaw/embedded`);
    }
    op.snapshot = renderSnapshot(configuration);
  }
  if (sent.op === 'activate') {
    if (placeholders === undefined) throw invalid('activate needs envelope.launchEnvironment (what beforeWorkloadStart returned)');
    op.placeholders = placeholders;
  }
  if (sent.op === 'read-logs') {
    if (logRequest === undefined) throw invalid('read-logs needs envelope.logRequest (the controller\'s request)');
    op.logRequest = logRequest;
  } else if (logRequest !== undefined) {
    throw invalid(`envelope.logRequest: ${sent.op} reads no log`);
  }
  if (sent.op === 'describe-runtime') op.events = env.events !== false;
  if (sent.op === 'probe') op.maxSessions = env.maxSessions;
  if (sent.op === 'diagnose') op.harnessVersion = env.harnessVersion;
  if (workspaceSetup !== undefined) {
    // The controller's setup of this call's Agent, delivered by prepare and activate.
    if (sent.op !== 'prepare' && sent.op !== 'activate') throw invalid(`envelope.workspaceSetup: ${sent.op} delivers no workspace setup`);
    if (workspaceSetup.namespaceId !== op.namespace.id || workspaceSetup.agentId !== op.agent.id) {
      throw invalid(`envelope.workspaceSetup belongs to another Agent, not to Agent ${op.agent.id} of Namespace ${op.namespace.id}`);
    }
    op.workspaceSetup = workspaceSetup;
  }
  return op;
}

function agentAccountName(runtimeUser, namespaceId, agentId) {
  return `${runtimeUser.slice(0, ACCOUNT_PREFIX_LENGTH)}-${sha12(`${namespaceId}:${agentId}`)}`;
}

module.exports = {
  OPERATIONS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE, RESERVED_PLACEHOLDER, MAX_PLACEHOLDERS,
  parseEnvelope, parseOperation, agentAccountName,
};
},
'ports': function (module, exports, require) {
'use strict';
// Ports: which ports of the host's range Agents hold, and a free one for a new Agent.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError } = require('./constants');
const { expectDir, lstatOrNull, readMarker } = require('./files');

// Every port named by an Agent marker under <root>/namespaces/*/agents/*/agent.json,
// whatever its Namespace or Driver: they all share this host's range.
function usedPorts(L) {
  const used = new Set();
  if (!expectDir(L.namespaces)) return used;
  for (const ns of fs.readdirSync(L.namespaces)) {
    if (ns.startsWith('.')) continue;
    const nsDir = path.join(L.namespaces, ns);
    const st = lstatOrNull(nsDir);
    if (st && st.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${nsDir} is a symlink`);
    if (!st || !st.isDirectory()) continue;
    const agents = path.join(nsDir, 'agents');
    if (!expectDir(agents)) continue;
    for (const name of fs.readdirSync(agents)) {
      if (name.startsWith('.')) continue;
      const agentDir = path.join(agents, name);
      const ast = lstatOrNull(agentDir);
      if (ast && ast.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${agentDir} is a symlink`);
      if (!ast || !ast.isDirectory()) continue;
      const marker = readMarker(path.join(agentDir, 'agent.json'));
      if (!marker) continue;
      if (!Number.isSafeInteger(marker.port)) {
        throw new HelperError('foreign-marker', `${agentDir}/agent.json has no valid port`);
      }
      used.add(marker.port);
    }
  }
  return used;
}

function allocatePort(L, range) {
  const used = usedPorts(L);
  for (let port = range.start; port <= range.end; port++) {
    if (!used.has(port)) return port;
  }
  throw new HelperError('no-free-port', `every port of ${range.start}..${range.end} is held by an Agent marker`);
}

module.exports = { allocatePort };
},
'readiness': function (module, exports, require) {
'use strict';
// Readiness.
//
// A 200 from 127.0.0.1:<port>/readyz counts only when the answer came from the
// Agent's own gateway: every socket listening on that port (IPv4 and IPv6) must belong
// to the Agent's account, and the same ones before and after the request. Any other
// account listening there is a squatter that could answer for the gateway (and keeps
// it from binding); activation then fails, retryably, naming the port and the account.

const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');

const {
  HelperError, READY_POLL_MS, READY_REQUEST_MS, RESTART_JOB_MS, RESTART_POLL_MS
} = require('./constants');
const { remainingMs, session, sleep } = require('./session');
const { run, unitState } = require('./children');

// LISTEN sockets on `port` in this network namespace: [{ uid, inode }].
function portListeners(port) {
  const found = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if (error.code === 'ENOENT') continue; // no IPv6 on this host
      throw error;
    }
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A') continue;
      const local = fields[1];
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) !== port) continue;
      found.push({ uid: Number(fields[7]), inode: fields[9] });
    }
  }
  return found;
}

async function accountName(uid) {
  const result = await run('getent', ['passwd', String(uid)], { allowFailure: true, timeoutMs: 15000 });
  return result.code === 0 ? result.stdout.split(':')[0] : `uid ${uid}`;
}

async function squatterError(port, foreign, account) {
  const name = await accountName(foreign.uid);
  return new HelperError('port-squatted',
    `port ${port} is held by account ${name} (uid ${foreign.uid}), not by the Agent's account ${account.name}` +
    ` (uid ${account.uid}): its answers cannot count as the gateway's and the gateway cannot bind;` +
    ` stop that listener (ss -ltnpe 'sport = :${port}') and retry`);
}

const sameListeners = (a, b) => a.length === b.length &&
  a.every((l, i) => l.inode === b[i].inode && l.uid === b[i].uid);

// One readiness probe: 'ready', 'not-ready', or a squatter ({ foreign }).
async function probeReady(port, account) {
  const before = portListeners(port);
  const foreign = before.find((l) => l.uid !== account.uid);
  if (foreign) return { foreign };
  if (before.length === 0) return { state: 'not-ready', status: null };
  const status = await readyStatus(port);
  const after = portListeners(port);
  const late = after.find((l) => l.uid !== account.uid);
  if (late) return { foreign: late };
  // The listeners changed while we asked (a restart): ask again.
  if (status === 200 && sameListeners(before, after)) return { state: 'ready', status };
  return { state: 'not-ready', status };
}

function readyStatus(port) {
  return new Promise((resolve) => {
    const request = http.get({
      host: '127.0.0.1', port, path: '/readyz', agent: false, timeout: READY_REQUEST_MS,
      signal: session.controller.signal,
    }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(null));
  });
}

// True when the Agent's own gateway answers ready now; a squatter only means "no".
async function servingReady(port, account) {
  return (await probeReady(port, account)).state === 'ready';
}

// Whether the unit still runs the gateway it was restarted into: a gateway that
// exited is between restarts (`activating`/`auto-restart`), or `failed` once
// systemd's start limit is hit; waiting out the readiness bound for it would only
// delay the same answer. OCC's own helper stops waiting on an inactive unit too.
function gatewayStopped(state) {
  if (state.ActiveState === 'active' || state.ActiveState === 'reloading') return false;
  return !(state.ActiveState === 'activating' && state.SubState !== 'auto-restart');
}

// Waits for the restart queued with --no-block to leave systemd's queue, and proves
// it ran: the unit has a new invocation. Until then the old gateway may still answer
// /readyz, which must not count as the new revision's readiness.
async function waitRestarted(unitName, before) {
  const limit = Math.min(RESTART_JOB_MS, remainingMs());
  const startedAt = Date.now();
  for (;;) {
    if (session.stop) throw session.stop;
    const state = await unitState(unitName);
    if (state.Job === '') {
      if (state.InvocationID !== '' && state.InvocationID !== before) return;
      throw new HelperError('superseded',
        `the restart of ${unitName} was cancelled before it ran (another operation stopped the unit)`);
    }
    if (Date.now() - startedAt >= limit) {
      throw new HelperError(limit < RESTART_JOB_MS ? 'deadline' : 'command-failed',
        `the restart of ${unitName} was still queued in systemd (job ${state.Job}, ${state.ActiveState}/${state.SubState}) ` +
        `after ${Date.now() - startedAt} ms`);
    }
    await sleep(RESTART_POLL_MS);
  }
}

async function waitReady(port, timeoutMs, account, unitName) {
  const startedAt = Date.now();
  const limit = Math.min(timeoutMs, remainingMs());
  let lastStatus = null;
  for (;;) {
    if (session.stop) throw session.stop;
    const probe = await probeReady(port, account);
    if (probe.foreign) throw await squatterError(port, probe.foreign, account);
    if (probe.state === 'ready') return Date.now() - startedAt;
    lastStatus = probe.status;
    const state = await unitState(unitName);
    if (gatewayStopped(state)) {
      throw new HelperError('gateway-exited',
        `${unitName} is ${state.ActiveState} (${state.SubState}) ${Date.now() - startedAt} ms after its restart, ` +
        `before http://127.0.0.1:${port}/readyz answered 200 (last: ${lastStatus === null ? 'no answer' : lastStatus}): ` +
        `the gateway exited; see journalctl -u ${unitName}`);
    }
    const elapsed = Date.now() - startedAt;
    if (elapsed >= limit) {
      if (limit < timeoutMs) throw new HelperError('deadline', `the helper deadline passed while waiting for readiness on port ${port}`);
      throw new HelperError('readiness-timeout',
        `http://127.0.0.1:${port}/readyz did not answer 200 within ${timeoutMs} ms (last: ${lastStatus === null ? 'no answer' : lastStatus})`);
    }
    await sleep(Math.min(READY_POLL_MS, limit - elapsed));
  }
}

module.exports = { servingReady, waitRestarted, waitReady, listenersOn: portListeners, readyStatus };
},
'probe': function (module, exports, require) {
'use strict';
// The probe: what preflight checks on a host before any Agent depends on it (systemd,
// the account tools, Node.js and the OpenClaw entrypoint), failing on what is
// missing, and what it warns about (sshd's sessions per connection, free space).

const fs = require('node:fs');
const path = require('node:path');

const { HelperError, NODE_MAJOR } = require('./constants');
const { oneLine, run } = require('./children');

async function opProbe(op) {
  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok, detail });
  try {
    const result = await run('systemctl', ['--version'], { allowFailure: true, timeoutMs: 15000 });
    check('systemctl', result.code === 0, oneLine(result.stdout.split('\n')[0] || result.stderr));
  } catch (error) {
    check('systemctl', false, error.message);
  }
  const searchPath = (process.env.PATH || '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  for (const command of ['flock', 'getent', 'useradd', 'userdel', 'groupadd', 'groupdel']) {
    const found = searchPath.map((dir) => path.join(dir || '.', command)).find((candidate) => {
      try {
        return fs.statSync(candidate).isFile() && (fs.accessSync(candidate, fs.constants.X_OK), true);
      } catch {
        return false;
      }
    });
    check(command, Boolean(found), found || `${command} is not on PATH`);
  }
  try {
    if (!fs.statSync(op.nodePath).isFile()) throw new Error('not a regular file');
    fs.accessSync(op.nodePath, fs.constants.X_OK);
    const result = await run(op.nodePath, ['--version'], { allowFailure: true, timeoutMs: 15000 });
    const version = result.stdout.trim();
    const major = /^v(\d+)\./.exec(version);
    if (result.code !== 0) {
      check('node', false, `${op.nodePath}: exit ${result.code}`);
    } else if (!major || Number(major[1]) !== NODE_MAJOR) {
      // The spec requires Node.js 24; the gateway itself needs it.
      check('node', false, `${op.nodePath} is Node.js ${JSON.stringify(oneLine(version))}, Node.js ${NODE_MAJOR} is required`);
    } else {
      check('node', true, `${op.nodePath} ${version}`);
    }
  } catch (error) {
    check('node', false, `${op.nodePath}: ${error.message}`);
  }
  try {
    if (!fs.statSync(op.openclawPath).isFile()) throw new Error('not a regular file');
    fs.accessSync(op.openclawPath, fs.constants.R_OK);
    check('openclaw', true, op.openclawPath);
  } catch (error) {
    check('openclaw', false, `${op.openclawPath}: ${error.message}`);
  }
  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    const error = new HelperError('probe-failed', `failed checks: ${failed.map((c) => `${c.name} (${c.detail})`).join('; ')}`);
    error.extra = { checks };
    throw error;
  }
  return { changed: false, checks, warnings: await probeWarnings(op) };
}

// What works now but an operator should know before Agents depend on it: sshd
// allowing fewer sessions per connection than the installation keeps, and little
// free space where Agents live.
const LOW_SPACE_BYTES = 1024 * 1024 * 1024;
async function probeWarnings(op) {
  const warnings = [];
  if (op.maxSessions !== undefined) {
    const result = await run('sshd', ['-T'], { allowFailure: true, timeoutMs: 15000 })
      .catch(() => ({ code: 1, stdout: '' }));
    const m = /^maxsessions (\d+)$/m.exec(result.stdout);
    if (result.code === 0 && m && Number(m[1]) < op.maxSessions) {
      warnings.push({ code: 'SSH_SESSION_LIMIT', message:
        `sshd allows ${m[1]} sessions per connection (MaxSessions), fewer than the ${op.maxSessions} ` +
        `this installation keeps open (maxSessions): lower drivers.compute.maxSessions to ${m[1]} or raise MaxSessions` });
    }
  }
  // The runtime root, or where it will be made: its nearest existing ancestor.
  let where = op.root;
  while (where !== '/' && !fs.existsSync(where)) where = path.dirname(where);
  try {
    const { bavail, bsize } = fs.statfsSync(where);
    const free = bavail * bsize;
    if (free < LOW_SPACE_BYTES) {
      warnings.push({ code: 'LOW_DISK_SPACE', message:
        `${where} has ${Math.floor(free / (1024 * 1024))} MiB free; every Agent needs its snapshots, home and state there` });
    }
  } catch (error) {
    warnings.push({ code: 'LOW_DISK_SPACE', message: `cannot read the free space of ${where}: ${error.code || error.message}` });
  }
  return warnings;
}

module.exports = { opProbe };
},
'operations': function (module, exports, require) {
'use strict';
// The operations: one function each (ensure-namespace, inspect-agent, prepare, activate,
// deactivate, stop, retire); each returns the result fields beyond event/ok.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const http = require('node:http');

const {
  DEFAULT_READINESS_MS, HelperError, ROOT_GID, ROOT_UID, TEMP_PREFIX, TRAVERSE_ONLY,
  UNIT_PREFIX
} = require('./constants');
const { guard, progress } = require('./session');
const { run, systemctl, unitState } = require('./children');
const { acquireLock, releaseLock } = require('./lock');
const {
  createDirAtomic, expectDir, expectFile, fsyncDir, makeDir, operatorDirExists, removeFile,
  removeTree, sweep, tempName, writeAtomic, writeNewFile
} = require('./files');
const { renderUnit } = require('./render');
const { applyWorkspaceSetup, planWorkspaceSetup } = require('./workspace-setup');
const {
  agentOwner, currentRevision, layout, markerText, namespaceOwner, readAgent, readCurrent,
  readServed, readUnit, refuseNumberConflict, revisionMarker, tightenTree, verifyNamespace,
  verifyRevision
} = require('./layout');
const { accountFields, accountIdentity, ensureAccount, loadAgent } = require('./accounts');
const { allocatePort } = require('./ports');
const { servingReady, waitReady, waitRestarted } = require('./readiness');

async function opEnsureNamespace(op) {
  const L = layout(op);
  let changed = false;
  if (!operatorDirExists(L.root)) {
    guard('create the root');
    fs.mkdirSync(L.root, { recursive: true, mode: 0o755 });
    fs.chmodSync(L.root, 0o755);
    changed = true;
  }
  await acquireLock(L.root);
  if (!expectDir(L.namespaces)) {
    guard('create the namespaces directory');
    makeDir(L.namespaces, TRAVERSE_ONLY);
    changed = true;
  }
  if (!expectDir(L.accounts)) {
    guard('create the accounts directory');
    makeDir(L.accounts, 0o700);
    changed = true;
  }
  sweep(L.namespaces);
  if (expectDir(L.nsDir)) {
    verifyNamespace(op, L, true);
    if (!expectDir(L.agentsDir)) {
      guard('create the agents directory');
      makeDir(L.agentsDir, TRAVERSE_ONLY);
      changed = true;
    }
    return { changed: tightenTree(L) || changed };
  }
  guard('create the Namespace');
  createDirAtomic(L.nsDir, TRAVERSE_ONLY, ROOT_UID, ROOT_GID, (temp) => {
    writeNewFile(path.join(temp, 'namespace.json'), markerText(op, namespaceOwner(op)), 0o600, ROOT_UID, ROOT_GID);
    makeDir(path.join(temp, 'agents'), TRAVERSE_ONLY);
  });
  tightenTree(L);
  progress('namespace', `created ${L.nsDir}`);
  return { changed: true };
}

async function opPrepare(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) throw new HelperError('missing-namespace', `${L.root} does not exist; ensure the Namespace first`);
  await acquireLock(L.root);
  verifyNamespace(op, L, true);
  let agent = readAgent(op, L);

  // A late worker must not write anything for a revision older than the one already
  // current or served: report not-ready with nothing changed.
  if (agent) {
    const served = readServed(op, L);
    const current = currentRevision(op, L, readCurrent(L));
    const newest = Math.max(served && Number.isSafeInteger(served.revisionNumber) ? served.revisionNumber : 0,
      current ? current.number : 0);
    if (newest > op.revision.number) {
      progress('superseded', `revision ${newest} is already current or served`);
      return { changed: false, ready: false, port: agent.port, uid: agent.uid, gid: agent.gid };
    }
    refuseNumberConflict(op, current, served && { number: served.revisionNumber, id: served.revisionId });
  }

  // Allocation only reads, so a full range is refused before any account exists; so
  // is a workspace setup this Agent cannot take.
  const setupPlan = planWorkspaceSetup(op, L, op.snapshot.text);
  const newPort = agent ? null : allocatePort(L, op.portRange);
  let changed = false;
  const account = await ensureAccount(op, L);
  changed = changed || account.changed;
  if (agent && (agent.uid !== account.uid || agent.gid !== account.gid)) {
    throw new HelperError('foreign-marker', `${L.agentMarker} records ${agent.uid}:${agent.gid}, the account is ${account.uid}:${account.gid}`);
  }

  if (!expectDir(L.agentsDir)) {
    guard('create the agents directory');
    makeDir(L.agentsDir, TRAVERSE_ONLY);
  }
  changed = tightenTree(L) || changed;
  sweep(L.agentsDir);
  if (!agent) {
    const port = newPort;
    agent = { ...accountFields(op), uid: account.uid, gid: account.gid, port };
    guard('create the Agent directory');
    // 0750 root:<agent group>: the Agent's own account can traverse to its home, state
    // and snapshot; sibling Agents, in other groups, cannot enter.
    createDirAtomic(L.agentDir, 0o750, ROOT_UID, account.gid, (temp) => {
      writeNewFile(path.join(temp, 'agent.json'), markerText(op, agent), 0o600, ROOT_UID, ROOT_GID);
      makeDir(path.join(temp, 'home'), 0o700, account.uid, account.gid);
      makeDir(path.join(temp, 'state'), 0o700, account.uid, account.gid);
      makeDir(path.join(temp, 'revisions'), 0o750, ROOT_UID, account.gid);
    });
    progress('agent', `created ${L.agentDir} with port ${port}`);
    changed = true;
  } else {
    sweep(L.agentDir);
    for (const [dir, mode, uid] of [[L.home, 0o700, account.uid], [L.state, 0o700, account.uid], [L.revisions, 0o750, ROOT_UID]]) {
      if (!expectDir(dir)) {
        guard(`create ${dir}`);
        makeDir(dir, mode, uid, account.gid);
        changed = true;
      }
    }
  }

  if (op.snapshot.needsPassword && !expectFile(L.passwordFile)) {
    // Created once and never rotated: later revisions and restarts reuse it.
    guard('create the gateway password');
    writeAtomic(L.passwordFile, `OPENCLAW_GATEWAY_PASSWORD=${crypto.randomBytes(32).toString('hex')}\n`, 0o600);
    progress('password', `created ${L.passwordFile}`);
    changed = true;
  }

  sweep(L.revisions);
  if (!verifyRevision(op, L, account.gid)) {
    guard('write the revision snapshot');
    createDirAtomic(L.revDir, 0o750, ROOT_UID, account.gid, (temp) => {
      // Root-owned and group-readable: the gateway reads but can never rewrite the
      // admitted document, and sibling Agents cannot read it.
      writeNewFile(path.join(temp, 'openclaw.json'), op.snapshot.text, 0o640, ROOT_UID, account.gid);
      writeNewFile(path.join(temp, 'revision.json'),
        markerText(op, revisionMarker(op, op.snapshot.sha256)), 0o600, ROOT_UID, ROOT_GID);
    });
    progress('snapshot', `wrote ${L.revDir}`);
    changed = true;
  }
  if (setupPlan) {
    changed = await applyWorkspaceSetup(op, L, { name: op.agent.account, uid: account.uid, gid: account.gid }, setupPlan) ||
      changed;
  }
  return { changed, ready: true, port: agent.port, uid: account.uid, gid: account.gid };
}

function servedMatches(served, op) {
  return served !== null && served.revisionId === op.revision.id &&
    served.revisionNumber === op.revision.number &&
    served.configurationSha256 === op.revision.configurationSha256;
}

async function switchCurrent(L, revHash) {
  guard('switch current');
  const temp = tempName(L.agentDir, 'current');
  fs.symlinkSync(`revisions/${revHash}`, temp);
  try {
    fs.renameSync(temp, L.current);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw error;
  }
  fsyncDir(L.agentDir);
  progress('current', `current -> revisions/${revHash}`);
}

async function opActivate(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) throw new HelperError('missing-namespace', `${L.root} does not exist`);
  if (!operatorDirExists(op.unitDirectory)) throw new HelperError('invalid-operation', `${op.unitDirectory} does not exist`);
  await acquireLock(L.root);
  const agent = await loadAgent(op, L, { required: true });
  // Never backwards: a newer current revision stays (OCC: "A newer revision is
  // already current"), and a number belongs to one revision.
  const notBehind = () => {
    const hash = readCurrent(L);
    const current = currentRevision(op, L, hash);
    if (current && current.number > op.revision.number) {
      throw new HelperError('superseded',
        `a newer revision is already current: revision ${current.number} (${JSON.stringify(current.id)}) ` +
        `of Agent ${op.agent.id}, not ${op.revision.number}`);
    }
    refuseNumberConflict(op, current);
    return hash;
  };
  let currentHash = notBehind();
  let snapshot = verifyRevision(op, L, agent.gid);
  if (!snapshot) {
    throw new HelperError('missing-revision', `${L.revDir} does not exist; prepare revision ${op.revision.id} first`);
  }
  // The workspace setup is delivered (or verified) before the unit that runs
  // behind it is written. Its run lets go of the host lock for a while, so what
  // the rest relies on is read again after it.
  const setupPlan = planWorkspaceSetup(op, L, snapshot.text);
  let changed = false;
  if (setupPlan) {
    changed = await applyWorkspaceSetup(op, L, accountIdentity(agent), setupPlan);
    currentHash = notBehind();
    snapshot = verifyRevision(op, L, agent.gid);
  }
  const unitText = renderUnit({
    namespaceId: op.namespace.id, agentId: op.agent.id, account: op.agent.account, agentDir: L.agentDir,
    nodePath: op.nodePath, openclawPath: op.openclawPath, port: agent.port,
    placeholders: op.placeholders, needsPassword: snapshot.needsPassword,
    workspace: setupPlan ? setupPlan.workspace : undefined,
  });
  const existingUnit = readUnit(L.unitPath, op.namespace.id, op.agent.id);
  const served = readServed(op, L);
  sweep(L.agentDir);
  sweep(op.unitDirectory, `${TEMP_PREFIX}${UNIT_PREFIX}`);

  const unitChanged = existingUnit !== unitText;
  if (unitChanged) {
    guard('write the unit');
    writeAtomic(L.unitPath, unitText, 0o644);
    progress('unit', `wrote ${L.unitPath}`);
    changed = true;
  }
  let state = await unitState(op.agent.unitName);
  let reload = unitChanged || state.NeedDaemonReload === 'yes' || state.LoadState !== 'loaded';
  if (state.UnitFileState !== 'enabled') {
    guard('enable the unit');
    // Only the wants link, read from the unit file on disk: the one daemon-reload
    // below makes systemd see both, where a plain `enable` would reload it again
    // (each reload re-reads every unit on the host while the host lock is held).
    await systemctl(['enable', '--no-reload', '--', op.agent.unitName]);
    progress('enable', `enabled ${op.agent.unitName}`);
    changed = true;
    reload = true;
  }
  if (reload) {
    guard('daemon-reload');
    await systemctl(['daemon-reload']);
    progress('daemon-reload', 'systemd reloaded');
    state = await unitState(op.agent.unitName);
    changed = true;
  }

  const account = accountIdentity(agent);
  // Already serving exactly this revision: nothing to restart.
  if (!unitChanged && currentHash === op.revision.hash && servedMatches(served, op) &&
      state.ActiveState === 'active' && (await servingReady(agent.port, account))) {
    return { changed, port: agent.port, readyAfterMs: 0 };
  }

  if (served && !servedMatches(served, op)) {
    // served.json names the revision whose restart last reached readiness; this
    // restart replaces it, so the old claim goes before anything else changes.
    guard('remove served.json');
    removeFile(L.served);
  }
  if (currentHash !== op.revision.hash) await switchCurrent(L, op.revision.hash);
  guard('restart the unit');
  progress('restart', `restarting ${op.agent.unitName}`);
  // A gateway that kept exiting counts against systemd's start limit and leaves its
  // unit `failed` on it, which would refuse this restart too: the new revision gets
  // a counter of its own.
  if (state.ActiveState !== 'active') {
    await run('systemctl', ['reset-failed', '--', op.agent.unitName], { allowFailure: true, timeoutMs: 20000 });
  }
  // The restart is queued while the lock is held, so that systemd orders it with
  // every other operation's effects on this unit as the lock does (a delete's stop
  // that comes after it replaces it). Stopping the old gateway and starting the new
  // one (up to TimeoutStopSec) change nothing of ours on the host, so they, like the
  // readiness wait (often 10 s, at most 120 s), run without the host lock: other
  // Agents on this host can prepare and activate meanwhile. The commit below re-takes
  // the lock and re-checks what it relies on.
  const before = state.InvocationID;
  await systemctl(['restart', '--no-block', '--', op.agent.unitName]);
  const restartedAt = Date.now();
  await releaseLock();
  await waitRestarted(op.agent.unitName, before);
  progress('readiness', `waiting for http://127.0.0.1:${agent.port}/readyz`);
  await waitReady(agent.port, DEFAULT_READINESS_MS, account, op.agent.unitName);
  const readyAfterMs = Date.now() - restartedAt;
  progress('ready', `ready ${readyAfterMs} ms after restart`);

  await acquireLock(L.root);
  const again = await loadAgent(op, L, { required: true });
  const sameRevision = again.port === agent.port && readCurrent(L) === op.revision.hash &&
    verifyRevision(op, L, agent.gid);
  if (!sameRevision || readUnit(L.unitPath, op.namespace.id, op.agent.id) !== unitText) {
    // Another activation of this very revision finished first and proved it served:
    // the goal of this one is met. Failing here would have the guest run its
    // compensating hooks and undo that successful activation.
    if (sameRevision && servedMatches(readServed(op, L), op)) {
      progress('served', `another activation already served revision ${op.revision.id}`);
      return { changed: true, port: agent.port, readyAfterMs };
    }
    throw new HelperError('superseded', `another operation changed Agent ${op.agent.id} during the readiness wait`);
  }
  state = await unitState(op.agent.unitName);
  if (state.ActiveState !== 'active') {
    throw new HelperError('readiness-timeout', `${op.agent.unitName} is ${state.ActiveState} after readiness`);
  }
  guard('write served.json');
  writeAtomic(L.served, markerText(op, {
    ...agentOwner(op), revisionId: op.revision.id,
    revisionNumber: op.revision.number, configurationSha256: op.revision.configurationSha256,
    servedAt: new Date().toISOString(),
  }), 0o600);
  progress('served', `served.json names revision ${op.revision.id}`);
  return { changed: true, port: agent.port, readyAfterMs };
}

async function opDeactivate(op) {
  const L = layout(op);
  const agent = operatorDirExists(L.root) ? await loadAgent(op, L, { required: false }) : null;
  if (agent) {
    verifyRevision(op, L, agent.gid);
    readCurrent(L);
    readServed(op, L);
  }
  readUnit(L.unitPath, op.namespace.id, op.agent.id);
  return { changed: false };
}

// Stops and disables the Agent's unit if its file is ours; returns whether it acted.
// `noReload` when the caller reloads systemd itself afterwards (a removal does).
async function stopUnit(unitPath, unitName, namespaceId, agentId, noReload = false) {
  if (readUnit(unitPath, namespaceId, agentId) === null) return false;
  const state = await unitState(unitName);
  let changed = false;
  if (state.LoadState === 'loaded' && !['inactive', 'failed'].includes(state.ActiveState)) {
    guard(`stop ${unitName}`);
    await systemctl(['stop', '--', unitName]);
    progress('stop', `stopped ${unitName}`);
    changed = true;
  }
  if (state.UnitFileState === 'enabled' || state.UnitFileState === 'enabled-runtime') {
    guard(`disable ${unitName}`);
    await systemctl(['disable', ...(noReload ? ['--no-reload'] : []), '--', unitName]);
    progress('disable', `disabled ${unitName}`);
    changed = true;
  }
  return changed;
}

// The gateway stops serving: unit stopped and disabled, then served.json and current
// removed, in that order so that a retry after any interruption still sees current.
async function stopAgent(op, L) {
  let changed = await stopUnit(L.unitPath, op.agent.unitName, op.namespace.id, op.agent.id);
  if (expectFile(L.served)) {
    guard('remove served.json');
    removeFile(L.served);
    changed = true;
  }
  if (readCurrent(L) !== null) {
    guard('remove current');
    removeFile(L.current);
    progress('current', 'removed current');
    changed = true;
  }
  return changed;
}

// The spec's stopRevision stops and disables the unit and removes current and
// served.json, as OCC's helper does, only when current names this revision: OCC's
// worker stops refused or failed candidates while their predecessor serves, and
// "an OCC publication failure leaves the previous gateway serving its existing
// revision". Otherwise it verifies and returns. The named revision's snapshot, when
// present, must still be the admitted one.
async function opStop(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) return { changed: false };
  await acquireLock(L.root);
  const agent = await loadAgent(op, L, { required: false });
  if (!agent) return { changed: false };
  verifyRevision(op, L, agent.gid);
  readServed(op, L);
  const currentHash = readCurrent(L);
  readUnit(L.unitPath, op.namespace.id, op.agent.id);
  if (currentHash !== op.revision.hash) {
    progress('stop', `revision ${op.revision.id} is not current; nothing to stop`);
    return { changed: false };
  }
  sweep(L.agentDir);
  return { changed: await stopAgent(op, L) };
}

async function opRetire(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) return { changed: false };
  await acquireLock(L.root);
  const agent = await loadAgent(op, L, { required: false });
  if (!agent) return { changed: false };
  const present = verifyRevision(op, L, agent.gid);
  readServed(op, L);
  const currentHash = readCurrent(L);
  readUnit(L.unitPath, op.namespace.id, op.agent.id);
  sweep(L.agentDir);
  sweep(L.revisions);
  let changed = false;
  if (currentHash === op.revision.hash) changed = await stopAgent(op, L) || changed;
  if (present) {
    guard('remove the revision snapshot');
    removeTree(L.revDir);
    progress('retire', `removed ${L.revDir}`);
    changed = true;
  }
  return { changed };
}

// Read-only: no lock, since every file it reads is replaced atomically.
async function opInspectAgent(op) {
  const L = layout(op);
  const agent = operatorDirExists(L.root) ? await loadAgent(op, L, { required: false }) : null;
  if (!agent) return { changed: false, exists: false };
  return { changed: false, exists: true, port: agent.port, account: agent.account, uid: agent.uid, gid: agent.gid };
}

module.exports = {
  opEnsureNamespace, opPrepare, opActivate, opDeactivate, stopUnit, opStop, opRetire,
  opInspectAgent,
};
},
'removal': function (module, exports, require) {
'use strict';
// Removal, shared by delete-namespace and delete-agent. Everything to be removed is
// verified first; then units go, the accounts' processes and schedules end, each
// Agent's home and state are emptied as its own account, the root-owned rest of the
// tree goes, and last the accounts themselves.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError, TEMP_PREFIX, UNIT_PREFIX } = require('./constants');
const { guard, progress } = require('./session');
const { run, systemctl } = require('./children');
const { acquireLock } = require('./lock');
const {
  checkFields, expectDir, lstatOrNull, operatorDirExists, readMarker, removeFile, removeTree,
  sweep
} = require('./files');
const { sha12 } = require('./values');
const {
  agentOwner, checkOwner, layout, namespaceOwner, ownerOf, readAgent, readCurrent, readServed,
  readUnit, verifyNamespace
} = require('./layout');
const {
  accountIdentity, checkAccountForRemoval, isAgentAccount, quiesceAccount, removeAccount
} = require('./accounts');
const { clearAgentTree } = require('./leftovers');
const { stopUnit } = require('./operations');

// One Agent directory to remove, verified whole: agent.json names this Driver and
// Namespace and the Agent whose hash names the directory, with that Agent's account;
// every revision marker, current, served.json and the unit header are that Agent's.
// The ServicePrincipal is taken from agent.json (removal is by Namespace and Agent).
function removalTarget(op, L, name) {
  const agentDir = path.join(L.agentsDir, name);
  expectDir(agentDir);
  const file = path.join(agentDir, 'agent.json');
  const marker = readMarker(file);
  if (!marker) throw new HelperError('foreign-marker', `${agentDir} has no agent.json`);
  checkOwner(marker, namespaceOwner(op), file, 'foreign-marker');
  if (typeof marker.agentId !== 'string' || sha12(marker.agentId) !== name) {
    throw new HelperError('foreign-marker', `${file} does not name the Agent of ${name}`);
  }
  if (!isAgentAccount(marker.account, op.namespace.id, marker.agentId)) {
    throw new HelperError('foreign-marker', `${file} names account ${JSON.stringify(marker.account)}, not this Agent's`);
  }
  const scoped = {
    ...op,
    agent: {
      id: marker.agentId, hash: name, servicePrincipalId: marker.servicePrincipalId,
      account: marker.account, unitName: `${UNIT_PREFIX}${name}.service`,
    },
  };
  const SL = layout(scoped);
  const agent = readAgent(scoped, SL);
  readCurrent(SL);
  readServed(scoped, SL);
  if (expectDir(SL.revisions)) {
    for (const rev of fs.readdirSync(SL.revisions)) {
      if (rev.startsWith(TEMP_PREFIX)) continue;
      expectDir(path.join(SL.revisions, rev));
      const revFile = path.join(SL.revisions, rev, 'revision.json');
      const revMarker = readMarker(revFile);
      if (!revMarker) throw new HelperError('foreign-marker', `${path.dirname(revFile)} has no revision.json`);
      checkOwner(revMarker, agentOwner(scoped), revFile, 'foreign-marker');
    }
  }
  readUnit(SL.unitPath, op.namespace.id, marker.agentId);
  return { scoped, SL, identity: accountIdentity(agent) };
}

// Stops, disables and removes each target's unit (when its file is ours), then one
// daemon-reload; returns whether anything changed.
async function removeUnits(targets) {
  let reload = false;
  let changed = false;
  for (const { scoped, SL } of targets) {
    if (await stopUnit(SL.unitPath, scoped.agent.unitName, scoped.namespace.id, scoped.agent.id, true)) {
      changed = true;
      reload = true;
    }
    if (lstatOrNull(SL.unitPath)) {
      guard(`remove ${SL.unitPath}`);
      removeFile(SL.unitPath);
      progress('unit', `removed ${SL.unitPath}`);
      reload = true;
      changed = true;
    }
  }
  if (reload) {
    guard('daemon-reload');
    await systemctl(['daemon-reload']);
    for (const { scoped } of targets) {
      await run('systemctl', ['reset-failed', '--', scoped.agent.unitName], { allowFailure: true, timeoutMs: 20000 });
    }
  }
  return changed;
}

// The Namespace's account markers, each naming its own file.
async function namespaceAccounts(op, L) {
  const found = [];
  if (!expectDir(L.accounts)) return found;
  for (const name of fs.readdirSync(L.accounts).sort()) {
    if (name.startsWith('.') || !name.endsWith('.json')) continue;
    const file = path.join(L.accounts, name);
    const marker = readMarker(file, 'foreign-account');
    const owner = namespaceOwner(op);
    if (marker.driverId !== owner.driverId || typeof marker.implementation !== 'string' ||
        ownerOf(marker.implementation) !== ownerOf(owner.implementation) ||
        marker.namespaceId !== owner.namespaceId) continue;
    checkOwner(marker, owner, file, 'foreign-account');
    if (typeof marker.account !== 'string' || `${marker.account}.json` !== name) {
      throw new HelperError('foreign-account', `${file} names account ${JSON.stringify(marker.account)}`);
    }
    found.push({ file, marker });
  }
  return found;
}

// Removes the targets and the accounts, verified by the caller: see the banner.
async function removeAgents(targets, accounts, removeTrees) {
  let changed = await removeUnits(targets);
  for (const { file, marker } of accounts) {
    if (await quiesceAccount(file, marker)) changed = true;
  }
  for (const { SL, identity } of targets) {
    if (identity) await clearAgentTree(SL, identity);
  }
  if (await removeTrees()) changed = true;
  for (const { file, marker } of accounts) {
    await removeAccount(file, marker);
    changed = true;
  }
  return changed;
}

async function opDeleteNamespace(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) return { changed: false };
  await acquireLock(L.root);
  sweep(L.namespaces);
  const present = verifyNamespace(op, L, false);
  const accounts = await namespaceAccounts(op, L);
  // Verify the whole deletion set before the first change.
  const targets = [];
  if (present && expectDir(L.agentsDir)) {
    for (const name of fs.readdirSync(L.agentsDir).sort()) {
      if (!name.startsWith(TEMP_PREFIX)) targets.push(removalTarget(op, L, name));
    }
  }
  for (const { file, marker } of accounts) await checkAccountForRemoval(file, marker);

  // When the tree is already gone this is the retry path: accounts outlive their
  // Agent directories until the Namespace goes.
  const changed = await removeAgents(targets, accounts, async () => {
    if (!present) return false;
    guard('remove the Namespace tree');
    removeTree(L.nsDir);
    progress('namespace', `removed ${L.nsDir}`);
    return true;
  });
  return { changed };
}

// OCC's deleteAgentRuntimeCredentials for one Agent: its unit, its whole directory
// (the port in agent.json is free again) and its account, verified as delete-namespace
// verifies each Agent. An absent Agent or Namespace is success, after removing a
// leftover account whose marker names this Namespace and Agent.
async function opDeleteAgent(op) {
  const L = layout(op);
  if (!operatorDirExists(L.root)) return { changed: false };
  await acquireLock(L.root);
  const present = verifyNamespace(op, L, false) && expectDir(L.agentDir) !== null;
  const targets = [];
  if (present) {
    const target = removalTarget(op, L, op.agent.hash);
    checkFields(target.scoped.agent, { id: op.agent.id, account: op.agent.account }, L.agentMarker, 'foreign-marker');
    targets.push(target);
  } else if (readUnit(L.unitPath, op.namespace.id, op.agent.id) !== null) {
    // A unit of ours without its directory (removed by hand): it goes too.
    targets.push({ scoped: op, SL: L, identity: null });
  }
  const accounts = [];
  if (expectDir(L.accounts)) {
    const marker = readMarker(L.accountMarker, 'foreign-account');
    if (marker) {
      checkOwner(marker, { ...namespaceOwner(op), agentId: op.agent.id, account: op.agent.account },
        L.accountMarker, 'foreign-account');
      const identity = present ? targets[0].identity : null;
      if (identity && marker.uid !== null && (marker.uid !== identity.uid || marker.gid !== identity.gid)) {
        throw new HelperError('foreign-account', `${L.accountMarker} records ${marker.uid}:${marker.gid}, ${L.agentMarker} ${identity.uid}:${identity.gid}`);
      }
      await checkAccountForRemoval(L.accountMarker, marker);
      accounts.push({ file: L.accountMarker, marker });
    }
  }
  if (present) sweep(L.agentsDir);

  const changed = await removeAgents(targets, accounts, async () => {
    if (!present) return false;
    guard('remove the Agent directory');
    removeTree(L.agentDir);
    progress('agent', `removed ${L.agentDir}`);
    return true;
  });
  return { changed };
}

module.exports = { opDeleteNamespace, opDeleteAgent };
},
'journal': function (module, exports, require) {
'use strict';
// The journal and systemd as a runtime read sees them: `systemctl show` of a unit, the
// unit's own records read from `journalctl -o json` one at a time (stopped as soon as
// a reader has what it needs), PID 1's records about the unit as OCC's events and
// exits, its invocations and the records of each (with the lines journald could not
// name an invocation for), and the journal's retention in words. Module of
// helper/helper.js; runtime.js reads an Agent's unit through it.

const fs = require('node:fs');
const { spawn } = require('node:child_process');

const { HelperError } = require('./constants');
const { remainingMs, session } = require('./session');
const { oneLine, run, showUnitProperties } = require('./children');
const { operatorDirExists } = require('./files');

// OCC's bound on a Pod's Events, and on an event's message.
const MAX_EVENTS = 100;
const MAX_EVENT_MESSAGE = 1024;
// How many of PID 1's records about the unit are looked through for an invocation.
const MAX_INVOCATION_RECORDS = 5000;

// PID 1's journal records about a unit, by MESSAGE_ID (systemd's catalog): the reason
// an event carries.
const UNIT_MESSAGES = {
  '7d4958e842da4a758f6c1cdc7b36dcc5': 'Starting',
  '39f53479d3a045ac8e11786248231fbf': 'Started',
  'be02cf6855d2428ba40df7e9d022f03d': 'FailedStart',
  'de5b426a63be47a7b6ac3eaac82e2f6f': 'Stopping',
  '9d1aaa27d60140bd96365438aad20286': 'Stopped',
  '5eb03494b6584870a536b337290809b3': 'Restarting',
  '98e322203f7a4ed290d09fe03c09fe15': 'ProcessExited',
  'd9b373ed55a64feb8242e02dbe79a49c': 'Failed',
  '7ad2d189f7e94e70a38c781354912448': 'Succeeded',
  'ae8f7b866b0347b9af31fe1c80b127c0': 'ResourcesUsed',
};

const UNIT_PROPERTIES = [
  'LoadState', 'ActiveState', 'SubState', 'Result', 'InvocationID', 'NRestarts', 'MainPID',
  'ExecMainStartTimestamp', 'ExecMainExitTimestamp', 'ExecMainCode', 'ExecMainStatus',
  'InactiveExitTimestamp',
];

// `systemctl show` of the unit, its times in microseconds, UTC.
async function showUnit(unitName) {
  return showUnitProperties(unitName, ['--timestamp=us+utc', `--property=${UNIT_PROPERTIES.join(',')}`]);
}

// "Sun 2026-12-06 07:48:57.123456 UTC" as ISO 8601, or null.
function systemdTime(text) {
  const m = /(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(\.\d{1,6})? UTC$/.exec(text || '');
  return m ? `${m[1]}T${m[2]}${m[3] || ''}Z` : null;
}

// A journal record's __REALTIME_TIMESTAMP in microseconds, or null: a Number holds
// them exactly (up to 2^53, the year 2255).
function realtimeUs(entry) {
  const us = entry.__REALTIME_TIMESTAMP;
  if (typeof us !== 'string' || !/^\d{1,16}$/.test(us)) return null;
  const n = Number(us);
  return Number.isSafeInteger(n) ? n : null;
}

// A journal record's time as ISO 8601 to the microsecond, or null.
function journalTime(entry) {
  const us = realtimeUs(entry);
  if (us === null) return null;
  const iso = new Date(Math.floor(us / 1000)).toISOString();
  return `${iso.slice(0, 19)}.${String(us % 1e6).padStart(6, '0')}Z`;
}

// A field as journalctl prints it: a string, or its bytes when they are not printable
// UTF-8; null when absent or repeated.
function field(entry, name) {
  const v = entry[name];
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((b) => Number.isInteger(b) && b >= 0 && b < 256)) {
    return Buffer.from(v).toString('utf8');
  }
  return null;
}

// Reads `journalctl -o json <args>` record by record; `each` returns false to stop
// (journalctl is then killed). Nothing is kept but what `each` keeps.
function journal(args, each) {
  return new Promise((resolve, reject) => {
    const child = spawn('journalctl', ['--no-pager', '--quiet', '-o', 'json', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C', SYSTEMD_PAGER: '', SYSTEMD_COLORS: '0' },
    });
    let stopped = false;
    let pending = '';
    let stderr = '';
    const stop = () => {
      if (!stopped) {
        stopped = true;
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(stop, Math.max(1000, Math.min(60000, remainingMs())));
    const onStop = () => stop();
    session.controller.signal.addEventListener('abort', onStop);
    // Decoded as a stream: a character split between two reads stays whole.
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      if (stopped) return;
      pending += chunk;
      let nl;
      while (!stopped && (nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line === '') continue;
        let entry;
        try {
          entry = JSON.parse(line);
        } catch {
          continue;
        }
        if (each(entry) === false) stop();
      }
    });
    child.stderr.on('data', (chunk) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new HelperError('command-failed', `journalctl: ${error.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      session.controller.signal.removeEventListener('abort', onStop);
      if (session.stop) return reject(session.stop);
      if (!stopped && code !== 0) {
        return reject(new HelperError('command-failed', `journalctl ${args.join(' ')}: exit ${code}: ${oneLine(stderr) || 'no output'}`));
      }
      resolve();
    });
  });
}

// PID 1's records about the unit: a trusted field (_PID) and the unit systemd names.
const unitRecords = (unitName) => ['_PID=1', `UNIT=${unitName}`];

// The unit's events, newest first, at most MAX_EVENTS.
async function unitEvents(unitName) {
  const events = [];
  await journal(['--reverse', `--lines=${MAX_EVENTS}`, ...unitRecords(unitName)], (entry) => {
    const id = field(entry, 'MESSAGE_ID');
    const priority = Number(field(entry, 'PRIORITY'));
    events.push({
      type: Number.isInteger(priority) && priority <= 4 ? 'Warning' : 'Normal',
      container: 'gateway',
      // systemd before 254 logs a process's exit without a MESSAGE_ID, with EXIT_CODE.
      reason: (id && UNIT_MESSAGES[id]) || (field(entry, 'EXIT_CODE') ? 'ProcessExited' : 'Systemd'),
      message: (field(entry, 'MESSAGE') || '').slice(0, MAX_EVENT_MESSAGE),
      count: 1,
      lastObservedAt: journalTime(entry),
    });
    return events.length < MAX_EVENTS;
  });
  return events;
}

// How an exit systemd logged reads in OCC's terms: Kubernetes' convention of 128 plus
// the signal for a process a signal ended.
const SIGNALS = { HUP: 1, INT: 2, QUIT: 3, ILL: 4, TRAP: 5, ABRT: 6, BUS: 7, FPE: 8, KILL: 9, SEGV: 11, PIPE: 13, TERM: 15 };
function termination(code, status, finishedAt) {
  if (code === 'exited') {
    const n = Number(status);
    return { reason: n === 0 ? 'Completed' : 'Error', exitCode: Number.isInteger(n) ? n : null, finishedAt };
  }
  if (code === 'killed' || code === 'dumped') {
    const n = /^\d+$/.test(status) ? Number(status) : SIGNALS[String(status).replace(/^SIG/, '')];
    return { reason: code === 'killed' ? 'Killed' : 'CoreDumped', exitCode: Number.isInteger(n) ? 128 + n : null, finishedAt };
  }
  return null;
}

// The last exit systemd logged for an invocation other than `current`: its record
// carries EXIT_CODE and EXIT_STATUS (and, from systemd 254, MESSAGE_ID
// 98e322203f7a4ed290d09fe03c09fe15).
async function lastLoggedExit(unitName, current) {
  let found = null;
  await journal(['--reverse', `--lines=${MAX_INVOCATION_RECORDS}`, ...unitRecords(unitName)], (entry) => {
    if (field(entry, 'INVOCATION_ID') === current || !field(entry, 'EXIT_CODE')) return true;
    found = termination(field(entry, 'EXIT_CODE'), field(entry, 'EXIT_STATUS'), journalTime(entry));
    return false;
  });
  return found;
}

// The invocations PID 1 recorded for the unit, newest first (distinct).
async function invocations(unitName) {
  const seen = [];
  await journal(['--reverse', `--lines=${MAX_INVOCATION_RECORDS}`, '--output-fields=INVOCATION_ID', ...unitRecords(unitName)], (entry) => {
    const id = field(entry, 'INVOCATION_ID');
    if (id && /^[0-9a-f]{32}$/.test(id) && !seen.includes(id)) seen.push(id);
    return true;
  });
  return seen;
}

// Microseconds as journalctl's --since/--until take them (both bounds inclusive).
const at = (us) => `@${Math.floor(us / 1e6)}.${String(us % 1e6).padStart(6, '0')}`;

// Where an invocation's records lie, in microseconds: `start`, its first record (PID 1's
// about it or its own processes'); `end`, PID 1's first record of the unit's next
// invocation (null while there is none); `last`, its processes' last record. null when
// the journal holds none of its records.
//
// journald names a line's invocation from the unit's cgroup when it reads the line: a
// line it reads only after the process and its cgroup are gone (a gateway that writes
// and exits at once, or a journald that lags) carries the unit but no invocation ID.
// Such a line belongs to the invocation whose span holds it: one unit runs one
// invocation at a time, and PID 1 logs the next one's start only after the last one
// stopped.
async function invocationSpan(unitName, id) {
  const own = [`_SYSTEMD_UNIT=${unitName}`, `_SYSTEMD_INVOCATION_ID=${id}`];
  let start = null;
  let last = null;
  // PID 1's records of the unit, newest first, down to the invocation's: the oldest
  // of another invocation among them is where the next one starts. Past the bound
  // (a thousand restarts since) the end is not known, and the span holds nothing.
  let end = null;
  let bounded = false;
  let read = 0;
  await Promise.all([
    journal([...unitRecords(unitName), `INVOCATION_ID=${id}`, '+', ...own, '--output-fields=_PID'], (entry) => {
      start = realtimeUs(entry);
      return false;
    }),
    journal(['--reverse', '--output-fields=_PID', ...own], (entry) => {
      last = realtimeUs(entry);
      return false;
    }),
    journal(['--reverse', '--output-fields=INVOCATION_ID', ...unitRecords(unitName)], (entry) => {
      const other = field(entry, 'INVOCATION_ID');
      if (other === id) return false;
      if (other !== null) end = realtimeUs(entry);
      bounded = ++read >= MAX_INVOCATION_RECORDS;
      return !bounded;
    }),
  ]);
  if (start === null) return null;
  return { start, end: bounded ? start : end, last: last ?? start };
}

// Whether a record of the unit is the invocation's: it carries the invocation's ID, or
// it carries none and lies in the invocation's span ([start, end), end null: open).
function ofInvocation(entry, id, span) {
  const invocation = entry._SYSTEMD_INVOCATION_ID;
  if (invocation !== undefined) return invocation === id;
  const t = realtimeUs(entry);
  return t !== null && t >= span.start && (span.end === null || t < span.end);
}

// Calls `each` with the invocation's last `tail` records (since `sinceUs`, when given),
// newest first, each with MESSAGE; `each` returns false to stop. Its records are those
// that carry its invocation ID, and those in its span that carry none (above).
async function invocationRecords(unitName, id, { tail, sinceUs }, each) {
  const span = await invocationSpan(unitName, id);
  if (span === null) return;
  // The unit's records from the span's start to the later of its end and the
  // invocation's last own record (a line journald read late may follow the next start).
  // A `since` after all of them reads nothing (journalctl refuses --since after --until).
  const from = Math.max(span.start, sinceUs ?? 0);
  const to = span.end === null ? null : Math.max(span.end, span.last);
  if (to !== null && from > to) return;
  const args = ['--reverse', `--since=${at(from)}`, ...(to === null ? [] : [`--until=${at(to)}`])];
  let given = 0;
  await journal([...args, '--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID', `_SYSTEMD_UNIT=${unitName}`], (entry) => {
    if (!ofInvocation(entry, id, span)) return true;
    given += 1;
    return each(entry) !== false && given < tail;
  });
}

// What the host's journal keeps, in words: where it is, how much it holds, since when.
async function retention() {
  const persistent = operatorDirExists('/var/log/journal') && fs.readdirSync('/var/log/journal').length > 0;
  let usage = null;
  const result = await run('journalctl', ['--disk-usage'], { allowFailure: true, timeoutMs: 15000 });
  const m = /take up (\S+) /.exec(result.stdout);
  if (m) usage = m[1];
  let oldest = null;
  await journal(['--output-fields=_PID'], (entry) => {
    oldest = journalTime(entry);
    return false;
  });
  const where = persistent
    ? 'the host\'s persistent journal (/var/log/journal, kept across reboots'
    : 'the host\'s volatile journal (/run/log/journal, lost when the host reboots';
  return `The gateway's output is in ${where}${usage ? `; ${usage} in use` : ''}` +
    `${oldest ? `; oldest record ${oldest}` : ''}). journald removes the oldest records ` +
    'when its size or age limits (journald.conf SystemMaxUse, MaxRetentionSec) are reached; ' +
    'an Agent\'s output goes when its host\'s journal rotates it out, not when the Agent is deleted.';
}


module.exports = {
  showUnit, systemdTime, journalTime, field, journal, unitEvents, termination, lastLoggedExit,
  invocations, ofInvocation, invocationRecords, retention,
};
},
'runtime': function (module, exports, require) {
'use strict';
// The runtime of one Agent as OCC's Console reads it: its gateway unit described (one
// "pod" per unit, its uid the unit's InvocationID), the unit's own output read from the
// journal within the controller's bounds, and a diagnosis of the exact revision. Every
// read is of the Agent the envelope names: the unit is the helper's own name for it,
// journal matches are on fields journald writes itself (_SYSTEMD_UNIT,
// _SYSTEMD_INVOCATION_ID, _PID=1; journal.js), and nothing here changes anything on
// the host.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError, NODE_MAJOR, ROOT_UID } = require('./constants');
const { run } = require('./children');
const { expectFile, lstatOrNull, readMarker } = require('./files');
const { layout, readCurrent, readUnit, verifyRevision } = require('./layout');
const { accountIdentity, loadAgent } = require('./accounts');
const { listenersOn, readyStatus, servingReady } = require('./readiness');
const {
  field, invocationRecords, invocations, journalTime, lastLoggedExit, retention, showUnit, systemdTime,
  termination, unitEvents
} = require('./journal');

// OCC's bound on a diagnosis, and on the lines of one log read.
const MAX_CHECKS = 32;
const MAX_TAIL_LINES = 1000;
// Below this much free space under the runtime root, a diagnosis fails `free-space`.
const LOW_SPACE_BYTES = 512 * 1024 * 1024;
// A gateway restarted less than this long ago, listening on nothing, is diagnosed as restarting.
const RESTART_WINDOW_MS = 10000;

function containerState(state) {
  switch (state.ActiveState) {
    case 'active': case 'reloading': case 'deactivating':
      return { state: 'running', reason: null };
    case 'activating':
      return { state: 'waiting', reason: state.SubState || null };
    case 'inactive': case 'failed':
      return { state: 'terminated', reason: state.Result || null };
    default:
      return { state: 'unknown', reason: state.ActiveState || null };
  }
}

function phase(state) {
  switch (state.ActiveState) {
    case 'active': case 'reloading': case 'deactivating': return 'Running';
    case 'activating': return 'Pending';
    case 'failed': return 'Failed';
    case 'inactive': return state.Result === 'success' ? 'Succeeded' : 'Failed';
    default: return 'Unknown';
  }
}


// The Agent, its unit and whether the unit runs the envelope's revision now: the one
// reading every operation below starts from. The Agent must exist and be ours.
async function agentUnit(op) {
  const L = layout(op);
  const agent = await loadAgent(op, L, { required: true });
  const unitText = readUnit(L.unitPath, op.namespace.id, op.agent.id);
  const state = await showUnit(op.agent.unitName);
  const current = readCurrent(L);
  const runsRevision = unitText !== null && current === op.revision.hash && state.LoadState === 'loaded' &&
    /^[0-9a-f]{32}$/.test(state.InvocationID || '');
  return { L, agent, state, current, runsRevision, unitText };
}

async function describe(op) {
  const { agent, state, runsRevision } = await agentUnit(op);
  const pods = [];
  if (runsRevision) {
    const { state: cstate, reason } = containerState(state);
    const ready = state.ActiveState === 'active' && (await servingReady(agent.port, accountIdentity(agent)));
    const restartCount = Number(state.NRestarts) || 0;
    const lastTermination = cstate === 'terminated'
      ? termination(state.ExecMainCode === '1' ? 'exited' : state.ExecMainCode === '2' ? 'killed' : state.ExecMainCode === '3' ? 'dumped' : '',
        state.ExecMainStatus, systemdTime(state.ExecMainExitTimestamp))
      : await lastLoggedExit(op.agent.unitName, state.InvocationID);
    pods.push({
      role: 'gateway',
      cluster: 'control',
      name: op.agent.unitName,
      uid: state.InvocationID,
      phase: phase(state),
      ready,
      createdAt: systemdTime(state.InactiveExitTimestamp),
      containers: [{
        name: 'gateway',
        state: cstate,
        reason,
        ready,
        restartCount,
        startedAt: cstate === 'waiting' ? null : systemdTime(state.ExecMainStartTimestamp),
        lastTermination,
      }],
      events: op.events === false ? [] : await unitEvents(op.agent.unitName),
    });
  }
  return {
    pods,
    sources: [{
      id: 'gateway',
      kind: 'container',
      pods: pods.map((p) => ({ name: p.name, uid: p.uid, container: 'gateway', restartCount: p.containers[0].restartCount })),
      available: pods.length > 0,
      ...(pods.length === 0 ? { unavailableCode: 'NO_POD' } : {}),
      retention: await retention(),
    }],
  };
}

// Which of `listeners` a process of the unit holds: the socket inodes open in the
// processes of the Agent's account whose cgroup is the unit's. A listener of the
// same account outside the unit (an Agent's own background server) is not the
// gateway's.
function heldByUnit(listeners, uid, unitName) {
  const wanted = new Set(listeners.map((l) => `socket:[${l.inode}]`));
  const held = new Set();
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (fs.statSync(`/proc/${pid}`).uid !== uid) continue;
      const cgroup = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
      const inUnit = cgroup.split('\n').some((line) => line.startsWith('0::') && line.split('/').includes(unitName));
      if (!inUnit) continue;
      for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
        const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (wanted.has(link)) held.add(link);
      }
    } catch {
      // A process that ended meanwhile holds nothing.
    }
  }
  return listeners.filter((l) => held.has(`socket:[${l.inode}]`));
}

// A line's bytes as the link counts them: its text as JSON carries it, and its newline.
const lineBytes = (raw) => Buffer.byteLength(JSON.stringify(raw), 'utf8') - 2 + 1;

// Lines, oldest first, within a byte budget (lineBytes each). The line that crosses
// the budget is cut to what is left.
function cutLines(entries, limitBytes) {
  const lines = [];
  let used = 0;
  for (const { time, raw } of entries) {
    const size = lineBytes(raw);
    if (used + size <= limitBytes) {
      lines.push({ time, raw });
      used += size;
      continue;
    }
    // The longest prefix of `raw` that fits.
    let lo = 0;
    let hi = raw.length;
    const left = limitBytes - used - 1;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (Buffer.byteLength(JSON.stringify(raw.slice(0, mid)), 'utf8') - 2 <= left) lo = mid;
      else hi = mid - 1;
    }
    if (lo > 0) lines.push({ time, raw: raw.slice(0, lo) });
    return { lines, truncated: true };
  }
  return { lines, truncated: false };
}

// A tail read newest first, held within the budget as it is read: a line that the
// older lines alone already push past the budget can never be sent, and is let go, so
// no more than the budget and one line is held. `lines()` is what cutLines makes of
// the whole tail, oldest first.
function tailWithin(limitBytes) {
  const held = []; // newest first
  let heldBytes = 0;
  let dropped = false;
  return {
    add(time, raw) {
      held.push({ time, raw, size: lineBytes(raw) });
      heldBytes += held[held.length - 1].size;
      while (held.length > 1 && heldBytes - held[0].size >= limitBytes) {
        heldBytes -= held.shift().size;
        dropped = true;
      }
    },
    lines() {
      const { lines, truncated } = cutLines(held.map(({ time, raw }) => ({ time, raw })).reverse(), limitBytes);
      return { lines, truncated: truncated || dropped };
    },
  };
}

async function readLogs(op) {
  const request = op.logRequest;
  const { state, runsRevision } = await agentUnit(op);
  if (!runsRevision || request.pod !== op.agent.unitName) {
    throw new HelperError('stream-unavailable',
      `${request.pod} is not the unit that runs revision ${op.revision.id} of Agent ${op.agent.id} now; describe the runtime again`);
  }
  let invocation = request.podUid;
  if (request.podUid !== state.InvocationID || request.previous) {
    const known = await invocations(op.agent.unitName);
    if (!known.includes(state.InvocationID)) known.unshift(state.InvocationID);
    const at = known.indexOf(request.podUid);
    if (at < 0) {
      throw new HelperError('stream-unavailable',
        `invocation ${request.podUid} of ${op.agent.unitName} is not in the host's journal; describe the runtime again`);
    }
    invocation = request.previous ? (known[at + 1] ?? null) : request.podUid;
  }
  const tailRead = tailWithin(request.limitBytes);
  if (invocation !== null) {
    const tail = Math.min(request.tailLines, MAX_TAIL_LINES);
    const sinceUs = request.sinceSeconds === undefined
      ? undefined : (Math.floor(Date.now() / 1000) - request.sinceSeconds) * 1e6;
    await invocationRecords(op.agent.unitName, invocation, { tail, sinceUs }, (entry) => {
      tailRead.add(journalTime(entry), field(entry, 'MESSAGE') ?? '');
    });
  }
  const { lines, truncated } = tailRead.lines();
  // The stream as it is after the read: a restart meanwhile shows as a new uid.
  const after = await showUnit(op.agent.unitName);
  return {
    stream: {
      source: 'gateway', pod: op.agent.unitName, podUid: after.InvocationID || request.podUid,
      container: 'gateway', restartCount: Number(after.NRestarts) || 0,
    },
    invocation,
    lines,
    truncated,
  };
}

// The diagnosis of the envelope's revision: each check's state now, in a fixed order
// with stable names and codes (docs/occ.md). A check that cannot be made because an
// earlier one failed is `unknown`.
async function diagnose(op) {
  const checks = [];
  const at = () => new Date().toISOString();
  const check = (component, name, ok, code) => {
    checks.push({
      component, check: name, state: ok === null ? 'unknown' : ok ? 'succeeded' : 'failed', checkedAt: at(),
      ...(code ? { code } : {}),
    });
  };
  check('host', 'reachable', true);
  try {
    const { bavail, bsize } = fs.statfsSync(op.root);
    check('host', 'free-space', bavail * bsize >= LOW_SPACE_BYTES, bavail * bsize >= LOW_SPACE_BYTES ? undefined : 'LOW_DISK_SPACE');
  } catch {
    check('host', 'free-space', false, 'RUNTIME_ROOT_MISSING');
  }
  const node = await nodeMajorOk(op.nodePath);
  check('host', 'node-version', node, node ? undefined : 'NODE_VERSION');
  const openclaw = expectFileSafe(op.openclawPath);
  check('host', 'openclaw-entrypoint', openclaw, openclaw ? undefined : 'OPENCLAW_MISSING');
  if (op.harnessVersion !== undefined) {
    // The revision was committed for this OpenClaw; the host runs what is installed.
    const installed = openclawVersion(op.openclawPath);
    check('host', 'openclaw-version', installed === null ? null : installed === op.harnessVersion,
      installed === null ? 'OPENCLAW_VERSION_UNKNOWN' : installed === op.harnessVersion ? undefined : 'OPENCLAW_VERSION');
  }

  let unit;
  try {
    unit = await agentUnit(op);
    check('agent', 'account-and-markers', true);
  } catch (error) {
    const code = error instanceof HelperError && error.code === 'missing-revision' ? 'AGENT_MISSING'
      : error instanceof HelperError && error.code === 'missing-namespace' ? 'NAMESPACE_MISSING' : 'MARKER_MISMATCH';
    if (!(error instanceof HelperError)) throw error;
    check('agent', 'account-and-markers', false, code);
    for (const [c, n] of [['revision', 'snapshot'], ['gateway', 'unit-file'], ['gateway', 'current-revision'],
      ['gateway', 'unit-active'], ['gateway', 'port-bound'], ['gateway', 'readyz'], ['agent', 'env-file']]) {
      check(c, n, null, 'UNAVAILABLE');
    }
    return { checks: checks.slice(0, MAX_CHECKS) };
  }
  const { L, agent, state, current, unitText } = unit;
  try {
    const snapshot = verifyRevision(op, L, agent.gid);
    check('revision', 'snapshot', snapshot !== null, snapshot ? undefined : 'SNAPSHOT_MISSING');
  } catch (error) {
    if (!(error instanceof HelperError)) throw error;
    check('revision', 'snapshot', false, 'SNAPSHOT_CHANGED');
  }
  check('gateway', 'unit-file', unitText !== null, unitText !== null ? undefined : 'UNIT_MISSING');
  check('gateway', 'current-revision', current === op.revision.hash, current === op.revision.hash ? undefined : 'NOT_CURRENT');
  const active = state.ActiveState === 'active';
  const account = accountIdentity(agent);
  const listeners = listenersOn(agent.port);
  // Active, restarted within the window and not listening: a gateway that
  // exits and is started again is active between its runs, serving nothing.
  const started = Date.parse(systemdTime(state.ExecMainStartTimestamp) || '');
  const restarting = active && (Number(state.NRestarts) || 0) > 0 && listeners.length === 0 &&
    Number.isFinite(started) && Date.now() - started < RESTART_WINDOW_MS;
  check('gateway', 'unit-active', active && !restarting,
    restarting ? 'UNIT_RESTARTING' : active ? undefined : `UNIT_${(state.ActiveState || 'unknown').toUpperCase()}`);
  const foreign = listeners.some((l) => l.uid !== account.uid);
  // Bound by the unit's own processes: every listener on the port is held in the unit.
  const byUnit = !foreign && listeners.length > 0 &&
    heldByUnit(listeners, account.uid, op.agent.unitName).length === listeners.length;
  check('gateway', 'port-bound', byUnit,
    foreign ? 'PORT_SQUATTED' : listeners.length === 0 ? 'PORT_NOT_BOUND' : byUnit ? undefined : 'PORT_NOT_THE_UNITS');
  if (byUnit) {
    const status = await readyStatus(agent.port);
    check('gateway', 'readyz', status === 200, status === 200 ? undefined : status === null ? 'READYZ_NO_ANSWER' : `READYZ_${status}`);
  } else {
    check('gateway', 'readyz', null, 'UNAVAILABLE');
  }
  const setupRecord = path.join(L.agentDir, 'workspace-setup.json');
  if (lstatOrNull(setupRecord)) {
    let record = null;
    try {
      record = readMarker(setupRecord);
    } catch {
      record = null;
    }
    const done = record !== null && record.completed === true;
    check('workspace', 'setup', done, done ? undefined : 'WORKSPACE_SETUP_INCOMPLETE');
  }
  // The operator's env file: present or not, and its owner and mode; never its content.
  const envFile = path.join(L.agentDir, 'env');
  const st = lstatOrNull(envFile);
  if (!st) {
    check('agent', 'env-file', true, 'ENV_FILE_ABSENT');
  } else {
    const safe = st.isFile() && st.uid === ROOT_UID && (st.mode & 0o077) === 0;
    check('agent', 'env-file', safe, safe ? undefined : st.isFile() ? 'ENV_FILE_MODE' : 'ENV_FILE_NOT_REGULAR');
  }
  return { checks: checks.slice(0, MAX_CHECKS) };
}

// The version in the package.json of the `openclaw` package the entrypoint is in
// (its directory or one of the two above it), or null.
function openclawVersion(entrypoint) {
  let dir = path.dirname(entrypoint);
  for (let i = 0; i < 3; i += 1) {
    try {
      const file = path.join(dir, 'package.json');
      if (fs.statSync(file).size <= 1 << 20) {
        const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
        if (pkg && pkg.name === 'openclaw' && typeof pkg.version === 'string') return pkg.version;
      }
    } catch {
      // No package.json here: look one directory up.
    }
    dir = path.dirname(dir);
  }
  return null;
}

function expectFileSafe(p) {
  try {
    return expectFile(p) !== null;
  } catch {
    return false;
  }
}

async function nodeMajorOk(nodePath) {
  try {
    const result = await run(nodePath, ['--version'], { allowFailure: true, timeoutMs: 15000 });
    const major = /^v(\d+)\./.exec(result.stdout.trim());
    return result.code === 0 && major !== null && Number(major[1]) === NODE_MAJOR;
  } catch {
    return false;
  }
}

async function opDescribeRuntime(op) {
  return { changed: false, ...(await describe(op)) };
}

async function opReadLogs(op) {
  return { changed: false, ...(await readLogs(op)) };
}

async function opDiagnose(op) {
  return { changed: false, ...(await diagnose(op)) };
}

module.exports = {
  opDescribeRuntime, opReadLogs, opDiagnose, cutLines, tailWithin, termination, systemdTime, journalTime,
  MAX_TAIL_LINES,
};
},
'main': function (module, exports, require) {
'use strict';
// Main: the helper's input read and checked, the operation run by its handler within
// the deadline, and one result line; `api` is what tests and the host read of it.

const fs = require('node:fs');

const {
  DEFAULT_DEADLINE_MS, DEFAULT_READINESS_MS, HEADER_FIRST_LINE, HEARTBEAT_MS, HelperError,
  MARKER_FORMAT, MAX_DEADLINE_MS, PERMANENT_CODES, PROTOCOL_VERSION, STARTED_AT, UNIT_PREFIX
} = require('./constants');
const { emit, remainingMs, session, stopWith, watchSession } = require('./session');
const { oneLine } = require('./children');
const { releaseLock, releaseLockOnExit } = require('./lock');
const { DISK_FULL, diskFullMessage } = require('./files');
const { SAFE_PATH, closedKeys, invalid, requireObject, sha256Hex } = require('./values');
const {
  MAX_PLACEHOLDERS, OPERATIONS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE, RESERVED_PLACEHOLDER,
  agentAccountName, parseEnvelope, parseOperation
} = require('./operation');
const { canonicalJson, renderSnapshot, renderUnit, unitHeader } = require('./render');
const {
  WORKSPACE_FILE_NAMES, WORKSPACE_SETUP_FAILED, WORKSPACE_SETUP_SOURCE, checkWorkspaceSetup
} = require('./workspace-setup');
const {
  opActivate, opDeactivate, opEnsureNamespace, opInspectAgent, opPrepare, opRetire,
  opStop
} = require('./operations');
const { opDeleteAgent, opDeleteNamespace } = require('./removal');
const { opProbe } = require('./probe');
const {
  cutLines, tailWithin, journalTime, opDescribeRuntime, opDiagnose, opReadLogs, systemdTime, termination
} = require('./runtime');
const { ofInvocation } = require('./journal');

const HANDLERS = {
  'probe': opProbe,
  'ensure-namespace': opEnsureNamespace,
  'prepare': opPrepare,
  'activate': opActivate,
  'deactivate': opDeactivate,
  'stop': opStop,
  'retire': opRetire,
  'delete-namespace': opDeleteNamespace,
  'inspect-agent': opInspectAgent,
  'delete-agent': opDeleteAgent,
  'describe-runtime': opDescribeRuntime,
  'read-logs': opReadLogs,
  'diagnose': opDiagnose,
};

function errorResult(error) {
  // Anything that is not a HelperError is an unexpected host failure (EACCES, EIO,
  // ...): retryable `io`. A signal stops the helper like a command failure would.
  if (!(error instanceof HelperError) && error && DISK_FULL.has(error.code)) {
    return {
      event: 'result',
      ok: false,
      error: { code: 'disk-full', message: oneLine(diskFullMessage(error)), permanent: false },
    };
  }
  const code = error instanceof HelperError ? (error.code === 'interrupted' ? 'command-failed' : error.code) : 'io';
  let message = error && error.message ? error.message : String(error);
  if (!(error instanceof HelperError) && error && error.code) message = `${error.code}: ${message}`;
  return {
    event: 'result',
    ok: false,
    error: { code, message: oneLine(message), permanent: PERMANENT_CODES.has(code) },
    ...(error && error.extra ? error.extra : {}),
  };
}

let heartbeat = null;

let deadlineTimer = null;

let backstop = null;

async function finish(result) {
  if (session.finished) return;
  session.finished = true;
  clearInterval(heartbeat);
  clearTimeout(deadlineTimer);
  clearTimeout(backstop);
  await releaseLock();
  const code = result.ok ? 0 : 1;
  if (session.closed) process.exit(code);
  try {
    process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(code));
  } catch {
    process.exit(code);
  }
}

// The helper's input, after its own text on stdin (the loader read that): one frame,
// a 4-byte big-endian length and that many bytes of JSON, `{"args": [<base64
// operation>, <base64 envelope>]}`, then the end of stdin. Read synchronously before
// anything else, so that the operation, the controller's document and the envelope
// never appear in an argument or the environment, where any account on the host could
// read them.
const MAX_INPUT_BYTES = 4 << 20;

function readStdinExact(n, what) {
  const buffer = Buffer.alloc(n);
  for (let got = 0; got < n;) {
    let read;
    try {
      read = fs.readSync(0, buffer, got, n - got, null);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      continue;
    }
    if (read === 0) throw invalid(`stdin ended inside ${what}`);
    got += read;
  }
  return buffer;
}

function readInput() {
  const size = readStdinExact(4, 'the input frame').readUInt32BE(0);
  if (size > MAX_INPUT_BYTES) throw invalid(`an input frame of ${size} bytes is over the bound of ${MAX_INPUT_BYTES}`);
  let input;
  try {
    input = JSON.parse(readStdinExact(size, 'the input frame').toString('utf8'));
  } catch (error) {
    if (error instanceof HelperError) throw error;
    throw invalid('the input frame is not JSON');
  }
  requireObject(input, 'input');
  closedKeys(input, ['args'], 'input');
  const { args } = input;
  if (!Array.isArray(args) || args.length !== 2 || !args.every((a) => typeof a === 'string')) {
    throw invalid('input.args must be [<base64 operation>, <base64 envelope>]');
  }
  return args;
}

async function main(helperSha256) {
  let op;
  try {
    const [operation, envelope] = readInput();
    // The title an operator sees in the process list names the run without its
    // content: a hash of both arguments.
    process.title = `occ-ssh-helper ${sha256Hex(`${operation} ${envelope}`).slice(0, 12)}`;
    op = parseOperation(operation, envelope);
    // The markers this run writes name the helper that wrote them.
    op.helperSha256 = helperSha256;
  } catch (error) {
    await finish(errorResult(error));
    return;
  }
  session.deadlineAt = STARTED_AT + (op.deadlineMs || DEFAULT_DEADLINE_MS);
  heartbeat = setInterval(() => emit({ event: 'heartbeat', elapsedMs: Date.now() - STARTED_AT }), HEARTBEAT_MS);
  deadlineTimer = setTimeout(() => stopWith(new HelperError('deadline', 'the helper deadline passed')),
    Math.max(0, remainingMs()));
  // Should a step ignore the stop (a command past its own timeout), still report and
  // exit before the transport's bound.
  backstop = setTimeout(() => finish(errorResult(new HelperError('deadline', 'the helper deadline passed'))),
    Math.max(0, remainingMs() + 3000));
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => stopWith(new HelperError('interrupted', `received ${signal}`)));
  }
  try {
    const result = await HANDLERS[op.op](op);
    await finish({ event: 'result', ok: true, ...result });
  } catch (error) {
    await finish(errorResult(error));
  }
}

// Run the helper: what the loader does with the shipped program. `helperSha256` is
// the SHA-256 the loader took of this program's text (null from a loader that took
// none): the hash the operator approved, which every marker written names.
function run(helperSha256) {
  watchSession();
  releaseLockOnExit();
  process.on('uncaughtException', (error) => finish(errorResult(error)));
  process.on('unhandledRejection', (error) => finish(errorResult(error)));
  main(typeof helperSha256 === 'string' && /^[0-9a-f]{64}$/.test(helperSha256) ? helperSha256 : null);
}

// What the tests and the host read of the helper: its tables and pure functions.
const api = {
  PROTOCOL_VERSION, MARKER_FORMAT, OPERATIONS, PERMANENT_CODES, HEADER_FIRST_LINE, UNIT_PREFIX, SAFE_PATH,
  DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, DEFAULT_READINESS_MS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE,
  RESERVED_PLACEHOLDER, MAX_PLACEHOLDERS, HelperError, parseEnvelope, parseOperation,
  renderSnapshot, renderUnit, canonicalJson, agentAccountName, unitHeader, WORKSPACE_FILE_NAMES,
  WORKSPACE_SETUP_SOURCE, WORKSPACE_SETUP_FAILED, checkWorkspaceSetup, cutLines, tailWithin, termination,
  systemdTime, journalTime, ofInvocation,
};

module.exports = { run, api };
},
};

const loaded = {};
function load(name) {
  if (!loaded[name]) {
    const mod = { exports: {} };
    loaded[name] = mod;
    const local = (spec) => (spec.startsWith('./') ? load(spec.slice(2)) : require(spec));
    SOURCES[name](mod, mod.exports, local);
  }
  return loaded[name].exports;
}

const main = load('main');
if (RUN_AS_HELPER) {
  main.run(module.helperSha256);
} else {
  module.exports = main.api;
}
