// The JSON-RPC 2.0 client of `occ-driver-host serve`: one host process per
// driver, one message per line on its stdio. Node built-ins only.
//
// The host calls back for lifecycle hooks (requests `hooks/<name>`), may cancel
// those requests (`$/cancelRequest`, when it stops waiting), and reports remote
// progress (`$/progress`). Calls are cancelled with `$/cancelRequest` when their
// AbortSignal fires.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

/** JSON-RPC error codes the host and this client use. */
export const RPC = {
  METHOD_NOT_FOUND: -32601,
  DRIVER_FAILED: -32000,
  REQUEST_CANCELLED: -32800,
};

/** A failed call: the driver's verdict, or the host's. */
export class DriverError extends Error {
  constructor(message, { failure, code, host, rpcCode } = {}) {
    super(message);
    this.name = "DriverError";
    /** "retryable" or "permanent". */
    this.failure = failure ?? "retryable";
    /** A stable code, e.g. "unsupported-plugins" or "ssh-connect". */
    this.code = code ?? "driver-error";
    /** The configured host alias involved, when there is one. */
    this.host = host ?? null;
    this.rpcCode = rpcCode ?? null;
  }
}

/**
 * Spawn `binary serve` with `args` and speak JSON-RPC with it.
 * `onRequest(method, params, signal)` answers the host's own requests (hooks);
 * throw an Error with `rpcCode` to answer with that code.
 */
export function spawnHost({ binary, args, env, onRequest, onProgress, onStderr }) {
  const child = spawn(binary, ["serve", ...args], { stdio: ["pipe", "pipe", "pipe"], env: env ?? process.env });
  const pending = new Map();
  const incoming = new Map();
  let nextId = 1;
  let closed = false;
  let exitError = null;
  let stderrTail = "";

  const send = (message) => {
    if (!closed) child.stdin.write(JSON.stringify(message) + "\n");
  };
  const failAll = (error) => {
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
  };

  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    stderrTail = (stderrTail + chunk).slice(-4096);
    if (onStderr) onStderr(chunk);
  });
  child.stdin.on("error", () => {});
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      closed = true;
      exitError = new DriverError(
        `occ-driver-host exited (${signal ?? code})${stderrTail ? ": " + stderrTail.trim() : ""}`,
        { failure: code === 65 ? "permanent" : "retryable", code: "host-exited" },
      );
      failAll(exitError);
      for (const controller of incoming.values()) controller.abort(exitError);
      resolve();
    });
    child.on("error", (error) => {
      closed = true;
      exitError = new DriverError(`cannot start ${binary}: ${error.message}`, { failure: "permanent", code: "host-missing" });
      failAll(exitError);
      resolve();
    });
  });

  const answer = async (message) => {
    const controller = new AbortController();
    incoming.set(JSON.stringify(message.id), controller);
    try {
      const result = await onRequest(message.method, message.params ?? {}, controller.signal);
      send({ jsonrpc: "2.0", id: message.id, result: result ?? null });
    } catch (error) {
      const data = error?.failure ? { failure: error.failure } : undefined;
      send({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: error?.rpcCode ?? RPC.DRIVER_FAILED, message: String(error?.message ?? error), data },
      });
    } finally {
      incoming.delete(JSON.stringify(message.id));
    }
  };

  createInterface({ input: child.stdout }).on("line", (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (message.method === "$/progress") {
      if (onProgress) onProgress(message.params);
      return;
    }
    if (message.method === "$/cancelRequest") {
      // The host stopped waiting for one of its requests: abort that hook.
      incoming.get(JSON.stringify(message.params?.id))?.abort(new Error("the driver host cancelled the hook"));
      return;
    }
    if (message.method) {
      void answer(message);
      return;
    }
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error) {
      const data = message.error.data ?? {};
      waiter.reject(
        new DriverError(message.error.message, {
          failure: data.failure,
          code: data.code,
          host: data.host,
          rpcCode: message.error.code,
        }),
      );
    } else {
      waiter.resolve(message.result);
    }
  });

  /** Call `method`; `signal` cancels it. Resolves to the result. */
  const call = (method, params, { signal, id: fixedId } = {}) => {
    if (closed) return Promise.reject(exitError ?? new DriverError("driver closed", { code: "closed" }));
    const id = fixedId ?? nextId++;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new DriverError("cancelled before it started", { failure: "retryable", code: "cancelled" }));
        return;
      }
      const onAbort = () => send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id } });
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = (f) => (value) => {
        signal?.removeEventListener("abort", onAbort);
        f(value);
      };
      pending.set(id, { resolve: done(resolve), reject: done(reject) });
      send({ jsonrpc: "2.0", id, method, params });
    });
  };

  return {
    call,
    /** A fresh request id, for a caller that needs to know it before calling. */
    nextId: () => nextId++,
    pid: child.pid,
    /** Whether the process has exited (or never started). */
    get closed() {
      return closed;
    },
    /** Stop the host; in-flight calls are cancelled. */
    async close() {
      if (!closed) child.stdin.end();
      await exited;
    },
  };
}
