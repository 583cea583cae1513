'use strict';
// The shipped helper is its modules assembled: helper/helper.js is byte for byte what
// helper/build.js makes of helper/src/, each module owns one concern in a file a reader
// can open (a head comment, not over 500 lines), requires only modules loaded before
// it, and required directly the modules give what the shipped text gives. Pure: no rig.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..', 'helper');
const { MODULES, assemble, build } = require(path.join(root, 'build.js'));

test('helper.js is what build.js assembles from helper/src, and assembling is deterministic', () => {
  const text = assemble(path.join(root, 'src'));
  assert.equal(assemble(path.join(root, 'src')), text);
  const shipped = fs.readFileSync(path.join(root, 'helper.js'), 'utf8');
  assert.ok(shipped === text, 'helper/helper.js differs from helper/src/: run `node helper/build.js`');
  assert.equal(build({ check: true }), true);
});

test('a module left out of the list, or a listed one missing, stops the build', () => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'occ-helper-src-'));
  try {
    for (const name of MODULES) fs.copyFileSync(path.join(root, 'src', `${name}.js`), path.join(dir, `${name}.js`));
    fs.writeFileSync(path.join(dir, 'stray.js'), "'use strict';\n");
    assert.throws(() => assemble(dir), /stray/);
    fs.rmSync(path.join(dir, 'stray.js'));
    fs.rmSync(path.join(dir, 'ports.js'));
    assert.throws(() => assemble(dir), /ports/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('each module says what it owns, stays small and requires only modules loaded before it', () => {
  for (const [i, name] of MODULES.entries()) {
    const text = fs.readFileSync(path.join(root, 'src', `${name}.js`), 'utf8');
    const lines = text.split('\n');
    assert.equal(lines[0], "'use strict';", name);
    assert.match(lines[1], /^\/\/ \S/, `${name}.js has no head comment`);
    assert.ok(lines.length <= 500, `${name}.js has ${lines.length} lines`);
    for (const [, spec] of text.matchAll(/require\('([^']+)'\)/g)) {
      if (spec.startsWith('node:')) continue;
      assert.ok(spec.startsWith('./'), `${name}.js requires ${spec}`);
      const at = MODULES.indexOf(spec.slice(2));
      assert.ok(at >= 0 && at < i, `${name}.js requires ${spec}, which is not loaded before it`);
    }
  }
});

test('the modules required directly give what the shipped helper exports', () => {
  const shipped = require(path.join(root, 'helper.js'));
  const { api } = require(path.join(root, 'src', 'main.js'));
  assert.deepEqual(Object.keys(api).sort(), Object.keys(shipped).sort());
  const shown = (v) => (typeof v === 'function' ? v.toString() : v instanceof Set ? [...v] : v);
  for (const key of Object.keys(api)) {
    assert.deepEqual(shown(api[key]), shown(shipped[key]), key);
  }
  // An envelope with nothing but its version: both refuse it, each with its own HelperError.
  const envelope = { version: api.PROTOCOL_VERSION };
  assert.throws(() => shipped.parseEnvelope(envelope), shipped.HelperError);
  assert.throws(() => api.parseEnvelope(envelope), api.HelperError);
});
