'use strict';
// prepare and its refusals: layout, markers, modes and owners, accounts, ports, the
// password file, snapshots, symlinks, units, supersession; plus deactivate and the
// delete-namespace paths that need no running gateway.

const test = require('node:test');
const assert = require('node:assert/strict');
const L = require('./lib.js');

const fx = new L.Fixture('prepare', { portStart: 19000, portEnd: 19019 });
test.after(() => fx.cleanup());

const { exists } = L;
const read = (p) => L.sh(`cat '${p}'`);
// A fingerprint of a whole tree (names, types, modes, owners, sizes, mtimes, link
// targets, contents), of the unit directory and of the accounts, to show that a
// refused operation changed nothing.
const fingerprint = (root) => L.hostState([root, fx.unitDirectory]);

async function expectRefusal(op, code, why) {
  const before = fingerprint(fx.root);
  const run = await L.runHelper(op);
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.result.ok, false);
  assert.equal(run.result.error.code, code, run.result.error.message);
  assert.equal(run.result.error.permanent, true);
  if (why) assert.match(run.result.error.message, why);
  L.sameHost(fingerprint(fx.root), before, 'a refused operation changed the host');
  return run.result;
}

test('prepare before ensure-namespace is refused (missing-namespace)', async () => {
  const result = await L.helper(fx.prepare('ns-missing', 'agent-0', 'rev-1', 1));
  assert.equal(result.error.code, 'missing-namespace');
  assert.equal(result.error.permanent, true);
});

test('prepare creates the layout with exact markers, modes and owners', async () => {
  assert.equal((await L.helper(fx.ensureNamespace('ns-a'))).ok, true);
  const result = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-1', 1));
  assert.equal(result.ok, true);
  assert.equal(result.changed, true);
  assert.equal(result.ready, true);
  assert.equal(result.port, 19000);
  const p = fx.paths('ns-a', 'agent-1', 'rev-1');
  const account = fx.account('ns-a', 'agent-1');
  assert.equal(account, `openclaw-${L.sha12('ns-a:agent-1')}`);
  const [, , uid, gid, , home, shell] = L.sh(`getent passwd ${account}`).trim().split(':');
  assert.equal(Number(uid), result.uid);
  assert.equal(Number(gid), result.gid);
  assert.equal(home, `${p.agentDir}/home`);
  assert.equal(shell, '/usr/sbin/nologin');
  assert.equal(L.sh(`getent group ${account}`).trim().split(':')[2], gid);
  assert.equal(L.sh(`test -d ${p.agentDir}/home/. && ls -A ${p.agentDir}/home | wc -l`).trim(), '0', 'useradd created no home content');

  const stats = L.statHost([
    fx.root, `${fx.root}/.compute-lock`, `${fx.root}/accounts`, p.accountMarker, `${fx.root}/namespaces`, p.nsDir,
    `${p.nsDir}/namespace.json`, `${p.nsDir}/agents`, p.agentDir, `${p.agentDir}/agent.json`,
    `${p.agentDir}/home`, `${p.agentDir}/state`, `${p.agentDir}/gateway-password.env`,
    `${p.agentDir}/revisions`, p.revDir, `${p.revDir}/openclaw.json`, `${p.revDir}/revision.json`,
  ]);
  const expect = (file, mode, user, group) => {
    const st = stats[file];
    assert.ok(st, `${file} exists`);
    assert.deepEqual([st.mode, st.user, st.group], [mode, user, group], file);
  };
  expect(fx.root, '755', 'root', 'root');
  expect(`${fx.root}/.compute-lock`, '600', 'root', 'root');
  expect(`${fx.root}/accounts`, '700', 'root', 'root');
  expect(p.accountMarker, '600', 'root', 'root');
  // Traversable, not listable: an Agent learns no other Namespace or Agent.
  expect(`${fx.root}/namespaces`, '711', 'root', 'root');
  expect(p.nsDir, '711', 'root', 'root');
  expect(`${p.nsDir}/namespace.json`, '600', 'root', 'root');
  expect(`${p.nsDir}/agents`, '711', 'root', 'root');
  expect(p.agentDir, '750', 'root', account);
  expect(`${p.agentDir}/agent.json`, '600', 'root', 'root');
  expect(`${p.agentDir}/home`, '700', account, account);
  expect(`${p.agentDir}/state`, '700', account, account);
  expect(`${p.agentDir}/gateway-password.env`, '600', 'root', 'root');
  expect(`${p.agentDir}/revisions`, '750', 'root', account);
  expect(p.revDir, '750', 'root', account);
  expect(`${p.revDir}/openclaw.json`, '640', 'root', account);
  expect(`${p.revDir}/revision.json`, '600', 'root', 'root');

  // Each marker names the exact Driver (its id and implementation) and the Namespace
  // (its id and name) that own it.
  // Each also names its format and who wrote it (the implementation, the helper's hash).
  assert.deepEqual(JSON.parse(read(`${p.nsDir}/namespace.json`)), {
    driverId: 'compute-ssh', implementation: 'occ/ssh', namespaceId: 'ns-a', namespaceName: L.HOST_ALIAS,
    format: 2, writtenBy: { implementation: 'occ/ssh', helper: L.sha256(L.HELPER_SOURCE) },
  });
  const owner = fx.agentOwner('ns-a', 'agent-1');
  // The account carries the marker's comment: proof that the driver made it.
  const accountMarker = JSON.parse(read(p.accountMarker));
  assert.match(accountMarker.comment, /^occ-ssh [0-9a-f]{24}$/);
  assert.deepEqual(accountMarker, { ...owner, account, uid: result.uid, gid: result.gid, comment: accountMarker.comment, ...fx.written() });
  assert.equal(L.sh(`getent passwd ${account}`).trim().split(':')[4], accountMarker.comment);
  // Denied cron (its deny list created, as the host had neither list) and at.
  assert.ok(read('/etc/cron.deny').split('\n').includes(account), 'in /etc/cron.deny');
  assert.ok(read('/etc/at.deny').split('\n').includes(account), 'in /etc/at.deny');
  assert.match(L.sh(`runuser -u ${account} -- crontab -l`, { allowFailure: true }).stderr, /not allowed/);
  assert.match(L.sh(`echo true | runuser -u ${account} -- at now + 1 hour`, { allowFailure: true }).stderr, /not allowed|permission/i);
  assert.deepEqual(JSON.parse(read(`${p.agentDir}/agent.json`)), { ...owner, account, uid: result.uid, gid: result.gid, port: 19000, ...fx.written() });
  // The snapshot is the helper's rendering of the controller's document; the marker
  // records the document's hash (the controller's) and the snapshot's (what is on disk).
  const snapshot = read(`${p.revDir}/openclaw.json`);
  assert.equal(snapshot, L.snapshotText(L.GATEWAY_CONFIG));
  assert.deepEqual(JSON.parse(read(`${p.revDir}/revision.json`)), {
    ...owner, revisionId: 'rev-1', revisionNumber: 1, configurationSha256: L.sha256(L.GATEWAY_CONFIG),
    snapshotSha256: L.sha256(snapshot), harness: 'openclaw/embedded', ...fx.written(),
  });
  assert.match(read(`${p.agentDir}/gateway-password.env`), /^OPENCLAW_GATEWAY_PASSWORD=[0-9a-f]{64}\n$/);
  // Prepare never touches current, served.json, the unit or the operator's env file.
  for (const absent of [`${p.agentDir}/current`, `${p.agentDir}/served.json`, `${p.agentDir}/env`, p.unitPath]) {
    assert.equal(exists(absent), false, absent);
  }
  assert.equal(L.sh(`find ${fx.root} -name '.occ-tmp-*' | wc -l`).trim(), '0', 'no temp files left');
});

test('prepare is idempotent: the same revision again changes nothing', async () => {
  const before = fingerprint(fx.root);
  const result = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-1', 1));
  assert.equal(result.ok, true);
  assert.equal(result.changed, false);
  assert.equal(result.port, 19000);
  L.sameHost(fingerprint(fx.root), before);
});

test('the Agent reads its own snapshot; a sibling Agent reads neither its snapshot nor state', async () => {
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-2', 'rev-1', 1))).ok, true);
  const a1 = fx.account('ns-a', 'agent-1');
  const a2 = fx.account('ns-a', 'agent-2');
  const p1 = fx.paths('ns-a', 'agent-1', 'rev-1');
  const p2 = fx.paths('ns-a', 'agent-2', 'rev-1');
  assert.equal(L.sh(`runuser -u ${a1} -- cat ${p1.revDir}/openclaw.json`), L.snapshotText(L.GATEWAY_CONFIG));
  assert.equal(L.sh(`runuser -u ${a1} -- sh -c 'touch ${p1.agentDir}/state/x && touch ${p1.agentDir}/home/y && echo ok'`).trim(), 'ok');
  for (const denied of [
    `cat ${p2.revDir}/openclaw.json`, `ls ${p2.agentDir}/state`, `ls ${p2.agentDir}`,
    `sh -c 'echo x >> ${p1.revDir}/openclaw.json'`, `cat ${p1.agentDir}/gateway-password.env`,
    `cat ${p1.agentDir}/agent.json`, `touch ${p1.agentDir}/new`, `ls ${fx.root}/accounts`,
  ]) {
    assert.notEqual(L.sh(`runuser -u ${a1} -- ${denied}`, { allowFailure: true }).code, 0, `${a1}: ${denied}`);
  }
  assert.notEqual(L.sh(`runuser -u ${a2} -- cat ${p1.revDir}/openclaw.json`, { allowFailure: true }).code, 0);
});

test('ports: lowest unused across Namespaces, kept by an Agent, and exhaustion', async () => {
  assert.equal((await L.helper(fx.ensureNamespace('ns-b'))).ok, true);
  // agent-1 has 19000 and agent-2 19001 in ns-a; the next Agent in ns-b gets 19002.
  const b1 = await L.helper(fx.prepare('ns-b', 'agent-b1', 'rev-1', 1));
  assert.equal(b1.port, 19002);
  const again = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-2', 2, `${L.GATEWAY_CONFIG} `));
  assert.equal(again.port, 19000, 'an Agent keeps its port for later revisions');
  // A gap left by a removed Agent is reused first.
  L.sh(`rm -rf ${fx.paths('ns-a', 'agent-2').agentDir}`);
  const b2 = await L.helper(fx.prepare('ns-b', 'agent-b2', 'rev-1', 1));
  assert.equal(b2.port, 19001);
  // A tiny range that is already fully held.
  const full = fx.prepare('ns-b', 'agent-b3', 'rev-1', 1);
  full.envelope.gatewayPortRange = { start: 19000, end: 19002 };
  const result = await L.helper(full);
  assert.equal(result.error.code, 'no-free-port');
  assert.equal(result.error.permanent, true);
  assert.equal(exists(fx.paths('ns-b', 'agent-b3').agentDir), false);
});

// A trusted-proxy document: the helper keeps it as written and adds no password.
const TRUSTED_PROXY = `${JSON.stringify({ gateway: { mode: 'local', bind: 'loopback', auth: { mode: 'trusted-proxy', trustedProxy: { userHeader: 'x-forwarded-user' } } } })}\n`;

test('the gateway password is created once and never rotated', async () => {
  const file = `${fx.paths('ns-a', 'agent-1').agentDir}/gateway-password.env`;
  const first = read(file);
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-3', 3, `${L.GATEWAY_CONFIG}  `))).ok, true);
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-3', 3, `${L.GATEWAY_CONFIG}  `))).changed, false);
  // A later revision that reads no password leaves the file as it is.
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-tp', 4, TRUSTED_PROXY))).ok, true);
  assert.equal(read(file), first);
  assert.equal(read(`${fx.paths('ns-a', 'agent-1', 'rev-tp').revDir}/openclaw.json`), L.snapshotText(TRUSTED_PROXY));
  L.sh(`rm -r ${fx.paths('ns-a', 'agent-1', 'rev-tp').revDir}`);
  // When the rendered snapshot reads no password (trusted-proxy), no file is created;
  // an omitted mode is password mode, and gets one.
  assert.equal((await L.helper(fx.prepare('ns-b', 'agent-nopw', 'rev-1', 1, TRUSTED_PROXY))).ok, true);
  assert.equal(exists(`${fx.paths('ns-b', 'agent-nopw').agentDir}/gateway-password.env`), false);
  const snapshot = JSON.parse(read(`${fx.paths('ns-b', 'agent-nopw', 'rev-1').revDir}/openclaw.json`));
  assert.deepEqual(snapshot.gateway.auth, { mode: 'trusted-proxy', trustedProxy: { userHeader: 'x-forwarded-user' } });
  assert.equal((await L.helper(fx.prepare('ns-b', 'agent-omitted', 'rev-1', 1, '{"gateway":{"mode":"local"}}'))).ok, true);
  const omitted = fx.paths('ns-b', 'agent-omitted', 'rev-1');
  assert.match(read(`${omitted.agentDir}/gateway-password.env`), /^OPENCLAW_GATEWAY_PASSWORD=[0-9a-f]{64}\n$/);
  assert.equal(read(`${omitted.revDir}/openclaw.json`), L.snapshotText(L.GATEWAY_CONFIG), 'the same snapshot as an explicit password mode');
});

test('a changed snapshot is refused, for another document and for a tampered file', async () => {
  // The same revision prepared from another document of the controller.
  await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1, '{"gateway":{}}\n'), 'changed-snapshot', /revision\.json: configurationSha256 is/);
  const p = fx.paths('ns-a', 'agent-1', 'rev-1');
  L.sh(`cp -p ${p.revDir}/openclaw.json /tmp/keep.json && printf ' ' >> ${p.revDir}/openclaw.json`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'changed-snapshot', /no longer has the snapshotSha256/);
  } finally {
    L.sh(`mv -f /tmp/keep.json ${p.revDir}/openclaw.json`);
  }
  // Edited with its recorded hash edited to match: still not the controller's document.
  L.sh(`cp -p ${p.revDir}/openclaw.json /tmp/keep.json && cp -p ${p.revDir}/revision.json /tmp/keep-rev.json
    printf '{"gateway":{"auth":{"mode":"none"}}}\\n' > ${p.revDir}/openclaw.json
    sed -i "s/\\"snapshotSha256\\":\\"[0-9a-f]*\\"/\\"snapshotSha256\\":\\"$(sha256sum < ${p.revDir}/openclaw.json | cut -c1-64)\\"/" ${p.revDir}/revision.json`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'changed-snapshot', /differs from the snapshot of the controller's document/);
  } finally {
    L.sh(`mv -f /tmp/keep.json ${p.revDir}/openclaw.json && mv -f /tmp/keep-rev.json ${p.revDir}/revision.json`);
  }
  L.sh(`chmod 0644 ${p.revDir}/openclaw.json`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'changed-snapshot', /640/);
  } finally {
    L.sh(`chmod 0640 ${p.revDir}/openclaw.json`);
  }
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-1', 1))).changed, false);
});

test('foreign markers are refused and nothing changes', async () => {
  const p = fx.paths('ns-a', 'agent-1', 'rev-1');
  // The same Agent claimed by another ServicePrincipal.
  const otherSp = fx.prepare('ns-a', 'agent-1', 'rev-1', 1);
  otherSp.envelope.agent.servicePrincipalId = 'sp-intruder';
  await expectRefusal(otherSp, 'foreign-marker', /agent\.json: servicePrincipalId is "sp-agent-1", expected "sp-intruder"/);
  // This Namespace's marker, seen by another Driver selection sharing the root: another
  // driver id, another implementation (with a version or without), or the same
  // Namespace id under another name.
  for (const [edit, why] of [
    [(e) => { e.driver.id = 'compute-other'; }, /namespace\.json: driverId is "compute-ssh", expected "compute-other"/],
    [(e) => { e.driver.implementation = 'occ/other'; }, /namespace\.json: implementation is "occ\/ssh", expected "occ\/other" \(any version\)/],
    [(e) => { e.driver.implementation = 'occ-other@1.0.0'; }, /namespace\.json: implementation is "occ\/ssh", expected "occ-other" \(any version\)/],
    [(e) => { e.namespace.name = 'other-host'; }, /namespace\.json: namespaceName is/],
  ]) {
    for (const request of [fx.prepare('ns-a', 'agent-1', 'rev-1', 1), fx.ensureNamespace('ns-a'), fx.deleteNamespace('ns-a'),
      fx.agentOp('stop', 'ns-a', 'agent-1', 'rev-1', 1), fx.deleteAgent('ns-a', 'agent-1')]) {
      edit(request.envelope);
      await expectRefusal(request, 'foreign-marker', why);
    }
  }
  // A marker rewritten by someone else.
  L.sh(`cp -p ${p.agentDir}/agent.json /tmp/agent.keep && sed -i 's/"agent-1"/"agent-9"/' ${p.agentDir}/agent.json`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-4', 4), 'foreign-marker', /agentId/);
  } finally {
    L.sh(`mv -f /tmp/agent.keep ${p.agentDir}/agent.json`);
  }
  // A marker not owned by the SSH account.
  L.sh(`chown 1:1 ${p.revDir}/revision.json`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'foreign-marker', /owned by uid 1/);
  } finally {
    L.sh(`chown 0:0 ${p.revDir}/revision.json`);
  }
  // An Agent directory without any marker.
  const bare = fx.paths('ns-a', 'agent-bare');
  L.sh(`mkdir -p ${bare.agentDir}`);
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-bare', 'rev-1', 1), 'foreign-marker', /no agent.json/);
  } finally {
    L.sh(`rmdir ${bare.agentDir}`);
  }
});

test('markers across releases: another version of the implementation manages them; a newer format is refused and nothing changes', async () => {
  const p = fx.paths('ns-a', 'agent-1', 'rev-1');
  // The same implementation with a version (how OCC names a package) owns what it made.
  const versioned = (request) => {
    request.envelope.driver.implementation = 'occ/ssh@9.9.9';
    return request;
  };
  const again = await L.helper(versioned(fx.prepare('ns-a', 'agent-1', 'rev-1', 1)));
  assert.equal(again.ok, true, JSON.stringify(again));
  assert.equal(again.changed, false);
  assert.equal((await L.helper(versioned(fx.ensureNamespace('ns-a')))).ok, true);
  // A marker a later release wrote in a format this helper does not know: every
  // operation that reads it refuses, permanently, naming the file, the format and the
  // release to roll forward to, and changes nothing.
  const later = (file, edit) => {
    const marker = JSON.parse(read(file));
    L.sh(`cp -p ${file} ${file}.keep && printf '%s\\n' '${JSON.stringify({ ...marker, ...edit })}' > ${file}`);
    return () => L.sh(`mv -f ${file}.keep ${file}`);
  };
  const newer = { format: 99, writtenBy: { implementation: 'occ/ssh@99.0.0', helper: 'f'.repeat(64) } };
  const roll = (file) => new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is marker format 99, written by occ/ssh@99\\.0\\.0; ` +
    'this helper reads formats 1 to 2: roll forward to at least occ/ssh@99\\.0\\.0');
  let restore = later(`${p.nsDir}/namespace.json`, newer);
  try {
    for (const request of [fx.ensureNamespace('ns-a'), fx.prepare('ns-a', 'agent-1', 'rev-1', 1), fx.deleteNamespace('ns-a'),
      fx.agentOp('stop', 'ns-a', 'agent-1', 'rev-1', 1), fx.deleteAgent('ns-a', 'agent-1')]) {
      await expectRefusal(request, 'newer-format', roll(`${p.nsDir}/namespace.json`));
    }
  } finally {
    restore();
  }
  restore = later(`${p.agentDir}/agent.json`, newer);
  try {
    for (const request of [fx.prepare('ns-a', 'agent-1', 'rev-1', 1), fx.deleteNamespace('ns-a'), fx.deleteAgent('ns-a', 'agent-1')]) {
      await expectRefusal(request, 'newer-format', roll(`${p.agentDir}/agent.json`));
    }
  } finally {
    restore();
  }
  // A format that is no format at all is a foreign marker.
  restore = later(`${p.revDir}/revision.json`, { format: 'two' });
  try {
    await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'foreign-marker', /revision\.json: format "two" is not a marker format/);
  } finally {
    restore();
  }
});

test('unexpected symlinks are refused', async () => {
  const p = fx.paths('ns-a', 'agent-1', 'rev-1');
  const cases = [
    [`mv ${p.agentDir}/state /tmp/state.keep && ln -s /tmp/state.keep ${p.agentDir}/state`,
      `rm ${p.agentDir}/state && mv /tmp/state.keep ${p.agentDir}/state`, /state is a symlink/],
    [`ln -s ../../../x ${p.agentDir}/current`, `rm ${p.agentDir}/current`, /current points at/],
    [`mkdir ${p.agentDir}/current`, `rmdir ${p.agentDir}/current`, /current is not a symlink/],
    [`ln -s revisions/${L.sha12('rev-1')}/ ${p.agentDir}/current`, `rm ${p.agentDir}/current`, /current points at/],
    [`mv ${p.agentDir}/gateway-password.env /tmp/pw.keep && ln -s /tmp/pw.keep ${p.agentDir}/gateway-password.env`,
      `rm ${p.agentDir}/gateway-password.env && mv /tmp/pw.keep ${p.agentDir}/gateway-password.env`, /gateway-password.env is a symlink/],
    [`mv ${p.revDir}/openclaw.json /tmp/oc.keep && ln -s /tmp/oc.keep ${p.revDir}/openclaw.json`,
      `rm ${p.revDir}/openclaw.json && mv /tmp/oc.keep ${p.revDir}/openclaw.json`, /openclaw.json is a symlink/],
  ];
  for (const [make, undo, why] of cases) {
    L.sh(make);
    try {
      await expectRefusal(fx.prepare('ns-a', 'agent-1', 'rev-1', 1), 'unexpected-symlink', why);
    } finally {
      L.sh(undo);
    }
  }
  // The whole Agent directory replaced by a symlink.
  const p2 = fx.paths('ns-b', 'agent-b1');
  L.sh(`mv ${p2.agentDir} /tmp/agent-b1.keep && ln -s /tmp/agent-b1.keep ${p2.agentDir}`);
  try {
    await expectRefusal(fx.prepare('ns-b', 'agent-b1', 'rev-1', 1), 'unexpected-symlink', /symlink where a directory/);
  } finally {
    L.sh(`rm ${p2.agentDir} && mv /tmp/agent-b1.keep ${p2.agentDir}`);
  }
  assert.equal((await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-1', 1))).changed, false);
});

test('an existing user or group without its marker is refused (foreign-account)', async () => {
  for (const [make, undo] of [
    ['groupadd --system NAME && useradd --system --gid NAME --no-create-home NAME', 'userdel NAME; groupdel NAME 2>/dev/null || true'],
    ['groupadd --system NAME', 'groupdel NAME'],
  ]) {
    const op = fx.prepare('ns-b', 'agent-taken', 'rev-1', 1);
    const name = fx.account('ns-b', 'agent-taken');
    L.sh(make.replaceAll('NAME', name));
    try {
      await expectRefusal(op, 'foreign-account', /exists without the ownership marker/);
      assert.equal(exists(fx.paths('ns-b', 'agent-taken').agentDir), false);
    } finally {
      L.sh(undo.replaceAll('NAME', name));
    }
  }
  // A marked account whose uid no longer matches (recreated by someone else).
  const op = fx.prepare('ns-a', 'agent-1', 'rev-1', 1);
  const marker = fx.paths('ns-a', 'agent-1').accountMarker;
  L.sh(`cp -p ${marker} /tmp/acct.keep && sed -i 's/"uid":[0-9]*/"uid":4242/' ${marker}`);
  try {
    await expectRefusal(op, 'foreign-account', /does not match/);
  } finally {
    L.sh(`mv -f /tmp/acct.keep ${marker}`);
  }
});

// A pending marker as a helper leaves it when killed before useradd returned.
function writePendingMarker(nsId, agentId, comment) {
  const op = fx.prepare(nsId, agentId, 'rev-1', 1);
  const marker = fx.paths(nsId, agentId).accountMarker;
  const name = fx.account(nsId, agentId);
  L.sh(`printf '%s\\n' '${JSON.stringify({
    ...fx.agentOwner(nsId, agentId), account: name, uid: null, gid: null, ...(comment ? { comment } : {}),
  })}' > ${marker} && chmod 600 ${marker}`);
  return { op, name, marker };
}

test('an account left half made by a killed helper is completed on retry', async () => {
  // Killed after useradd, before the marker was completed: the account carries the
  // comment the pending marker recorded, so the retry adopts it.
  const comment = 'occ-ssh 0123456789abcdef01234567';
  const { op, name, marker } = writePendingMarker('ns-b', 'agent-half', comment);
  L.sh(`useradd --system --user-group --comment '${comment}' --no-create-home --shell /usr/sbin/nologin ${name}`);
  const result = await L.helper(op);
  assert.equal(result.ok, true, JSON.stringify(result));
  const recorded = JSON.parse(read(marker));
  assert.deepEqual([recorded.uid, recorded.gid, recorded.comment],
    [result.uid, Number(L.sh(`getent group ${name}`).split(':')[2]), comment]);
});

test('a pending marker neither adopts nor deletes an account the driver did not make', async () => {
  for (const [make, why] of [
    // Someone else made the same-named user while the marker was pending.
    ['useradd --system --user-group --no-create-home NAME', /has comment "", not the one the driver recorded/],
    ['useradd --system --user-group --comment "occ-ssh ffffffffffffffffffffffff" --no-create-home NAME', /not the one the driver recorded/],
    // A group alone: one useradd --user-group never leaves that.
    ['groupadd --system NAME', /group .* exists without its user/],
  ]) {
    const { op, name, marker } = writePendingMarker('ns-b', 'agent-squat', 'occ-ssh 00000000000000000000000a');
    L.sh(make.replaceAll('NAME', name));
    const before = L.sh(`getent passwd ${name}; getent group ${name}`);
    try {
      await expectRefusal(op, 'foreign-account', why);
      assert.equal(exists(fx.paths('ns-b', 'agent-squat').agentDir), false);
      // delete-namespace refuses too, before any change: the account is not removed.
      await expectRefusal(fx.deleteNamespace('ns-b'), 'foreign-account', why);
      assert.equal(L.sh(`getent passwd ${name}; getent group ${name}`), before);
      assert.equal(JSON.parse(read(marker)).uid, null, 'the marker stays pending');
    } finally {
      L.sh(`userdel ${name} 2>/dev/null; groupdel ${name} 2>/dev/null; rm -f ${marker}`);
    }
  }
  // With nothing in its way the same pending marker makes its account.
  const { op, name } = writePendingMarker('ns-b', 'agent-squat', 'occ-ssh 00000000000000000000000a');
  const made = await L.helper(op);
  assert.equal(made.ok, true, JSON.stringify(made));
  assert.equal(L.sh(`getent passwd ${name}`).split(':')[4], 'occ-ssh 00000000000000000000000a');
});

test('a superseded prepare returns ready:false and changes nothing', async () => {
  const p = fx.paths('ns-a', 'agent-1');
  // rev-3 (number 3) is current: revision 2 is older, revision 4 is newer.
  L.sh(`ln -s revisions/${L.sha12('rev-3')} ${p.agentDir}/current`);
  try {
    const before = fingerprint(fx.root);
    const older = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-old', 2, '{"old":true}\n'));
    assert.deepEqual([older.ok, older.ready, older.changed, older.port], [true, false, false, 19000]);
    L.sameHost(fingerprint(fx.root), before);
    const newer = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-new', 5, '{"new":true}\n'));
    assert.deepEqual([newer.ok, newer.ready, newer.changed], [true, true, true]);
  } finally {
    L.sh(`rm ${p.agentDir}/current`);
  }
  // served.json of a newer revision supersedes as well.
  L.sh(`printf '%s\\n' '${JSON.stringify({ ...fx.agentOwner('ns-a', 'agent-1'), revisionId: 'rev-new', revisionNumber: 5, configurationSha256: '0'.repeat(64), servedAt: 'x' })}' > ${p.agentDir}/served.json`);
  try {
    const older = await L.helper(fx.prepare('ns-a', 'agent-1', 'rev-older', 4, '{"older":true}\n'));
    assert.deepEqual([older.ok, older.ready, older.changed], [true, false, false]);
  } finally {
    L.sh(`rm ${p.agentDir}/served.json`);
  }
});

test('a unit without the exact ownership header is refused by activate, stop and delete', async () => {
  const p = fx.paths('ns-b', 'agent-b1', 'rev-1');
  const header = fx.unitText('ns-b', 'agent-b1', 19002);
  for (const foreign of [
    '[Unit]\nDescription=someone else\n[Service]\nExecStart=/bin/true\n',
    header.replace('# OCC-Agent: agent-b1', '# OCC-Agent: agent-b10'),
    header.replace('# OCC-Namespace: ns-b', '# OCC-Namespace: ns-a'),
  ]) {
    L.sh(`cat > ${p.unitPath}`, { input: foreign });
    try {
      await expectRefusal(fx.activate('ns-b', 'agent-b1', 'rev-1', 1), 'foreign-unit', /ownership header/);
      await expectRefusal(fx.agentOp('stop', 'ns-b', 'agent-b1', 'rev-1', 1, L.GATEWAY_CONFIG), 'foreign-unit');
      await expectRefusal(fx.agentOp('retire', 'ns-b', 'agent-b1', 'rev-1', 1, L.GATEWAY_CONFIG), 'foreign-unit');
      await expectRefusal(fx.deleteNamespace('ns-b'), 'foreign-unit');
      assert.equal(read(p.unitPath), foreign);
    } finally {
      L.sh(`rm -f ${p.unitPath}`);
    }
  }
  L.sh(`ln -s /dev/null ${p.unitPath}`);
  try {
    await expectRefusal(fx.activate('ns-b', 'agent-b1', 'rev-1', 1), 'unexpected-symlink');
  } finally {
    L.sh(`rm -f ${p.unitPath}`);
  }
});

test('activate without a prepared revision is refused (missing-revision)', async () => {
  const result = await L.helper(fx.activate('ns-b', 'agent-b1', 'rev-unprepared', 9));
  assert.equal(result.error.code, 'missing-revision');
  assert.equal(exists(fx.paths('ns-b', 'agent-b1').unitPath), false);
});

test('activate takes the port from agent.json: a port, unit or readiness bound in the operation is refused', async () => {
  // The Agent holds 19000; protocol 1 let the component name the port its unit would
  // bind, render the unit and choose how long readiness may take.
  for (const [field, value] of [['port', 19005], ['unit', { text: fx.unitText('ns-a', 'agent-1', 19005) }], ['readinessTimeoutMs', 1]]) {
    const request = fx.activate('ns-a', 'agent-1', 'rev-1', 1);
    request.op[field] = value;
    await expectRefusal(request, 'invalid-operation', new RegExp(`^operation\\.${field} is not a field of operation`));
  }
  assert.equal(exists(fx.paths('ns-a', 'agent-1').unitPath), false);
});

test('deactivate and inspect-agent verify ownership and change nothing', async () => {
  const before = fingerprint(fx.root);
  const result = await L.helper(fx.agentOp('deactivate', 'ns-a', 'agent-1', 'rev-1', 1, L.GATEWAY_CONFIG));
  assert.deepEqual([result.ok, result.changed], [true, false]);
  const inspect = await L.helper(fx.inspectAgent('ns-a', 'agent-1'));
  const marker = JSON.parse(read(`${fx.paths('ns-a', 'agent-1').agentDir}/agent.json`));
  assert.deepEqual([inspect.exists, inspect.port, inspect.account, inspect.uid, inspect.gid],
    [true, 19000, marker.account, marker.uid, marker.gid]);
  const none = await L.helper(fx.inspectAgent('ns-a', 'agent-none'));
  assert.deepEqual([none.ok, none.exists], [true, false]);
  const foreign = fx.agentOp('deactivate', 'ns-a', 'agent-1', 'rev-1', 1, L.GATEWAY_CONFIG);
  foreign.envelope.agent.servicePrincipalId = 'sp-other';
  assert.equal((await L.helper(foreign)).error.code, 'foreign-marker');
  L.sameHost(fingerprint(fx.root), before);
});

test('retire removes only that snapshot; stop without a current pointer changes nothing', async () => {
  const p = fx.paths('ns-a', 'agent-1', 'rev-2');
  const stop = await L.helper(fx.agentOp('stop', 'ns-a', 'agent-1', 'rev-2', 2, `${L.GATEWAY_CONFIG} `));
  assert.deepEqual([stop.ok, stop.changed], [true, false]);
  const retire = await L.helper(fx.agentOp('retire', 'ns-a', 'agent-1', 'rev-2', 2, `${L.GATEWAY_CONFIG} `));
  assert.deepEqual([retire.ok, retire.changed], [true, true]);
  assert.equal(exists(p.revDir), false);
  assert.equal(exists(fx.paths('ns-a', 'agent-1', 'rev-1').revDir), true);
  for (const kept of ['home', 'state', 'gateway-password.env', 'agent.json']) assert.equal(exists(`${p.agentDir}/${kept}`), true, kept);
  const again = await L.helper(fx.agentOp('retire', 'ns-a', 'agent-1', 'rev-2', 2, `${L.GATEWAY_CONFIG} `));
  assert.deepEqual([again.ok, again.changed], [true, false]);
});

test('delete-namespace removes the tree and its accounts, and retries accounts when the tree is gone', async () => {
  // Deleting ns-b leaves ns-a, its tree and its accounts, untouched.
  const nsA = fx.paths('ns-a');
  const aAccounts = ['agent-1'].map((a) => fx.account('ns-a', a));
  const bAgents = ['agent-b1', 'agent-b2', 'agent-nopw', 'agent-omitted', 'agent-half', 'agent-squat'];
  const bAccounts = bAgents.map((a) => fx.account('ns-b', a));
  const result = await L.helper(fx.deleteNamespace('ns-b'));
  assert.deepEqual([result.ok, result.changed], [true, true], JSON.stringify(result));
  assert.equal(exists(fx.paths('ns-b').nsDir), false);
  for (const name of bAccounts) {
    assert.equal(L.sh(`getent passwd ${name} || true`).trim(), '', `user ${name} removed`);
    assert.equal(L.sh(`getent group ${name} || true`).trim(), '', `group ${name} removed`);
    assert.equal(exists(`${fx.root}/accounts/${name}.json`), false);
    for (const list of ['/etc/cron.deny', '/etc/at.deny']) {
      assert.ok(!read(list).split('\n').includes(name), `${name} left ${list}`);
    }
  }
  // The deny lists keep what the operator put there.
  assert.ok(read('/etc/at.deny').split('\n').includes('nobody'));
  assert.equal(exists(nsA.nsDir), true, 'other Namespaces stay');
  for (const name of aAccounts) assert.notEqual(L.sh(`getent passwd ${name} || true`).trim(), '');
  assert.equal((await L.helper(fx.deleteNamespace('ns-b'))).changed, false);

  // A deletion interrupted after the tree went: only the accounts remain to clean.
  L.sh(`rm -rf ${nsA.nsDir}`);
  const retry = await L.helper(fx.deleteNamespace('ns-a'));
  assert.deepEqual([retry.ok, retry.changed], [true, true]);
  for (const name of aAccounts) {
    assert.equal(L.sh(`getent passwd ${name} || true`).trim(), '');
    assert.equal(exists(`${fx.root}/accounts/${name}.json`), false);
  }
  assert.equal(L.sh(`ls -A ${fx.root}/accounts | wc -l`).trim(), '0');
});
