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
