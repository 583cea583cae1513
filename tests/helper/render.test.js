'use strict';
// What the helper renders on a host, against the golden files: the unit (renderUnit)
// and the native configuration snapshot (renderSnapshot). The rig suite expects the
// helper's own renderings on the host, so these pin them byte for byte. Pure: no rig,
// no ssh (`node --test tests/helper/render.test.js`, Node 20 or later).

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const H = require(process.env.OCC_HELPER_PATH || path.resolve(__dirname, '..', '..', 'helper', 'helper.js'));

const GOLDEN = path.join(__dirname, 'golden');
const golden = (name) => fs.readFileSync(path.join(GOLDEN, name), 'utf8');
const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const sha12 = (text) => sha256(text).slice(0, 12);

// The spec's example runtime (root /var/lib/openclaw-enterprise, user openclaw) and the
// Agent agent-1 of Namespace ns-1.
const base = {
  namespaceId: 'ns-1',
  agentId: 'agent-1',
  account: `openclaw-${sha12('ns-1:agent-1')}`,
  agentDir: `/var/lib/openclaw-enterprise/namespaces/${sha12('ns-1')}/agents/${sha12('agent-1')}`,
  nodePath: '/usr/bin/node',
  openclawPath: '/opt/openclaw/current/dist/index.js',
};
// As the envelope's launchEnvironment gives them to renderUnit: sorted by name.
const placeholders = [['IAM_SESSION', 'opaque-iam-7f3a'], ['SLACK_BOT_TOKEN', 'opaque-cfg:slack.bot']];

const UNITS = [
  ['unit-password.service', { ...base, port: 18800, placeholders: [], needsPassword: true }],
  ['unit-trusted-proxy-placeholders.service', { ...base, port: 18800, placeholders, needsPassword: false }],
  ['unit-activation.service', { ...base, port: 18805, placeholders, needsPassword: true }],
];

test('renderUnit renders the golden units byte for byte', () => {
  for (const [name, spec] of UNITS) assert.equal(H.renderUnit(spec), golden(name), name);
});

test('the account of the golden units is the one agentAccountName derives', () => {
  assert.equal(H.agentAccountName('openclaw', 'ns-1', 'agent-1'), base.account);
});

// The [Service] section of a unit text, as lines.
const serviceLines = (text) => text.split('\n[Service]\n')[1].split('\n\n')[0].split('\n');

test('each unit keeps every spec directive exactly once in [Service], with the hardening', () => {
  const once = [
    'Restart=always', 'RestartSec=2', 'KillSignal=SIGTERM', 'TimeoutStopSec=30', 'NoNewPrivileges=true',
    'PrivateTmp=true', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateDevices=yes',
    'TemporaryFileSystem=/dev/shm:mode=1777', 'PrivateIPC=yes', 'RemoveIPC=yes', 'ProtectProc=invisible',
    'ProtectKernelTunables=yes', 'ProtectKernelModules=yes', 'ProtectKernelLogs=yes', 'ProtectControlGroups=yes',
    'ProtectClock=yes', 'ProtectHostname=yes', 'RestrictSUIDSGID=yes', 'RestrictRealtime=yes',
    'RestrictNamespaces=yes', 'LockPersonality=yes', 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'SystemCallArchitectures=native', 'SystemCallFilter=@system-service', 'SystemCallErrorNumber=EPERM',
    'CapabilityBoundingSet=', 'UMask=0077', 'SocketBindDeny=any',
  ];
  for (const [name, spec] of UNITS) {
    const text = H.renderUnit(spec);
    const service = serviceLines(text);
    const home = `${spec.agentDir}/home`;
    const state = `${spec.agentDir}/state`;
    for (const line of [...once, `SocketBindAllow=tcp:${spec.port}`, `User=${spec.account}`, `Group=${spec.account}`,
      `WorkingDirectory=${home}`, `ExecStart=${spec.nodePath} ${spec.openclawPath} gateway --port ${spec.port}`]) {
      assert.equal(service.filter((l) => l === line).length, 1, `${name}: ${line}`);
    }
    // Each directive key once, but Environment= and EnvironmentFile= (one per variable).
    const keys = service.map((l) => l.slice(0, l.indexOf('=')));
    for (const key of new Set(keys)) {
      if (key === 'Environment' || key === 'EnvironmentFile') continue;
      assert.equal(keys.filter((k) => k === key).length, 1, `${name}: ${key}= once`);
    }
    // Only the Agent's home and state are writable.
    assert.deepEqual(service.filter((l) => l.startsWith('ReadWritePaths=')), [`ReadWritePaths=${home} ${state}`], name);
    assert.ok(!text.includes('OPENCLAW_LOG_LEVEL'), `${name}: no OPENCLAW_LOG_LEVEL`);
    assert.ok(!text.includes('MemoryDenyWriteExecute'), `${name}: no MemoryDenyWriteExecute (the gateway's JIT needs W^X off)`);
    assert.ok(text.startsWith(H.unitHeader(spec.namespaceId, spec.agentId)), `${name}: begins with the ownership header`);
    assert.ok(text.startsWith(`${H.HEADER_FIRST_LINE}\n`), name);
    // Every Environment= line quoted whole, one variable each.
    for (const line of service.filter((l) => l.startsWith('Environment='))) {
      assert.match(line, /^Environment="[A-Z_][A-Z0-9_]*=[^"%$\\\n]*"$/, line);
    }
    assert.equal(service.filter((l) => l === `EnvironmentFile=-${spec.agentDir}/env`).length, 1, name);
    assert.equal(service.filter((l) => l === `EnvironmentFile=${spec.agentDir}/gateway-password.env`).length,
      spec.needsPassword ? 1 : 0, `${name}: the password file exactly when the snapshot reads it`);
    for (const [key, value] of spec.placeholders) {
      assert.equal(service.filter((l) => l === `Environment="${key}=${value}"`).length, 1, `${name}: ${key}`);
    }
  }
});

test('the sandbox of the unit is the spec\'s hardening, in [Service] from NoNewPrivileges= on', () => {
  const service = serviceLines(golden('unit-password.service'));
  const sandbox = service.slice(service.indexOf('NoNewPrivileges=true'));
  assert.equal(sandbox[sandbox.length - 1], 'SocketBindAllow=tcp:18800');
  for (const prefix of ['ExecStart=', 'User=', 'Group=', 'Environment', 'Restart=', 'WorkingDirectory=']) {
    assert.ok(!sandbox.some((p) => p.startsWith(prefix)), prefix);
  }
});

// The guest's example revision configuration (guest-ssh-driver testing::revision()),
// from which snapshot-password.json was made.
const EXAMPLE_CONFIGURATION = '{"gateway":{"mode":"local","auth":{"mode":"password"}},"agents":{"defaults":{"model":"anthropic/claude"}}}';
const TRUSTED_PROXY_CONFIGURATION = '{"gateway":{"mode":"local","bind":"loopback","auth":{"mode":"trusted-proxy","trustedProxy":{"userHeader":"x-forwarded-user"}}}}';

test('renderSnapshot renders the golden snapshots byte for byte', () => {
  const password = H.renderSnapshot(EXAMPLE_CONFIGURATION);
  assert.equal(password.text, golden('snapshot-password.json'));
  assert.equal(password.needsPassword, true);
  assert.equal(password.sha256, sha256(golden('snapshot-password.json')));
  // The hashes the guest recorded for these files before they moved here.
  assert.equal(password.sha256, '240a1a15660c4a8f3e2c8789f5a6506a0dbad1ccc94db1cc82705d1fef723831');

  const proxy = H.renderSnapshot(TRUSTED_PROXY_CONFIGURATION);
  assert.equal(proxy.text, golden('snapshot-trusted-proxy.json'));
  assert.equal(proxy.needsPassword, false, 'trusted-proxy is kept as written: no password');
  assert.equal(proxy.sha256, 'bcde83748799c7c1d94ceb2027c7524976084aac2244931ec66e78e81808b277');
});

test('an omitted gateway.auth.mode is password mode with the managed SecretRef', () => {
  // {"gateway":{"mode":"local"}}: the golden password snapshot without the example's
  // agents section.
  const expected = JSON.parse(golden('snapshot-password.json'));
  delete expected.agents;
  for (const text of ['{"gateway":{"mode":"local"}}', '{"gateway":{"mode":"local","auth":{}}}',
    '{"gateway":{"mode":"local","auth":{"mode":"password"}}}',
    '{"gateway":{"mode":"local","auth":{"mode":"password","password":{"id":"OPENCLAW_GATEWAY_PASSWORD","source":"env","provider":"default"}}}}']) {
    const rendered = H.renderSnapshot(text);
    assert.equal(rendered.text, H.canonicalJson(expected), text);
    assert.equal(rendered.needsPassword, true, text);
  }
  // No gateway at all: the same managed password.
  assert.equal(H.renderSnapshot('{}').text, H.canonicalJson({ gateway: { auth: expected.gateway.auth } }));
  // A trusted-proxy document that names the managed SecretRef keeps it (and reads it).
  const withRef = H.renderSnapshot('{"gateway":{"auth":{"mode":"trusted-proxy","password":{"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}');
  assert.equal(withRef.needsPassword, true);
  assert.equal(JSON.parse(withRef.text).gateway.auth.mode, 'trusted-proxy');
});

test('the password expression OCC accepts beside the SecretRef is the managed password too', () => {
  const expression = '${OPENCLAW_GATEWAY_PASSWORD}';
  const password = H.renderSnapshot(JSON.stringify({ gateway: { mode: 'local', auth: { mode: 'password', password: expression } } }));
  assert.equal(password.text, H.renderSnapshot('{"gateway":{"mode":"local"}}').text, 'written as the SecretRef');
  assert.equal(password.needsPassword, true);
  // trusted-proxy keeps the document as written, expression included, and reads the file.
  const proxy = H.renderSnapshot(JSON.stringify({ gateway: { auth: { mode: 'trusted-proxy', password: expression } } }));
  assert.equal(JSON.parse(proxy.text).gateway.auth.password, expression);
  assert.equal(proxy.needsPassword, true);
  for (const other of ['${SLACK_BOT_TOKEN}', '$OPENCLAW_GATEWAY_PASSWORD', '${OPENCLAW_GATEWAY_PASSWORD} ', '${ OPENCLAW_GATEWAY_PASSWORD}']) {
    assert.throws(() => H.renderSnapshot(JSON.stringify({ gateway: { auth: { mode: 'password', password: other } } })),
      /gateway\.auth\.password must be the managed SecretRef/, other);
  }
});

test('renderSnapshot refuses every other gateway authentication', () => {
  for (const [text, why] of [
    ['{"gateway":{"auth":{"mode":"none"}}}', /gateway\.auth\.mode "none"/],
    ['{"gateway":{"auth":{"mode":"token","token":"t"}}}', /gateway\.auth\.mode "token"/],
    ['{"gateway":{"auth":{"mode":""}}}', /gateway\.auth\.mode ""/],
    ['{"gateway":{"auth":{"mode":null}}}', /gateway\.auth\.mode null/],
    ['{"gateway":{"auth":{"mode":"password","password":"hunter2"}}}', /gateway\.auth\.password must be the managed SecretRef/],
    ['{"gateway":{"bind":"lan","auth":{"password":{"source":"env","provider":"default","id":"OTHER"}}}}', /gateway\.auth\.password/],
    ['{"gateway":{"auth":{"mode":"trusted-proxy","password":{"source":"file","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}', /gateway\.auth\.password/],
    ['{"gateway":{"auth":{"password":{"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD","extra":1}}}}', /gateway\.auth\.password/],
    ['{"gateway":{"auth":"none"}}', /gateway\.auth must be an object/],
    ['{"gateway":[]}', /gateway must be an object/],
    ['[]', /must be a JSON object/],
    ['not json', /not JSON/],
  ]) {
    assert.throws(() => H.renderSnapshot(text), (error) => {
      assert.equal(error.code, 'invalid-operation', text);
      assert.match(error.message, why, text);
      return true;
    }, text);
  }
});

test('canonicalJson: keys sorted, two-space indent, a trailing newline; input order does not matter', () => {
  for (const [value, expected] of [
    [{}, '{}\n'],
    [[], '[]\n'],
    ['x', '"x"\n'],
    [{ b: 1, a: [true, null, {}], c: { z: [], y: 'é"\n' } },
      '{\n  "a": [\n    true,\n    null,\n    {}\n  ],\n  "b": 1,\n  "c": {\n    "y": "é\\"\\n",\n    "z": []\n  }\n}\n'],
    // Uppercase before lowercase.
    [{ b: 0, B: 0, a: 0 }, '{\n  "B": 0,\n  "a": 0,\n  "b": 0\n}\n'],
    [{ n: 1.5, m: -3 }, '{\n  "m": -3,\n  "n": 1.5\n}\n'],
  ]) {
    assert.equal(H.canonicalJson(value), expected);
  }
  assert.equal(H.renderSnapshot('{"x":{"b":1,"a":2},"w":[1,2]}').text, H.renderSnapshot('{"w":[1,2],"x":{"a":2,"b":1}}').text);
  // printf '{\n  "gateway": {\n    "mode": "local"\n  }\n}\n' | sha256sum
  assert.equal(sha256(H.canonicalJson({ gateway: { mode: 'local' } })),
    '0f966f47bcb2b3fee7fc55c31626acc772d4442a4969fc2a87d4dd2c608a36e2');
});

// The snapshot is the controller's document: no value of it may change on the way. A
// double cannot hold an integer beyond 2^53 or a number beyond its range, so the helper
// keeps each number's source text (Node.js 24, the hosts') or, where JSON.parse cannot
// give it, refuses the document.
test('renderSnapshot keeps every number of the document as the controller wrote it', () => {
  for (const number of ['18446744073709551615', '-9223372036854775808', '9007199254740993', '1e400']) {
    // Either written as it came, or refused: never another value.
    let rendered;
    try {
      rendered = H.renderSnapshot(`{"gateway":{"mode":"local"},"x":{"n":${number}}}`);
    } catch (error) {
      assert.equal(error.code, 'invalid-operation', number);
      continue;
    }
    assert.match(rendered.text, new RegExp(`"n": ${number}\n`), number);
  }
});
