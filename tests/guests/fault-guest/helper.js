'use strict';
// The fault guest's "helper": what a hostile or broken remote command does to the
// host that reads its output. Its input comes as the real helper's does, a frame on
// stdin after its own text ({"args": [<base64 operation JSON>, <base64 envelope>]});
// deadlineMs 1300 asks for 300 MB of stdout.
const fs = require('node:fs');
const take = (n) => {
  const b = Buffer.alloc(n);
  for (let got = 0; got < n;) {
    const r = fs.readSync(0, b, got, n - got, null);
    if (r === 0) break;
    got += r;
  }
  return b;
};
const input = JSON.parse(take(take(4).readUInt32BE(0)).toString('utf8'));
const op = JSON.parse(Buffer.from(input.args[0] || 'e30=', 'base64').toString('utf8'));
if (op.deadlineMs === 1300) {
  // Megabytes without a single newline.
  const chunk = Buffer.alloc(1 << 20, 0x78);
  let left = 300;
  const write = () => {
    while (left > 0) {
      left -= 1;
      if (!process.stdout.write(chunk)) {
        process.stdout.once('drain', write);
        return;
      }
    }
  };
  process.stdout.on('error', () => process.exit(0));
  write();
} else {
  process.stdout.write(`${JSON.stringify({ event: 'result', ok: true, args: input.args.length })}\n`);
}
