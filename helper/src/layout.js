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
