// OCC objects for the tests, written from OCC's public types
// (openclaw/openclaw-enterprise packages/contracts/src/index.ts): every field a
// controller sends, under OCC's names, and nothing of our own.

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "../../../..");
const target = process.env.CARGO_TARGET_DIR ?? join(repo, "target");
// Where `cargo xtask host` builds the binary the release ships: <target>/<triple>/release/.
const triple = `${{ x64: "x86_64", arm64: "aarch64" }[process.arch] ?? process.arch}-unknown-linux-gnu`;
export const hostBinary = process.env.OCC_DRIVER_HOST ?? join(target, triple, "release/occ-driver-host");
export const component = process.env.OCC_DRIVER_COMPONENT ?? join(target, "wasm32-wasip2/release/guest_ssh_driver.wasm");

/** How OCC names a packaged driver's implementation: `${packageName}@${version}`, this checkout's. */
const compute = JSON.parse(readFileSync(join(repo, "host/node/compute/package.json"), "utf8"));
export const IMPLEMENTATION = `${compute.name}@${compute.version}`;
export const DRIVER_ID = "compute-ssh";

const now = () => new Date().toISOString();

/** `Namespace`. */
export function namespace(name, extra = {}) {
  return { id: `ns-${randomUUID()}`, name, status: "provisioning", createdAt: now(), ...extra };
}

/** `Agent` in `namespace`. */
export function agent(ns, extra = {}) {
  return {
    id: `agent-${randomUUID()}`,
    namespaceId: ns.id,
    name: "support-bot",
    desiredRuntimeState: "running",
    status: "active",
    configurationId: `configuration-${randomUUID()}`,
    backendId: null,
    harnessAuth: { method: "runtime" },
    executionMode: "embedded",
    servicePrincipalId: `sp-${randomUUID()}`,
    createdAt: now(),
    ...extra,
  };
}

/** `AgentRevision` number `number` of `a`. */
export function revision(a, number, extra = {}) {
  return {
    id: `revision-${randomUUID()}`,
    namespaceId: a.namespaceId,
    agentId: a.id,
    revision: number,
    backendId: null,
    configurationId: a.configurationId,
    configurationKind: "agent",
    configurationGeneration: number,
    configuration: { gateway: { mode: "local" } },
    harness: { id: "openclaw", version: "2026.9.6", mode: "embedded" },
    compute: { id: DRIVER_ID, implementation: IMPLEMENTATION },
    harnessAuth: { method: "runtime" },
    servicePrincipalId: a.servicePrincipalId,
    createdAt: now(),
    ...extra,
  };
}

/** `ComputeRevisionContext` as the worker builds it for an SSH revision. */
export function context(extra = {}) {
  return { harnessAuth: { method: "runtime" }, secretEnvironment: [], ...extra };
}

/** The disposable test hosts tests/run.sh brings up and exports as OCC_RIG_*, or null. */
export const rig = process.env.OCC_RIG_IDENTITY
  ? {
      identity: process.env.OCC_RIG_IDENTITY,
      knownHosts: process.env.OCC_RIG_KNOWN_HOSTS,
      node: process.env.OCC_RIG_NODE,
      openclaw: process.env.OCC_RIG_OPENCLAW,
      hosts: JSON.parse(readFileSync(process.env.OCC_RIG_HOSTS_JSON, "utf8")),
    }
  : null;

// The tests' own looks at a host share one connection per host (a fresh
// handshake costs tens of milliseconds of CPU on each side, thousands of times
// a run); a master that an outage ended is replaced by the next command.
const mux = () => ["-o", `ControlPath=${join(dirname(rig.identity), "mux-%C")}`, "-o", "ControlMaster=auto", "-o", "ControlPersist=60"];

/** The package that carries the host binary for this machine. */
export const PLATFORM_PACKAGE = "occ-driver-host-linux-x64-gnu";

/**
 * A controller-like package in `dir` that depends on the driver package at
 * exactly `version`, installed from the tarballs of the release in `dist`,
 * offline, with Node 24 and npm alone on PATH; `npmArgs` are added to npm's.
 */
export function installRelease(dir, dist, version, npmArgs = []) {
  mkdirSync(dir, { recursive: true });
  const tarball = (name) => `file:${join(dist, `${name}-${version}.tgz`)}`;
  writeFileSync(join(dir, "package.json"), JSON.stringify({
    name: "occ-controller-under-test", version: "0.0.0", private: true, type: "module",
    dependencies: { "occ-driver-host-compute": tarball("occ-driver-host-compute") },
    // The driver package names the platform package by its exact version, as
    // on a registry; these tarballs are the registry here.
    overrides: { [PLATFORM_PACKAGE]: tarball(PLATFORM_PACKAGE) },
  }));
  const env = {
    PATH: `${dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: join(dir, ".home"),
    npm_config_cache: join(dir, ".npm-cache"),
    npm_config_update_notifier: "false",
  };
  return execFileSync("npm", ["install", "--offline", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", ...npmArgs],
    { cwd: dir, encoding: "utf8", env, stdio: ["ignore", "pipe", "pipe"] });
}

/** Run `script` on a rig host as root, as an operator would look; its trimmed stdout. */
export function onHost(host, script) {
  return execFileSync(
    "ssh",
    ["-F", "none", "-i", rig.identity, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
      "-o", `UserKnownHostsFile=${rig.knownHosts}`, ...mux(), "-o", "LogLevel=ERROR", "-p", String(host.port ?? 22),
      `root@${host.address}`, script],
    { encoding: "utf8" },
  ).trim();
}
