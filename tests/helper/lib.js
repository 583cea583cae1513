'use strict';
// Test support for the helper's suite: the rig's inventory, running helper/helper.js on a
// rig host over ssh exactly as the host runs it (`<node24> -e <helper/boot.js>`, with the
// helper's source and then its input, `{"args": [<base64 operation>, <base64
// envelope>]}`, as frames on stdin), building requests (the component's operation and
// the host's envelope), and the helper's own renderers for expected texts.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawn, spawnSync } = require('node:child_process');

const REPO = path.resolve(__dirname, '..', '..');
// OCC_HELPER_PATH runs the suite against another copy (e.g. the one a guest embeds).
const HELPER_PATH = process.env.OCC_HELPER_PATH || path.join(REPO, 'helper', 'helper.js');
const HELPER_SOURCE = fs.readFileSync(HELPER_PATH);
// Required as a module the helper does not run: it exports its pure functions, so the
// texts the suite expects on the host are the helper's own renderings.
const H = require(HELPER_PATH);
// The host's loader: what `node -e` runs, reading the helper from stdin.
const BOOT = fs.readFileSync(path.join(REPO, 'helper', 'boot.js'), 'utf8');
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
const RIG_HOST = process.env.OCC_HELPER_TEST_HOST
  ? hosts.find((h) => h.address === process.env.OCC_HELPER_TEST_HOST) || { name: 'occ-test', address: process.env.OCC_HELPER_TEST_HOST }
  : hosts[0];
if (!RIG_HOST) throw new Error(`${rigEnv.OCC_RIG_HOSTS_JSON} lists no host`);
const HOST = RIG_HOST.address;
// The host's alias in the installation: the envelope's `host`, and the name of every
// Namespace placed on it.
const HOST_ALIAS = RIG_HOST.name;

const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const sha12 = (text) => sha256(text).slice(0, 12);
const b64 = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');

function sshArgs(host, extra = []) {
  return [
    '-F', 'none', '-i', rigEnv.OCC_RIG_IDENTITY, '-o', 'IdentitiesOnly=yes',
    '-o', `UserKnownHostsFile=${rigEnv.OCC_RIG_KNOWN_HOSTS}`, '-o', 'StrictHostKeyChecking=yes',
    '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', '-o', 'LogLevel=ERROR',
    ...extra, `root@${host}`,
  ];
}

// The tests' own looks at a host share one connection per host (a fresh
// handshake costs tens of milliseconds of CPU on each side, thousands of times
// a run); a master that an outage ended is replaced by the next command. The helper itself
// runs over a connection of its own each time, as the suite has always run it.
const MUX = ['-o', `ControlPath=${path.join(path.dirname(rigEnv.OCC_RIG_IDENTITY), 'mux-%C')}`,
  '-o', 'ControlMaster=auto', '-o', 'ControlPersist=60'];

// Runs one shell command on the host and returns its stdout; throws on failure unless
// allowFailure, in which case { code, stdout, stderr } is returned.
function sh(command, { host = HOST, allowFailure = false, input } = {}) {
  const result = spawnSync('ssh', [...sshArgs(host, MUX), command], {
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

// The helper's two arguments for a request { op, envelope }: each base64 of its JSON.
// `args` replaces them (raw strings, any number of them) to send what no host would.
function helperArgs(request, args) {
  return args || [b64(request.op), b64(request.envelope)];
}

// One frame: 4 bytes of big-endian length, then the bytes.
function frame(bytes) {
  const body = Buffer.from(bytes);
  const size = Buffer.alloc(4);
  size.writeUInt32BE(body.length);
  return Buffer.concat([size, body]);
}

// The helper's stdin as the host writes it: its source, then its input.
function helperInput(argv, source = HELPER_SOURCE) {
  return Buffer.concat([frame(source), frame(JSON.stringify({ args: argv }))]);
}

const shellQuote = (text) => `'${text.replace(/'/g, `'\\''`)}'`;
// The remote command line: Node and the loader, nothing of the run.
const helperCommand = (node = NODE) => `${node} -e ${shellQuote(BOOT)}`;

// Starts the helper on the host. Returns { child, events, done, b64 } where done
// resolves to { code, signal, lines, events, result, stdout, stderr, b64 } and `events`
// fills as lines arrive; b64 is the operation argument (the helper's title hashes it).
function startHelper(request, { host = HOST, source = HELPER_SOURCE, onEvent, args } = {}) {
  const argv = helperArgs(request, args);
  const child = spawn('ssh', [...sshArgs(host), helperCommand()], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.on('error', () => {});
  child.stdin.end(helperInput(argv, source));
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
  // What names the run: both arguments, as the helper's title hashes them.
  const opB64 = argv.join(' ');
  const done = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      const last = events[events.length - 1];
      resolve({
        code, signal, lines, events, stdout, stderr, b64: opB64,
        result: last && last.event === 'result' ? last : null,
      });
    });
  });
  return { child, events, done, b64: opB64 };
}

async function runHelper(request, options) {
  return startHelper(request, options).done;
}

// Runs the helper and insists on a result line; returns the result object.
async function helper(request, options) {
  const run = await runHelper(request, options);
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

// The contract method whose call runs each helper operation, and the operations that
// method may run (host/src/world/ssh_compute_driver/method.rs, Method::helper_ops): the
// envelope's `method` and `ops`.
const METHOD_OF = {
  'probe': ['preflight', ['probe']],
  'ensure-namespace': ['ensureNamespace', ['ensure-namespace']],
  'prepare': ['prepareRevision', ['prepare']],
  'inspect-agent': ['activateRevision', ['inspect-agent', 'activate']],
  'activate': ['activateRevision', ['inspect-agent', 'activate']],
  'deactivate': ['deactivateRevision', ['deactivate']],
  'stop': ['stopRevision', ['stop']],
  'retire': ['retireRevision', ['retire']],
  'delete-agent': ['deleteAgentRuntimeCredentials', ['delete-agent']],
  'delete-namespace': ['deleteNamespace', ['delete-namespace']],
};

// A fixture: one root and one port range on the host, and request builders. A request
// is { op, envelope }: `op` what the component sends (its policy only), `envelope` what
// the host appends (host/src/world/ssh_compute_driver/envelope.rs). Tests forge either
// by editing the returned objects.
class Fixture {
  constructor(name, { portStart = 19000, portEnd = 19019 } = {}) {
    this.name = name;
    this.tag = `${name}-${crypto.randomBytes(3).toString('hex')}`;
    this.root = `/var/lib/occ-test-${this.tag}`;
    this.unitDirectory = '/etc/systemd/system';
    this.portRange = { start: portStart, end: portEnd };
    this.driver = { id: 'compute-ssh', implementation: 'occ/ssh' };
    this.user = 'openclaw';
    this.host = HOST_ALIAS;
  }

  runtime() {
    return { root: this.root, unitDirectory: this.unitDirectory, nodePath: NODE, openclawPath: OPENCLAW, user: this.user };
  }

  namespace(id) {
    return { id, name: this.host };
  }

  agent(agentId, servicePrincipalId = `sp-${agentId}`) {
    return { id: agentId, servicePrincipalId };
  }

  revision(revId, number, configuration = GATEWAY_CONFIG) {
    return { id: revId, number, harness: 'openclaw/embedded', configurationSha256: sha256(configuration) };
  }

  // The account the helper derives for the Agent (runtime.user's first 19 characters,
  // then the first 12 hex of SHA-256 of "<namespaceId>:<agentId>").
  account(nsId, agentId) {
    return H.agentAccountName(this.user, nsId, agentId);
  }

  unitName(agentId) {
    return `${H.UNIT_PREFIX}${sha12(agentId)}.service`;
  }

  envelope(opName, parts = {}) {
    const [method, ops] = METHOD_OF[opName] || ['prepareRevision', ['prepare']];
    return {
      version: 2, method, ops: [...ops], host: this.host, driver: { ...this.driver },
      runtime: this.runtime(), gatewayPortRange: { ...this.portRange }, ...parts,
    };
  }

  request(opName, parts = {}, fields = {}) {
    return { op: { version: 2, op: opName, deadlineMs: 170000, ...fields }, envelope: this.envelope(opName, parts) };
  }

  probe(runtime = {}) {
    const request = this.request('probe');
    Object.assign(request.envelope.runtime, runtime);
    return request;
  }

  ensureNamespace(nsId) {
    return this.request('ensure-namespace', { namespace: this.namespace(nsId) });
  }

  deleteNamespace(nsId) {
    return this.request('delete-namespace', { namespace: this.namespace(nsId) });
  }

  inspectAgent(nsId, agentId) {
    return this.request('inspect-agent', { namespace: this.namespace(nsId), agent: this.agent(agentId) });
  }

  deleteAgent(nsId, agentId) {
    return this.request('delete-agent', { namespace: this.namespace(nsId), agent: this.agent(agentId) });
  }

  // deactivate, stop, retire (and the base of prepare and activate): the revision's
  // configurationSha256 is the hash of the controller's document it was prepared from.
  agentOp(opName, nsId, agentId, revId, number, configuration = GATEWAY_CONFIG, fields = {}) {
    return this.request(opName, {
      namespace: this.namespace(nsId), agent: this.agent(agentId), revision: this.revision(revId, number, configuration),
    }, fields);
  }

  prepare(nsId, agentId, revId, number, configuration = GATEWAY_CONFIG) {
    return this.agentOp('prepare', nsId, agentId, revId, number, configuration, { configuration });
  }

  // launchEnvironment: what beforeWorkloadStart returned ({} when nothing).
  activate(nsId, agentId, revId, number, configuration = GATEWAY_CONFIG, { launchEnvironment = {}, deadlineMs } = {}) {
    const request = this.agentOp('activate', nsId, agentId, revId, number, configuration,
      deadlineMs === undefined ? {} : { deadlineMs });
    request.envelope.launchEnvironment = { ...launchEnvironment };
    return request;
  }

  paths(nsId, agentId, revId) {
    const nsDir = `${this.root}/namespaces/${sha12(nsId)}`;
    const agentDir = agentId ? `${nsDir}/agents/${sha12(agentId)}` : undefined;
    return {
      nsDir, agentDir,
      revDir: revId ? `${agentDir}/revisions/${sha12(revId)}` : undefined,
      unitPath: agentId ? `${this.unitDirectory}/${this.unitName(agentId)}` : undefined,
      accountMarker: agentId ? `${this.root}/accounts/${this.account(nsId, agentId)}.json` : undefined,
    };
  }

  // The unit exactly as the helper renders it on activate (its exported renderUnit,
  // checked against the golden units by render.test.js).
  unitText(nsId, agentId, port, { password = true, launchEnvironment = {}, workspace } = {}) {
    return H.renderUnit({
      namespaceId: nsId, agentId, account: this.account(nsId, agentId),
      agentDir: this.paths(nsId, agentId).agentDir, nodePath: NODE, openclawPath: OPENCLAW,
      port, placeholders: Object.keys(launchEnvironment).sort().map((name) => [name, launchEnvironment[name]]),
      needsPassword: password, workspace,
    });
  }

  // Marker owners as the helper records them.
  namespaceOwner(nsId) {
    return { driverId: this.driver.id, implementation: this.driver.implementation, namespaceId: nsId, namespaceName: this.host };
  }

  agentOwner(nsId, agentId) {
    return { ...this.namespaceOwner(nsId), agentId, servicePrincipalId: `sp-${agentId}` };
  }

  // What every marker this helper writes adds: its format, and who wrote it (the
  // implementation with its version, the SHA-256 of the text the loader ran).
  written() {
    return { format: H.MARKER_FORMAT, writtenBy: { implementation: this.driver.implementation, helper: sha256(HELPER_SOURCE) } };
  }

  // Removes everything this fixture may have left on the host: units, accounts, root.
  cleanup() {
    const script = `
      set -u
      root=${this.root}
      # Units first: a gateway systemd restarts would keep its account busy.
      for agentdir in "$root"/namespaces/*/agents/*; do
        [ -d "$agentdir" ] || continue
        unit=${H.UNIT_PREFIX}$(basename "$agentdir").service
        systemctl disable --now "$unit" >/dev/null 2>&1 || true
        rm -f ${this.unitDirectory}/"$unit"
      done
      systemctl daemon-reload
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
      rm -rf "$root"
    `;
    sh(script, { allowFailure: true });
  }
}

// The controller's native configuration document, as text (the operation's
// `configuration` of prepare).
const GATEWAY_CONFIG = `${JSON.stringify({
  gateway: {
    mode: 'local',
    auth: { mode: 'password', password: { source: 'env', provider: 'default', id: 'OPENCLAW_GATEWAY_PASSWORD' } },
  },
}, null, 2)}\n`;

// The snapshot the helper writes for a document (its exported renderSnapshot).
const snapshotText = (configuration) => H.renderSnapshot(configuration).text;

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

// The host pid of the helper running with these arguments ("<operation> <envelope>",
// as `run.b64` holds them), or null. The helper's command line never holds them (it is
// Node and the loader); once it has read its input it titles itself
// `occ-ssh-helper <first 12 hex of SHA-256 of both arguments>`, which is matched.
function helperTitle(opB64) {
  return `occ-ssh-helper ${sha256(opB64).slice(0, 12)}`;
}

function helperPid(opB64) {
  const out = sh(`ps -eo pid=,args= | awk -v title='${helperTitle(opB64)}' '($2 " " $3) == title { print $1; exit }'`).trim();
  return out ? Number(out) : null;
}

// True while a helper process with this operation argument runs on the host.
function helperRunning(opB64) {
  return helperPid(opB64) !== null;
}

// Whether anything (a link included) is at `p` on the test host.
const exists = (p) => sh(`test -e '${p}' -o -L '${p}' && echo yes || echo no`).trim() === 'yes';
// The HTTP status of the gateway's /readyz on `port` of the test host.
const readyz = (port) => sh(`curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://127.0.0.1:${port}/readyz`, { allowFailure: true }).stdout.trim();

// The [Service] lines that confine the process (everything from NoNewPrivileges= on),
// as `systemd-run -p` properties: a transient unit with exactly the gateway's sandbox.
function sandboxProperties(unitText) {
  const service = unitText.split('\n[Service]\n')[1].split('\n\n')[0].split('\n');
  return service.slice(service.indexOf('NoNewPrivileges=true'));
}

// Everything on the host a helper run could change, as text: every entry under `paths`
// (name, type, mode, owner, size, mtime, link target) and a hash of each file's
// content, the accounts and groups, the schedulers' deny lists, and whether the files
// the attack tests try to have root create exist. Equal before and after a run: the
// run changed nothing. (Root's home itself is not compared: the rig host's lower layer
// is the live machine, whose /root changes under it.)
// `skip` leaves out trees a running gateway writes to (its home and state).
function hostState(paths, { skip = [] } = {}) {
  const list = paths.map((p) => `'${p}'`).join(' ');
  const prune = skip.length ? `\\( ${skip.map((p) => `-path '${p}'`).join(' -o ')} \\) -prune -o` : '';
  return sh(`find ${list} ${prune} -printf '%p %y %m %u:%g %s %T@ %l\\n' 2>/dev/null | sort
    find ${list} ${prune} -type f -exec sha256sum {} + 2>/dev/null | sort
    getent passwd | sort; getent group | sort
    cat /etc/cron.deny /etc/at.deny 2>/dev/null || true
    for f in /root/x /tmp/x; do if [ -e "$f" ]; then echo "present: $f"; fi; done`);
}

// Throws naming the lines that differ between two hostState() texts.
function sameHost(after, before, what = 'the host changed') {
  if (after === before) return;
  const a = after.split('\n');
  const b = before.split('\n');
  const gone = b.filter((line) => !a.includes(line));
  const added = a.filter((line) => !b.includes(line));
  throw new Error(`${what}:\n${gone.map((l) => `- ${l}`).join('\n')}\n${added.map((l) => `+ ${l}`).join('\n')}`);
}

// Asserts a helper run was refused: exit 1, a result naming `code`, permanent as
// given, the message matching `why`. Returns the result.
function refused(run, code, why, permanent = true) {
  const detail = `${run.stdout.slice(-1500)} ${run.stderr}`;
  if (run.code !== 1 || !run.result || run.result.ok !== false) throw new Error(`not refused (exit ${run.code}): ${detail}`);
  const { error } = run.result;
  if (error.code !== code) throw new Error(`refused as ${error.code}, not ${code}: ${error.message}`);
  if (error.permanent !== permanent) throw new Error(`${code} reported permanent=${error.permanent}`);
  if (why && !why.test(error.message)) throw new Error(`message ${JSON.stringify(error.message)} does not match ${why}`);
  return run.result;
}

module.exports = {
  exists, readyz, REPO, HELPER_PATH, HELPER_SOURCE, BOOT, helperInput, helperCommand, frame, H, NODE, OPENCLAW, HOST, HOST_ALIAS, rigEnv, sshArgs, sh, shJson,
  startHelper, runHelper, helper, waitFor, Fixture, GATEWAY_CONFIG, snapshotText, statHost, sha12, sha256, b64,
  lockIsFree, helperRunning, helperPid, helperTitle, sandboxProperties, refused, hostState, sameHost,
};
