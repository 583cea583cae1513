'use strict';
// The operation and its envelope: the driver's operation (its policy alone) and the
// host's envelope (the trusted settings and the call's subjects), parsed and checked
// closed; the table of operations and the fields each may carry.

const path = require('node:path');

const { MAX_DEADLINE_MS, PROTOCOL_VERSION, UNIT_PREFIX } = require('./constants');
const { run } = require('./children');
const { SAFE_PATH, closedKeys, invalid, requireObject, sha12, sha256Hex } = require('./values');
const { renderSnapshot } = require('./render');
const { checkWorkspaceSetup } = require('./workspace-setup');

const CONTROL = /[\x00-\x1f\x7f]/;

function requireId(value, name) {
  // Ids go into the unit header lines: a newline would forge another header line.
  if (typeof value !== 'string' || value.length === 0 || value.length > 512 || CONTROL.test(value)) {
    throw invalid(`${name} must be a non-empty string without control characters`);
  }
  return value;
}

function requirePath(value, name) {
  if (typeof value !== 'string' || !SAFE_PATH.test(value) || path.posix.normalize(value) !== value ||
      value === '/' || value.endsWith('/')) {
    throw invalid(`${name} must be a normalized absolute path without special characters`);
  }
  return value;
}

function requireInt(value, name, min, max) {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw invalid(`${name} must be an integer in ${min}..${max}`);
  return value;
}

function requireHash(value, expected, name) {
  if (value !== expected) throw invalid(`${name} is ${JSON.stringify(value)}, expected ${expected}`);
}

// Each operation: whether it acts for an Agent (the envelope must name one) and for
// a revision, and the fields the operation itself may carry besides version, op and
// deadlineMs. Those are the component's policy; everything the helper acts on beyond
// them comes from the envelope the host wrote.
const OPERATIONS = {
  'probe': { namespace: false, agent: false, revision: false, fields: [] },
  'ensure-namespace': { namespace: true, agent: false, revision: false, fields: [] },
  'prepare': { namespace: true, agent: true, revision: true, fields: ['configuration'] },
  'activate': { namespace: true, agent: true, revision: true, fields: [] },
  'deactivate': { namespace: true, agent: true, revision: true, fields: [] },
  'stop': { namespace: true, agent: true, revision: true, fields: [] },
  'retire': { namespace: true, agent: true, revision: true, fields: [] },
  'delete-namespace': { namespace: true, agent: false, revision: false, fields: [] },
  'inspect-agent': { namespace: true, agent: true, revision: false, fields: [] },
  'delete-agent': { namespace: true, agent: true, revision: false, fields: [] },
  'describe-runtime': { namespace: true, agent: true, revision: true, fields: [] },
  'read-logs': { namespace: true, agent: true, revision: true, fields: [] },
  'diagnose': { namespace: true, agent: true, revision: true, fields: [] },
};

const COMMON_FIELDS = ['version', 'op', 'deadlineMs'];

const ENVELOPE_FIELDS = [
  'version', 'method', 'ops', 'host', 'driver', 'runtime', 'gatewayPortRange', 'namespace', 'agent',
  'revision', 'launchEnvironment', 'workspaceSetup', 'events', 'logRequest', 'maxSessions', 'harnessVersion',
];

// The controller's bounds on one log read (OCC asks 1 MiB and at most 1000 lines).
const MAX_LOG_BYTES = 4 << 20;
const MAX_LOG_LINES = 1000;
const MAX_SINCE_SECONDS = 366 * 86400;
const INVOCATION_ID = /^[0-9a-f]{32}$/;

const MIN_GATEWAY_PORT = 1024;

// A runtime user prefix: of a Linux user name's characters, never root; accounts take
// its first 19 characters (the spec's rule), so it may be longer than a user name.
const RUNTIME_USER = /^[a-z_][a-z0-9_-]{0,254}$/;

const ACCOUNT_PREFIX_LENGTH = 19;

// OCC's rules for the placeholders beforeWorkloadStart may return
// (apps/controller/src/drivers/compute/ssh/remote-helper.cjs): the host checks the
// same before the driver sees them; tests/helper/envelope.test.js holds both to one table.
const PLACEHOLDER_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;

const PLACEHOLDER_VALUE = /^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const RESERVED_PLACEHOLDER = /^(?:HOME|PATH|TMPDIR|CODEX_HOME|NODE_OPTIONS|NODE_PATH|BASH_ENV|ENV|LOG_FORMAT|RUST_LOG|XDG_.*|OPENCLAW_.*|OTEL_.*|LD_.*|DYLD_.*)$/;

const MAX_PLACEHOLDERS = 64;

function decodeJson(argument, what) {
  if (typeof argument !== 'string' || argument.length === 0) throw invalid(`missing base64 ${what} argument`);
  let value;
  try {
    value = JSON.parse(Buffer.from(argument, 'base64').toString('utf8'));
  } catch {
    throw invalid(`the ${what} argument is not base64 JSON`);
  }
  return requireObject(value, what);
}

function requireString(value, name) {
  if (typeof value !== 'string') throw invalid(`${name} must be a string`);
  return value;
}

function launchEnvironment(value) {
  const env = requireObject(value, 'envelope.launchEnvironment');
  if (Object.getPrototypeOf(env) !== Object.prototype) throw invalid('envelope.launchEnvironment must be a plain object');
  const names = Object.keys(env).sort();
  if (names.length > MAX_PLACEHOLDERS) {
    throw invalid(`envelope.launchEnvironment has ${names.length} placeholders, more than ${MAX_PLACEHOLDERS}`);
  }
  for (const name of names) {
    if (!PLACEHOLDER_NAME.test(name)) throw invalid(`envelope.launchEnvironment.${name}: the name must match ${PLACEHOLDER_NAME}`);
    if (RESERVED_PLACEHOLDER.test(name)) throw invalid(`envelope.launchEnvironment.${name}: the name is reserved`);
    if (typeof env[name] !== 'string' || !PLACEHOLDER_VALUE.test(env[name])) {
      throw invalid(`envelope.launchEnvironment.${name}: the value must be an opaque reference matching ${PLACEHOLDER_VALUE}`);
    }
  }
  return names.map((name) => [name, env[name]]);
}

// The envelope: what the host took from the trusted installation and from the call the
// controller made. Every value here is checked as an operator setting or an ID is, but
// none of it is the component's to choose.
function parseEnvelope(argument) {
  const env = decodeJson(argument, 'envelope');
  closedKeys(env, ENVELOPE_FIELDS, 'envelope');
  if (env.version !== PROTOCOL_VERSION) throw invalid(`unsupported envelope version ${JSON.stringify(env.version)}`);
  requireId(env.method, 'envelope.method');
  if (!Array.isArray(env.ops) || env.ops.some((op) => !Object.hasOwn(OPERATIONS, op))) {
    throw invalid('envelope.ops must list helper operations');
  }
  requireId(env.host, 'envelope.host');
  const driver = requireObject(env.driver, 'envelope.driver');
  closedKeys(driver, ['id', 'implementation'], 'envelope.driver');
  requireId(driver.id, 'envelope.driver.id');
  requireId(driver.implementation, 'envelope.driver.implementation');
  const runtime = requireObject(env.runtime, 'envelope.runtime');
  closedKeys(runtime, ['root', 'unitDirectory', 'nodePath', 'openclawPath', 'user'], 'envelope.runtime');
  for (const key of ['root', 'unitDirectory', 'nodePath', 'openclawPath']) requirePath(runtime[key], `envelope.runtime.${key}`);
  if (typeof runtime.user !== 'string' || !RUNTIME_USER.test(runtime.user) || runtime.user === 'root') {
    throw invalid('envelope.runtime.user must be a Linux user name prefix other than root');
  }
  const range = requireObject(env.gatewayPortRange, 'envelope.gatewayPortRange');
  closedKeys(range, ['start', 'end'], 'envelope.gatewayPortRange');
  requireInt(range.start, 'envelope.gatewayPortRange.start', MIN_GATEWAY_PORT, 65535);
  requireInt(range.end, 'envelope.gatewayPortRange.end', range.start, 65535);
  if (env.namespace !== undefined) {
    const ns = requireObject(env.namespace, 'envelope.namespace');
    closedKeys(ns, ['id', 'name'], 'envelope.namespace');
    requireId(ns.id, 'envelope.namespace.id');
    requireId(ns.name, 'envelope.namespace.name');
  }
  if (env.agent !== undefined) {
    const agent = requireObject(env.agent, 'envelope.agent');
    closedKeys(agent, ['id', 'servicePrincipalId'], 'envelope.agent');
    requireId(agent.id, 'envelope.agent.id');
    requireId(agent.servicePrincipalId, 'envelope.agent.servicePrincipalId');
  }
  if (env.revision !== undefined) {
    const revision = requireObject(env.revision, 'envelope.revision');
    closedKeys(revision, ['id', 'number', 'harness', 'configurationSha256'], 'envelope.revision');
    requireId(revision.id, 'envelope.revision.id');
    requireInt(revision.number, 'envelope.revision.number', 1, Number.MAX_SAFE_INTEGER);
    requireId(revision.harness, 'envelope.revision.harness');
    if (typeof revision.configurationSha256 !== 'string' || !/^[0-9a-f]{64}$/.test(revision.configurationSha256)) {
      throw invalid('envelope.revision.configurationSha256 must be 64 lowercase hex characters');
    }
  }
  const placeholders = env.launchEnvironment === undefined ? undefined : launchEnvironment(env.launchEnvironment);
  const workspaceSetup = env.workspaceSetup === undefined ? undefined : checkWorkspaceSetup(env.workspaceSetup, 'envelope.workspaceSetup');
  if (env.events !== undefined && typeof env.events !== 'boolean') throw invalid('envelope.events must be a boolean');
  if (env.maxSessions !== undefined) requireInt(env.maxSessions, 'envelope.maxSessions', 1, 64);
  if (env.harnessVersion !== undefined) requireId(env.harnessVersion, 'envelope.harnessVersion');
  const logRequest = env.logRequest === undefined ? undefined : checkLogRequest(env.logRequest);
  return { env, placeholders, workspaceSetup, logRequest };
}

// OCC's AgentRuntimeLogRequest as the host wrote it for this call: which unit and
// invocation, and the bounds of the read.
function checkLogRequest(value) {
  const request = requireObject(value, 'envelope.logRequest');
  closedKeys(request, ['pod', 'podUid', 'previous', 'tailLines', 'sinceSeconds', 'limitBytes'], 'envelope.logRequest');
  requireId(request.pod, 'envelope.logRequest.pod');
  if (typeof request.podUid !== 'string' || !INVOCATION_ID.test(request.podUid)) {
    throw invalid('envelope.logRequest.podUid must be a systemd invocation id (32 lowercase hex characters)');
  }
  if (typeof request.previous !== 'boolean') throw invalid('envelope.logRequest.previous must be a boolean');
  requireInt(request.tailLines, 'envelope.logRequest.tailLines', 1, MAX_LOG_LINES);
  if (request.sinceSeconds !== undefined) requireInt(request.sinceSeconds, 'envelope.logRequest.sinceSeconds', 1, MAX_SINCE_SECONDS);
  requireInt(request.limitBytes, 'envelope.logRequest.limitBytes', 1, MAX_LOG_BYTES);
  return { ...request };
}

// The operation the component sent, checked against the envelope, merged with it into
// the one object every operation below reads. The component chooses only which
// operation runs (among those the envelope lists), deadlineMs and the fields of
// OPERATIONS[op].fields.
function parseOperation(argument, envelopeArgument) {
  const { env, placeholders, workspaceSetup, logRequest } = parseEnvelope(envelopeArgument);
  const sent = decodeJson(argument, 'operation');
  if (sent.version !== PROTOCOL_VERSION) throw invalid(`unsupported protocol version ${JSON.stringify(sent.version)}`);
  const shape = Object.hasOwn(OPERATIONS, sent.op) ? OPERATIONS[sent.op] : null;
  if (!shape) throw invalid(`unknown op ${JSON.stringify(sent.op)}`);
  if (!env.ops.includes(sent.op)) {
    throw invalid(`op ${sent.op} is not one ${env.method} may run (it may run: ${env.ops.join(', ') || 'nothing'})`);
  }
  closedKeys(sent, [...COMMON_FIELDS, ...shape.fields], 'operation');
  if (sent.deadlineMs !== undefined) requireInt(sent.deadlineMs, 'operation.deadlineMs', 1000, MAX_DEADLINE_MS);
  for (const part of ['namespace', 'agent', 'revision']) {
    if (shape[part] && env[part] === undefined) throw invalid(`${sent.op} needs envelope.${part}`);
  }
  const op = {
    op: sent.op,
    method: env.method,
    host: env.host,
    deadlineMs: sent.deadlineMs,
    driver: { ...env.driver },
    root: env.runtime.root,
    unitDirectory: env.runtime.unitDirectory,
    nodePath: env.runtime.nodePath,
    openclawPath: env.runtime.openclawPath,
    runtimeUser: env.runtime.user,
    portRange: { ...env.gatewayPortRange },
  };
  if (shape.namespace) op.namespace = { id: env.namespace.id, name: env.namespace.name, hash: sha12(env.namespace.id) };
  if (shape.agent) {
    const hash = sha12(env.agent.id);
    op.agent = {
      id: env.agent.id,
      hash,
      servicePrincipalId: env.agent.servicePrincipalId,
      account: agentAccountName(env.runtime.user, env.namespace.id, env.agent.id),
      unitName: `${UNIT_PREFIX}${hash}.service`,
    };
  }
  if (shape.revision) {
    op.revision = {
      id: env.revision.id,
      hash: sha12(env.revision.id),
      number: env.revision.number,
      harness: env.revision.harness,
      configurationSha256: env.revision.configurationSha256,
    };
  }
  if (sent.op === 'prepare') {
    // The controller's document, by the hash the host took of it: a component cannot
    // have the helper write another.
    const configuration = requireString(sent.configuration, 'configuration');
    if (sha256Hex(configuration) !== op.revision.configurationSha256) {
      throw invalid('configuration is not the controller\'s revision.configuration (its SHA-256 differs from envelope.revision.configurationSha256)');
    }
    if (op.revision.harness !== 'openclaw/embedded') {
      throw invalid(`envelope.revision.harness is ${op.revision.harness}; SSH Compute prepares only openclaw/embedded`);
    }
    op.snapshot = renderSnapshot(configuration);
  }
  if (sent.op === 'activate') {
    if (placeholders === undefined) throw invalid('activate needs envelope.launchEnvironment (what beforeWorkloadStart returned)');
    op.placeholders = placeholders;
  }
  if (sent.op === 'read-logs') {
    if (logRequest === undefined) throw invalid('read-logs needs envelope.logRequest (the controller\'s request)');
    op.logRequest = logRequest;
  } else if (logRequest !== undefined) {
    throw invalid(`envelope.logRequest: ${sent.op} reads no log`);
  }
  if (sent.op === 'describe-runtime') op.events = env.events !== false;
  if (sent.op === 'probe') op.maxSessions = env.maxSessions;
  if (sent.op === 'diagnose') op.harnessVersion = env.harnessVersion;
  if (workspaceSetup !== undefined) {
    // The controller's setup of this call's Agent, delivered by prepare and activate.
    if (sent.op !== 'prepare' && sent.op !== 'activate') throw invalid(`envelope.workspaceSetup: ${sent.op} delivers no workspace setup`);
    if (workspaceSetup.namespaceId !== op.namespace.id || workspaceSetup.agentId !== op.agent.id) {
      throw invalid(`envelope.workspaceSetup belongs to another Agent, not to Agent ${op.agent.id} of Namespace ${op.namespace.id}`);
    }
    op.workspaceSetup = workspaceSetup;
  }
  return op;
}

function agentAccountName(runtimeUser, namespaceId, agentId) {
  return `${runtimeUser.slice(0, ACCOUNT_PREFIX_LENGTH)}-${sha12(`${namespaceId}:${agentId}`)}`;
}

module.exports = {
  OPERATIONS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE, RESERVED_PLACEHOLDER, MAX_PLACEHOLDERS,
  parseEnvelope, parseOperation, agentAccountName,
};
