'use strict';
// Output protocol, the host lock and the session-loss rule, on a rig host over ssh
// (and one case with a local pipe, where the EPIPE can be provoked deterministically).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const L = require('./lib.js');

const fx = new L.Fixture('protocol', { portStart: 19100, portEnd: 19119 });
test.after(() => fx.cleanup());

// Holds <root>/.compute-lock on the host until release() (stdin end): the remote
// `cat` sees end of file and the kernel drops the lock. umask 077: flock creates the
// file as the helper requires it (root's, 0600) when the holder comes first.
async function holdHostLock(root) {
  L.sh(`mkdir -p ${root}`);
  const child = spawn('ssh', [...L.sshArgs(L.HOST),
    `umask 077; flock ${root}/.compute-lock sh -c 'echo held; exec cat >/dev/null'`], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('held')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
  });
  return {
    release: () => new Promise((resolve) => {
      child.on('close', resolve);
      child.stdin.end();
    }),
  };
}

test('every line is JSON: heartbeats each second, progress, and the result last', async () => {
  const holder = await holdHostLock(fx.root);
  // Keep the helper in the lock wait until it has written two heartbeats.
  let released;
  const run = L.startHelper(fx.ensureNamespace('ns-proto'), {
    onEvent: (event) => {
      if (event.event === 'heartbeat' && !released && run.events.filter((e) => e.event === 'heartbeat').length >= 2) {
        released = holder.release();
      }
    },
  });
  const done = await run.done;
  await released;
  assert.equal(done.code, 0, done.stderr);
  assert.equal(done.stderr, '');
  assert.ok(done.stdout.endsWith('\n'));
  for (const line of done.lines) assert.doesNotThrow(() => JSON.parse(line), line);
  const beats = done.events.filter((e) => e.event === 'heartbeat');
  assert.ok(beats.length >= 2, `expected at least 2 heartbeats, got ${beats.length}`);
  for (let i = 1; i < beats.length; i++) assert.ok(beats[i].elapsedMs > beats[i - 1].elapsedMs);
  assert.deepEqual(Object.keys(beats[0]).filter((k) => k !== 'receivedAt'), ['event', 'elapsedMs']);
  const lockAt = done.events.findIndex((e) => e.event === 'progress' && e.step === 'lock');
  assert.match(done.events[lockAt].message, /host lock acquired after \d+ ms/);
  // Serialization: the helper took the lock only after the two heartbeats it wrote
  // while the holder still had it.
  assert.ok(lockAt > done.events.indexOf(beats[1]), 'the lock was taken before the holder let go');
  assert.deepEqual(done.result, { event: 'result', ok: true, changed: true, receivedAt: done.result.receivedAt });
  assert.equal(done.events[done.events.length - 1], done.result);
});

test('a repeated ensure-namespace changes nothing', async () => {
  const result = await L.helper(fx.ensureNamespace('ns-proto'));
  assert.equal(result.ok, true);
  assert.equal(result.changed, false);
});

// Runs the helper over ssh with raw arguments (any number of them); returns the result.
function rawRun(args) {
  const run = spawnSync('ssh', [...L.sshArgs(L.HOST), L.helperCommand()],
    { input: L.helperInput(args), encoding: 'utf8' });
  const lines = run.stdout.trim().split('\n');
  return { code: run.status, stdout: run.stdout, stderr: run.stderr, result: JSON.parse(lines[lines.length - 1]) };
}

test('invalid operations and envelopes are refused as permanent with exit 1', async () => {
  const ns = fx.ensureNamespace('ns-x');
  const prepare = fx.prepare('ns-x', 'agent-x', 'rev-x', 1);
  const before = L.hostState([fx.root, fx.unitDirectory]);
  const forge = (request, edit) => {
    const copy = JSON.parse(JSON.stringify(request));
    edit(copy);
    return [L.b64(copy.op), L.b64(copy.envelope)];
  };
  for (const [args, why] of [
    [['@@@', L.b64(ns.envelope)], /operation argument is not base64 JSON/],
    // Protocol 1: one argument, the operation alone.
    [[L.b64({ ...ns.op, version: 1 })], /input\.args must be \[<base64 operation>, <base64 envelope>\]/],
    [[L.b64(ns.op), L.b64(ns.envelope), L.b64(ns.envelope)], /input\.args must be/],
    [forge(ns, (r) => { r.op.version = 1; }), /unsupported protocol version 1/],
    [forge(ns, (r) => { r.envelope.version = 1; }), /unsupported envelope version 1/],
    [forge(ns, (r) => { r.op.op = 'reboot'; }), /unknown op "reboot"/],
    [forge(ns, (r) => { r.op.op = 'delete-namespace'; }), /op delete-namespace is not one ensureNamespace may run/],
    // What protocol 1 let the component set, now refused in the operation.
    [forge(ns, (r) => { r.op.namespace = { id: 'ns-x', hash: '000000000000' }; }), /operation\.namespace is not a field/],
    [forge(ns, (r) => { r.op.root = '/var/lib/a b'; }), /operation\.root is not a field/],
    [forge(prepare, (r) => { r.op.snapshot = '{}'; }), /operation\.snapshot is not a field/],
    [forge(prepare, (r) => { r.op.agent = { id: 'agent-x', account: 'root' }; }), /operation\.agent is not a field/],
    // And what no host writes in an envelope.
    [forge(ns, (r) => { r.envelope.runtime.root = '/var/lib/a b'; }), /envelope\.runtime\.root must be a normalized absolute path/],
    [forge(ns, (r) => { r.envelope.namespace.hash = '000000000000'; }), /envelope\.namespace\.hash is not a field/],
    [forge(prepare, (r) => { r.envelope.agent.account = 'root'; }), /envelope\.agent\.account is not a field/],
    [forge(prepare, (r) => { r.envelope.runtime.user = 'root'; }), /envelope\.runtime\.user/],
    [forge(prepare, (r) => { r.op.configuration = '{}'; }), /configuration is not the controller's/],
  ]) {
    const run = rawRun(args);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.equal(run.result.event, 'result');
    assert.equal(run.result.ok, false);
    assert.equal(run.result.error.code, 'invalid-operation');
    assert.equal(run.result.error.permanent, true);
    assert.match(run.result.error.message, why);
  }
  // A unit the component renders is no part of activate any more: refused before any effect.
  const activate = fx.activate('ns-x', 'agent-x', 'rev-x', 1);
  activate.op.unit = { text: fx.unitText('ns-x', 'agent-x', 19100).split('\n').slice(1).join('\n') };
  const result = L.refused(await L.runHelper(activate), 'invalid-operation', /operation\.unit is not a field/);
  assert.equal(result.ok, false);
  L.sameHost(L.hostState([fx.root, fx.unitDirectory]), before);
});

test('probe reports each check and fails permanently naming the failed ones', async () => {
  const ok = await L.helper(fx.probe());
  assert.equal(ok.ok, true);
  assert.deepEqual(ok.checks.map((c) => c.name),
    ['systemctl', 'flock', 'getent', 'useradd', 'userdel', 'groupadd', 'groupdel', 'node', 'openclaw']);
  assert.ok(ok.checks.every((c) => c.ok));
  assert.match(ok.checks.find((c) => c.name === 'node').detail, /v24\./);

  const bad = await L.runHelper(fx.probe({ nodePath: '/usr/bin/no-such-node', openclawPath: '/etc/shadow-missing' }));
  assert.equal(bad.code, 1);
  assert.equal(bad.result.ok, false);
  assert.equal(bad.result.error.code, 'probe-failed');
  assert.equal(bad.result.error.permanent, true);
  assert.match(bad.result.error.message, /node .*no-such-node/);
  assert.match(bad.result.error.message, /openclaw/);
  assert.deepEqual(bad.result.checks.filter((c) => !c.ok).map((c) => c.name), ['node', 'openclaw']);

  // The host's own node (the machine's Node.js 20 shows through the rig's overlay) runs,
  // but the spec requires Node.js 24.
  const old = await L.runHelper(fx.probe({ nodePath: '/usr/bin/node' }));
  assert.equal(old.result.error.code, 'probe-failed');
  const node = old.result.checks.find((c) => c.name === 'node');
  assert.equal(node.ok, false);
  assert.match(node.detail, /\/usr\/bin\/node is Node\.js "v20\.[0-9.]+", Node\.js 24 is required/);
  assert.deepEqual(old.result.checks.filter((c) => !c.ok).map((c) => c.name), ['node']);
});

test('a root lock with a loose mode is tightened; one another account owns is refused, naming it', async () => {
  const lockPath = `${fx.root}/.compute-lock`;
  L.sh(`mkdir -p ${fx.root} && touch ${lockPath}`);
  // As plain `flock` (and OCC's own driver) leaves it, or looser: tightened in place.
  for (const mode of ['644', '660', '666']) {
    L.sh(`chmod ${mode} ${lockPath}`);
    const run = await L.runHelper(fx.ensureNamespace('ns-lockmode'));
    assert.equal(run.code, 0, JSON.stringify(run.result));
    assert.ok(run.events.some((e) => e.step === 'lock' && e.message === `tightened ${lockPath} from ${mode} to 600`), mode);
    assert.deepEqual(L.statHost([lockPath])[lockPath].mode, '600');
  }
  // Another account's: refused before any wait, naming the account and the fix.
  L.sh(`chown 1:1 ${lockPath}`);
  const run = await L.runHelper(fx.ensureNamespace('ns-lockmode'));
  assert.equal(run.code, 1);
  assert.deepEqual([run.result.error.code, run.result.error.permanent], ['foreign-marker', true]);
  assert.ok(run.result.error.message.startsWith(`${lockPath} is owned by account daemon (uid 1)`), run.result.error.message);
  assert.ok(run.result.error.message.includes(`chown root:root ${lockPath} && chmod 600 ${lockPath}`), run.result.error.message);
  assert.ok(!run.events.some((e) => e.step === 'lock'), 'never waited on it');
  assert.deepEqual(L.statHost([lockPath])[lockPath].uid, 1, 'not taken over');
  L.sh(`chown 0:0 ${lockPath}`);
  assert.equal((await L.helper(fx.ensureNamespace('ns-lockmode'))).ok, true);
  // Created fresh, it is root's and 0600.
  L.sh(`rm ${lockPath}`);
  assert.equal((await L.helper(fx.ensureNamespace('ns-lockmode'))).ok, true);
  assert.deepEqual(L.statHost([lockPath])[lockPath], { mode: '600', user: 'root', group: 'root', uid: 0, gid: 0, type: 'regular empty file' });
});

test('lock acquisition gives up after 30 s with a retryable lock-timeout', { timeout: 90000 }, async () => {
  const holder = await holdHostLock(fx.root);
  try {
    const run = await L.runHelper(fx.prepare('ns-proto', 'agent-lock', 'rev-1', 1));
    assert.equal(run.code, 1);
    assert.equal(run.result.error.code, 'lock-timeout');
    assert.equal(run.result.error.permanent, false);
    assert.match(run.result.error.message, /stayed locked for 30 s/);
    assert.equal(L.sh(`test -e ${fx.paths('ns-proto', 'agent-lock').agentDir} && echo yes || echo no`).trim(), 'no');
  } finally {
    await holder.release();
  }
  assert.ok(L.lockIsFree(fx.root));
});

test('killing the ssh client during the lock wait stops the helper before any effect', { timeout: 60000 }, async () => {
  const holder = await holdHostLock(fx.root);
  const op = fx.prepare('ns-proto', 'agent-epipe', 'rev-1', 1);
  const run = L.startHelper(op, {
    onEvent: (event, child) => {
      if (event.event === 'heartbeat' && event.elapsedMs >= 1000) child.kill('SIGKILL');
    },
  });
  const done = await run.done;
  assert.equal(done.result, null, 'no result reaches a killed client');
  // The helper's next heartbeat fails with EPIPE; it must end within a few seconds even
  // though it still waits for the lock.
  await L.waitFor(() => !L.helperRunning(run.b64), { timeoutMs: 10000, what: 'the helper to exit' });
  // The helper is gone: releasing the lock now cannot let it act.
  await holder.release();
  const p = fx.paths('ns-proto', 'agent-epipe');
  assert.equal(L.sh(`test -e ${p.agentDir} && echo yes || echo no`).trim(), 'no');
  assert.equal(L.sh(`test -e ${p.accountMarker} && echo yes || echo no`).trim(), 'no');
  assert.equal(L.sh(`getent passwd ${fx.account('ns-proto', 'agent-epipe')} >/dev/null && echo yes || echo no`).trim(), 'no');
  assert.ok(L.lockIsFree(fx.root), 'the lock is free');
});

test('a failed stdout write (EPIPE) stops the helper before its next step (local pipe)', { timeout: 60000 }, async () => {
  // Run on this machine with Node 24 so the pipe can be closed at an exact moment:
  // the helper waits for a lock held here, its stdout reader goes away, then the lock
  // is released; the helper must neither create the Namespace nor linger.
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'occ-helper-epipe-'));
  try {
    const holder = spawn('flock', [path.join(root, '.compute-lock'), 'sh', '-c', 'echo held; exec cat >/dev/null'],
      { stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise((resolve) => holder.stdout.once('data', resolve));
    const request = fx.ensureNamespace('ns-local');
    request.envelope.runtime.root = root;
    const helper = spawn(L.NODE, ['-e', L.BOOT], { stdio: ['pipe', 'pipe', 'pipe'] });
    helper.stdin.end(L.helperInput([L.b64(request.op), L.b64(request.envelope)]));
    let stderr = '';
    helper.stderr.on('data', (chunk) => { stderr += chunk; });
    await new Promise((resolve) => helper.stdout.once('data', resolve));
    helper.stdout.destroy(); // the reading end closes, as when sshd drops the session
    const exit = await new Promise((resolve) => helper.on('exit', (code, signal) => resolve({ code, signal })));
    // Node ignores SIGPIPE: the helper exits by itself rather than being killed by it.
    assert.equal(exit.signal, null, `helper ended by ${exit.signal}`);
    assert.equal(stderr, '', 'no uncaught EPIPE');
    await new Promise((resolve) => { holder.on('close', resolve); holder.stdin.end(); });
    assert.equal(fs.existsSync(path.join(root, 'namespaces', L.sha12('ns-local'))), false);
    const free = spawnSync('flock', ['-n', path.join(root, '.compute-lock'), 'true']);
    assert.equal(free.status, 0, 'the lock is free');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('a helper killed while its child holds the lock leaves no stale lock', { timeout: 60000 }, async () => {
  // SIGKILL gives the helper no chance to clean up. Freeze it (SIGSTOP) while it waits
  // for the lock, let its flock child take the lock, then kill it: the child's stdin
  // pipe closes with the helper and the kernel must drop the lock.
  const holder = await holdHostLock(fx.root);
  const op = fx.prepare('ns-proto', 'agent-killed', 'rev-1', 1);
  const run = L.startHelper(op);
  const pid = await L.waitFor(() => L.helperPid(run.b64), { what: 'the helper to start' });
  await L.waitFor(() => L.sh(`pgrep -P ${pid} -x flock || true`).trim(), { what: 'the flock child' });
  L.sh(`kill -STOP ${pid}`);
  await holder.release();
  await L.waitFor(() => !L.lockIsFree(fx.root), { timeoutMs: 10000, what: "the helper's child to take the lock" });
  L.sh(`kill -KILL ${pid}`);
  await run.done;
  await L.waitFor(() => L.lockIsFree(fx.root), { timeoutMs: 5000, what: 'the lock to be released' });
  assert.equal(L.sh(`test -e ${fx.paths('ns-proto', 'agent-killed').agentDir} && echo yes || echo no`).trim(), 'no');
});
