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
