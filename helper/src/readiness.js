'use strict';
// Readiness.
//
// A 200 from 127.0.0.1:<port>/readyz counts only when the answer came from the
// Agent's own gateway: every socket listening on that port (IPv4 and IPv6) must belong
// to the Agent's account, and the same ones before and after the request. Any other
// account listening there is a squatter that could answer for the gateway (and keeps
// it from binding); activation then fails, retryably, naming the port and the account.

const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');

const {
  HelperError, READY_POLL_MS, READY_REQUEST_MS, RESTART_JOB_MS, RESTART_POLL_MS
} = require('./constants');
const { remainingMs, session, sleep } = require('./session');
const { run, unitState } = require('./children');

// LISTEN sockets on `port` in this network namespace: [{ uid, inode }].
function portListeners(port) {
  const found = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if (error.code === 'ENOENT') continue; // no IPv6 on this host
      throw error;
    }
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A') continue;
      const local = fields[1];
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) !== port) continue;
      found.push({ uid: Number(fields[7]), inode: fields[9] });
    }
  }
  return found;
}

async function accountName(uid) {
  const result = await run('getent', ['passwd', String(uid)], { allowFailure: true, timeoutMs: 15000 });
  return result.code === 0 ? result.stdout.split(':')[0] : `uid ${uid}`;
}

async function squatterError(port, foreign, account) {
  const name = await accountName(foreign.uid);
  return new HelperError('port-squatted',
    `port ${port} is held by account ${name} (uid ${foreign.uid}), not by the Agent's account ${account.name}` +
    ` (uid ${account.uid}): its answers cannot count as the gateway's and the gateway cannot bind;` +
    ` stop that listener (ss -ltnpe 'sport = :${port}') and retry`);
}

const sameListeners = (a, b) => a.length === b.length &&
  a.every((l, i) => l.inode === b[i].inode && l.uid === b[i].uid);

// One readiness probe: 'ready', 'not-ready', or a squatter ({ foreign }).
async function probeReady(port, account) {
  const before = portListeners(port);
  const foreign = before.find((l) => l.uid !== account.uid);
  if (foreign) return { foreign };
  if (before.length === 0) return { state: 'not-ready', status: null };
  const status = await readyStatus(port);
  const after = portListeners(port);
  const late = after.find((l) => l.uid !== account.uid);
  if (late) return { foreign: late };
  // The listeners changed while we asked (a restart): ask again.
  if (status === 200 && sameListeners(before, after)) return { state: 'ready', status };
  return { state: 'not-ready', status };
}

function readyStatus(port) {
  return new Promise((resolve) => {
    const request = http.get({
      host: '127.0.0.1', port, path: '/readyz', agent: false, timeout: READY_REQUEST_MS,
      signal: session.controller.signal,
    }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(null));
  });
}

// True when the Agent's own gateway answers ready now; a squatter only means "no".
async function servingReady(port, account) {
  return (await probeReady(port, account)).state === 'ready';
}

// Whether the unit still runs the gateway it was restarted into: a gateway that
// exited is between restarts (`activating`/`auto-restart`), or `failed` once
// systemd's start limit is hit; waiting out the readiness bound for it would only
// delay the same answer. OCC's own helper stops waiting on an inactive unit too.
function gatewayStopped(state) {
  if (state.ActiveState === 'active' || state.ActiveState === 'reloading') return false;
  return !(state.ActiveState === 'activating' && state.SubState !== 'auto-restart');
}

// Waits for the restart queued with --no-block to leave systemd's queue, and proves
// it ran: the unit has a new invocation. Until then the old gateway may still answer
// /readyz, which must not count as the new revision's readiness.
async function waitRestarted(unitName, before) {
  const limit = Math.min(RESTART_JOB_MS, remainingMs());
  const startedAt = Date.now();
  for (;;) {
    if (session.stop) throw session.stop;
    const state = await unitState(unitName);
    if (state.Job === '') {
      if (state.InvocationID !== '' && state.InvocationID !== before) return;
      throw new HelperError('superseded',
        `the restart of ${unitName} was cancelled before it ran (another operation stopped the unit)`);
    }
    if (Date.now() - startedAt >= limit) {
      throw new HelperError(limit < RESTART_JOB_MS ? 'deadline' : 'command-failed',
        `the restart of ${unitName} was still queued in systemd (job ${state.Job}, ${state.ActiveState}/${state.SubState}) ` +
        `after ${Date.now() - startedAt} ms`);
    }
    await sleep(RESTART_POLL_MS);
  }
}

async function waitReady(port, timeoutMs, account, unitName) {
  const startedAt = Date.now();
  const limit = Math.min(timeoutMs, remainingMs());
  let lastStatus = null;
  for (;;) {
    if (session.stop) throw session.stop;
    const probe = await probeReady(port, account);
    if (probe.foreign) throw await squatterError(port, probe.foreign, account);
    if (probe.state === 'ready') return Date.now() - startedAt;
    lastStatus = probe.status;
    const state = await unitState(unitName);
    if (gatewayStopped(state)) {
      throw new HelperError('gateway-exited',
        `${unitName} is ${state.ActiveState} (${state.SubState}) ${Date.now() - startedAt} ms after its restart, ` +
        `before http://127.0.0.1:${port}/readyz answered 200 (last: ${lastStatus === null ? 'no answer' : lastStatus}): ` +
        `the gateway exited; see journalctl -u ${unitName}`);
    }
    const elapsed = Date.now() - startedAt;
    if (elapsed >= limit) {
      if (limit < timeoutMs) throw new HelperError('deadline', `the helper deadline passed while waiting for readiness on port ${port}`);
      throw new HelperError('readiness-timeout',
        `http://127.0.0.1:${port}/readyz did not answer 200 within ${timeoutMs} ms (last: ${lastStatus === null ? 'no answer' : lastStatus})`);
    }
    await sleep(Math.min(READY_POLL_MS, limit - elapsed));
  }
}

module.exports = { servingReady, waitRestarted, waitReady, listenersOn: portListeners, readyStatus };
