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
