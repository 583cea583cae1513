'use strict';
// activate, stop, retire and delete-namespace with real OpenClaw gateways under the
// rig host's real systemd. At most two gateways (about 800 MB each) run at once, and
// every one is stopped by the end.

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const fx = new L.Fixture('gateway', { portStart: 19200, portEnd: 19219 });
test.after(() => fx.cleanup());

const NS = 'ns-gw';
const AGENT = 'agent-gw';
// Same native configuration, different bytes: each revision its own controller
// document (its own configurationSha256), rendered to the same snapshot.
const CONFIG_2 = `${JSON.stringify(JSON.parse(L.GATEWAY_CONFIG))}\n`;
const CONFIG_3 = `${JSON.stringify(JSON.parse(L.GATEWAY_CONFIG), null, 4)}\n`;
const p = fx.paths(NS, AGENT);
const unitName = fx.unitName(AGENT);
const { exists, readyz } = L;
const unitProp = (prop) => L.sh(`systemctl show -p ${prop} --value ${unitName}`).trim();
let port;

async function activate(revId, number, configuration, options) {
  const started = Date.now();
  const run = await L.runHelper(fx.activate(NS, AGENT, revId, number, configuration, options));
  return { ...run, ms: Date.now() - started };
}

test('prepare the Agent and an operator env file', async () => {
  assert.equal((await L.helper(fx.ensureNamespace(NS))).ok, true);
  const prepared = await L.helper(fx.prepare(NS, AGENT, 'rev-1', 1));
  assert.equal(prepared.ready, true);
  port = prepared.port;
  L.sh(`printf 'OPERATOR_SECRET=keep-me\\n' > ${p.agentDir}/env && chmod 0600 ${p.agentDir}/env`);
});

test('activate starts a real gateway and writes served.json only after /readyz 200', { timeout: 180000 }, async (t) => {
  const password = L.sh(`cat ${p.agentDir}/gateway-password.env`);
  const snapshotBefore = L.sh(`stat -c '%s %Y %a %U:%G' ${fx.paths(NS, AGENT, 'rev-1').revDir}/openclaw.json`);
  let duringWait = null;
  const started = Date.now();
  const run = L.startHelper(fx.activate(NS, AGENT, 'rev-1', 1), {
    onEvent: (event) => {
      if (event.event === 'progress' && event.step === 'readiness' && !duringWait) {
        duringWait = {
          served: exists(`${p.agentDir}/served.json`),
          current: L.sh(`readlink ${p.agentDir}/current`).trim(),
          lockFree: L.lockIsFree(fx.root),
        };
      }
    },
  });
  const done = await run.done;
  const ms = Date.now() - started;
  assert.equal(done.code, 0, done.stdout.slice(-1500));
  const result = done.result;
  assert.deepEqual([result.ok, result.changed, result.port], [true, true, port]);
  assert.ok(result.readyAfterMs > 0);
  t.diagnostic(`activate -> served: ${ms} ms (gateway ready ${result.readyAfterMs} ms after restart)`);

  const steps = done.events.filter((e) => e.event === 'progress').map((e) => e.step);
  assert.deepEqual(steps, ['lock', 'unit', 'enable', 'daemon-reload', 'current', 'restart', 'unlock', 'readiness', 'ready', 'lock', 'served', 'unlock']);
  assert.deepEqual(duringWait, { served: false, current: `revisions/${L.sha12('rev-1')}`, lockFree: true },
    'while waiting for readiness: no served.json, current already switched, host lock free');

  const served = JSON.parse(L.sh(`cat ${p.agentDir}/served.json`));
  assert.deepEqual(served, {
    ...fx.agentOwner(NS, AGENT), revisionId: 'rev-1', revisionNumber: 1,
    configurationSha256: L.sha256(L.GATEWAY_CONFIG), servedAt: served.servedAt, ...fx.written(),
  });
  assert.ok(Date.parse(served.servedAt) >= started, served.servedAt);
  assert.equal(L.statHost([`${p.agentDir}/served.json`])[`${p.agentDir}/served.json`].mode, '600');
  // The unit is the helper's own rendering: the envelope's paths, the account and port of
  // agent.json, the password file the snapshot reads.
  assert.equal(L.sh(`cat ${p.unitPath}`), fx.unitText(NS, AGENT, port));
  assert.equal(L.statHost([p.unitPath])[p.unitPath].mode, '644');
  assert.equal(unitProp('ActiveState'), 'active');
  assert.equal(unitProp('UnitFileState'), 'enabled');
  assert.equal(readyz(port), '200');
  // The gateway runs as the Agent's private account, inside its sandbox: a read-only
  // host but for its home and state, /proc showing only its own processes, a /dev/shm
  // of its own, and only the port it was given.
  const marker = JSON.parse(L.sh(`cat ${p.agentDir}/agent.json`));
  const pid = unitProp('MainPID');
  assert.equal(L.sh(`ps -o uid=,gid= -p ${pid}`).trim().split(/\s+/).map(Number).join(':'), `${marker.uid}:${marker.gid}`);
  const mounts = L.sh(`cat /proc/${pid}/mountinfo`).split('\n').map((line) => line.split(' '));
  const mount = (target) => mounts.filter((m) => m[4] === target).pop();
  assert.match(mount('/')[5], /^ro,/);
  assert.match(mount(`${p.agentDir}/home`)[5], /^rw,/);
  assert.match(mount(`${p.agentDir}/state`)[5], /^rw,/);
  assert.match(mounts.filter((m) => m[4] === '/proc').pop().join(' '), /hidepid=invisible/);
  assert.equal(mount('/dev/shm')[mount('/dev/shm').indexOf('-') + 1], 'tmpfs');
  assert.equal(L.sh(`ss -Htlnpe | grep -c 'uid:${marker.uid} ' || true`).trim(), '1', 'the gateway listens on one port only');
  assert.match(L.sh(`ss -Htlnpe 'sport = :${port}'`), new RegExp(`uid:${marker.uid} `));
  // The gateway never rewrote its admitted snapshot; the password was not rotated and
  // the operator's file was not touched.
  assert.equal(L.sh(`stat -c '%s %Y %a %U:%G' ${fx.paths(NS, AGENT, 'rev-1').revDir}/openclaw.json`), snapshotBefore);
  assert.equal(L.sh(`cat ${p.agentDir}/gateway-password.env`), password);
  assert.equal(L.sh(`cat ${p.agentDir}/env`), 'OPERATOR_SECRET=keep-me\n');
});

test('activating the served revision again changes nothing and does not restart', async () => {
  const pid = unitProp('MainPID');
  const run = await activate('rev-1', 1, L.GATEWAY_CONFIG);
  assert.deepEqual([run.result.ok, run.result.changed, run.result.port], [true, false, port]);
  assert.equal(unitProp('MainPID'), pid);
  assert.ok(!run.events.some((e) => e.step === 'restart'));
});

test('a new revision: prepare leaves the gateway alone, activate restarts onto it', { timeout: 180000 }, async (t) => {
  const pid = unitProp('MainPID');
  // What the gateway keeps in its state directory (its key, its database) and a file of
  // the Agent's own must survive the cutover: only the snapshot changes.
  const account = fx.account(NS, AGENT);
  L.sh(`runuser -u ${account} -- sh -c 'echo mine > ${p.agentDir}/state/agent-file'`);
  const stateBefore = L.sh(`cd ${p.agentDir}/state && sha256sum config-journal-fingerprint.key && stat -c '%i %U' state/openclaw.sqlite`);
  const prepared = await L.helper(fx.prepare(NS, AGENT, 'rev-2', 2, CONFIG_2));
  assert.deepEqual([prepared.ready, prepared.changed, prepared.port], [true, true, port]);
  assert.equal(unitProp('MainPID'), pid, 'prepare does not restart');
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12('rev-1')}`);
  const run = await activate('rev-2', 2, CONFIG_2);
  assert.equal(run.result.ok, true, JSON.stringify(run.result));
  t.diagnostic(`activate -> served: ${run.ms} ms (gateway ready ${run.result.readyAfterMs} ms after restart)`);
  assert.notEqual(unitProp('MainPID'), pid);
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12('rev-2')}`);
  assert.equal(JSON.parse(L.sh(`cat ${p.agentDir}/served.json`)).revisionId, 'rev-2');
  assert.equal(L.sh(`cd ${p.agentDir}/state && sha256sum config-journal-fingerprint.key && stat -c '%i %U' state/openclaw.sqlite`), stateBefore);
  assert.equal(L.sh(`cat ${p.agentDir}/state/agent-file`), 'mine\n');
  // The older revision is superseded now.
  const late = await L.helper(fx.prepare(NS, AGENT, 'rev-0', 1, '{"late":true}\n'));
  assert.deepEqual([late.ready, late.changed], [false, false]);
});

test('a snapshot edited in place is refused by activate, stop, retire and deactivate', { timeout: 120000 }, async () => {
  // rev-2 serves. Root appends a byte: owner, group (the Agent's) and mode 0640 stay.
  const file = `${fx.paths(NS, AGENT, 'rev-2').revDir}/openclaw.json`;
  const stat = L.sh(`stat -c '%U:%G %a %i' ${file}`);
  L.sh(`printf ' ' >> ${file}`);
  assert.equal(L.sh(`stat -c '%U:%G %a %i' ${file}`), stat);
  const pid = unitProp('MainPID');
  const served = L.sh(`cat ${p.agentDir}/served.json`);
  try {
    for (const op of ['activate', 'stop', 'retire', 'deactivate']) {
      const run = op === 'activate'
        ? await L.runHelper(fx.activate(NS, AGENT, 'rev-2', 2, CONFIG_2))
        : await L.runHelper(fx.agentOp(op, NS, AGENT, 'rev-2', 2, CONFIG_2));
      assert.deepEqual([run.code, run.result.error.code, run.result.error.permanent], [1, 'changed-snapshot', true], op);
      assert.ok(run.result.error.message.startsWith(`${file} no longer has the snapshotSha256`), run.result.error.message);
      assert.ok(!run.events.some((e) => ['restart', 'stop', 'retire', 'current'].includes(e.step)), op);
    }
    // Not restarted into service, not stopped, not removed, served.json untouched.
    assert.equal(unitProp('MainPID'), pid);
    assert.equal(L.sh(`cat ${p.agentDir}/served.json`), served);
    assert.equal(exists(file), true);
  } finally {
    L.sh(`truncate -s -1 ${file}`);
  }
  assert.equal((await activate('rev-2', 2, CONFIG_2)).result.changed, false);
});

test('retire of a revision that is not current leaves the gateway serving', async () => {
  const pid = unitProp('MainPID');
  const retired = await L.helper(fx.agentOp('retire', NS, AGENT, 'rev-1', 1, L.GATEWAY_CONFIG));
  assert.deepEqual([retired.ok, retired.changed], [true, true]);
  assert.equal(exists(fx.paths(NS, AGENT, 'rev-1').revDir), false);
  assert.equal(unitProp('MainPID'), pid);
  assert.equal(JSON.parse(L.sh(`cat ${p.agentDir}/served.json`)).revisionId, 'rev-2');
});

test('stop of a revision that is not current leaves the serving gateway alone', async () => {
  // rev-2 serves; rev-3 is only prepared (a candidate OCC refused or failed to publish).
  // As OCC's helper does, stop acts only when current names the revision.
  const pid = unitProp('MainPID');
  const served = L.sh(`cat ${p.agentDir}/served.json`);
  assert.equal((await L.helper(fx.prepare(NS, AGENT, 'rev-3', 3, CONFIG_3))).ready, true);
  const stopped = await L.helper(fx.agentOp('stop', NS, AGENT, 'rev-3', 3, CONFIG_3));
  assert.deepEqual([stopped.ok, stopped.changed], [true, false]);
  assert.equal(unitProp('ActiveState'), 'active');
  assert.equal(unitProp('MainPID'), pid);
  assert.equal(readyz(port), '200');
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12('rev-2')}`);
  assert.equal(L.sh(`cat ${p.agentDir}/served.json`), served);
  for (const kept of [fx.paths(NS, AGENT, 'rev-2').revDir, fx.paths(NS, AGENT, 'rev-3').revDir]) {
    assert.equal(exists(kept), true, kept);
  }
});

test('an older revision is never activated over a newer one, and a number names one revision', async () => {
  // rev-2 serves. OCC: "A newer revision is already current", permanent.
  const pid = unitProp('MainPID');
  const back = await L.runHelper(fx.activate(NS, AGENT, 'rev-1', 1, L.GATEWAY_CONFIG));
  assert.deepEqual([back.code, back.result.error.code, back.result.error.permanent], [1, 'superseded', true]);
  assert.match(back.result.error.message, /a newer revision is already current: revision 2 \("rev-2"\)/);
  assert.ok(!back.events.some((e) => ['unit', 'current', 'restart'].includes(e.step)), 'nothing changed');
  // Another revision id under the current number: refused in prepare, nothing written,
  // and in activate.
  const prepared = await L.runHelper(fx.prepare(NS, AGENT, 'rev-2-other', 2, CONFIG_2));
  assert.deepEqual([prepared.code, prepared.result.error.code, prepared.result.error.permanent], [1, 'revision-conflict', true]);
  assert.match(prepared.result.error.message, /revision number 2 belongs to another revision \("rev-2"\)/);
  assert.equal(exists(fx.paths(NS, AGENT, 'rev-2-other').revDir), false);
  const activated = await L.runHelper(fx.activate(NS, AGENT, 'rev-2-other', 2, CONFIG_2));
  assert.deepEqual([activated.code, activated.result.error.code], [1, 'revision-conflict']);
  assert.equal(unitProp('MainPID'), pid);
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12('rev-2')}`);
  assert.equal(readyz(port), '200');
});

test('a session closed during the readiness wait writes no served.json; the retry converges', { timeout: 240000 }, async (t) => {
  assert.equal((await L.helper(fx.prepare(NS, AGENT, 'rev-3', 3, CONFIG_3))).ready, true);
  const run = L.startHelper(fx.activate(NS, AGENT, 'rev-3', 3, CONFIG_3), {
    onEvent: (event, child) => {
      if (event.event === 'progress' && event.step === 'readiness') child.kill('SIGKILL');
    },
  });
  const done = await run.done;
  assert.equal(done.result, null);
  assert.ok(done.events.some((e) => e.step === 'readiness'), 'killed during the readiness wait');
  await L.waitFor(() => !L.helperRunning(run.b64), { timeoutMs: 10000, what: 'the helper to exit' });
  // The restart already handed to systemd completes: the gateway becomes ready...
  await L.waitFor(() => readyz(port) === '200', { timeoutMs: 120000, intervalMs: 1000, what: 'the gateway' });
  // ...but nobody proved it to a caller (the helper is gone), so nothing claims it is served.
  assert.equal(exists(`${p.agentDir}/served.json`), false);
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12('rev-3')}`);
  assert.ok(L.lockIsFree(fx.root));
  assert.equal(L.sh(`find ${fx.root} ${fx.unitDirectory} -maxdepth 6 -name '.occ-tmp-*' | wc -l`).trim(), '0');

  const retry = await activate('rev-3', 3, CONFIG_3);
  assert.deepEqual([retry.result.ok, retry.result.changed], [true, true]);
  t.diagnostic(`retry activate -> served: ${retry.ms} ms`);
  assert.equal(JSON.parse(L.sh(`cat ${p.agentDir}/served.json`)).revisionId, 'rev-3');
});

test('the helper deadline stops the readiness wait with a retryable error and no served.json', { timeout: 180000 }, async () => {
  const stop = await L.helper(fx.agentOp('stop', NS, AGENT, 'rev-3', 3, CONFIG_3));
  assert.deepEqual([stop.ok, stop.changed], [true, true]);
  const run = await activate('rev-3', 3, CONFIG_3, { deadlineMs: 4000 });
  assert.equal(run.code, 1);
  assert.equal(run.result.error.code, 'deadline');
  assert.equal(run.result.error.permanent, false);
  // The helper stopped at its deadline, before any readiness counted.
  assert.ok(!run.events.some((e) => e.step === 'ready' || e.step === 'served'), 'readiness counted despite the deadline');
  assert.equal(exists(`${p.agentDir}/served.json`), false);
  assert.ok(L.lockIsFree(fx.root));
  const retry = await activate('rev-3', 3, CONFIG_3);
  assert.equal(retry.result.ok, true, JSON.stringify(retry.result));
});

test('stop stops and disables the unit, removes current and served.json, keeps the rest', async () => {
  const password = L.sh(`cat ${p.agentDir}/gateway-password.env`);
  L.sh(`touch ${p.agentDir}/state/marker-file`);
  const result = await L.helper(fx.agentOp('stop', NS, AGENT, 'rev-3', 3, CONFIG_3));
  assert.deepEqual([result.ok, result.changed], [true, true]);
  assert.equal(unitProp('ActiveState'), 'inactive');
  assert.equal(unitProp('UnitFileState'), 'disabled');
  assert.equal(exists(`${p.agentDir}/current`), false);
  assert.equal(exists(`${p.agentDir}/served.json`), false);
  for (const kept of [fx.paths(NS, AGENT, 'rev-3').revDir, fx.paths(NS, AGENT, 'rev-2').revDir, `${p.agentDir}/home`,
    `${p.agentDir}/state/marker-file`, p.unitPath]) {
    assert.equal(exists(kept), true, kept);
  }
  assert.equal(L.sh(`cat ${p.agentDir}/gateway-password.env`), password);
  assert.equal(L.sh(`cat ${p.agentDir}/env`), 'OPERATOR_SECRET=keep-me\n');
  assert.equal((await L.helper(fx.agentOp('stop', NS, AGENT, 'rev-3', 3, CONFIG_3))).changed, false);
});

test('retiring the current revision stops the gateway first, then removes only that snapshot', { timeout: 180000 }, async () => {
  assert.equal((await activate('rev-3', 3, CONFIG_3)).result.ok, true);
  const result = await L.helper(fx.agentOp('retire', NS, AGENT, 'rev-3', 3, CONFIG_3));
  assert.deepEqual([result.ok, result.changed], [true, true]);
  assert.equal(unitProp('ActiveState'), 'inactive');
  assert.equal(unitProp('UnitFileState'), 'disabled');
  assert.equal(exists(`${p.agentDir}/current`), false);
  assert.equal(exists(`${p.agentDir}/served.json`), false);
  assert.equal(exists(fx.paths(NS, AGENT, 'rev-3').revDir), false);
  for (const kept of [fx.paths(NS, AGENT, 'rev-2').revDir, `${p.agentDir}/home`, `${p.agentDir}/state/marker-file`,
    `${p.agentDir}/gateway-password.env`, `${p.agentDir}/env`]) {
    assert.equal(exists(kept), true, kept);
  }
});

// Runs `first` until its restart is handed to systemd and the host lock is released for
// the readiness wait, freezes it there (SIGSTOP), runs `other` to completion, then lets
// `first` go on: the order of events is fixed, whatever the timings.
async function overtaken(first, other) {
  let pid = null;
  const run = L.startHelper(first, {
    onEvent: (event) => {
      if (event.event === 'progress' && event.step === 'readiness' && pid === null) {
        pid = L.helperPid(run.b64);
        L.sh(`kill -STOP ${pid}`);
      }
    },
  });
  await L.waitFor(() => pid !== null || run.events.some((e) => e.event === 'result'),
    { timeoutMs: 120000, what: 'the first activation to reach its readiness wait' });
  assert.ok(pid, 'the first activation reached its readiness wait');
  let otherResult;
  try {
    otherResult = await L.runHelper(other);
  } finally {
    L.sh(`kill -CONT ${pid}`);
  }
  return { first: await run.done, other: otherResult };
}

test('an activation overtaken by one of the same revision succeeds; by another revision it is superseded', { timeout: 480000 }, async (t) => {
  const withToken = (revId, number, configuration, token) =>
    fx.activate(NS, AGENT, revId, number, configuration, { launchEnvironment: { OCC_TEST_TOKEN: token } });
  // Both activate rev-2, with different placeholders from beforeWorkloadStart (in the
  // envelope, rendered into the unit by the helper): the second one's unit wins
  // and it writes served.json first. The first must not fail (its failure would run
  // compensating hooks against a revision that is serving).
  const same = await overtaken(withToken('rev-2', 2, CONFIG_2, 'opaque-first'), withToken('rev-2', 2, CONFIG_2, 'opaque-second'));
  assert.equal(same.other.result.ok, true, JSON.stringify(same.other.result));
  const servedBySecond = L.sh(`cat ${p.agentDir}/served.json`);
  assert.equal(same.first.code, 0, same.first.stdout.slice(-1500));
  assert.deepEqual([same.first.result.ok, same.first.result.port], [true, port]);
  assert.ok(same.first.events.some((e) => e.step === 'served' && /another activation already served revision rev-2/.test(e.message)));
  assert.equal(L.sh(`cat ${p.agentDir}/served.json`), servedBySecond, 'served.json is the second activation\'s');
  assert.equal(L.sh(`cat ${p.unitPath}`), fx.unitText(NS, AGENT, port, { launchEnvironment: { OCC_TEST_TOKEN: 'opaque-second' } }));
  assert.match(unitProp('Environment'), /OCC_TEST_TOKEN=opaque-second/);
  t.diagnostic('same revision: both activations succeeded');

  // Another revision overtakes: the first one's goal is gone, superseded stays.
  const CONFIG_4 = `${JSON.stringify(JSON.parse(L.GATEWAY_CONFIG), null, 3)}\n`;
  assert.equal((await L.helper(fx.prepare(NS, AGENT, 'rev-4', 4, CONFIG_4))).ready, true);
  const other = await overtaken(withToken('rev-2', 2, CONFIG_2, 'opaque-first'), fx.activate(NS, AGENT, 'rev-4', 4, CONFIG_4));
  assert.equal(other.other.result.ok, true, JSON.stringify(other.other.result));
  assert.deepEqual([other.first.code, other.first.result.error.code, other.first.result.error.permanent], [1, 'superseded', true]);
  assert.equal(JSON.parse(L.sh(`cat ${p.agentDir}/served.json`)).revisionId, 'rev-4');
  assert.equal(readyz(port), '200');
});

// The restart is queued in systemd under the host lock and runs after it is
// released: a stop that takes the lock after it must still win, or a stopped (or
// deleted) Agent would be started again behind the operation that stopped it.
test('a stop that comes after an activation queued its restart wins: the unit stays stopped', { timeout: 300000 }, async (t) => {
  const AGENT3 = 'agent-gw-3';
  const p3 = fx.paths(NS, AGENT3);
  const unit3 = fx.unitName(AGENT3);
  const prop3 = (prop) => L.sh(`systemctl show -p ${prop} --value ${unit3}`).trim();
  const prepared = await L.helper(fx.prepare(NS, AGENT3, 'rev-1', 1));
  assert.equal(prepared.ready, true);
  assert.equal((await L.helper(fx.activate(NS, AGENT3, 'rev-1', 1))).ok, true);
  assert.equal((await L.helper(fx.prepare(NS, AGENT3, 'rev-2', 2, CONFIG_2))).ready, true);
  let pid = null;
  let restarted = false;
  const run = L.startHelper(fx.activate(NS, AGENT3, 'rev-2', 2, CONFIG_2), {
    onEvent: (event) => {
      if (event.event !== 'progress') return;
      if (event.step === 'restart') restarted = true;
      // The first release after the restart was queued: the lock is free, the
      // restart may not have run yet.
      if (event.step === 'unlock' && restarted && pid === null) {
        pid = L.helperPid(run.b64);
        L.sh(`kill -STOP ${pid}`);
      }
    },
  });
  await L.waitFor(() => pid !== null || run.events.some((e) => e.event === 'result'),
    { timeoutMs: 120000, what: 'the activation to queue its restart and let go of the lock' });
  assert.ok(pid, 'the activation let go of the lock after queueing its restart');
  let stopped;
  try {
    stopped = await L.helper(fx.agentOp('stop', NS, AGENT3, 'rev-2', 2, CONFIG_2));
  } finally {
    L.sh(`kill -CONT ${pid}`);
  }
  assert.deepEqual([stopped.ok, stopped.changed], [true, true], JSON.stringify(stopped));
  const done = await run.done;
  assert.equal(done.code, 1, done.stdout.slice(-1500));
  // Cancelled before it ran (`superseded`), or ran and was stopped under the
  // readiness wait (`gateway-exited`): either way the activation failed.
  assert.ok(['superseded', 'gateway-exited'].includes(done.result.error.code), JSON.stringify(done.result));
  t.diagnostic(`the activation failed ${done.result.error.code}: ${done.result.error.message}`);
  // Still stopped a while later: nothing started it again.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  assert.deepEqual([prop3('ActiveState'), prop3('UnitFileState')], ['inactive', 'disabled']);
  assert.notEqual(readyz(prepared.port), '200');
  assert.equal(exists(`${p3.agentDir}/served.json`), false);
  assert.equal(exists(`${p3.agentDir}/current`), false);
  assert.ok(L.lockIsFree(fx.root));
  assert.equal((await L.helper(fx.deleteAgent(NS, AGENT3))).ok, true);
});

test('two Agents of two Namespaces activate concurrently; delete-namespace removes one whole', { timeout: 240000 }, async (t) => {
  const NS2 = 'ns-gw-2';
  const AGENT2 = 'agent-gw-2';
  assert.equal((await L.helper(fx.ensureNamespace(NS2))).ok, true);
  const other = await L.helper(fx.prepare(NS2, AGENT2, 'rev-1', 1));
  assert.notEqual(other.port, port);
  // rev-4 serves; never backwards, so the next revision restarts concurrently.
  const CONFIG_5 = `${JSON.stringify(JSON.parse(L.GATEWAY_CONFIG), null, 4)}\n`;
  assert.equal((await L.helper(fx.prepare(NS, AGENT, 'rev-5', 5, CONFIG_5))).ready, true);
  const started = Date.now();
  const [a, b] = await Promise.all([
    activate('rev-5', 5, CONFIG_5),
    L.runHelper(fx.activate(NS2, AGENT2, 'rev-1', 1)),
  ]);
  t.diagnostic(`two concurrent activations served after ${Date.now() - started} ms`);
  assert.equal(a.result.ok, true, JSON.stringify(a.result));
  assert.equal(b.result.ok, true, JSON.stringify(b.result));
  assert.equal(readyz(port), '200');
  assert.equal(readyz(other.port), '200');

  const account = fx.account(NS, AGENT);
  const deleted = await L.helper(fx.deleteNamespace(NS));
  assert.deepEqual([deleted.ok, deleted.changed], [true, true], JSON.stringify(deleted));
  assert.equal(exists(p.unitPath), false);
  assert.equal(exists(fx.paths(NS).nsDir), false);
  assert.equal(L.sh(`getent passwd ${account} || true`).trim(), '');
  assert.equal(exists(`${fx.root}/accounts/${account}.json`), false);
  assert.equal(L.sh(`systemctl list-units --all --no-legend ${unitName} | wc -l`).trim(), '0', 'unit gone from systemd');
  assert.notEqual(readyz(port), '200');
  // The other Namespace keeps serving.
  assert.equal(readyz(other.port), '200');
  const second = await L.helper(fx.deleteNamespace(NS2));
  assert.deepEqual([second.ok, second.changed], [true, true]);
  assert.notEqual(readyz(other.port), '200');
  assert.equal(L.sh(`ls -A ${fx.root}/accounts ${fx.root}/namespaces | grep -v ':$' | grep -c . || true`).trim(), '0');
});
