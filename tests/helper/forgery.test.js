'use strict';
// The helper runs as root: whoever hands it its input directly (a component carrying
// the approved helper byte for byte, or anything else that reaches the helper over ssh)
// must get nothing beyond what the host's envelope allows. Each attack here runs the
// approved helper over ssh on a real host with a forged operation, or an honest one
// with a forged-but-valid envelope where the point is what the helper renders, and
// compares the host before and after: a refusal changes nothing, nothing runs as root
// (/root/x is never created), and the next honest operation is served.

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const fx = new L.Fixture('forgery', { portStart: 19300, portEnd: 19319 });
test.after(() => fx.cleanup());

const { exists, readyz } = L;
// A systemd line that would run a root command before the gateway.
const PAYLOAD = 'ExecStartPre=+/bin/sh -c "id > /root/x"';
// Printable text an ID may carry (IDs only refuse control characters): quotes, unit
// specifiers, variables, a shell command and a line continuation.
const HOSTILE = ` ${PAYLOAD} "q" 'q' %n %h $HOME \${PATH} ; \`id > /root/x\` \\`;
const NS = `ns-forge${HOSTILE}`;
const AGENT = `agent-forge${HOSTILE}`;
const REV = `rev-1${HOSTILE}`;
// Placeholders as beforeWorkloadStart returns them (out of order: the unit sorts them).
// Names the gateway itself acts on (SLACK_BOT_TOKEN starts a Slack channel, which
// keeps the gateway from readiness for over a minute here) are left to render.test.js.
const LAUNCH = { OCC_TEST_TOKEN: 'opaque-cfg:slack.bot', IAM_SESSION: 'opaque-iam-7f3a' };
// Where a forged root or unit directory would put things.
const FORGED_ROOT = '/root/occ-forged-root';
const FORGED_UNITS = '/root/occ-forged-units';

const p = fx.paths(NS, AGENT, REV);
const unitName = fx.unitName(AGENT);
const unitProp = (prop) => L.sh(`systemctl show -p ${prop} --value ${unitName}`).trim();
// The host as a refusal must leave it: the fixture's root, the unit directory, the
// forged places, the accounts, /root/x. The running gateway's own home and state are
// its to change.
const hostState = () => L.hostState([fx.root, fx.unitDirectory, FORGED_ROOT, FORGED_UNITS],
  { skip: [`${p.agentDir}/home`, `${p.agentDir}/state`] });
let port;
// The rig's paths as regular expressions.
const NODE_RE = L.NODE.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const OPENCLAW_RE = L.OPENCLAW.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

const honestActivate = () => fx.activate(NS, AGENT, REV, 1, L.GATEWAY_CONFIG, { launchEnvironment: LAUNCH });

// Runs `request`, asserts it is refused as `code` matching `why` with the host
// unchanged and /root/x absent, then that the honest activation is still served.
async function refusedThenServed(what, request, why, code = 'invalid-operation') {
  const before = hostState();
  const run = await L.runHelper(request);
  try {
    L.refused(run, code, why);
  } catch (error) {
    error.message = `${what}: ${error.message}`;
    throw error;
  }
  L.sameHost(hostState(), before, `${what}: the refused run changed the host`);
  assert.equal(exists('/root/x'), false, `${what}: /root/x`);
  const next = await L.runHelper(honestActivate());
  assert.deepEqual([next.code, next.result && next.result.ok, next.result && next.result.changed, next.result && next.result.port],
    [0, true, false, port], `${what}: the next honest activation: ${next.stdout.slice(-800)}`);
}

test('an Agent whose IDs carry unit syntax gets exactly the unit the helper renders, and it runs nothing else', { timeout: 240000 }, async (t) => {
  assert.equal(exists('/root/x'), false);
  assert.equal((await L.helper(fx.ensureNamespace(NS))).ok, true);
  const prepared = await L.helper(fx.prepare(NS, AGENT, REV, 1));
  assert.equal(prepared.ready, true, JSON.stringify(prepared));
  port = prepared.port;
  const run = await L.runHelper(honestActivate());
  assert.equal(run.code, 0, run.stdout.slice(-1500));
  t.diagnostic(`served ${run.result.readyAfterMs} ms after restart`);
  assert.equal(readyz(port), '200');

  // On disk: the helper's rendering, byte for byte; the IDs only in the header comments.
  const unit = L.sh(`cat ${p.unitPath}`);
  assert.equal(unit, fx.unitText(NS, AGENT, port, { launchEnvironment: LAUNCH }));
  assert.deepEqual(unit.split('\n').filter((line) => line.includes(HOSTILE)),
    [`# OCC-Namespace: ${NS}`, `# OCC-Agent: ${AGENT}`]);
  assert.deepEqual(unit.split('\n').filter((line) => line.includes('ExecStartPre')),
    [`# OCC-Namespace: ${NS}`, `# OCC-Agent: ${AGENT}`]);
  // As systemd read it: one ExecStart, no other command, exactly the environment the
  // helper set (the placeholders sorted), the password file and the operator's file.
  for (const prop of ['ExecStartPre', 'ExecStartPost', 'ExecStartPreEx', 'ExecStop', 'ExecStopPost', 'ExecReload', 'ExecCondition']) {
    assert.equal(unitProp(prop), '', prop);
  }
  assert.match(unitProp('ExecStart'), new RegExp(`^\\{ path=${NODE_RE} ; argv\\[\\]=${NODE_RE} ${OPENCLAW_RE} gateway --port ${port} ;`));
  assert.equal(unitProp('User'), fx.account(NS, AGENT));
  assert.equal(unitProp('Environment'), [
    `HOME=${p.agentDir}/home`, `OPENCLAW_STATE_DIR=${p.agentDir}/state`,
    `OPENCLAW_CONFIG_PATH=${p.agentDir}/current/openclaw.json`, `OPENCLAW_GATEWAY_PORT=${port}`,
    'IAM_SESSION=opaque-iam-7f3a', 'OCC_TEST_TOKEN=opaque-cfg:slack.bot',
  ].join(' '));
  assert.equal(unitProp('EnvironmentFiles'),
    `${p.agentDir}/gateway-password.env (ignore_errors=no)\n${p.agentDir}/env (ignore_errors=yes)`);
  assert.equal(unitProp('Description'), `OpenClaw gateway of OCC Agent ${L.sha12(AGENT)}`);
  // The markers carry the IDs as JSON strings, exactly.
  const marker = (file) => JSON.parse(L.sh(`cat ${file}`));
  assert.deepEqual(marker(`${p.nsDir}/namespace.json`), { ...fx.namespaceOwner(NS), ...fx.written() });
  assert.equal(marker(`${p.agentDir}/agent.json`).agentId, AGENT);
  assert.equal(marker(`${p.agentDir}/agent.json`).servicePrincipalId, `sp-${AGENT}`);
  assert.equal(marker(`${p.revDir}/revision.json`).revisionId, REV);
  assert.equal(marker(`${p.agentDir}/served.json`).revisionId, REV);
  const inspected = await L.helper(fx.inspectAgent(NS, AGENT));
  assert.deepEqual([inspected.exists, inspected.port, inspected.account], [true, port, fx.account(NS, AGENT)]);
  assert.equal(exists('/root/x'), false, 'nothing ran as root');
});

test('a unit line smuggled through any field is refused, the host unchanged, the next activation served', { timeout: 300000 }, async () => {
  const forged = (edit) => {
    const request = honestActivate();
    edit(request);
    return request;
  };
  const line = `\n${PAYLOAD}\n`;
  const cases = [
    // What the component sends: none of it is policy.
    ['a unit in the operation', forged((r) => { r.op.unit = { text: `${fx.unitText(NS, AGENT, port)}${PAYLOAD}\n` }; }), /^operation\.unit is not a field/],
    ['a port in the operation', forged((r) => { r.op.port = 22; }), /^operation\.port is not a field/],
    ['a readiness bound in the operation', forged((r) => { r.op.readinessTimeoutMs = 1; }), /^operation\.readinessTimeoutMs is not a field/],
    ['placeholders in the operation', forged((r) => { r.op.launchEnvironment = { IAM_SESSION: `opaque-a"${line}` }; }), /^operation\.launchEnvironment is not a field/],
    ['a node path in the operation', forged((r) => { r.op.nodePath = '/bin/sh'; }), /^operation\.nodePath is not a field/],
    ['an account in the operation', forged((r) => { r.op.agent = { id: AGENT, account: 'root' }; }), /^operation\.agent is not a field/],
    ['a document in activate', forged((r) => { r.op.configuration = L.GATEWAY_CONFIG; }), /^operation\.configuration is not a field/],
    // Placeholder values and names.
    ['a placeholder value with a quote and a line', forged((r) => { r.envelope.launchEnvironment.IAM_SESSION = `opaque-a"${line}#`; }),
      /launchEnvironment\.IAM_SESSION: the value must be an opaque reference/],
    ['a placeholder value with a line', forged((r) => { r.envelope.launchEnvironment.IAM_SESSION = `opaque-a${line}`; }), /launchEnvironment\.IAM_SESSION: the value/],
    ['a placeholder value with a specifier', forged((r) => { r.envelope.launchEnvironment.IAM_SESSION = 'opaque-%h'; }), /launchEnvironment\.IAM_SESSION: the value/],
    ['a placeholder value with a variable', forged((r) => { r.envelope.launchEnvironment.IAM_SESSION = 'opaque-$HOME'; }), /launchEnvironment\.IAM_SESSION: the value/],
    ['a placeholder name with a line', forged((r) => { r.envelope.launchEnvironment[`X="${line}#`] = 'opaque-a'; }), /the name must match/],
    ['LD_PRELOAD', forged((r) => { r.envelope.launchEnvironment.LD_PRELOAD = 'opaque-x'; }), /LD_PRELOAD: the name is reserved/],
    ['NODE_OPTIONS', forged((r) => { r.envelope.launchEnvironment.NODE_OPTIONS = 'opaque-x'; }), /NODE_OPTIONS: the name is reserved/],
    ['another snapshot path', forged((r) => { r.envelope.launchEnvironment.OPENCLAW_CONFIG_PATH = 'opaque-x'; }), /OPENCLAW_CONFIG_PATH: the name is reserved/],
    ['another gateway password', forged((r) => { r.envelope.launchEnvironment.OPENCLAW_GATEWAY_PASSWORD = 'opaque-x'; }), /OPENCLAW_GATEWAY_PASSWORD: the name is reserved/],
    ['a shell start file', forged((r) => { r.envelope.launchEnvironment.BASH_ENV = 'opaque-x'; }), /BASH_ENV: the name is reserved/],
    // Paths, which are unit lines as they are.
    ['a node path with a line', forged((r) => { r.envelope.runtime.nodePath = `${L.NODE}${line}`; }), /envelope\.runtime\.nodePath must be a normalized absolute path/],
    ['a node path with a command', forged((r) => { r.envelope.runtime.nodePath = '/bin/sh -c "id > /root/x" #'; }), /envelope\.runtime\.nodePath/],
    ['an openclaw path with a semicolon', forged((r) => { r.envelope.runtime.openclawPath = `${L.OPENCLAW};id`; }), /envelope\.runtime\.openclawPath/],
    ['an openclaw path with a specifier', forged((r) => { r.envelope.runtime.openclawPath = `${L.OPENCLAW}%n`; }), /envelope\.runtime\.openclawPath/],
    ['a root with a line', forged((r) => { r.envelope.runtime.root = `${fx.root}${line}`; }), /envelope\.runtime\.root/],
    ['a root with a variable', forged((r) => { r.envelope.runtime.root = `${fx.root}$HOME`; }), /envelope\.runtime\.root/],
    ['a unit directory with a line', forged((r) => { r.envelope.runtime.unitDirectory = `${fx.unitDirectory}${line}`; }), /envelope\.runtime\.unitDirectory/],
    ['a unit directory with a backslash', forged((r) => { r.envelope.runtime.unitDirectory = `${fx.unitDirectory}\\`; }), /envelope\.runtime\.unitDirectory/],
    // IDs, which are unit header lines.
    ['an Agent id with a line', forged((r) => { r.envelope.agent.id = `${AGENT}${line}`; }), /envelope\.agent\.id must be a non-empty string without control characters/],
    ['a Namespace id with a line', forged((r) => { r.envelope.namespace.id = `${NS}${line}`; }), /envelope\.namespace\.id must be/],
    ['a Namespace name with a line', forged((r) => { r.envelope.namespace.name = `${fx.host}${line}`; }), /envelope\.namespace\.name must be/],
    ['a ServicePrincipal with a carriage return', forged((r) => { r.envelope.agent.servicePrincipalId = `sp\r${PAYLOAD}`; }), /envelope\.agent\.servicePrincipalId must be/],
    ['a revision id with a line', forged((r) => { r.envelope.revision.id = `${REV}${line}`; }), /envelope\.revision\.id must be/],
    ['a driver implementation with a line', forged((r) => { r.envelope.driver.implementation = `occ/ssh${line}`; }), /envelope\.driver\.implementation must be/],
    // The account.
    ['runtime.user root', forged((r) => { r.envelope.runtime.user = 'root'; }), /envelope\.runtime\.user must be a Linux user name/],
    ['runtime.user with a line', forged((r) => { r.envelope.runtime.user = `openclaw${line}`; }), /envelope\.runtime\.user must be a Linux user name/],
    ['an account in the envelope', forged((r) => { r.envelope.agent.account = 'root'; }), /^envelope\.agent\.account is not a field/],
    ['a unit in the envelope', forged((r) => { r.envelope.unit = PAYLOAD; }), /^envelope\.unit is not a field/],
  ];
  for (const [what, request, why] of cases) await refusedThenServed(what, request, why);
  assert.equal(L.sh(`cat ${p.unitPath}`), fx.unitText(NS, AGENT, port, { launchEnvironment: LAUNCH }));
  assert.equal(unitProp('ExecStartPre'), '');
});

test('a root or unit directory in the operation is refused for every op; nothing is made there', { timeout: 300000 }, async () => {
  const requests = [
    fx.probe(), fx.ensureNamespace(NS), fx.prepare(NS, AGENT, 'rev-2', 2), honestActivate(), fx.inspectAgent(NS, AGENT),
    fx.agentOp('deactivate', NS, AGENT, REV, 1), fx.agentOp('stop', NS, AGENT, REV, 1), fx.agentOp('retire', NS, AGENT, REV, 1),
    fx.deleteAgent(NS, AGENT), fx.deleteNamespace(NS),
  ];
  for (const request of requests) {
    for (const [field, value] of [['root', FORGED_ROOT], ['unitDirectory', FORGED_UNITS]]) {
      const forged = JSON.parse(JSON.stringify(request));
      forged.op[field] = value;
      await refusedThenServed(`${request.op.op} with operation.${field}`, forged, new RegExp(`^operation\\.${field} is not a field of operation`));
    }
  }
  // An op the call's method may not run, whatever the component asks.
  for (const [call, op] of [
    [fx.agentOp('stop', NS, AGENT, REV, 1), fx.deleteNamespace(NS).op],
    [honestActivate(), fx.deleteAgent(NS, AGENT).op],
    [fx.prepare(NS, AGENT, 'rev-2', 2), honestActivate().op],
    [fx.probe(), fx.ensureNamespace(NS).op],
  ]) {
    await refusedThenServed(`${op.op} in a ${call.envelope.method} call`, { op, envelope: call.envelope },
      new RegExp(`^op ${op.op} is not one ${call.envelope.method} may run`));
  }
  for (const place of [FORGED_ROOT, FORGED_UNITS]) assert.equal(exists(place), false, place);
});

test('prepare writes the controller\'s document and nothing else: another document, or one SSH Compute does not serve, is refused', { timeout: 300000 }, async () => {
  const NONE = `${JSON.stringify({ gateway: { mode: 'local', auth: { mode: 'none' } } })}\n`;
  const rev2 = fx.paths(NS, AGENT, 'rev-2');
  // A document whose hash is not the one the host took of the controller's.
  const swapped = fx.prepare(NS, AGENT, 'rev-2', 2);
  swapped.op.configuration = NONE;
  await refusedThenServed('a configuration whose hash differs', swapped, /^configuration is not the controller's revision\.configuration/);
  // Documents the controller might send, hashed honestly, that no gateway may serve.
  for (const [what, document, why] of [
    ['gateway.auth.mode none', NONE, /gateway\.auth\.mode "none" is not one SSH Compute serves/],
    ['gateway.auth.mode token', `${JSON.stringify({ gateway: { mode: 'local', auth: { mode: 'token', token: 'not-a-secret' } } })}\n`,
      /gateway\.auth\.mode "token" is not one SSH Compute serves/],
    ['a literal password', `${JSON.stringify({ gateway: { mode: 'local', auth: { mode: 'password', password: 'hunter2' } } })}\n`,
      /gateway\.auth\.password must be the managed SecretRef/],
    ['a non-loopback gateway reading another secret', `${JSON.stringify({ gateway: { mode: 'local', bind: 'lan', auth: { mode: 'password', password: { source: 'env', provider: 'default', id: 'SLACK_BOT_TOKEN' } } } })}\n`,
      /gateway\.auth\.password must be the managed SecretRef/],
  ]) {
    await refusedThenServed(what, fx.prepare(NS, AGENT, 'rev-2', 2, document), why);
  }
  // Another harness is not prepared either.
  const harness = fx.prepare(NS, AGENT, 'rev-2', 2);
  harness.envelope.revision.harness = 'openclaw/sandboxed';
  await refusedThenServed('another harness', harness, /SSH Compute prepares only openclaw\/embedded/);
  assert.equal(exists(rev2.revDir), false);

  // The controller's document is prepared: its rendering, recorded by both hashes.
  const prepared = await L.helper(fx.prepare(NS, AGENT, 'rev-2', 2));
  assert.deepEqual([prepared.ok, prepared.ready, prepared.changed, prepared.port], [true, true, true, port]);
  const snapshot = L.sh(`cat ${rev2.revDir}/openclaw.json`);
  assert.equal(snapshot, L.snapshotText(L.GATEWAY_CONFIG));
  const marker = JSON.parse(L.sh(`cat ${rev2.revDir}/revision.json`));
  assert.deepEqual([marker.configurationSha256, marker.snapshotSha256], [L.sha256(L.GATEWAY_CONFIG), L.sha256(snapshot)]);
  // The gateway still serves the first revision.
  assert.equal(L.sh(`readlink ${p.agentDir}/current`).trim(), `revisions/${L.sha12(REV)}`);
  assert.equal(readyz(port), '200');
});

test('nothing of it ran as root, and the Namespace goes whole', { timeout: 180000 }, async () => {
  assert.equal(exists('/root/x'), false);
  const deleted = await L.helper(fx.deleteNamespace(NS));
  assert.deepEqual([deleted.ok, deleted.changed], [true, true], JSON.stringify(deleted));
  assert.notEqual(readyz(port), '200');
  for (const gone of [p.unitPath, p.nsDir, p.accountMarker, FORGED_ROOT, FORGED_UNITS, '/root/x']) assert.equal(exists(gone), false, gone);
  assert.equal(L.sh(`getent passwd ${fx.account(NS, AGENT)} || true`).trim(), '');
});
