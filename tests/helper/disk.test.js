'use strict';
// A full disk on the host: the runtime root is a small filesystem of its own (a
// tmpfs mounted there), filled. Each write the helper makes fails `disk-full`,
// retryable, naming the file and the space left; nothing half-written stays under
// a final name; once space is freed the same call succeeds.

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const fx = new L.Fixture('disk', { portStart: 19060, portEnd: 19079 });
const FILL = `${fx.root}/.fill`;
test.before(() => {
  L.sh(`mkdir -p ${fx.root} && mount -t tmpfs -o size=4m,mode=0755 occ-disk ${fx.root}`);
});
test.after(() => {
  fx.cleanup();
  L.sh(`umount ${fx.root}; rmdir ${fx.root}`, { allowFailure: true });
});

const NS = 'ns-disk';
const AGENT = 'agent-disk';
const fill = () => L.sh(`dd if=/dev/zero of=${FILL} bs=16k 2>/dev/null; sync; df --output=avail -k ${fx.root} | tail -1`).trim();
const free = () => L.sh(`rm -f ${FILL}`);
// Every entry under the root but the filler: names and types.
const tree = () => L.sh(`cd ${fx.root} && find . -mindepth 1 ! -path ./.fill -printf '%y %p\\n' | sort`);

test('a full disk fails prepare retryable, naming the file; nothing half-written stays; freed, it prepares', async (t) => {
  assert.equal((await L.helper(fx.ensureNamespace(NS))).ok, true);
  const before = tree();
  const avail = fill();
  assert.equal(avail, '0', 'the root has no space left');
  const run = await L.runHelper(fx.prepare(NS, AGENT, 'rev-1', 1));
  assert.equal(run.code, 1, run.stdout.slice(-1500));
  const { code, message, permanent } = run.result.error;
  assert.deepEqual([code, permanent], ['disk-full', false], message);
  t.diagnostic(message);
  assert.match(message, /the disk is full \(ENOSPC\) writing \/var\/lib\/occ-test-disk-[0-9a-f]+\/\S+; 0 KiB free on its filesystem/);
  // No Agent under its final name, no temp entry: the tree is the one before,
  // but for what a retry completes (an account marker written before the failure).
  const after = tree();
  assert.ok(!/\.occ-tmp-/.test(after), after);
  assert.ok(!after.includes('/agents/'), `an Agent directory under a final name: ${after}`);
  for (const line of before.split('\n').filter(Boolean)) assert.ok(after.includes(line), `${line} kept`);
  assert.ok(L.lockIsFree(fx.root));

  free();
  const again = await L.helper(fx.prepare(NS, AGENT, 'rev-1', 1));
  assert.equal(again.ok, true, JSON.stringify(again));
  assert.equal(again.ready, true);
  assert.ok(L.exists(fx.paths(NS, AGENT, 'rev-1').revDir));
});

test('a full disk fails writing a second revision the same way, and the first stays whole', async (t) => {
  const first = fx.paths(NS, AGENT, 'rev-1');
  const snapshot = L.sh(`sha256sum ${first.revDir}/openclaw.json`);
  assert.equal(fill(), '0');
  const run = await L.runHelper(fx.prepare(NS, AGENT, 'rev-2', 2));
  assert.deepEqual([run.result.error.code, run.result.error.permanent], ['disk-full', false], run.result.error.message);
  assert.match(run.result.error.message, /revisions\//);
  t.diagnostic(run.result.error.message);
  assert.equal(L.exists(fx.paths(NS, AGENT, 'rev-2').revDir), false);
  assert.ok(!/\.occ-tmp-/.test(tree()));
  assert.equal(L.sh(`sha256sum ${first.revDir}/openclaw.json`), snapshot);
  free();
  assert.equal((await L.helper(fx.prepare(NS, AGENT, 'rev-2', 2))).ready, true);
});

test('a workspace setup on a full disk fails disk-full, retryable, naming the workspace; freed, the same setup lands whole', async (t) => {
  // Room for OpenClaw's own workspace (its repository, sessions) once freed.
  L.sh(`mount -o remount,size=64m ${fx.root}`);
  const agent = 'agent-disk-setup';
  const setup = {
    id: 'setup-disk', namespaceId: NS, agentId: agent, completed: false,
    files: { 'SOUL.md': '# Soul\n\nMarker: disk-soul-51f0\n', 'USER.md': '# User\n' },
  };
  const withSetup = (request) => Object.assign(request, { envelope: { ...request.envelope, workspaceSetup: setup } });
  assert.equal((await L.helper(fx.prepare(NS, agent, 'rev-1', 1))).ok, true);
  const p = fx.paths(NS, agent, 'rev-1');
  const workspace = `${p.agentDir}/state/workspace`;

  // No room at all: the setup program itself cannot be written.
  assert.equal(fill(), '0');
  let run = await L.runHelper(withSetup(fx.prepare(NS, agent, 'rev-1', 1)));
  assert.deepEqual([run.result.error.code, run.result.error.permanent], ['disk-full', false], run.result.error.message);
  t.diagnostic(run.result.error.message);
  assert.match(run.result.error.message, /the disk is full \(ENOSPC\) writing \S+workspace-setup\.cjs/);
  // Room for the program but not for what OpenClaw's setup writes: the program fails
  // on the full filesystem, and the helper says so rather than blaming the workspace.
  L.sh(`truncate -s -48K ${FILL}`);
  run = await L.runHelper(withSetup(fx.prepare(NS, agent, 'rev-1', 1)));
  assert.deepEqual([run.result.error.code, run.result.error.permanent], ['disk-full', false], run.result.error.message);
  t.diagnostic(run.result.error.message);
  assert.match(run.result.error.message, new RegExp(`workspace setup of Agent ${agent} at ${workspace} exited \\d+ with \\d+ KiB free`));
  assert.equal(L.sh(`test -e ${p.agentDir}/workspace-setup.json && echo yes || echo no`).trim(), 'no',
    'a setup recorded complete on a full disk');
  assert.ok(L.lockIsFree(fx.root));

  // Freed: the same setup lands whole, as the Agent's own.
  free();
  const done = await L.helper(withSetup(fx.prepare(NS, agent, 'rev-1', 1)));
  assert.equal(done.ok, true, JSON.stringify(done));
  for (const [name, text] of Object.entries(setup.files)) {
    assert.equal(L.sh(`runuser -u ${fx.account(NS, agent)} -- cat '${workspace}/${name}'`), text, name);
  }
  assert.equal(L.sh(`cat ${p.agentDir}/workspace-setup.json`),
    JSON.stringify({ id: setup.id, namespaceId: NS, agentId: agent, completed: true }));
});
