'use strict';
// The fault guest's "helper": what a hostile or broken remote command does to the
// host that reads its output. The operation is base64 JSON, as for the real helper,
// and the host's envelope follows it; deadlineMs 1300 asks for 300 MB of stdout.
const op = JSON.parse(Buffer.from(process.argv[2] || 'e30=', 'base64').toString('utf8'));
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
  process.stdout.write(`${JSON.stringify({ event: 'result', ok: true, argv: process.argv.length })}\n`);
}
