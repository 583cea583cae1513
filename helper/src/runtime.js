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
