'use strict';
// The runtime of one Agent as OCC's Console reads it: its gateway unit described (one
// "pod" per unit, its uid the unit's InvocationID), the unit's own output read from the
// journal within the controller's bounds, and a diagnosis of the exact revision. Every
// read is of the Agent the envelope names: the unit is the helper's own name for it,
// journal matches are on fields journald writes itself (_SYSTEMD_UNIT,
// _SYSTEMD_INVOCATION_ID, _PID=1), and nothing here changes anything on the host.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const { HelperError, NODE_MAJOR, ROOT_UID } = require('./constants');
const { remainingMs, session } = require('./session');
const { oneLine, run } = require('./children');
const { expectFile, lstatOrNull, operatorDirExists, readMarker } = require('./files');
const { layout, readCurrent, readUnit, verifyRevision } = require('./layout');
const { accountIdentity, loadAgent } = require('./accounts');
const { listenersOn, readyStatus } = require('./readiness');

// OCC's bound on a Pod's Events, and on a diagnosis.
const MAX_EVENTS = 100;
const MAX_CHECKS = 32;
// Bounds on what one read sends back: an event's message, a log request's lines.
const MAX_EVENT_MESSAGE = 1024;
const MAX_TAIL_LINES = 1000;
// How many of PID 1's records about the unit are looked through for an invocation.
const MAX_INVOCATION_RECORDS = 5000;
// Below this much free space under the runtime root, a diagnosis fails `free-space`.
const LOW_SPACE_BYTES = 512 * 1024 * 1024;

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
  const result = await run('systemctl', [
    'show', '--timestamp=us+utc', `--property=${UNIT_PROPERTIES.join(',')}`, '--', unitName,
  ], { timeoutMs: 20000 });
  const state = {};
  for (const line of result.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) state[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return state;
}

// "Sun 2026-12-06 07:48:57.123456 UTC" as ISO 8601, or null.
function systemdTime(text) {
  const m = /(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(\.\d{1,6})? UTC$/.exec(text || '');
  return m ? `${m[1]}T${m[2]}${m[3] || ''}Z` : null;
}

// A journal record's __REALTIME_TIMESTAMP (microseconds) as ISO 8601 with them.
function journalTime(entry) {
  const us = entry.__REALTIME_TIMESTAMP;
  if (typeof us !== 'string' || !/^\d{1,17}$/.test(us)) return null;
  const n = BigInt(us);
  const iso = new Date(Number(n / 1000n)).toISOString();
  return `${iso.slice(0, 19)}.${String(n % 1000000n).padStart(6, '0')}Z`;
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
    child.stdout.on('data', (chunk) => {
      if (stopped) return;
      pending += chunk.toString('utf8');
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
    ? 'the host\'s persistent journal (/var/log/journal), kept across reboots'
    : 'the host\'s volatile journal (/run/log/journal), lost when the host reboots';
  return `The gateway's output is kept in ${where}${usage ? `, ${usage} in use` : ''}` +
    `${oldest ? `, its oldest record from ${oldest}` : ''}; journald removes the oldest records ` +
    'when its size or age limits (journald.conf SystemMaxUse, MaxRetentionSec) are reached, and ' +
    'an Agent\'s output goes when its host\'s journal rotates it out, not when the Agent is deleted.';
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
    const ready = state.ActiveState === 'active' && (await readyStatusOf(agent)) === 200;
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

async function readyStatusOf(agent) {
  const account = accountIdentity(agent);
  const listeners = listenersOn(agent.port);
  if (listeners.length === 0 || listeners.some((l) => l.uid !== account.uid)) return null;
  return readyStatus(agent.port);
}

// A byte budget as the link counts it: each line's text as JSON carries it, and its
// newline. The line that crosses the budget is cut to what is left.
function cutLines(entries, limitBytes) {
  const lines = [];
  let used = 0;
  for (const { time, raw } of entries) {
    const size = Buffer.byteLength(JSON.stringify(raw), 'utf8') - 2 + 1;
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
  const entries = [];
  if (invocation !== null) {
    const args = [
      `--lines=${Math.min(request.tailLines, MAX_TAIL_LINES)}`, '--output-fields=MESSAGE',
      `_SYSTEMD_UNIT=${op.agent.unitName}`, `_SYSTEMD_INVOCATION_ID=${invocation}`,
    ];
    if (request.sinceSeconds !== undefined) {
      args.unshift(`--since=@${Math.floor(Date.now() / 1000) - request.sinceSeconds}`);
    }
    // The bound is kept while reading: journalctl is stopped once the lines read
    // already fill the budget, so a tail of long lines is never held whole.
    let bytes = 0;
    await journal(args, (entry) => {
      const raw = field(entry, 'MESSAGE') ?? '';
      entries.push({ time: journalTime(entry), raw });
      bytes += Buffer.byteLength(JSON.stringify(raw), 'utf8') - 1;
      return bytes <= request.limitBytes;
    });
  }
  const { lines, truncated } = cutLines(entries, request.limitBytes);
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
  check('gateway', 'unit-active', active, active ? undefined : `UNIT_${(state.ActiveState || 'unknown').toUpperCase()}`);
  const account = accountIdentity(agent);
  const listeners = listenersOn(agent.port);
  const foreign = listeners.some((l) => l.uid !== account.uid);
  check('gateway', 'port-bound', listeners.length > 0 && !foreign,
    foreign ? 'PORT_SQUATTED' : listeners.length === 0 ? 'PORT_NOT_BOUND' : undefined);
  if (listeners.length > 0 && !foreign) {
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
  opDescribeRuntime, opReadLogs, opDiagnose, cutLines, termination, systemdTime, journalTime,
  MAX_TAIL_LINES,
};
