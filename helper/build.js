'use strict';
// Assembles the shipped helper, helper/helper.js, from its modules in helper/src/:
// one program text, which the operator approves by SHA-256 and the host runs as
// `node -`. Each module is wrapped in a function that gets its own `module`,
// `exports` and a `require` that finds the other modules by `./name` and Node's
// built-ins by `node:name`; nothing else is read or added, so the same sources give
// the same bytes. `node helper/build.js` writes the file; `--check` only says
// whether it matches (tests/helper/build.test.js runs it).
const fs = require('node:fs');
const path = require('node:path');

// Every module, each after those it requires: the order they are loaded in.
const MODULES = [
  'constants', 'session', 'children', 'files', 'lock', 'values', 'render', 'layout',
  'leftovers', 'accounts', 'workspace-setup', 'operation', 'ports', 'readiness',
  'probe', 'operations', 'removal', 'journal', 'runtime', 'main',
];

const PREAMBLE = `'use strict';
// The OCC SSH Compute Driver's host helper: every effect the driver has on a host.
// The host runs it through its loader (\`<nodePath> -e <helper/boot.js>\`), with this
// source and then the helper's input on stdin, each a frame; the protocol (input,
// operations, events, markers, error codes, unit header) is helper/README.md.
//
// Shape of every mutating operation: parse and validate the operation, take the host
// lock, read what is there, verify ownership of everything it will touch, then act only
// where the host differs, reporting \`changed\`. Before each mutating step \`guard()\` checks
// that the SSH session is still open (a failed stdout write closes it), that the
// helper's own deadline has not passed and that the lock is still held.
//
// Assembled from helper/src/ by helper/build.js: edit the modules there, then run
// \`node helper/build.js\`. Run by the loader (which names its module \`occ-ssh-helper\`)
// this file is the helper; required as a module (the tests do), it only exports the
// tables and pure functions of \`api\` in helper/src/main.js.
const RUN_AS_HELPER = module.id === 'occ-ssh-helper';
const SOURCES = {
`;

const LOADER = `};

const loaded = {};
function load(name) {
  if (!loaded[name]) {
    const mod = { exports: {} };
    loaded[name] = mod;
    const local = (spec) => (spec.startsWith('./') ? load(spec.slice(2)) : require(spec));
    SOURCES[name](mod, mod.exports, local);
  }
  return loaded[name].exports;
}

const main = load('main');
if (RUN_AS_HELPER) {
  main.run(module.helperSha256);
} else {
  module.exports = main.api;
}
`;

function assemble(dir) {
  const found = fs.readdirSync(dir).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3)).sort();
  const listed = [...MODULES].sort();
  if (JSON.stringify(found) !== JSON.stringify(listed)) {
    throw new Error(`helper/src holds ${found.join(', ')}; build.js lists ${listed.join(', ')}`);
  }
  const parts = [PREAMBLE];
  for (const name of MODULES) {
    const text = fs.readFileSync(path.join(dir, `${name}.js`), 'utf8');
    if (!text.endsWith('\n')) throw new Error(`helper/src/${name}.js does not end with a newline`);
    parts.push(`'${name}': function (module, exports, require) {\n${text}},\n`);
  }
  parts.push(LOADER);
  return parts.join('');
}

function build({ check = false } = {}) {
  const here = __dirname;
  const text = assemble(path.join(here, 'src'));
  const target = path.join(here, 'helper.js');
  const current = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : null;
  if (check) return current === text;
  if (current !== text) fs.writeFileSync(target, text);
  return true;
}

module.exports = { MODULES, assemble, build };

if (require.main === module) {
  const check = process.argv.includes('--check');
  if (!build({ check })) {
    process.stderr.write('helper/helper.js differs from helper/src/: run `node helper/build.js`\n');
    process.exit(1);
  }
}
