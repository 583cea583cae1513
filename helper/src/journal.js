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
