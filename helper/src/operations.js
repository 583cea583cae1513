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
