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
