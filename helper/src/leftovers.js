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
