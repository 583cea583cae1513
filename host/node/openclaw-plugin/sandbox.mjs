// OpenClaw's SSH sandbox backend, served by a WebAssembly component: this module
// spawns `occ-driver-host serve` on a private Unix socket and gives OpenClaw the
// shapes it expects from a sandbox backend: a factory whose handle has
// OpenClaw's fields (runtimeId, workdir, buildExecSpec, runShellCommand,
// createFsBridge, ...) and a manager (describeRuntime, removeRuntime). Node
// built-ins only.
//
//   const host = await startSandboxHost({ installation, component });
//   const handle = await host.createHandle({ scopeKey, workspaceDir });
//   const bridge = handle.createFsBridge({ sandbox: {} });
//   await bridge.writeFile({ filePath: "notes.md", data: "hi" });
//   await host.close();

import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { assertValidExecCommand } from "./exec-command.mjs";
import { hostEnvironment, resolveHostBinary } from "occ-driver-host-rpc/host-binary";
import { DriverError, Peer } from "occ-driver-host-rpc";

/** The sandbox component a release carries beside this module, when it does. */
export function bundledComponent() {
  const file = fileURLToPath(new URL("./guest_ssh_sandbox.wasm", import.meta.url));
  return existsSync(file) ? file : undefined;
}

/**
 * A failed sandbox call: the backend's verdict, or the host's. The one error
 * class of this package's clients (occ-driver-host-rpc), under the name sandbox callers
 * know it by; `code` is the backend's: not-found, escapes-workspace, symlink, ...
 */
export { DriverError as SandboxError };

/** The backend id this client registers under (see ./index.mjs). */
export const BACKEND_ID = "occ-ssh";

/**
 * The binary the plugin's config names: `binary`, or `hostBinary`, its name
 * before 0.3.0, which an installed config may still carry (`warn` says so once).
 */
export function binaryOf(pluginConfig, warn) {
  if (pluginConfig.binary !== undefined) return pluginConfig.binary;
  if (pluginConfig.hostBinary !== undefined) {
    warn?.(`${BACKEND_ID}: plugins.entries.${BACKEND_ID}.config.hostBinary is deprecated: name the binary in binary (as driverHost.binary in the compute package)`);
  }
  return pluginConfig.hostBinary;
}

const b64 = (data) => Buffer.from(typeof data === "string" ? data : data ?? []).toString("base64");

/**
 * One JSON-RPC connection to the host's socket (the peer is occ-driver-host-rpc's rpc.mjs). It
 * keeps this process alive only while a call is pending.
 */
export class Connection {
  #outputs = new Map();

  constructor(socket) {
    this.socket = socket;
    this.peer = new Peer({
      write: (line) => socket.write(line),
      // A command's output as it arrives, for the call that runs it.
      onNotification: (method, params) => {
        if (method === "$/output") this.#outputs.get(params?.id)?.(params.stream, Buffer.from(params.data, "base64"));
      },
      abortedError: () => Object.assign(new Error("Aborted"), { name: "AbortError" }),
      onBusy: (busy) => (busy ? socket.ref() : socket.unref()),
    });
    socket.unref();
    createInterface({ input: socket }).on("line", (line) => this.peer.receive(line));
    socket.on("error", (e) => this.peer.close(new DriverError(`occ-driver-host socket: ${e.message}`, { code: "host-exited" })));
    socket.on("close", () => this.peer.close(new DriverError("occ-driver-host closed the connection", { code: "host-exited" })));
  }

  static open(socketPath) {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      socket.once("connect", () => resolve(new Connection(socket)));
      socket.once("error", reject);
    });
  }

  /** The error calls fail with once the connection has ended, else null. */
  get closed() {
    return this.peer.closed;
  }

  /**
   * Call `method`; `signal` cancels it (the host kills the remote command);
   * `onOutput(stream, bytes)` sees the command's output as it arrives.
   */
  async call(method, params, { signal, onOutput } = {}) {
    const id = this.peer.nextId();
    if (onOutput) this.#outputs.set(id, onOutput);
    try {
      return await this.peer.call(method, params, { signal, id });
    } finally {
      this.#outputs.delete(id);
    }
  }

  close() {
    this.socket.end();
  }
}

/**
 * Start a host for a sandbox installation: `installation` is a file path or the
 * Installation document as an object (`drivers.sandbox`). `binary` is the
 * occ-driver-host to run (`hostBinary`, its former name, is still read);
 * `cacheDir` its precompiled components' directory.
 */
export async function startSandboxHost(options) {
  const { installation, component, onStderr } = options ?? {};
  if (typeof installation !== "string" && (typeof installation !== "object" || installation === null)) {
    throw new TypeError("startSandboxHost: installation must be a file path or an Installation object");
  }
  const binary = resolveHostBinary(options.binary ?? options.hostBinary, "the plugin's binary");
  // Private: it holds the socket. An installation given as an object (it may
  // carry identityData) never touches a disk: the host reads it from a pipe,
  // its descriptor 3, so that no crash of this process leaves the key behind.
  const scratch = await mkdtemp(path.join(tmpdir(), "occ-sandbox-"));
  const inline = typeof installation === "object";
  const installationPath = inline ? "/dev/fd/3" : installation;
  const socketPath = path.join(scratch, "host.sock");
  // The host ends when this process does: it keeps a pipe to the host's stdin.
  const args = ["serve", "--installation", installationPath, "--listen", socketPath, "--until-stdin-closes"];
  if (options.cacheDir) args.push("--cache-dir", options.cacheDir);
  if (component) args.push("--component", component);
  if (options.auditLog) args.push("--audit-log", options.auditLog);
  if (options.preflight) args.push("--preflight");
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe", inline ? "pipe" : "ignore"], env: hostEnvironment(options.env ?? process.env) });
  child.stdin.on("error", () => {});
  if (inline) {
    child.stdio[3].on("error", () => {});
    child.stdio[3].end(JSON.stringify(installation));
  }
  let stderrTail = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    stderrTail = (stderrTail + chunk).slice(-4096);
    onStderr?.(chunk);
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  // The host says when its socket accepts connections.
  const ready = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.startsWith("listening ")) resolve();
    });
    exited.then(({ code, signal }) =>
      reject(new DriverError(`occ-driver-host exited (${signal ?? code})${stderrTail ? ": " + stderrTail.trim() : ""}`, { code: "host-exited", failure: "permanent" })),
    );
    child.on("error", (e) => reject(new DriverError(`cannot start ${binary}: ${e.message}`, { code: "host-missing" })));
  });
  try {
    await ready;
  } catch (error) {
    await rm(scratch, { recursive: true, force: true });
    throw error;
  }
  const connection = await Connection.open(socketPath);
  // From here the host keeps this process alive only while a call is pending.
  for (const handle of [child, child.stdin, child.stdout, child.stderr]) handle.unref?.();
  return new SandboxHost({ child, exited, connection, socketPath, scratch, binary });
}

/** Normalize a remote (POSIX) path, keeping a leading "/". */
function normalizeRemote(p) {
  return path.posix.normalize(p).replace(/\/+$/, "") || "/";
}

function inside(root, candidate) {
  return candidate === root || candidate.startsWith(root.endsWith("/") ? root : `${root}/`);
}

/**
 * The scope of OpenClaw's backend params (`scopeKey`, `sessionKey`,
 * `workspaceDir`, `agentWorkspaceDir`, `skillsWorkspaceDir`), as the host's
 * methods take it.
 */
function scopeOf(params) {
  return {
    workspaceDir: params.workspaceDir,
    ...(params.scopeKey ? { scopeKey: params.scopeKey } : {}),
    ...(params.sessionKey ? { sessionKey: params.sessionKey } : {}),
    ...(params.agentId ? { agentId: params.agentId } : {}),
    ...(params.agentWorkspaceDir ? { agentWorkspaceDir: params.agentWorkspaceDir } : {}),
    // OpenClaw's materialized skills (workspaceAccess "rw"): refreshed on
    // the target before each operation, as its own SSH backend does.
    ...(params.skillsWorkspaceDir ? { skillsWorkspaceDir: params.skillsWorkspaceDir } : {}),
  };
}

/**
 * OpenClaw's `resolveWorkdir`: where the scope of `params` has its workspace
 * on the target, answered by the host from the installation's settings and
 * the scope alone (`occ-driver-host call resolveWorkdir`), with no connection
 * to the target. Synchronous, as OpenClaw calls it; the installation travels
 * on the host's stdin, never on disk or a command line.
 */
export function resolveWorkdirSync({ installation, binary: override, hostBinary, cacheDir }, params) {
  const binary = resolveHostBinary(override ?? hostBinary, "the plugin's binary");
  // Both documents on stdin: the installation may carry key material, and the
  // scope (a session key, local paths) is the tenant's; another account on
  // this machine reads every process's command line.
  const args = ["call", "resolveWorkdir", "--json", "--installation", "/dev/stdin", "--params", "@-",
    ...(cacheDir ? ["--cache-dir", cacheDir] : [])];
  const input = `${JSON.stringify(installation)}\n${JSON.stringify({ scope: scopeOf(params) })}\n`;
  let out;
  try {
    out = execFileSync(binary, args, { input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"], timeout: 30_000, env: hostEnvironment() });
  } catch (e) {
    const said = String(e.stderr ?? "").trim().split("\n").pop() || e.message;
    throw new DriverError(`occ-driver-host resolveWorkdir: ${said}`, { code: "resolve-workdir" });
  }
  return JSON.parse(out);
}

/** A running host for one sandbox installation. */
export class SandboxHost {
  constructor({ child, exited, connection, socketPath, scratch, binary }) {
    this.binary = binary;
    this.child = child;
    this.exited = exited;
    this.connection = connection;
    this.socketPath = socketPath;
    this.scratch = scratch;
  }

  /** The host's process id. */
  get pid() {
    return this.child.pid;
  }

  /** One call of the sandbox world. */
  call(method, params, options) {
    return this.connection.call(method, params ?? {}, options);
  }

  /**
   * OpenClaw's backend factory: a handle for the scope of `params`
   * (`scopeKey`, `sessionKey`, `workspaceDir`, `agentWorkspaceDir`,
   * `skillsWorkspaceDir`). Nothing
   * happens on the target until the first operation, which seeds the
   * workspace if it does not exist: the handle's paths and label come from
   * the host's layout (`resolveWorkdir`), so that OpenClaw builds the Agent's
   * prompt, which names the remote workdir, with the target unreachable, as
   * with its own `ssh` backend.
   */
  async createHandle(params) {
    const scope = scopeOf(params);
    const info = await this.call("resolveWorkdir", { scope });
    return createHandle(this, scope, info, params);
  }

  /** OpenClaw's backend manager. `scopeOf(entry)` gives the scope of a registry entry. */
  manager(scopeOf) {
    return {
      describeRuntime: async ({ entry }) => {
        const info = await this.call("describeRuntime", { scope: scopeOf(entry) });
        return { running: info.running, actualConfigLabel: info.configLabel, configLabelMatch: entry?.image === info.configLabel };
      },
      removeRuntime: async ({ entry }) => {
        await this.call("removeRuntime", { scope: scopeOf(entry) });
      },
    };
  }

  /** Stop the host: running calls are cancelled and its private files removed. */
  async close() {
    // Waiting for the host to go must keep this process alive.
    this.child.ref?.();
    this.connection.close();
    this.child.stdin.end();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGTERM");
    await this.exited;
    await rm(this.scratch, { recursive: true, force: true });
  }
}

function createHandle(host, scope, info, params) {
  const call = (method, p, options) => host.call(method, { scope, ...p }, options);
  const mounts = [
    { containerRoot: info.workdir, hostRoot: path.resolve(scope.workspaceDir), writable: true },
    ...(info.agentWorkdir && scope.agentWorkspaceDir ? [{ containerRoot: info.agentWorkdir, hostRoot: path.resolve(scope.agentWorkspaceDir), writable: false }] : []),
  ];
  const runShellCommand = async ({ script, args, stdin, allowFailure, signal }) => {
    // The host answers every exit status; a failure is thrown here the way
    // OpenClaw's own session throws it: its stderr as the message, with the
    // exit code, stdout and stderr on the error.
    const result = await call(
      "runShellCommand",
      { script, args: args ?? [], allowFailure: true, ...(stdin !== undefined ? { stdin: b64(stdin) } : {}) },
      { signal },
    );
    const out = { code: result.code, stdout: Buffer.from(result.stdout, "base64"), stderr: Buffer.from(result.stderr, "base64") };
    if (out.code !== 0 && !allowFailure) {
      const message = out.stderr.toString("utf8").trim() || `ssh exited with code ${out.code}`;
      throw Object.assign(new Error(message), { code: out.code, stdout: out.stdout, stderr: out.stderr });
    }
    return out;
  };
  // The workspace is seeded before the first command of this handle; later
  // commands skip the check, a round trip each: a runtime removed meanwhile
  // (by a recreate elsewhere) is seeded again by the command itself, which
  // finds it gone before it runs anything.
  let seeded = null;
  const seedOnce = () => {
    seeded ??= call("ensureRuntime", {}).catch((error) => {
      seeded = null;
      throw error;
    });
    return seeded;
  };
  return {
    id: BACKEND_ID,
    runtimeId: info.runtimeId,
    runtimeLabel: info.runtimeId,
    workdir: info.workdir,
    env: {},
    configLabel: info.configLabel,
    configLabelKind: "Target",
    workdirValidation: "backend",
    workdirRoots: [info.workdir, ...(info.agentWorkdir ? [info.agentWorkdir] : [])],
    remoteWorkspaceDir: info.workdir,
    remoteAgentWorkspaceDir: info.agentWorkdir ?? info.workdir,
    // No browser: OpenClaw refuses browser sandboxing on this backend.
    capabilities: {},
    async validateWorkdir(workdir) {
      return (await call("validateWorkdir", { workdir })).workdir;
    },
    /**
     * What OpenClaw spawns for a command: `occ-driver-host relay`, which asks
     * the serving host to run it and passes its output through as it arrives,
     * exiting with its status. Its stdin stays open, as with OpenClaw's own
     * backend: what OpenClaw writes to it (`process write`) reaches the
     * command as it arrives, and closing it closes the command's. The run has
     * no time limit of its own: OpenClaw's exec timeout kills the relay,
     * which closes its connection, and the host kills the remote command. A
     * malformed command is refused here, with OpenClaw's message, before
     * anything runs; the workspace is seeded first, as OpenClaw's backend
     * does, so that what OpenClaw writes reaches the command and not a seed.
     */
    async buildExecSpec({ command, workdir, env, usePty }) {
      assertValidExecCommand(command);
      await seedOnce();
      // usePty: the command gets a terminal on the target (TERM=xterm-256color
      // unless env sets TERM), as OpenClaw's backend gives one with `ssh -tt`.
      const request = { scope, command, ...(workdir ? { workdir } : {}), env: env ?? {}, ...(usePty ? { pty: true } : {}) };
      return {
        argv: [host.binary, "relay", "--socket", host.socketPath],
        // The command and its environment stay out of the process list.
        env: { ...process.env, OCC_RELAY_PARAMS: Buffer.from(JSON.stringify(request)).toString("base64") },
        stdinMode: "pipe-open",
      };
    },
    async finalizeExec() {},
    runShellCommand,
    runRemoteShellScript: runShellCommand,
    createFsBridge() {
      return createFsBridge(call, mounts);
    },
    /** Seed now (otherwise the first operation does). */
    ensureRuntime: async () => {
      const result = await call("ensureRuntime", {});
      seeded = Promise.resolve(result);
      return result;
    },
    /** The scope the host acts on. */
    scope,
    params,
  };
}

/** A path as OpenClaw's bridge reads it: trimmed of surrounding white space. */
const trimmed = (p) => (typeof p === "string" ? p.replace(/^[\s\uFEFF]+|[\s\uFEFF]+$/g, "") : p);

/** A sandbox path (absolute once `\` is read as `/`) with `/` only. */
const posixIfAbsolute = (p) => {
  const posix = typeof p === "string" ? p.replace(/\\/g, "/") : p;
  return typeof posix === "string" && posix.startsWith("/") ? posix : p;
};

function createFsBridge(call, mounts) {
  const file = ({ filePath, cwd }) => ({ filePath, ...(cwd ? { cwd } : {}) });
  // A missing file reads as OpenClaw's bridge reports it: code ENOENT (its
  // memory flush checks for it).
  const notFound = (error, containerPath) => {
    if (error instanceof DriverError && error.code === "not-found") {
      return Object.assign(new Error(`Sandbox file not found: ${containerPath}`), { code: "ENOENT", failure: error.failure });
    }
    return error;
  };
  // A local path inside a mount's local root, as the container path it maps to.
  const fromHost = (p) => {
    const local = path.resolve(p);
    const byHost = mounts.find((m) => inside(m.hostRoot, local));
    if (!byHost) return null;
    return path.posix.join(byHost.containerRoot, path.relative(byHost.hostRoot, local).split(path.sep).join("/"));
  };
  const resolveContainer = (filePath, cwd) => {
    const base = (() => {
      if (!cwd) return mounts[0].containerRoot;
      if (!cwd.startsWith("/")) return path.posix.join(mounts[0].containerRoot, cwd);
      const c = normalizeRemote(cwd);
      const byContainer = mounts.find((m) => inside(m.containerRoot, c));
      if (byContainer) return c;
      return fromHost(cwd);
    })();
    if (filePath.startsWith("/")) {
      const c = normalizeRemote(filePath);
      if (mounts.some((m) => inside(m.containerRoot, c))) return c;
      return fromHost(filePath);
    }
    return base === null ? null : normalizeRemote(path.posix.join(base, filePath));
  };
  const bridge = {
    pathMappings: mounts.map((m) => ({ hostRoot: m.hostRoot, containerRoot: m.containerRoot })),
    /**
     * OpenClaw's synchronous mapping onto the mounts (the same rules the
     * component applies; it checks again on every operation).
     */
    resolvePath({ filePath, cwd }) {
      const inContainer = mounts.some((m) => inside(m.containerRoot, normalizeRemote(posixIfAbsolute(trimmed(filePath)))));
      const containerPath = resolveContainer(inContainer ? posixIfAbsolute(trimmed(filePath)) : trimmed(filePath), cwd);
      const mount = containerPath && [...mounts].sort((a, b) => b.containerRoot.length - a.containerRoot.length).find((m) => inside(m.containerRoot, containerPath));
      if (!mount) throw new DriverError(`Sandbox path escapes allowed mounts; cannot access: ${filePath}`, { code: "escapes-workspace" });
      const relativePath = path.posix.relative(mount.containerRoot, containerPath);
      return { hostPath: path.join(mount.hostRoot, relativePath), relativePath, containerPath };
    },
    async readFile(params) {
      return (await bridge.readFileWithSource(params)).data;
    },
    /** The bytes, where they were read (container path) and, in the workspace, its relative path. */
    async readFileWithSource({ filePath, cwd, signal, maxBytes }) {
      const where = bridge.resolvePath({ filePath, cwd });
      let r;
      try {
        r = await call("readFile", { ...file({ filePath, cwd }), ...(maxBytes !== undefined ? { maxBytes } : {}) }, { signal });
      } catch (e) {
        throw notFound(e, where.containerPath);
      }
      const workspace = mounts[0];
      return {
        data: Buffer.from(r.data, "base64"),
        canonicalPath: where.containerPath,
        ...(inside(workspace.containerRoot, where.containerPath) ? { workspaceRelativePath: path.posix.relative(workspace.containerRoot, where.containerPath) } : {}),
      };
    },
    /** Copy one file inside the sandbox: read as readFile does, written as writeFile does. */
    async copyFile({ sourcePath, destinationPath, cwd, mkdir, signal }) {
      const data = await bridge.readFile({ filePath: sourcePath, cwd, signal });
      await bridge.writeFile({ filePath: destinationPath, cwd, data, mkdir, signal });
    },
    async writeFile({ filePath, cwd, data, encoding, mkdir, signal }) {
      const bytes = typeof data === "string" ? Buffer.from(data, encoding ?? "utf8") : data;
      await call("writeFile", { ...file({ filePath, cwd }), data: b64(bytes), mkdir: mkdir !== false }, { signal });
    },
    async createFileExclusive({ filePath, cwd, data, encoding, mkdir, signal }) {
      const bytes = typeof data === "string" ? Buffer.from(data, encoding ?? "utf8") : data;
      return call("createFileExclusive", { ...file({ filePath, cwd }), data: b64(bytes), mkdir: mkdir !== false }, { signal });
    },
    async mkdirp({ filePath, cwd, signal }) {
      await call("mkdirp", file({ filePath, cwd }), { signal });
    },
    async remove({ filePath, cwd, recursive, force, signal }) {
      await call("remove", { ...file({ filePath, cwd }), recursive: Boolean(recursive), force: force !== false }, { signal });
    },
    async rename({ from, to, cwd, signal }) {
      await call("rename", { from, to, ...(cwd ? { cwd } : {}) }, { signal });
    },
    async stat({ filePath, cwd, signal }) {
      const s = await call("stat", file({ filePath, cwd }), { signal });
      return s === null ? null : { type: s.type, size: s.size, mtimeMs: s.mtimeMs };
    },
    async readDirectory({ filePath, cwd, signal }) {
      const entries = await call("readDirectory", file({ filePath, cwd }), { signal });
      return entries.map((e) => ({ name: e.name, isDirectory: e.isDirectory }));
    },
  };
  return bridge;
}
