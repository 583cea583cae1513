'use strict';
// Test support for the helper's suite: the rig's inventory, running helper/helper.js on a
// rig host over ssh exactly as the driver does (`<node24> - <base64 op>`, source on
// stdin), building operations, and rendering units the way the guest does.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawn, spawnSync } = require('node:child_process');
const { renderUnit, sandboxProperties, sha12 } = require('./unit.js');

const REPO = path.resolve(__dirname, '..', '..');
// OCC_HELPER_PATH runs the suite against another copy (e.g. the one a guest embeds).
const HELPER_PATH = process.env.OCC_HELPER_PATH || path.join(REPO, 'helper', 'helper.js');
const HELPER_SOURCE = fs.readFileSync(HELPER_PATH);
const RIG = process.env.OCC_RIG || '/run/occ-rig';

function readRigEnv() {
  const file = path.join(RIG, 'env');
  if (!fs.existsSync(file)) {
    throw new Error(`no rig at ${RIG}: run tests/helper/run.sh or tests/rig/up.sh 1 first`);
  }
  const env = {};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

const rigEnv = readRigEnv();
const hosts = JSON.parse(fs.readFileSync(rigEnv.OCC_RIG_HOSTS_JSON, 'utf8'));
const NODE = rigEnv.OCC_RIG_NODE;
const OPENCLAW = rigEnv.OCC_RIG_OPENCLAW;
const HOST = process.env.OCC_HELPER_TEST_HOST || (hosts[0] && hosts[0].address);
if (!HOST) throw new Error(`${rigEnv.OCC_RIG_HOSTS_JSON} lists no host`);

const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');

function sshArgs(host, extra = []) {
  return [
    '-F', 'none', '-i', rigEnv.OCC_RIG_IDENTITY, '-o', 'IdentitiesOnly=yes',
    '-o', `UserKnownHostsFile=${rigEnv.OCC_RIG_KNOWN_HOSTS}`, '-o', 'StrictHostKeyChecking=yes',
    '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', '-o', 'LogLevel=ERROR',
    ...extra, `root@${host}`,
  ];
}

// Runs one shell command on the host and returns its stdout; throws on failure unless
// allowFailure, in which case { code, stdout, stderr } is returned.
function sh(command, { host = HOST, allowFailure = false, input } = {}) {
  const result = spawnSync('ssh', [...sshArgs(host), command], {
    input, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 120000,
  });
  if (allowFailure) return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  if (result.status !== 0) {
    throw new Error(`ssh ${host} ${command}: exit ${result.status}: ${result.stderr}`);
  }
  return result.stdout;
}

function shJson(command, options) {
  return JSON.parse(sh(command, options));
}

// Starts the helper on the host. Returns { child, events, done } where done resolves to
// { code, signal, lines, events, result, stdout, stderr } and `events` fills as lines arrive.
function startHelper(op, { host = HOST, source = HELPER_SOURCE, onEvent } = {}) {
  const b64 = Buffer.from(JSON.stringify(op)).toString('base64');
  const child = spawn('ssh', [...sshArgs(host), NODE, '-', b64], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end(source);
  const events = [];
  const lines = [];
  let stdout = '';
  let stderr = '';
  let pending = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      lines.push(line);
      let event;
      try {
        event = JSON.parse(line);
      } catch {
        event = { event: 'unparsable', line };
      }
      event.receivedAt = Date.now();
      events.push(event);
      if (onEvent) onEvent(event, child);
    }
  });
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const done = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      const last = events[events.length - 1];
      resolve({
        code, signal, lines, events, stdout, stderr, b64,
        result: last && last.event === 'result' ? last : null,
      });
    });
  });
  return { child, events, done, b64 };
}

async function runHelper(op, options) {
  return startHelper(op, options).done;
}

// Runs the helper and insists on a result line; returns the result object.
async function helper(op, options) {
  const run = await runHelper(op, options);
  if (!run.result) {
    throw new Error(`helper produced no result (exit ${run.code}): ${run.stdout.slice(-2000)} ${run.stderr}`);
  }
  return run.result;
}

function waitFor(predicate, { timeoutMs = 30000, intervalMs = 200, what = 'condition' } = {}) {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      let value;
      try {
        value = predicate();
      } catch (error) {
        reject(error);
        return;
      }
      if (value) resolve(value);
      else if (Date.now() - start > timeoutMs) reject(new Error(`timed out waiting for ${what}`));
      else setTimeout(tick, intervalMs);
    };
    tick();
  });
}

// A fixture: one root on the host, Namespace ids, and operation builders.
class Fixture {
  constructor(name, { portStart = 19000, portEnd = 19019 } = {}) {
    this.name = name;
    this.tag = `${name}-${crypto.randomBytes(3).toString('hex')}`;
    this.root = `/var/lib/occ-test-${this.tag}`;
    this.unitDirectory = '/etc/systemd/system';
    this.portRange = { start: portStart, end: portEnd };
    this.driver = 'occ/ssh';
  }

  namespace(id) {
    return { id, hash: sha12(id) };
  }

  agent(nsId, agentId, servicePrincipalId = `sp-${agentId}`) {
    const hash = sha12(agentId);
    return {
      id: agentId, hash, servicePrincipalId,
      account: `openclaw-${sha12(`${nsId}:${agentId}`)}`,
      unitName: `openclaw-enterprise-gateway-${hash}.service`,
    };
  }

  revision(revId, number, snapshot) {
    return { id: revId, hash: sha12(revId), number, configHash: sha256(snapshot), harness: 'openclaw/embedded' };
  }

  base(op, nsId) {
    return {
      version: 1, op, deadlineMs: 170000, driver: this.driver,
      root: this.root, unitDirectory: this.unitDirectory, namespace: this.namespace(nsId),
    };
  }

  ensureNamespace(nsId) {
    return this.base('ensure-namespace', nsId);
  }

  deleteNamespace(nsId) {
    return this.base('delete-namespace', nsId);
  }

  agentOp(op, nsId, agentId, revId, number, snapshot, extra = {}) {
    return {
      ...this.base(op, nsId), agent: this.agent(nsId, agentId),
      revision: this.revision(revId, number, snapshot), ...extra,
    };
  }

  prepare(nsId, agentId, revId, number, snapshot = GATEWAY_CONFIG, extra = {}) {
    return this.agentOp('prepare', nsId, agentId, revId, number, snapshot, {
      snapshot, needsPassword: true, portRange: this.portRange, ...extra,
    });
  }

  activate(nsId, agentId, revId, number, port, snapshot = GATEWAY_CONFIG, extra = {}) {
    return this.agentOp('activate', nsId, agentId, revId, number, snapshot, {
      unit: { text: this.unitText(nsId, agentId, port, extra.unitOptions) },
      port, readinessTimeoutMs: 120000, ...extra,
    });
  }

  paths(nsId, agentId, revId) {
    const nsDir = `${this.root}/namespaces/${sha12(nsId)}`;
    const agentDir = agentId ? `${nsDir}/agents/${sha12(agentId)}` : undefined;
    return {
      nsDir, agentDir,
      revDir: revId ? `${agentDir}/revisions/${sha12(revId)}` : undefined,
      unitPath: agentId ? `${this.unitDirectory}/openclaw-enterprise-gateway-${sha12(agentId)}.service` : undefined,
      accountMarker: agentId ? `${this.root}/accounts/openclaw-${sha12(`${nsId}:${agentId}`)}.json` : undefined,
    };
  }

  // The unit exactly as the guest renders it (unit.js, checked against the guest's
  // golden units by unit.test.js).
  unitText(nsId, agentId, port, { password = true, placeholders = [] } = {}) {
    return renderUnit({
      namespaceId: nsId, agentId, account: this.agent(nsId, agentId).account,
      agentDir: this.paths(nsId, agentId).agentDir, nodePath: NODE, openclawPath: OPENCLAW,
      port, placeholders, needsPassword: password,
    });
  }

  // Removes everything this fixture may have left on the host: units, accounts, root.
  cleanup() {
    const script = `
      set -u
      root=${this.root}
      for marker in "$root"/accounts/*.json; do
        [ -e "$marker" ] || continue
        acct=$(basename "$marker" .json)
        pkill -KILL -u "$acct" 2>/dev/null || true
        userdel "$acct" 2>/dev/null || true
        groupdel "$acct" 2>/dev/null || true
        for list in /etc/cron.deny /etc/at.deny; do
          [ -f "$list" ] && sed -i "/^$acct\$/d" "$list"
        done
      done
      for agentdir in "$root"/namespaces/*/agents/*; do
        [ -d "$agentdir" ] || continue
        unit=openclaw-enterprise-gateway-$(basename "$agentdir").service
        systemctl disable --now "$unit" >/dev/null 2>&1 || true
        rm -f ${this.unitDirectory}/"$unit"
      done
      systemctl daemon-reload
      rm -rf "$root"
    `;
    sh(script, { allowFailure: true });
  }
}

const GATEWAY_CONFIG = `${JSON.stringify({
  gateway: {
    mode: 'local',
    auth: { mode: 'password', password: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_PASSWORD' } },
  },
}, null, 2)}\n`;

// stat of paths on the host: { path: { mode: '750', user, group, uid, gid, type } }.
function statHost(paths) {
  const out = sh(`stat -c '%n|%a|%U|%G|%u|%g|%F' ${paths.map((p) => `'${p}'`).join(' ')}`);
  const result = {};
  for (const line of out.trim().split('\n')) {
    const [name, mode, user, group, uid, gid, type] = line.split('|');
    result[name] = { mode, user, group, uid: Number(uid), gid: Number(gid), type };
  }
  return result;
}

function lockIsFree(root) {
  return sh(`flock -n ${root}/.compute-lock true`, { allowFailure: true }).code === 0;
}

// The host pid of the helper running this operation, or null. The helper replaces its
// argv with `occ-ssh-helper <first 12 hex of SHA-256 of the operation argument>` as soon
// as it starts (before that, argv still holds the Node binary and the argument), so
// both forms are matched, each as a fixed string.
function helperTitle(b64) {
  return `occ-ssh-helper ${sha256(b64).slice(0, 12)}`;
}

function helperPid(b64) {
  const out = sh(`ps -eo pid=,args= | awk -v node='${NODE}' -v op='${b64.slice(0, 80)}' -v title='${helperTitle(b64)}' '($2 == node && index($0, op)) || ($2 " " $3) == title { print $1; exit }'`).trim();
  return out ? Number(out) : null;
}

// True while a helper process with this operation argument runs on the host.
function helperRunning(b64) {
  return helperPid(b64) !== null;
}

// Whether anything (a link included) is at `p` on the test host.
const exists = (p) => sh(`test -e '${p}' -o -L '${p}' && echo yes || echo no`).trim() === 'yes';
// The HTTP status of the gateway's /readyz on `port` of the test host.
const readyz = (port) => sh(`curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://127.0.0.1:${port}/readyz`, { allowFailure: true }).stdout.trim();

module.exports = {
  exists, readyz, REPO, HELPER_PATH, HELPER_SOURCE, NODE, OPENCLAW, HOST, rigEnv, sshArgs, sh, shJson,
  startHelper, runHelper, helper, waitFor, Fixture, GATEWAY_CONFIG, statHost, sha12, sha256,
  lockIsFree, helperRunning, helperPid, helperTitle, sandboxProperties,
};
