'use strict';
// What the helper accepts as input, through parseOperation(<base64 operation>,
// <base64 envelope>) exactly as the input frame on its stdin hands them over. The helper
// runs as root: the component may choose only its policy (which operation, a deadline,
// and for prepare the controller's document, by the hash the host took of it), and
// every value of the host's envelope must be one a unit line, a path or a marker can
// carry as it is. Pure: no rig, no ssh (`node --test tests/helper/envelope.test.js`,
// Node 20 or later).

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');

const H = require(process.env.OCC_HELPER_PATH || path.resolve(__dirname, '..', '..', 'helper', 'helper.js'));

const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const sha12 = (text) => sha256(text).slice(0, 12);
const b64 = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');
const clone = (value) => JSON.parse(JSON.stringify(value));

const CONFIGURATION = '{"gateway":{"mode":"local","auth":{"mode":"password"}},"agents":{"defaults":{"model":"anthropic/claude"}}}';

// The method whose call runs each operation and the operations it may run
// (host/src/world/ssh_compute_driver/method.rs), and the envelope parts the host
// writes for it (envelope.rs).
const CALLS = {
  'probe': ['preflight', ['probe'], []],
  'ensure-namespace': ['ensureNamespace', ['ensure-namespace'], ['namespace']],
  'prepare': ['prepareRevision', ['prepare'], ['namespace', 'agent', 'revision']],
  'inspect-agent': ['activateRevision', ['inspect-agent', 'activate'], ['namespace', 'agent', 'revision']],
  'activate': ['activateRevision', ['inspect-agent', 'activate'], ['namespace', 'agent', 'revision', 'launchEnvironment']],
  'deactivate': ['deactivateRevision', ['deactivate'], ['namespace', 'agent', 'revision']],
  'stop': ['stopRevision', ['stop'], ['namespace', 'agent', 'revision']],
  'retire': ['retireRevision', ['retire'], ['namespace', 'agent', 'revision']],
  'delete-agent': ['deleteAgentRuntimeCredentials', ['delete-agent'], ['namespace', 'agent']],
  'delete-namespace': ['deleteNamespace', ['delete-namespace'], ['namespace']],
  'describe-runtime': ['describeAgentRuntime', ['describe-runtime'], ['namespace', 'agent', 'revision', 'events']],
  'read-logs': ['readAgentRuntimeLogs', ['read-logs'], ['namespace', 'agent', 'revision', 'logRequest']],
  'diagnose': ['diagnoseAgentDeployment', ['diagnose'], ['namespace', 'agent', 'revision', 'harnessVersion']],
};
const OPS = Object.keys(CALLS);

const PARTS = {
  namespace: { id: 'ns-1', name: 'host-a' },
  agent: { id: 'agent-1', servicePrincipalId: 'sp-1' },
  revision: { id: 'rev-1', number: 1, harness: 'openclaw/embedded', configurationSha256: sha256(CONFIGURATION) },
  launchEnvironment: { SLACK_BOT_TOKEN: 'opaque-cfg:slack.bot', IAM_SESSION: 'opaque-iam-7f3a' },
  events: true,
  harnessVersion: '2026.9.6',
  logRequest: {
    pod: `openclaw-enterprise-gateway-${sha12('agent-1')}.service`, podUid: 'f305315cd6ce4aceb4f28d27bacc6262',
    previous: false, tailLines: 200, limitBytes: 1048576,
  },
};

// The honest request of an op: { op, envelope }.
function honest(op) {
  const [method, ops, parts] = CALLS[op];
  const envelope = {
    version: 2, method, ops, host: 'host-a',
    driver: { id: 'compute-ssh', implementation: 'occ/ssh' },
    runtime: {
      root: '/var/lib/openclaw-enterprise', unitDirectory: '/etc/systemd/system',
      nodePath: '/usr/bin/node', openclawPath: '/opt/openclaw/current/dist/index.js', user: 'openclaw',
    },
    gatewayPortRange: { start: 18800, end: 18899 },
  };
  for (const part of parts) envelope[part] = clone(PARTS[part]);
  const operation = { version: 2, op, deadlineMs: 170000, ...(op === 'prepare' ? { configuration: CONFIGURATION } : {}) };
  return { op: operation, envelope };
}

const parse = ({ op, envelope }) => H.parseOperation(b64(op), b64(envelope));

// Asserts the request is refused as invalid-operation with a message matching `why`.
function refuses(request, why, what) {
  assert.throws(() => parse(request), (error) => {
    assert.ok(error instanceof H.HelperError, `${what}: ${error && error.stack}`);
    assert.equal(error.code, 'invalid-operation', `${what}: ${error.message}`);
    assert.match(error.message, why, what);
    return true;
  }, what);
}

// A request of `op` with `edit` applied to a copy.
function forged(op, edit) {
  const request = honest(op);
  edit(request);
  return request;
}

test('the honest request of every op parses into what the helper acts on', () => {
  const account = `openclaw-${sha12('ns-1:agent-1')}`;
  for (const op of OPS) {
    const parsed = parse(honest(op));
    assert.equal(parsed.op, op);
    assert.equal(parsed.method, CALLS[op][0]);
    assert.equal(parsed.host, 'host-a');
    assert.deepEqual(parsed.driver, { id: 'compute-ssh', implementation: 'occ/ssh' });
    assert.equal(parsed.root, '/var/lib/openclaw-enterprise');
    assert.equal(parsed.unitDirectory, '/etc/systemd/system');
    assert.equal(parsed.nodePath, '/usr/bin/node');
    assert.equal(parsed.openclawPath, '/opt/openclaw/current/dist/index.js');
    assert.deepEqual(parsed.portRange, { start: 18800, end: 18899 });
    assert.equal(parsed.deadlineMs, 170000);
    const parts = CALLS[op][2];
    if (parts.includes('namespace')) assert.deepEqual(parsed.namespace, { id: 'ns-1', name: 'host-a', hash: sha12('ns-1') });
    else assert.equal(parsed.namespace, undefined, op);
    if (parts.includes('agent')) {
      assert.deepEqual(parsed.agent, {
        id: 'agent-1', hash: sha12('agent-1'), servicePrincipalId: 'sp-1', account,
        unitName: `openclaw-enterprise-gateway-${sha12('agent-1')}.service`,
      });
    } else {
      assert.equal(parsed.agent, undefined, op);
    }
    if (H.OPERATIONS[op].revision) {
      assert.deepEqual(parsed.revision, {
        id: 'rev-1', hash: sha12('rev-1'), number: 1, harness: 'openclaw/embedded',
        configurationSha256: sha256(CONFIGURATION),
      });
    }
    if (op === 'prepare') {
      assert.deepEqual(parsed.snapshot, H.renderSnapshot(CONFIGURATION));
      assert.equal(parsed.snapshot.needsPassword, true);
    } else {
      assert.equal(parsed.snapshot, undefined, op);
    }
    // The placeholders reach the unit sorted by name.
    if (op === 'activate') {
      assert.deepEqual(parsed.placeholders, [['IAM_SESSION', 'opaque-iam-7f3a'], ['SLACK_BOT_TOKEN', 'opaque-cfg:slack.bot']]);
    }
  }
});

test('a log read takes the unit, the invocation and its bounds from the envelope alone', () => {
  const parsed = parse(honest('read-logs'));
  assert.deepEqual(parsed.logRequest, PARTS.logRequest);
  assert.equal(parse(honest('describe-runtime')).events, true);
  assert.equal(parse(honest('diagnose')).harnessVersion, '2026.9.6');
  refuses(forged('diagnose', (r) => { r.envelope.harnessVersion = '1\n2'; }), /harnessVersion must be a non-empty string/, 'a version with a newline');
  const edits = [
    [(r) => { delete r.envelope.logRequest; }, /^read-logs needs envelope\.logRequest/],
    [(r) => { r.envelope.logRequest.podUid = '../../etc/shadow'; }, /podUid must be a systemd invocation id/],
    [(r) => { r.envelope.logRequest.tailLines = 1001; }, /tailLines must be an integer in 1\.\.1000/],
    [(r) => { r.envelope.logRequest.limitBytes = 0; }, /limitBytes must be an integer/],
    [(r) => { r.envelope.logRequest.sinceSeconds = -1; }, /sinceSeconds must be an integer/],
    [(r) => { r.envelope.logRequest.path = '/etc/shadow'; }, /envelope\.logRequest.*path/],
    [(r) => { r.envelope.logRequest.pod = 'a\nb'; }, /pod must be a non-empty string without control characters/],
    // The component cannot send a request of its own: the operation carries policy only.
    [(r) => { r.op.logRequest = clone(PARTS.logRequest); }, /logRequest/],
  ];
  for (const [edit, why] of edits) refuses(forged('read-logs', edit), why, String(why));
  // No other operation carries a log request.
  refuses(forged('diagnose', (r) => { r.envelope.logRequest = clone(PARTS.logRequest); }),
    /envelope\.logRequest: diagnose reads no log/, 'a log request in a diagnosis');
});

test('preflight reads the installation\'s sessions per connection from the envelope, checked', () => {
  const probe = (edit) => forged('probe', (r) => { r.envelope.maxSessions = 8; edit(r); });
  assert.equal(parse(probe(() => {})).maxSessions, 8);
  refuses(probe((r) => { r.envelope.maxSessions = 0; }), /maxSessions must be an integer in 1\.\.64/, 'no sessions');
  refuses(probe((r) => { r.op.maxSessions = 1; }), /maxSessions/, 'the component\'s own limit');
});

test('a log read is cut as it crosses: by its lines\' JSON text, the last line partial', () => {
  const lines = [{ time: 't1', raw: 'abcd' }, { time: 't2', raw: 'efgh' }];
  assert.deepEqual(H.cutLines(lines, 100), { lines, truncated: false });
  assert.deepEqual(H.cutLines(lines, 5), { lines: [lines[0]], truncated: true });
  assert.deepEqual(H.cutLines(lines, 8), { lines: [lines[0], { time: 't2', raw: 'ef' }], truncated: true });
  // An escape costs what it costs on the link: six bytes for a control character.
  assert.deepEqual(H.cutLines([{ time: null, raw: '\u001b[1m' }], 4), { lines: [], truncated: true });
  assert.deepEqual(H.cutLines([{ time: null, raw: 'é' }], 3), { lines: [{ time: null, raw: 'é' }], truncated: false });
});

test('a tail read newest first and held within the budget sends what cutting the whole tail sends', () => {
  // Lines of 0 to 12 characters, some that JSON escapes, against budgets around them.
  // mulberry32, seeded: the same cases each run.
  let seed = 7;
  const next = (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const alphabet = ['a', 'b', 'é', '\u001b', '"', '\\', ' '];
  let truncated = 0;
  for (let round = 0; round < 2000; round += 1) {
    const tail = Array.from({ length: next(8) }, (_, i) => ({
      time: `t${i}`, raw: Array.from({ length: next(13) }, () => alphabet[next(alphabet.length)]).join(''),
    }));
    const limit = 1 + next(60);
    const read = H.tailWithin(limit);
    for (const { time, raw } of [...tail].reverse()) read.add(time, raw);
    const whole = H.cutLines(tail, limit);
    assert.deepEqual(read.lines(), whole, JSON.stringify({ tail, limit }));
    if (whole.truncated) truncated += 1;
  }
  // Both sides of the budget were tried, many times.
  assert.ok(truncated > 500 && truncated < 1500, `${truncated} of 2000 cut`);
});

test('an exit systemd logged reads as OCC\'s lastTermination, and times as RFC 3339', () => {
  assert.deepEqual(H.termination('killed', '9', 't'), { reason: 'Killed', exitCode: 137, finishedAt: 't' });
  assert.deepEqual(H.termination('exited', '1', 't'), { reason: 'Error', exitCode: 1, finishedAt: 't' });
  assert.deepEqual(H.termination('exited', '0', null), { reason: 'Completed', exitCode: 0, finishedAt: null });
  assert.deepEqual(H.termination('dumped', 'SEGV', null), { reason: 'CoreDumped', exitCode: 139, finishedAt: null });
  assert.equal(H.termination('', '0', null), null);
  assert.equal(H.systemdTime('Sun 2026-12-06 07:48:57.123456 UTC'), '2026-12-06T07:48:57.123456Z');
  assert.equal(H.systemdTime(''), null);
  assert.equal(H.journalTime({ __REALTIME_TIMESTAMP: '1796543334379355' }), '2026-12-06T07:48:54.379355Z');
  assert.equal(H.journalTime({ __REALTIME_TIMESTAMP: 'x' }), null);
});

test('a line journald left without an invocation ID counts to the invocation whose span holds it', () => {
  const id = 'a'.repeat(32);
  const line = (t, invocation) => ({ __REALTIME_TIMESTAMP: String(t), ...(invocation ? { _SYSTEMD_INVOCATION_ID: invocation } : {}) });
  const span = { start: 100, end: 200 };
  // A line journald named an invocation for is that invocation's, wherever it lies.
  assert.equal(H.ofInvocation(line(150, id), id, span), true);
  assert.equal(H.ofInvocation(line(250, id), id, span), true);
  assert.equal(H.ofInvocation(line(150, 'b'.repeat(32)), id, span), false);
  // One without is the invocation's only inside [start, end).
  assert.equal(H.ofInvocation(line(100), id, span), true);
  assert.equal(H.ofInvocation(line(199), id, span), true);
  assert.equal(H.ofInvocation(line(99), id, span), false);
  assert.equal(H.ofInvocation(line(200), id, span), false, 'the next invocation\'s start is its own');
  // The newest invocation's span is open.
  assert.equal(H.ofInvocation(line(10 ** 15), id, { start: 100, end: null }), true);
  // A record without a time, or with a repeated ID, is nobody's.
  assert.equal(H.ofInvocation({}, id, span), false);
  assert.equal(H.ofInvocation({ __REALTIME_TIMESTAMP: '150', _SYSTEMD_INVOCATION_ID: [id, id] }, id, span), false);
});

test('the account is the first 19 characters of runtime.user, a dash and 12 hex', () => {
  const user = 'abcdefghij0123456789-klmnopqrst_uvwxyz98';
  assert.equal(user.length, 40);
  const parsed = parse(forged('prepare', (r) => { r.envelope.runtime.user = user; }));
  assert.equal(parsed.agent.account, `abcdefghij012345678-${sha12('ns-1:agent-1')}`);
  assert.equal(parsed.agent.account.length, 32, 'a Linux user name at its longest');
  // A short one is taken whole.
  assert.equal(parse(forged('prepare', (r) => { r.envelope.runtime.user = 'oc'; })).agent.account, `oc-${sha12('ns-1:agent-1')}`);
  assert.equal(H.agentAccountName(user, 'ns-1', 'agent-1'), parsed.agent.account);
});

test('activate with no placeholders parses ({} is what beforeWorkloadStart returned)', () => {
  const parsed = parse(forged('activate', (r) => { r.envelope.launchEnvironment = {}; }));
  assert.deepEqual(parsed.placeholders, []);
});

// What a component might put in its operation to steer the helper. Each was a field
// of protocol 1 (or is what the helper derives): none is policy.
const FORGED_FIELDS = {
  root: '/root',
  unitDirectory: '/etc/systemd/system.control',
  nodePath: '/bin/sh',
  openclawPath: '/tmp/evil.js',
  portRange: { start: 22, end: 22 },
  namespace: { id: 'ns-other', hash: '000000000000' },
  agent: { id: 'agent-1', hash: sha12('agent-1'), servicePrincipalId: 'sp-1', account: 'root', unitName: 'sshd.service' },
  revision: { id: 'rev-1', hash: sha12('rev-1'), number: 1, configHash: '0'.repeat(64), harness: 'openclaw/embedded' },
  snapshot: '{"gateway":{"auth":{"mode":"none"}}}',
  needsPassword: false,
  unit: { text: '[Service]\nExecStart=/bin/sh -c "id > /root/x"\n' },
  port: 22,
  readinessTimeoutMs: 1,
  driver: 'occ/ssh',
  launchEnvironment: { LD_PRELOAD: '/tmp/x.so' },
  placeholders: [['LD_PRELOAD', '/tmp/x.so']],
  account: 'root',
  user: 'root',
  host: 'host-b',
  method: 'deleteNamespace',
  ops: ['delete-namespace'],
  envelope: {},
};

test('every field the component might set beyond its policy is refused, naming it', () => {
  for (const op of OPS) {
    for (const [field, value] of Object.entries(FORGED_FIELDS)) {
      refuses(forged(op, (r) => { r.op[field] = value; }), new RegExp(`^operation\\.${field} is not a field of operation`), `${op}: operation.${field}`);
    }
    // The controller's document goes with prepare alone.
    if (op !== 'prepare') {
      refuses(forged(op, (r) => { r.op.configuration = CONFIGURATION; }), /^operation\.configuration is not a field/, `${op}: configuration`);
    }
  }
});

test('the operation: version, op and deadlineMs, and nothing the envelope does not allow', () => {
  for (const [edit, why, what] of [
    [(r) => { r.op.version = 1; }, /unsupported protocol version 1/, 'protocol 1'],
    [(r) => { r.op.version = 3; }, /unsupported protocol version 3/, 'protocol 3'],
    [(r) => { r.op.version = '2'; }, /unsupported protocol version "2"/, 'version as a string'],
    [(r) => { delete r.op.version; }, /unsupported protocol version/, 'no version'],
    [(r) => { r.op.op = 'reboot'; }, /unknown op "reboot"/, 'unknown op'],
    [(r) => { r.op.op = '__proto__'; }, /unknown op "__proto__"/, 'a prototype key as op'],
    [(r) => { r.op.op = 'hasOwnProperty'; }, /unknown op/, 'an inherited name as op'],
    [(r) => { delete r.op.op; }, /unknown op/, 'no op'],
    [(r) => { r.op.deadlineMs = 999; }, /deadlineMs must be an integer in 1000\.\.175000/, 'deadline below 1 s'],
    [(r) => { r.op.deadlineMs = 175001; }, /deadlineMs must be an integer in 1000\.\.175000/, 'deadline past the transport'],
    [(r) => { r.op.deadlineMs = 1500.5; }, /deadlineMs/, 'fractional deadline'],
    [(r) => { r.op.deadlineMs = '170000'; }, /deadlineMs/, 'deadline as a string'],
  ]) {
    refuses(forged('ensure-namespace', edit), why, what);
  }
  // An op the envelope's method may not run: a stop call cannot delete, an activate call
  // cannot prepare.
  for (const [call, op] of [['stop', 'delete-namespace'], ['activate', 'prepare'], ['probe', 'ensure-namespace'],
    ['prepare', 'activate'], ['inspect-agent', 'delete-agent'], ['ensure-namespace', 'delete-namespace']]) {
    const request = honest(call);
    request.op = honest(op).op;
    refuses(request, new RegExp(`^op ${op} is not one ${CALLS[call][0]} may run`), `${op} in a ${CALLS[call][0]} call`);
  }
  const none = forged('probe', (r) => { r.envelope.ops = []; });
  refuses(none, /may run: nothing/, 'an envelope that lists no op');
  for (const deadlineMs of [1000, 175000]) parse(forged('stop', (r) => { r.op.deadlineMs = deadlineMs; }));
  parse(forged('stop', (r) => { delete r.op.deadlineMs; }));
});

test('the arguments must be base64 JSON objects', () => {
  const { op, envelope } = honest('probe');
  for (const [opArg, envArg, why] of [
    ['@@@', b64(envelope), /operation argument is not base64 JSON/],
    [b64(op), '@@@', /envelope argument is not base64 JSON/],
    ['', b64(envelope), /missing base64 operation argument/],
    [b64(op), '', /missing base64 envelope argument/],
    [b64(op), undefined, /missing base64 envelope argument/],
    [b64([op]), b64(envelope), /operation must be an object/],
    [b64(op), b64('null'), /envelope must be an object/],
    [b64(op), b64('"x"'), /envelope must be an object/],
  ]) {
    assert.throws(() => H.parseOperation(opArg, envArg), (error) => error.code === 'invalid-operation' && why.test(error.message), String(why));
  }
});

test('prepare writes only the controller\'s document, in a mode SSH Compute serves', () => {
  for (const [edit, why, what] of [
    [(r) => { r.op.configuration = `${CONFIGURATION} `; }, /^configuration is not the controller's revision\.configuration/, 'a configuration whose hash differs'],
    [(r) => { r.op.configuration = '{"gateway":{"auth":{"mode":"none"}}}'; }, /^configuration is not the controller's/, 'another document'],
    [(r) => { r.envelope.revision.configurationSha256 = sha256('{}'); }, /^configuration is not the controller's/, 'the hash of another document'],
    [(r) => { delete r.op.configuration; }, /^configuration must be a string/, 'no configuration'],
    [(r) => { r.op.configuration = JSON.parse(CONFIGURATION); }, /^configuration must be a string/, 'the document as an object'],
    [(r) => { r.envelope.revision.harness = 'openclaw/sandboxed'; }, /envelope\.revision\.harness is openclaw\/sandboxed; SSH Compute prepares only openclaw\/embedded/, 'another harness mode'],
    [(r) => { r.envelope.revision.harness = 'codex/embedded'; }, /envelope\.revision\.harness is codex\/embedded/, 'another harness'],
  ]) {
    refuses(forged('prepare', edit), why, what);
  }
  // Documents the host hashed honestly but that the helper must not serve.
  const withDocument = (text) => forged('prepare', (r) => {
    r.op.configuration = text;
    r.envelope.revision.configurationSha256 = sha256(text);
  });
  for (const [text, why, what] of [
    ['{"gateway":{"mode":"local","auth":{"mode":"none"}}}', /gateway\.auth\.mode "none" is not one SSH Compute serves/, 'auth mode none'],
    ['{"gateway":{"mode":"local","auth":{"mode":"token","token":"t0ken"}}}', /gateway\.auth\.mode "token" is not one SSH Compute serves/, 'auth mode token'],
    ['{"gateway":{"mode":"local","bind":"lan","auth":{"mode":"password","password":{"source":"env","provider":"default","id":"SLACK_BOT_TOKEN"}}}}',
      /gateway\.auth\.password must be the managed SecretRef/, 'a non-loopback document with another password ref'],
    ['{"gateway":{"mode":"local","bind":"lan","auth":{"password":"hunter2"}}}', /gateway\.auth\.password must be the managed SecretRef/, 'a literal password'],
    ['{"gateway":{"mode":"local","bind":"lan","auth":{"mode":"trusted-proxy","password":{"source":"exec","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}',
      /gateway\.auth\.password must be the managed SecretRef/, 'trusted-proxy with another password source'],
    ['not json', /configuration is not JSON/, 'not JSON'],
    ['["gateway"]', /configuration must be a JSON object/, 'an array'],
  ]) {
    refuses(withDocument(text), why, what);
  }
  // trusted-proxy is served as written.
  const proxy = '{"gateway":{"mode":"local","bind":"loopback","auth":{"mode":"trusted-proxy","trustedProxy":{"userHeader":"x-forwarded-user"}}}}';
  const parsed = parse(withDocument(proxy));
  assert.equal(parsed.snapshot.needsPassword, false);
  assert.deepEqual(JSON.parse(parsed.snapshot.text), JSON.parse(proxy));
});

test('an envelope refuses its own unknown keys, versions and shapes', () => {
  for (const [edit, why, what] of [
    [(e) => { e.version = 1; }, /unsupported envelope version 1/, 'envelope version 1'],
    [(e) => { e.version = 3; }, /unsupported envelope version 3/, 'envelope version 3'],
    [(e) => { delete e.version; }, /unsupported envelope version/, 'no envelope version'],
    [(e) => { e.unit = 'x'; }, /^envelope\.unit is not a field of envelope/, 'envelope.unit'],
    [(e) => { e.snapshot = 'x'; }, /^envelope\.snapshot is not a field of envelope/, 'envelope.snapshot'],
    [(e) => { e.account = 'root'; }, /^envelope\.account is not a field/, 'envelope.account'],
    [(e) => { e.runtime.group = 'root'; }, /^envelope\.runtime\.group is not a field/, 'envelope.runtime.group'],
    [(e) => { e.driver.version = '1'; }, /^envelope\.driver\.version is not a field/, 'envelope.driver.version'],
    [(e) => { e.gatewayPortRange.step = 1; }, /^envelope\.gatewayPortRange\.step is not a field/, 'envelope.gatewayPortRange.step'],
    [(e) => { e.namespace.hash = '000000000000'; }, /^envelope\.namespace\.hash is not a field/, 'envelope.namespace.hash'],
    [(e) => { e.agent.account = 'root'; }, /^envelope\.agent\.account is not a field/, 'envelope.agent.account'],
    [(e) => { e.agent.hash = sha12('agent-2'); }, /^envelope\.agent\.hash is not a field/, 'envelope.agent.hash'],
    [(e) => { e.revision.hash = '000000000000'; }, /^envelope\.revision\.hash is not a field/, 'envelope.revision.hash'],
    [(e) => { e.revision.configHash = '0'.repeat(64); }, /^envelope\.revision\.configHash is not a field/, 'envelope.revision.configHash'],
    [(e) => { e.ops = 'prepare'; }, /envelope\.ops must list helper operations/, 'ops not a list'],
    [(e) => { e.ops = ['prepare', 'reboot']; }, /envelope\.ops must list helper operations/, 'an unknown op in ops'],
    [(e) => { e.ops = ['__proto__']; }, /envelope\.ops must list helper operations/, 'a prototype key in ops'],
    [(e) => { e.driver = 'occ/ssh'; }, /envelope\.driver must be an object/, 'driver as protocol 1 had it'],
    [(e) => { e.runtime = null; }, /envelope\.runtime must be an object/, 'no runtime'],
    [(e) => { delete e.gatewayPortRange; }, /envelope\.gatewayPortRange must be an object/, 'no port range'],
    [(e) => { e.namespace = ['ns-1']; }, /envelope\.namespace must be an object/, 'namespace as an array'],
    [(e) => { delete e.namespace; }, /prepare needs envelope\.namespace/, 'prepare without namespace'],
    [(e) => { delete e.agent; }, /prepare needs envelope\.agent/, 'prepare without agent'],
    [(e) => { delete e.revision; }, /prepare needs envelope\.revision/, 'prepare without revision'],
    [(e) => { e.revision.number = 0; }, /envelope\.revision\.number must be an integer/, 'revision 0'],
    [(e) => { e.revision.number = 1.5; }, /envelope\.revision\.number/, 'fractional revision'],
    [(e) => { e.revision.number = '1'; }, /envelope\.revision\.number/, 'revision as a string'],
    [(e) => { e.revision.configurationSha256 = sha256(CONFIGURATION).toUpperCase(); }, /configurationSha256 must be 64 lowercase hex/, 'uppercase hash'],
    [(e) => { e.revision.configurationSha256 = sha256(CONFIGURATION).slice(1); }, /configurationSha256 must be 64 lowercase hex/, 'short hash'],
    [(e) => { e.revision.configurationSha256 = `${sha256(CONFIGURATION)}\n`; }, /configurationSha256 must be 64 lowercase hex/, 'hash with a newline'],
  ]) {
    refuses(forged('prepare', (r) => edit(r.envelope)), why, what);
  }
  for (const [op, part] of [['ensure-namespace', 'namespace'], ['delete-namespace', 'namespace'], ['inspect-agent', 'agent'],
    ['delete-agent', 'agent'], ['activate', 'revision'], ['stop', 'revision'], ['retire', 'revision'], ['deactivate', 'revision']]) {
    refuses(forged(op, (r) => { delete r.envelope[part]; }), new RegExp(`^${op} needs envelope\\.${part}$`), `${op} without ${part}`);
  }
  refuses(forged('activate', (r) => { delete r.envelope.launchEnvironment; }), /activate needs envelope\.launchEnvironment/, 'activate without placeholders');
});

// Characters that would end a unit line, quote or unquote an Environment= value, or
// make systemd expand something (specifiers, variables, escapes) or a shell split it.
const UNIT_BREAKERS = [
  ['a newline', '\nExecStartPre=+/bin/sh -c "id > /root/x"'],
  ['a carriage return', '\r'],
  ['a percent', '%n'],
  ['a dollar', '$HOME'],
  ['a dollar brace', '${PATH}'],
  ['a double quote', '"'],
  ['a single quote', "'"],
  ['a backslash', '\\'],
  ['a space', ' x'],
  ['a tab', '\tx'],
  ['a semicolon', ';id'],
  ['a NUL', '\0'],
];

test('runtime paths are normalized absolute paths a unit line carries as they are', () => {
  for (const key of ['root', 'unitDirectory', 'nodePath', 'openclawPath']) {
    const why = new RegExp(`^envelope\\.runtime\\.${key} must be a normalized absolute path without special characters`);
    const bad = [
      ...UNIT_BREAKERS.map(([what, text]) => [`${what} in it`, `/opt/x${text}`]),
      ['relative', 'opt/x'], ['/', '/'], ['a trailing slash', '/opt/x/'], ['..', '/opt/../etc'], ['.', '/opt/./x'],
      ['//', '//opt/x'], ['empty', ''], ['a number', 1], ['null', null], ['missing', undefined],
      ['a glob', '/opt/*'], ['a backtick', '/opt/`id`'], ['non-ASCII', '/opt/é'], ['a line separator', '/opt/\u2028x'],
    ];
    for (const [what, value] of bad) {
      refuses(forged('activate', (r) => { r.envelope.runtime[key] = value; }), why, `runtime.${key}: ${what}`);
    }
    parse(forged('activate', (r) => { r.envelope.runtime[key] = '/srv/occ_1.2/x+y@z:w-v'; }));
  }
});

test('IDs and names carry no control characters (they are unit header lines and marker values)', () => {
  const ids = [
    ['namespace', 'id'], ['namespace', 'name'], ['agent', 'id'], ['agent', 'servicePrincipalId'], ['revision', 'id'],
    ['revision', 'harness'], ['driver', 'id'], ['driver', 'implementation'], [null, 'method'], [null, 'host'],
  ];
  for (const [part, key] of ids) {
    const name = part ? `envelope.${part}.${key}` : `envelope.${key}`;
    const why = new RegExp(`^${name.replaceAll('.', '\\.')} must be a non-empty string without control characters`);
    for (const [what, value] of [
      ['a newline', 'x\nExecStartPre=+/bin/sh -c "id > /root/x"'], ['a newline at the end', 'x\n'],
      ['a carriage return', 'x\r# OCC-Agent: other'], ['NUL', 'x\0'], ['ESC', 'x\x1b[2J'], ['DEL', 'x\x7f'], ['a tab', 'x\ty'],
      ['empty', ''], ['too long', 'x'.repeat(513)], ['a number', 7], ['an object', { id: 'x' }],
    ]) {
      refuses(forged('activate', (r) => {
        if (part) r.envelope[part][key] = value;
        else r.envelope[key] = value;
      }), why, `${name}: ${what}`);
    }
  }
  // Printable text is an ID like any other: it reaches a unit only in a comment line.
  parse(forged('activate', (r) => { r.envelope.agent.id = 'agent "1" %n $HOME \\ ;'; }));
});

test('placeholders follow OCC\'s rules: names, reserved names, opaque values, at most 64', () => {
  const reserved = ['HOME', 'PATH', 'TMPDIR', 'CODEX_HOME', 'NODE_OPTIONS', 'NODE_PATH', 'BASH_ENV', 'ENV', 'LOG_FORMAT',
    'RUST_LOG', 'XDG_RUNTIME_DIR', 'XDG_', 'OPENCLAW_GATEWAY_PASSWORD', 'OPENCLAW_CONFIG_PATH', 'OPENCLAW_STATE_DIR',
    'OPENCLAW_GATEWAY_PORT', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'LD_PRELOAD', 'LD_LIBRARY_PATH', 'DYLD_INSERT_LIBRARIES'];
  const withEnv = (env) => forged('activate', (r) => { r.envelope.launchEnvironment = env; });
  for (const name of reserved) {
    refuses(withEnv({ [name]: 'opaque-x' }), new RegExp(`^envelope\\.launchEnvironment\\.${name}: the name is reserved`), `reserved ${name}`);
  }
  for (const [what, name] of [
    ['lowercase', 'lower'], ['mixed case', 'Iam_session'], ['a leading digit', '1X'], ['a dash', 'A-B'], ['an equals sign', 'A=B'],
    ['a space', 'A B'], ['a quote', 'A"'], ['a newline', 'A\nExecStartPre=+/bin/sh'], ['a trailing newline', 'A\n'],
    ['a dollar', 'A$'], ['empty', ''], ['too long', `A${'B'.repeat(128)}`], ['a prototype key', '__proto__'],
  ]) {
    refuses(withEnv({ [name]: 'opaque-x' }), /the name must match/, `name ${what}`);
  }
  for (const [what, value] of [
    ['not opaque', 'secret'], ['only the prefix', 'opaque-'], ['a space', 'opaque-a b'],
    ['a quote and a unit line', 'opaque-a"\nExecStartPre=+/bin/sh -c "id > /root/x"'], ['a quote', 'opaque-a"'],
    ['a newline', 'opaque-a\n'], ['a percent', 'opaque-%n'], ['a dollar', 'opaque-$HOME'], ['a backslash', 'opaque-a\\'],
    ['a slash', 'opaque-a/b'], ['a leading dot', 'opaque-.a'], ['too long', `opaque-a${'b'.repeat(128)}`],
    ['uppercase prefix', 'OPAQUE-a'], ['a number', 7], ['null', null], ['an object', { value: 'opaque-a' }],
  ]) {
    refuses(withEnv({ IAM_SESSION: value }), /^envelope\.launchEnvironment\.IAM_SESSION: the value must be an opaque reference/, `value ${what}`);
  }
  for (const [what, env] of [['an array', [['A', 'opaque-a']]], ['a string', 'A=opaque-a'], ['null', null]]) {
    refuses(withEnv(env), /envelope\.launchEnvironment must be/, `launchEnvironment ${what}`);
  }
  const many = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`P${i}`, `opaque-v${i}`]));
  refuses(withEnv(many(65)), /envelope\.launchEnvironment has 65 placeholders, more than 64/, '65 placeholders');
  assert.equal(parse(withEnv(many(64))).placeholders.length, 64);
  // At their longest, and with every character OCC allows.
  const name = `A${'B'.repeat(127)}`;
  const value = `opaque-a${'b'.repeat(127)}`;
  assert.deepEqual(parse(withEnv({ [name]: value, _X9: 'opaque-Z9._:-z' })).placeholders, [[name, value], ['_X9', 'opaque-Z9._:-z']]);
  // The helper's rules are OCC's.
  assert.equal(H.MAX_PLACEHOLDERS, 64);
  assert.equal(String(H.PLACEHOLDER_NAME), String(/^[A-Z_][A-Z0-9_]{0,127}$/));
  assert.equal(String(H.PLACEHOLDER_VALUE), String(/^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/));
});

test('the port range stays where unprivileged gateways bind, and runtime.user is never root', () => {
  for (const [range, why] of [
    [{ start: 1023, end: 2000 }, /gatewayPortRange\.start must be an integer in 1024\.\.65535/],
    [{ start: 22, end: 22 }, /gatewayPortRange\.start/],
    [{ start: 0, end: 0 }, /gatewayPortRange\.start/],
    [{ start: 18800, end: 18799 }, /gatewayPortRange\.end must be an integer in 18800\.\.65535/],
    [{ start: 18800, end: 65536 }, /gatewayPortRange\.end/],
    [{ start: 18800.5, end: 18900 }, /gatewayPortRange\.start/],
    [{ start: '18800', end: 18900 }, /gatewayPortRange\.start/],
    [{ start: 18800 }, /gatewayPortRange\.end/],
  ]) {
    refuses(forged('prepare', (r) => { r.envelope.gatewayPortRange = range; }), why, JSON.stringify(range));
  }
  parse(forged('prepare', (r) => { r.envelope.gatewayPortRange = { start: 1024, end: 1024 }; }));
  for (const user of ['root', 'Root', '', '1abc', 'a b', 'open\nclaw', 'openclaw;id', 'a:b', 'a/b', 'a$', 7, null, undefined]) {
    refuses(forged('prepare', (r) => { r.envelope.runtime.user = user; }), /^envelope\.runtime\.user must be a Linux user name/, JSON.stringify(user));
  }
});
