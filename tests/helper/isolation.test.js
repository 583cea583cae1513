'use strict';
// Tenant isolation on a real host: each test acts as a hostile Agent account would
// (through runuser, or from a transient unit with exactly the sandbox of an Agent's
// gateway) against another Agent, and checks what the driver's helper and units let
// it do. Real gateways run where the claim is about a gateway.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const L = require('./lib.js');

const fx = new L.Fixture('isolation', { portStart: 19400, portEnd: 19419 });
test.after(() => {
  L.sh(`rm -rf /var/lib/occ-canary-${fx.tag}`, { allowFailure: true });
  fx.cleanup();
});

const tag = crypto.randomBytes(4).toString('hex');
// Two tenants: Agent A of Namespace NS_A, Agent B of Namespace NS_B.
const NS_A = `ns-iso-a-${tag}`;
const NS_B = `ns-iso-b-${tag}`;
const A = 'agent-a';
const B = 'agent-b';
const accountOf = (ns, agent) => fx.account(ns, agent);
const { exists, readyz } = L;
const uidOf = (account) => Number(L.sh(`id -u ${account}`).trim());
const ports = {};

// A long-running command on the host; `lines` fills with its stdout lines.
function startRemote(command) {
  const child = spawn('ssh', [...L.sshArgs(L.HOST), command], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    lines.splice(0, lines.length, ...stdout.split('\n').filter(Boolean));
  });
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const done = new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, lines, done, stderr: () => stderr };
}

function waitLine(remote, text, what) {
  return Promise.race([
    L.waitFor(() => remote.lines.includes(text), { timeoutMs: 60000, what }),
    remote.done.then((r) => {
      if (!remote.lines.includes(text)) throw new Error(`${what}: exited ${r.code} first: ${r.stderr}`);
    }),
  ]);
}

// System V IPC objects whose owner or creator is uid, from /proc/sysvipc by column name.
function ipcOwnedBy(uid) {
  const found = [];
  for (const kind of ['shm', 'msg', 'sem']) {
    const [header, ...rows] = L.sh(`cat /proc/sysvipc/${kind}`).trim().split('\n');
    const columns = header.trim().split(/\s+/);
    for (const row of rows) {
      const fields = row.trim().split(/\s+/);
      if ([fields[columns.indexOf('uid')], fields[columns.indexOf('cuid')]].includes(String(uid))) found.push(`${kind} ${fields[1]}`);
    }
  }
  return found;
}

test('two tenants prepare', async () => {
  for (const [ns, agent] of [[NS_A, A], [NS_B, B]]) {
    assert.equal((await L.helper(fx.ensureNamespace(ns))).ok, true);
    const prepared = await L.helper(fx.prepare(ns, agent, 'rev-1', 1));
    assert.equal(prepared.ok, true, JSON.stringify(prepared));
    ports[agent] = prepared.port;
  }
});

test("an Agent account cannot hold the host lock; the other tenant and its own stop go on", { timeout: 120000 }, async () => {
  const a = accountOf(NS_A, A);
  const lockPath = `${fx.root}/.compute-lock`;
  // If A could open the file, it would hold the lock for ten minutes and print "held".
  const holder = startRemote(`runuser -u ${a} -- flock ${lockPath} sh -c 'echo held; exec sleep 600'`);
  const held = waitLine(holder, 'held', 'the lock').then(() => true, () => false);
  const result = await Promise.race([holder.done, held.then((yes) => (yes ? { held } : holder.done))]);
  assert.ok(!holder.lines.includes('held'), 'A took the host lock');
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /Permission denied/);
  // Nor can A list the tree to find other tenants, though it reaches its own files.
  assert.notEqual(L.sh(`runuser -u ${a} -- ls ${fx.root}/namespaces`, { allowFailure: true }).code, 0);
  assert.notEqual(L.sh(`runuser -u ${a} -- ls ${fx.paths(NS_A).nsDir}/agents`, { allowFailure: true }).code, 0);
  assert.equal(L.sh(`runuser -u ${a} -- ls -d ${fx.paths(NS_A, A).agentDir}/state`).trim(), `${fx.paths(NS_A, A).agentDir}/state`);

  const b = await L.runHelper(fx.prepare(NS_B, B, 'rev-2', 2, `${L.GATEWAY_CONFIG} `));
  assert.equal(b.result.ok, true, JSON.stringify(b.result));
  const stop = await L.helper(fx.agentOp('stop', NS_A, A, 'rev-1', 1, L.GATEWAY_CONFIG));
  assert.equal(stop.ok, true, JSON.stringify(stop));
  assert.ok(L.lockIsFree(fx.root));
});

test("a squatter on the Agent's port fails activation retryably, naming port and account; served.json only after it goes", { timeout: 300000 }, async (t) => {
  const b = accountOf(NS_B, B);
  const port = ports[A];
  const pA = fx.paths(NS_A, A);
  // B answers 200 to everything, /readyz included, on A's port before A's restart.
  const squatter = startRemote(`runuser -u ${b} -- ${L.NODE} -e 'require("http").createServer((q, s) => s.end("ok")).listen(${port}, "127.0.0.1", () => console.log("listening"))'`);
  await waitLine(squatter, 'listening', "B's listener");
  assert.equal(readyz(port), '200', "B's listener answers as if it were A's gateway");
  try {
    const run = await L.runHelper(fx.activate(NS_A, A, 'rev-1', 1));
    assert.equal(run.code, 1, run.stdout.slice(-1000));
    assert.deepEqual([run.result.error.code, run.result.error.permanent], ['port-squatted', false]);
    assert.match(run.result.error.message, new RegExp(`port ${port} is held by account ${b} \\(uid ${uidOf(b)}\\)`));
    assert.ok(run.events.some((e) => e.step === 'restart'), 'the gateway was restarted, then the squatter found');
    assert.ok(!run.events.some((e) => e.step === 'ready' || e.step === 'served'));
    assert.equal(exists(`${pA.agentDir}/served.json`), false);
  } finally {
    L.sh(`pkill -KILL -u ${b} || true`);
    await squatter.done;
  }
  const retry = await L.runHelper(fx.activate(NS_A, A, 'rev-1', 1));
  assert.equal(retry.result.ok, true, JSON.stringify(retry.result));
  t.diagnostic(`retry served after ${retry.result.readyAfterMs} ms`);
  assert.equal(JSON.parse(L.sh(`cat ${pA.agentDir}/served.json`)).revisionId, 'rev-1');
  // The listener on the port is A's gateway now.
  assert.match(L.sh(`ss -Htlnpe 'sport = :${port}'`), new RegExp(`uid:${uidOf(accountOf(NS_A, A))} `));
});

test("from inside its sandbox, Agent B sees nothing of Agent A's operations in /proc", { timeout: 240000 }, async (t) => {
  const b = accountOf(NS_B, B);
  const marker = `snapshot-marker-${tag}`;
  const configuration = `${JSON.stringify({ ...JSON.parse(L.GATEWAY_CONFIG), 'x-test-marker': marker })}\n`;
  const needles = [NS_A, marker];
  // B's own gateway unit, as the helper renders it: its sandbox lines become the
  // transient unit's properties, so the scanner runs exactly where B's gateway would.
  const props = L.sandboxProperties(fx.unitText(NS_B, B, ports[B]));
  assert.equal(props[0], 'NoNewPrivileges=true');
  assert.equal(props[props.length - 1], `SocketBindAllow=tcp:${ports[B]}`);
  for (const line of ['PrivateTmp=true', 'ProtectProc=invisible', 'ProtectSystem=strict', 'CapabilityBoundingSet=']) {
    assert.ok(props.includes(line), line);
  }
  for (const prefix of ['ExecStart=', 'User=', 'Environment', 'Restart=']) {
    assert.ok(!props.some((p) => p.startsWith(prefix)), prefix);
  }
  const scanner = `
    const fs = require('fs');
    const needles = Buffer.from(process.env.NEEDLES, 'hex').toString().split('\\n');
    const seen = { scans: 0, foreign: new Set(), helpers: new Set(), matches: new Set() };
    const me = process.getuid();
    let done = false;
    process.stdin.on('data', () => {});
    process.stdin.on('end', () => { done = true; });
    function scan() {
      for (const pid of fs.readdirSync('/proc')) {
        if (!/^[0-9]+$/.test(pid) || Number(pid) === process.pid) continue;
        let cmdline, uid;
        try {
          uid = fs.statSync('/proc/' + pid).uid;
          cmdline = fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1');
        } catch { continue; }
        if (uid !== me) seen.foreign.add(pid);
        if (cmdline.startsWith('occ-ssh-helper ')) seen.helpers.add(cmdline.split('\\0')[0]);
        for (const arg of cmdline.split('\\0')) {
          const decoded = Buffer.from(arg, 'base64').toString('latin1');
          for (const n of needles) if (arg.includes(n) || decoded.includes(n)) seen.matches.add(pid + ': ' + n);
        }
      }
      seen.scans++;
      if (done) {
        console.log(JSON.stringify({ scans: seen.scans, foreign: seen.foreign.size, helpers: [...seen.helpers], matches: [...seen.matches] }));
      } else setImmediate(scan);
    }
    console.log('scanning');
    scan();
  `;
  const hex = Buffer.from(needles.join('\n')).toString('hex');
  const run = async (properties) => {
    const args = ['--wait', '--pipe', '--quiet', '-p', `User=${b}`, '-p', `Group=${b}`,
      ...properties.flatMap((p) => ['-p', p]), `--setenv=NEEDLES=${hex}`, L.NODE, '-e', scanner];
    const remote = startRemote(`systemd-run ${args.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ')}`);
    await waitLine(remote, 'scanning', 'the scanner');
    // A's prepares run while B scans: each is a fresh helper whose arguments hold
    // A's document (the operation) and A's Namespace id (the envelope).
    const titles = [];
    for (let i = 0; i < 5; i++) {
      const op = fx.prepare(NS_A, A, `rev-scan-${i}`, 10 + i, configuration);
      const done = await L.runHelper(op);
      assert.equal(done.result.ok, true, JSON.stringify(done.result));
      titles.push(L.helperTitle(done.b64));
    }
    remote.child.stdin.end();
    const result = await remote.done;
    assert.equal(result.code, 0, result.stderr);
    return { ...JSON.parse(remote.lines[remote.lines.length - 1]), titles };
  };

  // Control: the same scanner and account without ProtectProc sees root's processes,
  // A's helpers among them (by their title only).
  const control = await run(props.filter((p) => p !== 'ProtectProc=invisible'));
  t.diagnostic(`control: ${control.scans} scans, ${control.helpers.length} helper titles, ${control.matches.length} sightings of A's operation in Node's first milliseconds`);
  assert.ok(control.foreign > 0, 'the control scanner sees other accounts\' processes');
  assert.ok(control.helpers.some((h) => control.titles.includes(h)), `control saw no helper of A: ${JSON.stringify(control)}`);

  const sandboxed = await run(props);
  assert.ok(sandboxed.scans > 0);
  assert.equal(sandboxed.foreign, 0, 'B sees no process of any other account');
  assert.deepEqual(sandboxed.helpers, []);
  assert.deepEqual(sandboxed.matches, [], 'nothing of A\'s operation');
});

test('a symlink swapped in by the Agent never leads deletion outside its tree', { timeout: 600000 }, async (t) => {
  const canaryDir = `/var/lib/occ-canary-${fx.tag}`;
  const b = accountOf(NS_B, B);
  const bState = `${fx.paths(NS_B, B).agentDir}/state`;
  L.sh(`mkdir -p ${canaryDir}/dir && echo keep > ${canaryDir}/dir/file && echo keep > ${canaryDir}/file`);
  // A sibling's state is the canary that matters most: root could delete it, A cannot.
  L.sh(`runuser -u ${b} -- sh -c 'mkdir -p ${bState}/dir && echo keep > ${bState}/dir/file && echo keep > ${bState}/file'`);
  const canaries = [`${canaryDir}/dir/file`, `${canaryDir}/file`, `${bState}/dir/file`, `${bState}/file`];
  const ROUNDS = 8;
  for (let round = 0; round < ROUNDS; round++) {
    // Agent IDs are unique across Namespaces (the unit is named by the Agent alone).
    const ns = `ns-swap-${tag}-${round}`;
    const agent = `agent-swap-${round}`;
    assert.equal((await L.helper(fx.ensureNamespace(ns))).ok, true);
    assert.equal((await L.helper(fx.prepare(ns, agent, 'rev-1', 1))).ok, true);
    const a = accountOf(ns, agent);
    const state = `${fx.paths(ns, agent).agentDir}/state`;
    const home = `${fx.paths(ns, agent).agentDir}/home`;
    // Static links, and a loop that swaps state/x between a directory and a link to
    // each canary as fast as it can.
    L.sh(`runuser -u ${a} -- sh -c 'ln -s ${canaryDir} ${home}/root-canary; ln -s ${bState} ${state}/sibling; ln -s ${canaryDir}/file ${state}/file-link'`);
    const swapper = startRemote(`runuser -u ${a} -- sh -c 'echo swapping; while :; do
      mkdir -p ${state}/x/y && touch ${state}/x/y/z && rm -rf ${state}/x;
      ln -s ${canaryDir} ${state}/x && rm -f ${state}/x;
      ln -s ${bState} ${state}/x && rm -f ${state}/x;
    done'`);
    await waitLine(swapper, 'swapping', 'the swap loop');
    const deleted = await L.runHelper(fx.deleteNamespace(ns));
    assert.equal(deleted.result.ok, true, JSON.stringify(deleted.result));
    // The loop was ended by the deletion, as every process of the account.
    await swapper.done;
    for (const canary of canaries) assert.equal(L.sh(`cat ${canary}`), 'keep\n', `round ${round}: ${canary}`);
    assert.equal(exists(fx.paths(ns).nsDir), false);
  }
  t.diagnostic(`${ROUNDS} rounds, every canary intact`);
});

test('after delete-namespace nothing of the accounts is left on the host', { timeout: 600000 }, async () => {
  const ns = `ns-left-${tag}`;
  assert.equal((await L.helper(fx.ensureNamespace(ns))).ok, true);
  // One Agent runs a real gateway, writing its state under the sandbox (whose
  // RemoveIPC=yes clears its IPC when the unit stops); the other never ran one, so
  // only the helper can clear what it leaves.
  const running = await L.helper(fx.prepare(ns, 'agent-left', 'rev-1', 1));
  const active = await L.runHelper(fx.activate(ns, 'agent-left', 'rev-1', 1));
  assert.equal(active.result.ok, true, JSON.stringify(active.result));
  assert.equal((await L.helper(fx.prepare(ns, 'agent-idle', 'rev-1', 1))).ok, true);
  const accounts = ['agent-left', 'agent-idle'].map((agent) => accountOf(ns, agent));
  const uids = accounts.map(uidOf);
  for (const [i, a] of accounts.entries()) {
    const uid = uids[i];
    const mark = `${tag}-${i}`;
    // Outside its unit (an operator's runuser, or a host set up before this driver),
    // the account leaves files in the shared places (one in a directory it made
    // untraversable), POSIX shared memory, a queue, System V IPC, a crontab, an at
    // job, and a process that ignores SIGTERM.
    L.sh(`runuser -u ${a} -- sh -c 'echo x > /tmp/left-${mark}; mkdir -p /var/tmp/left-${mark}/d && echo x > /var/tmp/left-${mark}/d/f && chmod 0 /var/tmp/left-${mark}/d;
      echo x > /dev/shm/left-${mark}; touch /dev/mqueue/left-${mark}; ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null'`);
    // Denied, the account gets no crontab even from root's crontab -u: plant one as if
    // left from before the deny.
    assert.match(L.sh(`echo '0 0 1 1 * true' | crontab -u ${a} -`, { allowFailure: true }).stderr, /cannot use this program/);
    L.sh(`echo '0 0 1 1 * true' | install -o ${a} -g crontab -m 600 /dev/stdin /var/spool/cron/crontabs/${a}`);
    L.sh(`echo true | at -q z now + 1 year 2>/dev/null && f=$(ls -t /var/spool/cron/atjobs/z* | head -1) && chown ${a} "$f"`);
    L.sh(`runuser -u ${a} -- setsid sh -c 'trap "" TERM; exec sleep 600' </dev/null >/dev/null 2>&1 &`);
    // Eight planted (the running gateway's private /tmp adds its own).
    assert.ok(Number(L.sh(`find /tmp /var/tmp /dev/shm /dev/mqueue /var/spool/cron -xdev -uid ${uid} | wc -l`)) >= 8);
    assert.notEqual(L.sh(`pgrep -u ${uid} | wc -l`).trim(), '0');
    assert.equal(ipcOwnedBy(uid).length, 2, 'a shared memory segment and a message queue');
  }

  const deleted = await L.runHelper(fx.deleteNamespace(ns));
  assert.equal(deleted.result.ok, true, JSON.stringify(deleted.result));
  const steps = deleted.events.filter((e) => e.event === 'progress').map((e) => `${e.step}: ${e.message}`);
  for (const step of ['processes', 'schedule', 'files', 'ipc']) {
    assert.ok(steps.some((s) => s.startsWith(step) && s.includes(accounts[1])), `the helper did ${step} for ${accounts[1]}: ${steps.join('; ')}`);
  }
  assert.equal(L.sh(`find / -xdev \\( -uid ${uids[0]} -o -uid ${uids[1]} \\)`), '', 'files of the uids on /');
  for (const [i, a] of accounts.entries()) {
    const uid = uids[i];
    assert.equal(L.sh(`getent passwd ${a} || true`).trim(), '');
    assert.equal(L.sh(`pgrep -u ${uid} | wc -l`).trim(), '0', 'no process of the uid');
    assert.equal(L.sh(`find /tmp /var/tmp /dev/shm /dev/mqueue /run -xdev -uid ${uid}`), '', 'files in shared places');
    assert.deepEqual(ipcOwnedBy(uid), [], 'IPC objects');
    assert.equal(exists(`/var/spool/cron/crontabs/${a}`), false, 'crontab gone');
    for (const list of ['/etc/cron.deny', '/etc/at.deny']) {
      assert.ok(!L.sh(`cat ${list}`).split('\n').includes(a), `${a} left ${list}`);
    }
  }
  assert.equal(L.sh('ls -A /dev/shm /dev/mqueue').split('\n').filter((n) => n.includes(tag)).length, 0);
  assert.equal(L.sh('atq -q z | wc -l').trim(), '0', 'at jobs gone');
});

test('delete-agent removes one Agent whole and releases its port; its siblings keep running', { timeout: 600000 }, async () => {
  const C = 'agent-c';
  const prepared = await L.helper(fx.prepare(NS_B, C, 'rev-1', 1));
  const portC = prepared.port;
  const active = await L.runHelper(fx.activate(NS_B, C, 'rev-1', 1));
  assert.equal(active.result.ok, true, JSON.stringify(active.result));
  const c = accountOf(NS_B, C);
  const uid = uidOf(c);
  const pC = fx.paths(NS_B, C);
  L.sh(`printf 'OPERATOR=1\\n' > ${pC.agentDir}/env && chmod 600 ${pC.agentDir}/env`);
  const bFiles = L.sh(`find ${fx.paths(NS_B, B).agentDir} | sort`);
  const op = fx.deleteAgent(NS_B, C);

  // A foreign agent.json is refused before any change.
  L.sh(`cp -p ${pC.agentDir}/agent.json /tmp/agent-c.keep && sed -i 's/"namespaceId":"[^"]*"/"namespaceId":"ns-other"/' ${pC.agentDir}/agent.json`);
  try {
    const refused = await L.runHelper(op);
    assert.deepEqual([refused.result.error.code, refused.result.error.permanent], ['foreign-marker', true]);
    assert.equal(readyz(portC), '200', 'still serving');
  } finally {
    L.sh(`mv -f /tmp/agent-c.keep ${pC.agentDir}/agent.json`);
  }

  const result = await L.helper(op);
  assert.deepEqual([result.ok, result.changed], [true, true], JSON.stringify(result));
  assert.notEqual(readyz(portC), '200');
  assert.equal(exists(pC.unitPath), false);
  assert.equal(L.sh(`systemctl list-units --all --no-legend ${fx.unitName(C)} | wc -l`).trim(), '0');
  assert.equal(exists(pC.agentDir), false, 'home, state, env, password, revisions, markers: all gone');
  assert.equal(exists(pC.accountMarker), false);
  assert.equal(L.sh(`getent passwd ${c} || true; getent group ${c} || true`).trim(), '');
  assert.equal(L.sh(`pgrep -u ${uid} | wc -l`).trim(), '0');
  assert.equal(L.sh(`find ${fx.root} /tmp /var/tmp /dev/shm /var/spool/cron -xdev -uid ${uid}`), '');
  // The sibling and the Namespace stay; the port is free for the next Agent.
  assert.equal(L.sh(`find ${fx.paths(NS_B, B).agentDir} | sort`), bFiles);
  assert.equal(exists(fx.paths(NS_B).nsDir), true);
  assert.equal((await L.helper(fx.prepare(NS_B, 'agent-d', 'rev-1', 1))).port, portC);

  // Again: nothing left, nothing changed.
  assert.deepEqual([(await L.helper(op)).changed], [false]);
  // A leftover account (its directory removed by hand) goes, also without the tree.
  const e = await L.helper(fx.prepare(NS_B, 'agent-e', 'rev-1', 1));
  assert.equal(e.ok, true);
  L.sh(`rm -rf ${fx.paths(NS_B, 'agent-e').agentDir}`);
  const opE = fx.deleteAgent(NS_B, 'agent-e');
  assert.deepEqual([(await L.helper(opE)).changed], [true]);
  assert.equal(L.sh(`getent passwd ${accountOf(NS_B, 'agent-e')} || true`).trim(), '');
  assert.equal(exists(fx.paths(NS_B, 'agent-e').accountMarker), false);
  // An absent Namespace is success.
  const none = await L.helper(fx.deleteAgent('ns-none', 'agent-z'));
  assert.deepEqual([none.ok, none.changed], [true, false]);
});

test('tenants are removed', { timeout: 300000 }, async () => {
  for (const ns of [NS_A, NS_B]) {
    const deleted = await L.helper(fx.deleteNamespace(ns));
    assert.equal(deleted.ok, true, JSON.stringify(deleted));
  }
  assert.equal(L.sh(`ls -A ${fx.root}/accounts | wc -l`).trim(), '0');
});
