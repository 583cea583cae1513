// The JSON-RPC 2.0 client of `occ-driver-host serve`: one host process per
// driver, one message per line on its stdio (the peer is occ-driver-host-rpc's rpc.mjs). Node
// built-ins only.
//
// The host calls back for lifecycle hooks (requests `hooks/<name>`), may cancel
// those requests (`$/cancelRequest`, when it stops waiting), and reports remote
// progress (`$/progress`). Calls are cancelled with `$/cancelRequest` when their
// AbortSignal fires.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

import { DriverError, Peer, RPC } from "occ-driver-host-rpc";
import { EXIT_STATUS } from "occ-driver-host-rpc/codes";

export { DriverError, RPC };

/**
 * Spawn `binary serve` with `args` and speak JSON-RPC with it.
 * `onRequest(method, params, signal)` answers the host's own requests (hooks);
 * throw an Error with `rpcCode` to answer with that code.
 */
export function spawnHost({ binary, args, env, onRequest, onProgress, onStderr }) {
  const child = spawn(binary, ["serve", ...args], { stdio: ["pipe", "pipe", "pipe"], env: env ?? process.env });
  const peer = new Peer({
    write: (line) => child.stdin.write(line),
    onRequest,
    onNotification: (method, params) => {
      if (method === "$/progress") onProgress?.(params);
    },
    abortedError: () => new DriverError("cancelled before it started", { code: "cancelled" }),
  });
  let stderrTail = "";

  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    stderrTail = (stderrTail + chunk).slice(-4096);
    onStderr?.(chunk);
  });
  child.stdin.on("error", () => {});
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      peer.close(
        new DriverError(`occ-driver-host exited (${signal ?? code})${stderrTail ? ": " + stderrTail.trim() : ""}`, {
          failure: code === EXIT_STATUS.permanent ? "permanent" : "retryable",
          code: "host-exited",
        }),
      );
      resolve();
    });
    child.on("error", (error) => {
      peer.close(new DriverError(`cannot start ${binary}: ${error.message}`, { code: "host-missing" }));
      resolve();
    });
  });
  createInterface({ input: child.stdout }).on("line", (line) => peer.receive(line));

  return {
    /** Call `method`; `signal` cancels it; `id` fixes the request id. Resolves to the result. */
    call: (method, params, options) => peer.call(method, params, options),
    /** A fresh request id, for a caller that needs to know it before calling. */
    nextId: () => peer.nextId(),
    pid: child.pid,
    /** Whether the process has exited (or never started). */
    get closed() {
      return peer.closed !== null;
    },
    /** Stop the host; in-flight calls are cancelled. */
    async close() {
      if (peer.closed === null) child.stdin.end();
      await exited;
    },
  };
}
