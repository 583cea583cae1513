'use strict';
// Main: the helper's input read and checked, the operation run by its handler within
// the deadline, and one result line; `api` is what tests and the host read of it.

const fs = require('node:fs');

const {
  DEFAULT_DEADLINE_MS, DEFAULT_READINESS_MS, HEADER_FIRST_LINE, HEARTBEAT_MS, HelperError,
  MARKER_FORMAT, MAX_DEADLINE_MS, PERMANENT_CODES, PROTOCOL_VERSION, STARTED_AT, UNIT_PREFIX
} = require('./constants');
const { emit, remainingMs, session, stopWith, watchSession } = require('./session');
const { oneLine } = require('./children');
const { releaseLock, releaseLockOnExit } = require('./lock');
const { DISK_FULL, diskFullMessage } = require('./files');
const { SAFE_PATH, closedKeys, invalid, requireObject, sha256Hex } = require('./values');
const {
  MAX_PLACEHOLDERS, OPERATIONS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE, RESERVED_PLACEHOLDER,
  agentAccountName, parseEnvelope, parseOperation
} = require('./operation');
const { canonicalJson, renderSnapshot, renderUnit, unitHeader } = require('./render');
const {
  WORKSPACE_FILE_NAMES, WORKSPACE_SETUP_FAILED, WORKSPACE_SETUP_SOURCE, checkWorkspaceSetup
} = require('./workspace-setup');
const {
  opActivate, opDeactivate, opEnsureNamespace, opInspectAgent, opPrepare, opRetire,
  opStop
} = require('./operations');
const { opDeleteAgent, opDeleteNamespace } = require('./removal');
const { opProbe } = require('./probe');
const {
  cutLines, tailWithin, journalTime, opDescribeRuntime, opDiagnose, opReadLogs, systemdTime, termination
} = require('./runtime');
const { ofInvocation } = require('./journal');

const HANDLERS = {
  'probe': opProbe,
  'ensure-namespace': opEnsureNamespace,
  'prepare': opPrepare,
  'activate': opActivate,
  'deactivate': opDeactivate,
  'stop': opStop,
  'retire': opRetire,
  'delete-namespace': opDeleteNamespace,
  'inspect-agent': opInspectAgent,
  'delete-agent': opDeleteAgent,
  'describe-runtime': opDescribeRuntime,
  'read-logs': opReadLogs,
  'diagnose': opDiagnose,
};

function errorResult(error) {
  // Anything that is not a HelperError is an unexpected host failure (EACCES, EIO,
  // ...): retryable `io`. A signal stops the helper like a command failure would.
  if (!(error instanceof HelperError) && error && DISK_FULL.has(error.code)) {
    return {
      event: 'result',
      ok: false,
      error: { code: 'disk-full', message: oneLine(diskFullMessage(error)), permanent: false },
    };
  }
  const code = error instanceof HelperError ? (error.code === 'interrupted' ? 'command-failed' : error.code) : 'io';
  let message = error && error.message ? error.message : String(error);
  if (!(error instanceof HelperError) && error && error.code) message = `${error.code}: ${message}`;
  return {
    event: 'result',
    ok: false,
    error: { code, message: oneLine(message), permanent: PERMANENT_CODES.has(code) },
    ...(error && error.extra ? error.extra : {}),
  };
}

let heartbeat = null;

let deadlineTimer = null;

let backstop = null;

async function finish(result) {
  if (session.finished) return;
  session.finished = true;
  clearInterval(heartbeat);
  clearTimeout(deadlineTimer);
  clearTimeout(backstop);
  await releaseLock();
  const code = result.ok ? 0 : 1;
  if (session.closed) process.exit(code);
  try {
    process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(code));
  } catch {
    process.exit(code);
  }
}

// The helper's input, after its own text on stdin (the loader read that): one frame,
// a 4-byte big-endian length and that many bytes of JSON, `{"args": [<base64
// operation>, <base64 envelope>]}`, then the end of stdin. Read synchronously before
// anything else, so that the operation, the controller's document and the envelope
// never appear in an argument or the environment, where any account on the host could
// read them.
const MAX_INPUT_BYTES = 4 << 20;

function readStdinExact(n, what) {
  const buffer = Buffer.alloc(n);
  for (let got = 0; got < n;) {
    let read;
    try {
      read = fs.readSync(0, buffer, got, n - got, null);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      continue;
    }
    if (read === 0) throw invalid(`stdin ended inside ${what}`);
    got += read;
  }
  return buffer;
}

function readInput() {
  const size = readStdinExact(4, 'the input frame').readUInt32BE(0);
  if (size > MAX_INPUT_BYTES) throw invalid(`an input frame of ${size} bytes is over the bound of ${MAX_INPUT_BYTES}`);
  let input;
  try {
    input = JSON.parse(readStdinExact(size, 'the input frame').toString('utf8'));
  } catch (error) {
    if (error instanceof HelperError) throw error;
    throw invalid('the input frame is not JSON');
  }
  requireObject(input, 'input');
  closedKeys(input, ['args'], 'input');
  const { args } = input;
  if (!Array.isArray(args) || args.length !== 2 || !args.every((a) => typeof a === 'string')) {
    throw invalid('input.args must be [<base64 operation>, <base64 envelope>]');
  }
  return args;
}

async function main(helperSha256) {
  let op;
  try {
    const [operation, envelope] = readInput();
    // The title an operator sees in the process list names the run without its
    // content: a hash of both arguments.
    process.title = `occ-ssh-helper ${sha256Hex(`${operation} ${envelope}`).slice(0, 12)}`;
    op = parseOperation(operation, envelope);
    // The markers this run writes name the helper that wrote them.
    op.helperSha256 = helperSha256;
  } catch (error) {
    await finish(errorResult(error));
    return;
  }
  session.deadlineAt = STARTED_AT + (op.deadlineMs || DEFAULT_DEADLINE_MS);
  heartbeat = setInterval(() => emit({ event: 'heartbeat', elapsedMs: Date.now() - STARTED_AT }), HEARTBEAT_MS);
  deadlineTimer = setTimeout(() => stopWith(new HelperError('deadline', 'the helper deadline passed')),
    Math.max(0, remainingMs()));
  // Should a step ignore the stop (a command past its own timeout), still report and
  // exit before the transport's bound.
  backstop = setTimeout(() => finish(errorResult(new HelperError('deadline', 'the helper deadline passed'))),
    Math.max(0, remainingMs() + 3000));
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => stopWith(new HelperError('interrupted', `received ${signal}`)));
  }
  try {
    const result = await HANDLERS[op.op](op);
    await finish({ event: 'result', ok: true, ...result });
  } catch (error) {
    await finish(errorResult(error));
  }
}

// Run the helper: what the loader does with the shipped program. `helperSha256` is
// the SHA-256 the loader took of this program's text (null from a loader that took
// none): the hash the operator approved, which every marker written names.
function run(helperSha256) {
  watchSession();
  releaseLockOnExit();
  process.on('uncaughtException', (error) => finish(errorResult(error)));
  process.on('unhandledRejection', (error) => finish(errorResult(error)));
  main(typeof helperSha256 === 'string' && /^[0-9a-f]{64}$/.test(helperSha256) ? helperSha256 : null);
}

// What the tests and the host read of the helper: its tables and pure functions.
const api = {
  PROTOCOL_VERSION, MARKER_FORMAT, OPERATIONS, PERMANENT_CODES, HEADER_FIRST_LINE, UNIT_PREFIX, SAFE_PATH,
  DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, DEFAULT_READINESS_MS, PLACEHOLDER_NAME, PLACEHOLDER_VALUE,
  RESERVED_PLACEHOLDER, MAX_PLACEHOLDERS, HelperError, parseEnvelope, parseOperation,
  renderSnapshot, renderUnit, canonicalJson, agentAccountName, unitHeader, WORKSPACE_FILE_NAMES,
  WORKSPACE_SETUP_SOURCE, WORKSPACE_SETUP_FAILED, checkWorkspaceSetup, cutLines, tailWithin, termination,
  systemdTime, journalTime, ofInvocation,
};

module.exports = { run, api };
