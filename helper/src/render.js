'use strict';
// What the helper renders: the native configuration snapshot, the unit and its
// managed header.

const { HEADER_FIRST_LINE, HelperError } = require('./constants');
const { invalid, isPlainObject, sha12, sha256Hex } = require('./values');

function unitHeader(namespaceId, agentId) {
  return `${HEADER_FIRST_LINE}\n# OCC-Namespace: ${namespaceId}\n# OCC-Agent: ${agentId}\n`;
}

const GATEWAY_PASSWORD_ENV = 'OPENCLAW_GATEWAY_PASSWORD';

const GATEWAY_PASSWORD_REF = Object.freeze({ source: 'env', provider: 'default', id: GATEWAY_PASSWORD_ENV });

// The expression form OCC accepts beside the SecretRef.
const GATEWAY_PASSWORD_EXPRESSION = `\${${GATEWAY_PASSWORD_ENV}}`;

// A number of the controller's document, kept as the text it was written in: a
// double would change what does not fit one (18446744073709551615, 1e400).
class SourceNumber {
  constructor(source) {
    this.source = source;
  }
}

// The controller's document, its numbers as written. JSON.parse gives a reviver
// each number's source text on the Node.js the hosts run (24); where it does not,
// a number a double would change is refused rather than rewritten.
function parseDocument(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value !== 'number') return value;
    if (context && typeof context.source === 'string') return new SourceNumber(context.source);
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) {
      throw invalid(`configuration holds a number (${value}) this Node.js cannot keep exactly`);
    }
    return value;
  });
}

function sameJson(a, b) {
  return canonicalJson(a) === canonicalJson(b);
}

// Pretty JSON with object keys sorted, two-space indentation, a trailing newline: the
// same document always gives the same bytes.
function canonicalJson(value) {
  const write = (v, depth) => {
    const pad = '  '.repeat(depth + 1);
    const close = '  '.repeat(depth);
    if (Array.isArray(v)) {
      if (v.length === 0) return '[]';
      return `[\n${v.map((item) => `${pad}${write(item, depth + 1)}`).join(',\n')}\n${close}]`;
    }
    if (v instanceof SourceNumber) return v.source;
    if (isPlainObject(v)) {
      const keys = Object.keys(v).sort();
      if (keys.length === 0) return '{}';
      return `{\n${keys.map((key) => `${pad}${JSON.stringify(key)}: ${write(v[key], depth + 1)}`).join(',\n')}\n${close}}`;
    }
    return JSON.stringify(v);
  };
  return `${write(value, 0)}\n`;
}

// The snapshot the spec allows for the controller's document: the document itself,
// plus, in password mode (explicit or omitted), the managed SecretRef (whichever
// form OCC accepts the document named it in). Any other gateway authentication is
// refused: the helper never writes a snapshot a gateway would serve without it.
function renderSnapshot(text) {
  let document;
  try {
    document = parseDocument(text);
  } catch (error) {
    if (error instanceof HelperError) throw error;
    throw invalid('configuration is not JSON');
  }
  if (!isPlainObject(document)) throw invalid('configuration must be a JSON object');
  if (document.gateway === undefined) document.gateway = {};
  if (!isPlainObject(document.gateway)) throw invalid('configuration.gateway must be an object');
  if (document.gateway.auth === undefined) document.gateway.auth = {};
  const auth = document.gateway.auth;
  if (!isPlainObject(auth)) throw invalid('configuration.gateway.auth must be an object');
  if (auth.password !== undefined && auth.password !== GATEWAY_PASSWORD_EXPRESSION &&
      !sameJson(auth.password, GATEWAY_PASSWORD_REF)) {
    throw invalid(`configuration.gateway.auth.password must be the managed SecretRef ${JSON.stringify(GATEWAY_PASSWORD_REF)} ` +
      `or ${GATEWAY_PASSWORD_EXPRESSION}`);
  }
  if (auth.mode === undefined || auth.mode === 'password') {
    auth.mode = 'password';
    auth.password = { ...GATEWAY_PASSWORD_REF };
  } else if (auth.mode !== 'trusted-proxy') {
    throw invalid(`configuration.gateway.auth.mode ${JSON.stringify(auth.mode)} is not one SSH Compute serves (password or trusted-proxy)`);
  }
  const rendered = canonicalJson(document);
  return { text: rendered, sha256: sha256Hex(rendered), needsPassword: auth.password !== undefined };
}

// Whether a snapshot's gateway reads the managed password: the unit then loads
// gateway-password.env.
function snapshotNeedsPassword(bytes) {
  try {
    const auth = JSON.parse(bytes.toString('utf8')).gateway.auth;
    return isPlainObject(auth) && auth.password !== undefined;
  } catch {
    return false;
  }
}

// The unit of the spec, rendered from typed fields only: the envelope's runtime paths,
// the account and port of agent.json, the placeholders the controller returned, and
// whether the snapshot needs the managed password. Every value in it has passed a
// check that keeps it to one line without systemd expansion: paths are SAFE_PATH,
// IDs carry no control characters and appear only in comments, the account is
// derived, placeholders follow OCC's rules.
function renderUnit({ namespaceId, agentId, account, agentDir, nodePath, openclawPath, port, placeholders, needsPassword,
  workspace }) {
  const home = `${agentDir}/home`;
  const state = `${agentDir}/state`;
  // An Agent with a completed workspace setup (workspace: its directory): the setup
  // program verifies the workspace before every start, as OCC's driver renders it.
  const setup = workspace === undefined ? [] : [
    `Environment="OPENCLAW_EXECUTABLE=${openclawPath}"`,
    `Environment="OPENCLAW_WORKSPACE_DIR=${workspace}"`,
    `Environment="OPENCLAW_WORKSPACE_SETUP_PATH=${agentDir}/workspace-setup.json"`,
  ];
  return [
    HEADER_FIRST_LINE,
    `# OCC-Namespace: ${namespaceId}`,
    `# OCC-Agent: ${agentId}`,
    '',
    '[Unit]',
    `Description=OpenClaw gateway of OCC Agent ${sha12(agentId)}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    `ExecStart=${nodePath} ${openclawPath} gateway --port ${port}`,
    `User=${account}`,
    `Group=${account}`,
    `Environment="HOME=${home}"`,
    `Environment="OPENCLAW_STATE_DIR=${state}"`,
    `Environment="OPENCLAW_CONFIG_PATH=${agentDir}/current/openclaw.json"`,
    `Environment="OPENCLAW_GATEWAY_PORT=${port}"`,
    ...placeholders.map(([name, value]) => `Environment="${name}=${value}"`),
    ...setup,
    ...(needsPassword ? [`EnvironmentFile=${agentDir}/gateway-password.env`] : []),
    `EnvironmentFile=-${agentDir}/env`,
    ...(workspace === undefined ? [] : [`ExecStartPre=${nodePath} ${agentDir}/workspace-setup.cjs`]),
    `WorkingDirectory=${home}`,
    'Restart=always',
    'RestartSec=2',
    'KillSignal=SIGTERM',
    'TimeoutStopSec=30',
    'NoNewPrivileges=true',
    'PrivateTmp=true',
    // The confinement of helper/README.md ("Unit sandbox"), each directive's reason there.
    'ProtectSystem=strict',
    `ReadWritePaths=${home} ${state}`,
    'ProtectHome=yes',
    'PrivateDevices=yes',
    'TemporaryFileSystem=/dev/shm:mode=1777',
    'PrivateIPC=yes',
    'RemoveIPC=yes',
    'ProtectProc=invisible',
    'ProtectKernelTunables=yes',
    'ProtectKernelModules=yes',
    'ProtectKernelLogs=yes',
    'ProtectControlGroups=yes',
    'ProtectClock=yes',
    'ProtectHostname=yes',
    'RestrictSUIDSGID=yes',
    'RestrictRealtime=yes',
    'RestrictNamespaces=yes',
    'LockPersonality=yes',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'SystemCallArchitectures=native',
    'SystemCallFilter=@system-service',
    'SystemCallErrorNumber=EPERM',
    'CapabilityBoundingSet=',
    'UMask=0077',
    'SocketBindDeny=any',
    `SocketBindAllow=tcp:${port}`,
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

module.exports = { unitHeader, canonicalJson, renderSnapshot, snapshotNeedsPassword, renderUnit };
