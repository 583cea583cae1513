'use strict';
// Workspace setup (OCC's `context.workspaceSetup`) on a real host with the real
// OpenClaw: the four Console documents delivered into the Agent's workspace as its own
// account, idempotent after a lost acknowledgement, refused over a file the Agent
// already made its own, blocking the gateway's start when the workspace no longer
// carries the setup, and never aimed at another Agent or outside the Agent's own tree.

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const fx = new L.Fixture('wsetup', { portStart: 19040, portEnd: 19059 });
test.after(() => fx.cleanup());

const NS = 'ns-wsetup';
const FILES = {
  'AGENTS.md': '# Team rules\n\nAlways answer in haiku.\n',
  'SOUL.md': '# Soul\n\nCalm and precise. Marker: wsetup-soul-7c1e\n',
  'IDENTITY.md': '# Identity\n\n- **Name:** Ada\n',
  'USER.md': '# User\n\n- Prefer short answers.\n',
};
const setupOf = (agentId, extra = {}) => ({
  id: `setup-${agentId}`, namespaceId: NS, agentId, completed: false, files: { ...FILES }, ...extra,
});
// prepare and activate with the setup in the host's envelope.
function withSetup(request, setup) {
  request.envelope.workspaceSetup = setup;
  return request;
}
const workspaceOf = (agentId) => `${fx.paths(NS, agentId).agentDir}/state/workspace`;
// A file of the workspace read as the Agent's own account (its tree is 0700).
const readAs = (agentId, file) => L.sh(`runuser -u ${fx.account(NS, agentId)} -- cat '${file}'`);
const writeAs = (agentId, file, text) =>
  L.sh(`runuser -u ${fx.account(NS, agentId)} -- sh -c 'cat > "$0"' '${file}'`, { input: text });
const tree = (agentId) => L.hostState([`${fx.paths(NS, agentId).agentDir}`]);

test.before(async () => {
  assert.equal((await L.helper(fx.ensureNamespace(NS))).ok, true);
});

test('the four documents land in the workspace as the Agent\'s own, and a second delivery changes nothing', async () => {
  const agent = 'agent-deliver';
  const p = fx.paths(NS, agent, 'rev-1');
  const first = await L.helper(withSetup(fx.prepare(NS, agent, 'rev-1', 1), setupOf(agent)));
  assert.equal(first.ok, true, JSON.stringify(first));
  assert.equal(first.changed, true);
  const account = fx.account(NS, agent);
  for (const [name, text] of Object.entries(FILES)) {
    assert.equal(readAs(agent, `${workspaceOf(agent)}/${name}`), text, name);
  }
  // OpenClaw's own setup made the rest of the workspace (its repository, the sessions).
  assert.equal(L.sh(`test -d '${workspaceOf(agent)}/.git' && test -d '${p.agentDir}/state/agents/main/sessions' && echo yes || echo no`).trim(), 'yes');
  const stats = L.statHost([`${workspaceOf(agent)}/SOUL.md`, `${p.agentDir}/workspace-setup.json`,
    `${p.agentDir}/workspace-setup.cjs`]);
  assert.deepEqual([stats[`${workspaceOf(agent)}/SOUL.md`].user, stats[`${workspaceOf(agent)}/SOUL.md`].mode],
    [account, '600']);
  for (const file of ['workspace-setup.json', 'workspace-setup.cjs']) {
    const st = stats[`${p.agentDir}/${file}`];
    assert.deepEqual([st.mode, st.user, st.group], ['640', 'root', account], file);
  }
  // OCC's completion record and the program's marker, in OCC's formats.
  assert.equal(L.sh(`cat ${p.agentDir}/workspace-setup.json`),
    JSON.stringify({ id: `setup-${agent}`, namespaceId: NS, agentId: agent, completed: true }));
  assert.equal(readAs(agent, `${workspaceOf(agent)}/.oce-workspace-setup.json`),
    JSON.stringify({ id: `setup-${agent}`, namespaceId: NS, agentId: agent }));
  // The program is the helper's own text, the one the operator approved with it.
  assert.equal(L.sh(`cat ${p.agentDir}/workspace-setup.cjs`), L.H.WORKSPACE_SETUP_SOURCE);

  // The acknowledgement was lost: OCC sends the same setup again. Nothing changes.
  const before = tree(agent);
  const again = await L.helper(withSetup(fx.prepare(NS, agent, 'rev-1', 1), setupOf(agent)));
  assert.equal(again.ok, true, JSON.stringify(again));
  assert.equal(again.changed, false);
  L.sameHost(tree(agent), before, 'a repeated delivery changed the Agent\'s tree');

  // Activation starts the gateway behind the setup program's check.
  const activated = await L.helper(withSetup(fx.activate(NS, agent, 'rev-1', 1), setupOf(agent)));
  assert.equal(activated.ok, true, JSON.stringify(activated));
  const unit = L.sh(`cat ${p.unitPath}`);
  assert.equal(unit, fx.unitText(NS, agent, activated.port, { workspace: workspaceOf(agent) }));
  assert.match(unit, new RegExp(`^ExecStartPre=${L.NODE} ${p.agentDir}/workspace-setup\\.cjs$`, 'm'));
  assert.match(unit, new RegExp(`^Environment="OPENCLAW_WORKSPACE_DIR=${workspaceOf(agent)}"$`, 'm'));
  assert.equal(L.readyz(activated.port), '200');
  // The Agent's later edits are its own: a restart still starts.
  writeAs(agent, `${workspaceOf(agent)}/SOUL.md`, '# Soul\n\nEdited by the Agent.\n');
  L.sh(`systemctl restart ${fx.unitName(agent)}`);
  await L.waitFor(() => L.readyz(activated.port) === '200', { timeoutMs: 120000, what: 'the gateway after a restart' });
  // A serving gateway keeps writing its state: the later tests compare trees.
  L.sh(`systemctl stop ${fx.unitName(agent)}`);
});

test('a file the Agent already made its own is never replaced: the setup is refused and nothing is recorded', async () => {
  const agent = 'agent-divergent';
  const p = fx.paths(NS, agent, 'rev-1');
  assert.equal((await L.helper(fx.prepare(NS, agent, 'rev-1', 1))).ok, true);
  L.sh(`runuser -u ${fx.account(NS, agent)} -- mkdir -p '${workspaceOf(agent)}'`);
  writeAs(agent, `${workspaceOf(agent)}/SOUL.md`, 'mine, not stock\n');
  const before = tree(agent);
  const run = await L.runHelper(withSetup(fx.prepare(NS, agent, 'rev-1', 1), setupOf(agent)));
  const result = L.refused(run, 'workspace-setup-failed', /^WORKSPACE_SETUP_FAILED: /, false);
  // Neither the error nor anything the helper printed quotes a document.
  assert.doesNotMatch(run.stdout + run.stderr, /wsetup-soul-7c1e|haiku/);
  assert.equal(result.error.message.includes('Ada'), false);
  assert.equal(readAs(agent, `${workspaceOf(agent)}/SOUL.md`), 'mine, not stock\n');
  assert.equal(L.exists(`${workspaceOf(agent)}/AGENTS.md`), false, 'nothing was created before the check');
  assert.equal(L.exists(`${p.agentDir}/workspace-setup.json`), false);
  // The program file is the only addition.
  const added = tree(agent).split('\n').filter((line) => !before.split('\n').includes(line));
  assert.ok(added.every((line) => line.includes('workspace-setup.cjs') || line.includes(`${p.agentDir} `)),
    added.join('\n'));
});

test('after completion, a workspace that no longer carries the setup blocks the gateway\'s start', async () => {
  const agent = 'agent-blocked';
  const p = fx.paths(NS, agent, 'rev-1');
  assert.equal((await L.helper(withSetup(fx.prepare(NS, agent, 'rev-1', 1), setupOf(agent)))).ok, true);
  const activated = await L.helper(fx.activate(NS, agent, 'rev-1', 1));
  assert.equal(activated.ok, true, JSON.stringify(activated));
  assert.equal(L.readyz(activated.port), '200');
  // The marker diverges (another setup's identity): the next start is refused by the
  // unit's ExecStartPre, as OCC's driver blocks it.
  writeAs(agent, `${workspaceOf(agent)}/.oce-workspace-setup.json`,
    JSON.stringify({ id: 'setup-other', namespaceId: NS, agentId: agent }));
  L.sh(`systemctl restart ${fx.unitName(agent)} || true`);
  await L.waitFor(() => L.sh(`journalctl -u ${fx.unitName(agent)} --no-pager -n 50 || true`).includes('WORKSPACE_SETUP_FAILED'),
    { timeoutMs: 30000, what: 'the blocked start in the journal' });
  assert.notEqual(L.readyz(activated.port), '200');
  // And activation itself says why, before any restart.
  const run = await L.runHelper(fx.activate(NS, agent, 'rev-1', 1));
  L.refused(run, 'workspace-setup-failed', /WORKSPACE_SETUP_FAILED/, false);
  // A different setup for a completed Agent is refused outright.
  const other = await L.runHelper(withSetup(fx.prepare(NS, agent, 'rev-1', 1), setupOf(agent, { id: 'setup-second' })));
  L.refused(other, 'foreign-marker', /records another workspace setup/);
  L.sh(`systemctl stop ${fx.unitName(agent)} || true`);
  assert.equal(L.exists(`${p.agentDir}/workspace-setup.json`), true);
});

test('the setup is never aimed at another Agent nor outside the Agent\'s own home and state', async () => {
  const victim = 'agent-victim';
  const attacker = 'agent-attacker';
  assert.equal((await L.helper(fx.prepare(NS, victim, 'rev-1', 1))).ok, true);
  assert.equal((await L.helper(fx.prepare(NS, attacker, 'rev-1', 1))).ok, true);
  const before = L.hostState([fx.root, fx.unitDirectory]);
  // The envelope's setup names the victim while the call is the attacker's.
  let run = await L.runHelper(withSetup(fx.prepare(NS, attacker, 'rev-1', 1), setupOf(victim)));
  L.refused(run, 'invalid-operation', /envelope\.workspaceSetup belongs to another Agent/);
  // The document puts the workspace in the victim's state, in /root, or in the tree.
  for (const workspace of [workspaceOf(victim), '/root/workspace', `${fx.paths(NS, attacker).agentDir}/revisions/x`]) {
    const configuration = `${JSON.stringify({ ...JSON.parse(L.GATEWAY_CONFIG), agents: { defaults: { workspace } } })}\n`;
    run = await L.runHelper(withSetup(fx.prepare(NS, attacker, 'rev-2', 2, configuration), setupOf(attacker)));
    L.refused(run, 'invalid-operation', /workspace setup writes only inside this Agent's home or state/);
  }
  // More than one Agent in the document: no one workspace to set up.
  const list = `${JSON.stringify({ ...JSON.parse(L.GATEWAY_CONFIG), agents: { list: [{ id: 'main' }, { id: 'x' }] } })}\n`;
  run = await L.runHelper(withSetup(fx.prepare(NS, attacker, 'rev-3', 3, list), setupOf(attacker)));
  L.refused(run, 'invalid-operation', /supports only the native main Agent/);
  // An oversized document or a foreign file name in the envelope.
  for (const [files, why] of [
    [{ 'SOUL.md': 'x'.repeat(16 * 1024 + 1) }, /files\.SOUL\.md must be well-formed Unicode without NUL and at most 16 KiB/],
    [{ '../../../../root/x': 'pwned' }, /is not one of AGENTS\.md, SOUL\.md, IDENTITY\.md, USER\.md/],
    [{ 'USER.md': 'nul\u0000' }, /files\.USER\.md must be well-formed/],
  ]) {
    run = await L.runHelper(withSetup(fx.prepare(NS, attacker, 'rev-1', 1), setupOf(attacker, { files })));
    L.refused(run, 'invalid-operation', why);
  }
  // Revisions 2 and 3 were refused before any snapshot; nothing else changed either.
  L.sameHost(L.hostState([fx.root, fx.unitDirectory]), before, 'a refused setup changed the host');
  assert.equal(L.exists(`${workspaceOf(victim)}/SOUL.md`), false);
});

test('a first delivery does not hold the host lock: another Agent\'s prepare finishes meanwhile', async () => {
  const slow = 'agent-lock-a';
  const other = 'agent-lock-b';
  const order = [];
  let delivering;
  const started = new Promise((resolve) => { delivering = resolve; });
  const run = L.startHelper(withSetup(fx.prepare(NS, slow, 'rev-1', 1), setupOf(slow)), {
    onEvent: (event) => {
      if (event.event === 'progress' && event.step === 'workspace-setup' && /^delivering/.test(event.message)) delivering();
    },
  });
  run.done.then(() => order.push(slow));
  await started;
  const result = await L.helper(fx.prepare(NS, other, 'rev-1', 1));
  order.push(other);
  assert.equal(result.ok, true, JSON.stringify(result));
  const done = await run.done;
  assert.equal(done.result.ok, true, done.stdout);
  assert.deepEqual(order, [other, slow], 'the other prepare waited for the delivery');
  assert.equal(readAs(slow, `${workspaceOf(slow)}/SOUL.md`), FILES['SOUL.md']);
  assert.ok(L.lockIsFree(fx.root), 'the lock is free');
});
