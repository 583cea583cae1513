'use strict';
// The helper's loader: the host runs `<nodePath> -e <this text>` and writes on stdin
// two frames, each a 4-byte big-endian length and that many bytes: the approved
// helper's text, then the helper's input (helper/README.md). This text reads the first
// and runs it as the main CommonJS module `occ-ssh-helper`, which reads the second.
// So the command line any account on the host can read holds only this constant text.
// The module carries the SHA-256 of the text it runs (`helperSha256`): what the
// operator approved, which the helper records in every marker it writes.
const fs = require('node:fs');
const vm = require('node:vm');
const Module = require('node:module');
function readExact(n) {
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
    if (read === 0) throw new Error('occ-ssh-helper: stdin ended inside the helper frame');
    got += read;
  }
  return buffer;
}
const bytes = readExact(readExact(4).readUInt32BE(0));
const text = bytes.toString('utf8');
const helper = new Module('occ-ssh-helper', null);
helper.filename = '/occ-ssh-helper';
helper.paths = [];
helper.helperSha256 = require('node:crypto').createHash('sha256').update(bytes).digest('hex');
vm.runInThisContext(Module.wrap(text), { filename: 'occ-ssh-helper' })
  .call(helper.exports, helper.exports, require, helper, helper.filename, '/');
