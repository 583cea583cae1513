// A stand-in for the OpenClaw gateway, for the fault and scale tests: the unit runs
// it exactly as it runs OpenClaw (`node <entrypoint> gateway --port <port>`), and
// what it does is chosen by the name it is installed under:
//
//   ready.mjs        answers 200 on /readyz (and every other path), as a healthy gateway
//   unavailable.mjs  listens and answers 503 on /readyz, forever: it never becomes ready
//   exits.mjs        exits with status 1 at once, as a gateway whose startup fails
//
// Every mode but `exits` prints a line when it listens and one per request (`GET
// /<path>`, percent-decoded): what the runtime-log tests read back from the unit's
// journal, each Agent's gateway printing markers of its own.
//
// It holds a few tens of MB where the real gateway holds about 750 MB, so a hundred
// Agents fit on one machine. It is never an OpenClaw: the reports name it a stand-in.
import { createServer } from "node:http";
import { basename } from "node:path";

const mode = basename(process.argv[1], ".mjs");
const at = process.argv.indexOf("--port");
const port = Number(at > 0 ? process.argv[at + 1] : process.env.OPENCLAW_GATEWAY_PORT);
if (!["ready", "unavailable", "exits"].includes(mode) || !Number.isInteger(port)) {
  console.error(`stand-in gateway: unknown mode ${mode} or port ${port}`);
  process.exit(2);
}
if (mode === "exits") {
  console.error("stand-in gateway: exiting at start, as a gateway whose startup fails");
  process.exit(1);
}
const status = mode === "ready" ? 200 : 503;
createServer((request, response) => {
  let path = request.url;
  try {
    path = decodeURIComponent(path);
  } catch {
    // Not percent-encoding: logged as it came.
  }
  console.log(`stand-in gateway: ${request.method} ${path}`);
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify({ ready: status === 200, standIn: true }));
}).listen(port, "127.0.0.1", () => console.log(`stand-in gateway: ${mode} on 127.0.0.1:${port}`));
