'use strict';
// Markers across releases, without a host: what owns host state (the Driver id and the
// implementation without its version), and the format rule (a marker of a newer format
// than this helper writes is refused, naming who wrote it).
//   node --test tests/helper/markers.test.js

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { MARKER_FORMAT } = require('../../helper/src/constants');
const { readMarker } = require('../../helper/src/files');
const { checkOwner, markerText, ownerOf } = require('../../helper/src/layout');

test('the owner is the implementation without its version', () => {
  const table = [
    ['occ-driver-host-compute@0.2.0', 'occ-driver-host-compute'],
    ['occ-driver-host-compute@0.3.0', 'occ-driver-host-compute'],
    ['pkg@1.2.3', 'pkg'],
    ['@scope/pkg@1.2.3-rc.1', '@scope/pkg'],
    ['@scope/pkg', '@scope/pkg'],
    ['occ/ssh', 'occ/ssh'],
    ['pkg@', 'pkg@'],
    ['@', '@'],
    ['a@b@1.0.0', 'a@b'],
  ];
  for (const [implementation, owner] of table) assert.equal(ownerOf(implementation), owner, implementation);
});

test('another version of the same package owns the marker; another package or Driver id does not', () => {
  const marker = {
    driverId: 'compute-ssh', implementation: 'occ-driver-host-compute@0.2.0', namespaceId: 'ns-1', namespaceName: 'a',
  };
  const expected = (over) => ({ ...marker, implementation: 'occ-driver-host-compute@0.3.0', ...over });
  checkOwner(marker, expected({}), 'namespace.json', 'foreign-marker');
  checkOwner(marker, expected({ implementation: 'occ-driver-host-compute@0.1.9' }), 'namespace.json', 'foreign-marker');
  // The package named without a version (an operator's occ-driver-host call) owns it too.
  checkOwner(marker, expected({ implementation: 'occ-driver-host-compute' }), 'namespace.json', 'foreign-marker');
  const refused = (over, field) => assert.throws(() => checkOwner(marker, expected(over), 'namespace.json', 'foreign-marker'),
    (e) => e.code === 'foreign-marker' && e.message.startsWith(`namespace.json: ${field} is`), JSON.stringify(over));
  refused({ implementation: 'another-package@0.2.0' }, 'implementation');
  refused({ implementation: 'occ/ssh' }, 'implementation');
  refused({ implementation: 'occ-driver-host-compute-2@0.2.0' }, 'implementation');
  refused({ driverId: 'compute-ssh-2' }, 'driverId');
  refused({ namespaceName: 'b' }, 'namespaceName');
  // An implementation without a version (OCC's own occ/ssh) is compared whole.
  checkOwner({ ...marker, implementation: 'occ/ssh' }, expected({ implementation: 'occ/ssh' }), 'namespace.json', 'foreign-marker');
  assert.throws(() => checkOwner({ ...marker, implementation: 'occ/ssh' }, expected({ implementation: 'occ/ssh2' }),
    'namespace.json', 'foreign-marker'), /implementation is "occ\/ssh"/);
});

test('a marker names its format and who wrote it', () => {
  const op = { driver: { id: 'compute-ssh', implementation: 'occ-driver-host-compute@0.3.0' }, helperSha256: 'a'.repeat(64) };
  const text = markerText(op, { driverId: 'compute-ssh', implementation: 'occ-driver-host-compute@0.2.0' });
  assert.ok(text.endsWith('\n'));
  assert.deepEqual(JSON.parse(text), {
    driverId: 'compute-ssh',
    implementation: 'occ-driver-host-compute@0.2.0',
    format: MARKER_FORMAT,
    writtenBy: { implementation: 'occ-driver-host-compute@0.3.0', helper: 'a'.repeat(64) },
  });
  assert.equal(JSON.parse(markerText({ driver: op.driver }, {})).writtenBy.helper, null);
});

test('every format up to this helper\'s is read; a newer one is refused naming the file, its format and its writer', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'occ-markers-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name, value) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, JSON.stringify(value), { mode: 0o600 });
    return file;
  };
  assert.deepEqual(readMarker(write('first.json', { a: 1 })), { a: 1 });
  for (let format = 1; format <= MARKER_FORMAT; format++) {
    assert.equal(readMarker(write(`f${format}.json`, { format })).format, format);
  }
  const newer = write('newer.json', { format: MARKER_FORMAT + 1, writtenBy: { implementation: 'pkg@9.0.0' } });
  assert.throws(() => readMarker(newer), (e) => e.code === 'newer-format' &&
    e.message === `${newer} is marker format ${MARKER_FORMAT + 1}, written by pkg@9.0.0; this helper reads formats 1 to ` +
      `${MARKER_FORMAT}: roll forward to at least pkg@9.0.0`);
  const anonymous = write('anonymous.json', { format: 99 });
  assert.throws(() => readMarker(anonymous), /written by a later release; .* roll forward to at least a later release/);
  for (const format of ['2', 0, -1, 1.5, null]) {
    assert.throws(() => readMarker(write('bad.json', { format }), 'foreign-account'),
      (e) => e.code === 'foreign-account' && /is not a marker format/.test(e.message), JSON.stringify(format));
  }
});
