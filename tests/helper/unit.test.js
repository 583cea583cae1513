'use strict';
// The suite's unit text (unit.js) must be the guest's byte for byte: every gateway this
// suite runs under real systemd is then the gateway the driver would run. Renders the
// inputs of the guest's golden units (guest-ssh-driver/src/unit.rs tests, the spec's
// example configuration) and compares with the golden files.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { renderUnit, sandboxProperties, sha12 } = require('./unit.js');

const GOLDEN = path.resolve(__dirname, '..', '..', 'guest-ssh-driver', 'tests', 'golden');
const golden = (name) => fs.readFileSync(path.join(GOLDEN, name), 'utf8');

// testing::agent_ids() and testing::layout() of the guest, with the spec's example
// runtime (root /var/lib/openclaw-enterprise, user openclaw).
const base = {
  namespaceId: 'ns-1',
  agentId: 'agent-1',
  account: `openclaw-${sha12('ns-1:agent-1')}`,
  agentDir: `/var/lib/openclaw-enterprise/namespaces/${sha12('ns-1')}/agents/${sha12('agent-1')}`,
  nodePath: '/usr/bin/node',
  openclawPath: '/opt/openclaw/current/dist/index.js',
};
// The guest admits placeholders sorted by name.
const placeholders = [['IAM_SESSION', 'opaque-iam-7f3a'], ['SLACK_BOT_TOKEN', 'opaque-cfg:slack.bot']];

test('the suite renders the guest golden units byte for byte', () => {
  assert.equal(renderUnit({ ...base, port: 18800, needsPassword: true }), golden('unit-password.service'));
  assert.equal(renderUnit({ ...base, port: 18800, placeholders, needsPassword: false }),
    golden('unit-trusted-proxy-placeholders.service'));
  assert.equal(renderUnit({ ...base, port: 18805, placeholders, needsPassword: true }),
    golden('unit-activation.service'));
});

test('the sandbox properties are the confining [Service] lines of the unit', () => {
  const props = sandboxProperties(golden('unit-password.service'));
  assert.equal(props[0], 'NoNewPrivileges=true');
  assert.equal(props[props.length - 1], 'SocketBindAllow=tcp:18800');
  for (const line of ['PrivateTmp=true', 'ProtectProc=invisible', 'ProtectSystem=strict', 'CapabilityBoundingSet=']) {
    assert.ok(props.includes(line), line);
  }
  for (const prefix of ['ExecStart=', 'User=', 'Environment', 'Restart=']) {
    assert.ok(!props.some((p) => p.startsWith(prefix)), prefix);
  }
});
