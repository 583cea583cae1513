'use strict';
// The helper's constants: protocol version, bounds and timings, the unit and marker
// names, the error codes that are permanent, and HelperError, the one error a step
// throws with its code. Module of helper/helper.js (helper/build.js assembles it).

const STARTED_AT = Date.now();

const PROTOCOL_VERSION = 2;

// The format of the markers this helper writes. 1: those of the first releases, which
// carried no format (the helper of 0.2.0 and before); 2: each marker names its format
// and who wrote it (\`writtenBy\`). A helper reads every format up to its own and
// refuses, changing nothing, a newer one (helper/README.md, "Markers across releases").
const MARKER_FORMAT = 2;

// The transport kills an operation at 180 s; stopping at 170 s leaves time to report.
const DEFAULT_DEADLINE_MS = 170000;

const MAX_DEADLINE_MS = 175000;

const LOCK_WAIT_SECONDS = 30;

const DEFAULT_READINESS_MS = 120000;

const HEARTBEAT_MS = 1000;

const NODE_MAJOR = 24;

const TRAVERSE_ONLY = 0o711;

const READY_POLL_MS = 500;

const READY_REQUEST_MS = 2000;

// A restart queued with --no-block: how long it may take to run (systemctl's own
// bound when it waits), and how often the queue is looked at meanwhile.
const RESTART_JOB_MS = 90000;

const RESTART_POLL_MS = 50;

// Conflict exit code for flock: distinguishes "waited 30 s" from any other failure.
const FLOCK_TIMEOUT_EXIT = 75;

const TEMP_PREFIX = '.occ-tmp-';

const SAFE_PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const UNIT_PREFIX = 'openclaw-enterprise-gateway-';

const HEADER_FIRST_LINE = '# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.';

const ROOT_UID = typeof process.getuid === 'function' ? process.getuid() : 0;

const ROOT_GID = typeof process.getgid === 'function' ? process.getgid() : 0;

const PERMANENT_CODES = new Set([
  'foreign-marker', 'changed-snapshot', 'unexpected-symlink', 'foreign-unit',
  'foreign-account', 'invalid-operation', 'missing-namespace', 'missing-revision',
  'no-free-port', 'probe-failed', 'superseded', 'revision-conflict', 'newer-format',
]);

class HelperError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

module.exports = {
  STARTED_AT, PROTOCOL_VERSION, MARKER_FORMAT, DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, LOCK_WAIT_SECONDS,
  DEFAULT_READINESS_MS, HEARTBEAT_MS, NODE_MAJOR, TRAVERSE_ONLY, READY_POLL_MS, READY_REQUEST_MS,
  RESTART_JOB_MS, RESTART_POLL_MS, FLOCK_TIMEOUT_EXIT, TEMP_PREFIX, SAFE_PATH_ENV, UNIT_PREFIX,
  HEADER_FIRST_LINE, ROOT_UID, ROOT_GID, PERMANENT_CODES, HelperError,
};
