// A TCP relay in front of a rig host's sshd that behaves like a real network:
// this kernel has no `netem` qdisc, so latency, stalls and cut connections
// come from here. Node built-ins only.
//
//   node tests/rig/relay.mjs --to 10.201.1.2:22 [--listen 127.0.0.1:0]
//                            [--delay-ms 25] [--jitter-ms 0]
//
// Prints `listening <port>` on stdout once it accepts connections. Every chunk
// is held `delay` (plus up to `jitter`) milliseconds in each direction, in
// order: a round trip through it costs twice the delay. Commands, one per line
// on stdin, change it while it runs:
//   delay <ms> [<jitter ms>]     the hold of every later chunk
//   stall <up|down|both> <ms>    hold a direction for that long (up: towards
//                                the target), as a congested or flapping link
//   cut                          close every connection at once, as a link
//                                that went away
// Each command is answered `ok <command>` on stdout.

import { createServer, connect } from "node:net";
import { createInterface } from "node:readline";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const [toHost, toPort] = option("to", "").split(/:(?=\d+$)/);
if (!toHost || !toPort) {
  process.stderr.write("relay: --to <host:port> is required\n");
  process.exit(2);
}
const [listenHost, listenPort] = option("listen", "127.0.0.1:0").split(/:(?=\d+$)/);
let delay = Number(option("delay-ms", "0"));
let jitter = Number(option("jitter-ms", "0"));
const stalledUntil = { up: 0, down: 0 };
const sockets = new Set();
// A direction pauses its reader past this much held data, and resumes below it.
const HIGH_WATER = 8 << 20;

/**
 * Pass `from`'s bytes to `to`, each chunk held, in order. The chunks wait in
 * one queue per direction drained by one timer: timers of different lengths
 * that fall due at the same moment may fire in any order, and a byte stream
 * reordered is a corrupt one (ssh ends with "Bad packet length").
 */
function pipeHeld(from, to, direction) {
  const queue = [];
  let last = 0;
  let held = 0;
  let timer = null;
  let ended = false;
  const drain = () => {
    timer = null;
    const now = Date.now();
    while (queue.length && queue[0].at <= now) {
      const { chunk } = queue.shift();
      held -= chunk.length;
      if (!to.destroyed) to.write(chunk);
    }
    if (held <= HIGH_WATER && from.isPaused()) from.resume();
    if (queue.length) timer = setTimeout(drain, queue[0].at - now);
    else if (ended && !to.destroyed) to.end();
  };
  from.on("data", (chunk) => {
    const now = Date.now();
    const at = Math.max(now + delay + Math.random() * jitter, last, stalledUntil[direction]);
    last = at;
    held += chunk.length;
    if (held > HIGH_WATER) from.pause();
    queue.push({ at, chunk });
    if (timer === null) timer = setTimeout(drain, at - now);
  });
  from.on("end", () => {
    ended = true;
    if (timer === null) drain();
  });
}

const server = createServer((client) => {
  const target = connect(Number(toPort), toHost);
  for (const s of [client, target]) {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {
      client.destroy();
      target.destroy();
    });
  }
  client.on("close", () => target.destroy());
  target.on("close", () => client.destroy());
  pipeHeld(client, target, "up");
  pipeHeld(target, client, "down");
});

server.listen(Number(listenPort), listenHost, () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, a, b] = line.trim().split(/\s+/);
  if (command === "delay") {
    delay = Number(a);
    jitter = Number(b ?? jitter);
  } else if (command === "stall") {
    const until = Date.now() + Number(b);
    if (a === "up" || a === "both") stalledUntil.up = until;
    if (a === "down" || a === "both") stalledUntil.down = until;
  } else if (command === "cut") {
    for (const s of sockets) s.destroy();
  } else {
    process.stdout.write(`error ${line}\n`);
    return;
  }
  process.stdout.write(`ok ${line.trim()}\n`);
});
// The relay ends with its controller.
process.stdin.on("end", () => process.exit(0));
