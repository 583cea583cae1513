// A ComputeDriver backed by a WebAssembly driver component, for controllers on
// Node.js: it spawns `occ-driver-host serve` and speaks JSON-RPC 2.0 with it over
// stdio. Node built-ins only.
//
//   const driver = await createComponentDriver({ component, installation, hooks });
//   await driver.ensureNamespace(namespace);

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** A failed contract call: the driver's verdict, or the host's. */
export class DriverError extends Error {
  constructor(message, { failure, code, host, rpcCode } = {}) {
    super(message);
    this.name = "DriverError";
    /** "retryable" or "permanent". */
    this.failure = failure ?? "retryable";
    this.code = code ?? "driver-error";
    this.host = host ?? null;
    this.rpcCode = rpcCode ?? null;
  }
}

const HOOKS = {
  "hooks/afterNamespacePrepared": "afterNamespacePrepared",
  "hooks/beforeWorkloadStart": "beforeWorkloadStart",
  "hooks/beforeWorkloadStop": "beforeWorkloadStop",
  "hooks/beforeNamespaceDelete": "beforeNamespaceDelete",
};

const METHOD_NOT_FOUND = -32601;

/**
 * The contract methods and how each takes its arguments, from the one list the
 * host keeps in step with its own (`methods.json`, checked by a host test).
 */
export const METHODS = JSON.parse(readFileSync(new URL("./methods.json", import.meta.url), "utf8")).methods;

/**
 * Start a driver host for `component` with `installation` (a file path, or the
 * Installation document as an object) and return the ComputeDriver object.
 */
export async function createComponentDriver(options) {
  const { component, installation, hooks = {}, onProgress, onStderr } = options ?? {};
  if (typeof installation !== "string" && (typeof installation !== "object" || installation === null)) {
    throw new TypeError("createComponentDriver: installation must be a file path or an Installation object");
  }
  for (const name of Object.keys(hooks)) {
    if (!Object.values(HOOKS).includes(name) || typeof hooks[name] !== "function") {
      throw new TypeError(`createComponentDriver: unknown hook ${name}; hooks are ${Object.values(HOOKS).join(", ")}`);
    }
  }
  const binary = options.hostBinary ?? process.env.OCC_DRIVER_HOST ?? "occ-driver-host";
  let scratch = null;
  let installationPath = installation;
  if (typeof installation === "object") {
    // JSON is YAML: the host reads this like any installation file. Private,
    // because it names the SSH identity and hosts.
    scratch = await mkdtemp(join(tmpdir(), "occ-driver-"));
    installationPath = join(scratch, "installation.yaml");
    await writeFile(installationPath, JSON.stringify(installation), { mode: 0o600 });
  }
  const args = ["serve", "--installation", installationPath];
  if (component) args.push("--component", component);
  if (options.auditLog) args.push("--audit-log", options.auditLog);
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"], env: options.env ?? process.env });

  const pending = new Map();
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
        { failure: "retryable", code: "host-exited" },
      );
      failAll(exitError);
      resolve();
    });
    child.on("error", (error) => {
      closed = true;
      exitError = new DriverError(`cannot start ${binary}: ${error.message}`, { failure: "permanent", code: "host-missing" });
      failAll(exitError);
      resolve();
    });
  });

  const answerHook = async (message) => {
    const name = HOOKS[message.method];
    const hook = name && hooks[name];
    if (!hook) {
      send({ jsonrpc: "2.0", id: message.id, error: { code: METHOD_NOT_FOUND, message: `no ${message.method} hook selected` } });
      return;
    }
    try {
      const result = await hook(message.params ?? {});
      send({ jsonrpc: "2.0", id: message.id, result: result ?? null });
    } catch (error) {
      send({ jsonrpc: "2.0", id: message.id, error: { code: -32000, message: String(error?.message ?? error) } });
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
    if (message.method) {
      void answerHook(message);
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

  const call = (method, params, { signal } = {}) => {
    if (closed) return Promise.reject(exitError ?? new DriverError("driver closed", { code: "closed" }));
    const id = nextId++;
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

  // One function per method, shaped by how the method takes its arguments.
  const shapes = {
    none: (name) => (options) => call(name, {}, options),
    namespace: (name) => (namespace, options) => call(name, { namespace }, options),
    binding: (name) => (binding, options) => call(name, binding, options),
    revision: (name) => (revision, options = {}) =>
      call(name, { revision, ...(options.binding ? { binding: options.binding } : {}) }, options),
    "revision+context": (name) => (revision, context = {}, options = {}) =>
      call(name, { revision, context, ...(options.binding ? { binding: options.binding } : {}) }, options),
  };
  const methods = Object.fromEntries(METHODS.map(({ name, params }) => [name, shapes[params](name)]));

  return {
    ...methods,
    /** The host's process id. */
    pid: child.pid,
    /** Stop the host; in-flight calls are cancelled. */
    async close() {
      if (!closed) child.stdin.end();
      await exited;
      if (scratch) await rm(scratch, { recursive: true, force: true });
    },
  };
}
