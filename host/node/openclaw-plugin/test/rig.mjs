// What the sandbox tests share: the rig ($OCC_RIG/env, two hosts), the built
// host and component, an installation for a target, and commands on a host to
// look at it as an operator would.

import { execFileSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "../../../..");
const target = process.env.CARGO_TARGET_DIR ?? join(repo, "target");
// Where `cargo xtask host` builds the binary the release ships: <target>/<triple>/release/.
const triple = `${{ x64: "x86_64", arm64: "aarch64" }[process.arch] ?? process.arch}-unknown-linux-gnu`;
export const hostBinary = process.env.OCC_DRIVER_HOST ?? join(target, triple, "release/occ-driver-host");
// A component built elsewhere (a benchmark of given binaries) may be named
// explicitly; otherwise the one `cargo guests` built.
export const component = process.env.OCC_SANDBOX_COMPONENT ?? join(target, "wasm32-wasip2/release/guest_ssh_sandbox.wasm");

const rigDir = process.env.OCC_RIG ?? "/run/occ-rig";
const env = Object.fromEntries(
  readFileSync(join(rigDir, "env"), "utf8")
    .split("\n")
    .filter((l) => l.includes("="))
    .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
);
export const rig = {
  identity: env.OCC_RIG_IDENTITY,
  knownHosts: env.OCC_RIG_KNOWN_HOSTS,
  openclaw: env.OCC_RIG_OPENCLAW,
  hosts: JSON.parse(readFileSync(env.OCC_RIG_HOSTS_JSON, "utf8")),
};

/** SHA-256 of each script in the repository: what an operator approves. */
export function approvedScripts() {
  const sha = (f) => createHash("sha256").update(readFileSync(join(repo, "guest-ssh-sandbox/scripts", f))).digest("hex");
  return { preflight: sha("preflight.sh"), workspace: sha("workspace.py"), exec: sha("exec.py") };
}

export const unique = (prefix) => `${prefix}-${process.pid}-${randomUUID().slice(0, 8)}`;

/** A local workspace with a few files, under a private directory. */
export function localWorkspace() {
  const base = mkdtempSync(join(tmpdir(), "occ-sbx-node-"));
  const workspace = join(base, "workspace");
  mkdirSync(join(workspace, "src"), { recursive: true });
  writeFileSync(join(workspace, "README.md"), "hello from the local workspace\n");
  writeFileSync(join(workspace, "src/main.rs"), "fn main() {\n    old();\n}\n");
  symlinkSync("../README.md", join(workspace, "src/readme"));
  return { base, workspace, cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

/**
 * A fresh OpenClaw home under a private directory, for installing the plugin
 * as a user would: `home`, `state`, and the Agent's workspace where OpenClaw
 * keeps it (`state/workspace`, holding seed.txt with `seed`); an empty
 * configuration; and the environment OpenClaw runs in: Node 24 (this
 * process's) and the system's npm, offline, nothing of cargo, the checkout or
 * the test run's own settings.
 */
export function openclawHome(prefix, seed) {
  const base = mkdtempSync(join(tmpdir(), prefix));
  for (const d of ["home", "state", "state/workspace"]) mkdirSync(join(base, d));
  writeFileSync(join(base, "state/workspace/seed.txt"), seed);
  const configPath = join(base, "state/openclaw.json");
  writeFileSync(configPath, "{}\n");
  const env = {
    PATH: `${dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: join(base, "home"),
    OPENCLAW_STATE_DIR: join(base, "state"),
    OPENCLAW_CONFIG_PATH: configPath,
    npm_config_offline: "true",
    npm_config_cache: join(base, "npm-cache"),
    npm_config_update_notifier: "false",
  };
  return { base, configPath, env };
}

/**
 * OpenClaw's `agents` for an installed plugin in an {@link openclawHome}:
 * the scripted model, and every session sandboxed by occ-ssh, read-write, on
 * `host` under `workspaceRoot`.
 */
export function installedPluginAgents(base, host, workspaceRoot) {
  return {
    defaults: {
      workspace: join(base, "state/workspace"),
      model: { primary: "scripted/steps" },
      sandbox: {
        mode: "all",
        backend: "occ-ssh",
        scope: "session",
        workspaceAccess: "rw",
        ssh: { target: `root@${host.address}:22`, workspaceRoot, identityFile: rig.identity, knownHostsFile: rig.knownHosts, updateHostKeys: false },
      },
    },
  };
}

/** OpenClaw's ssh block for a host of the rig. */
export function sshBlock(host, workspaceRoot, extra = {}) {
  return {
    target: `root@${host.address}:${host.port ?? 22}`,
    workspaceRoot,
    identityFile: rig.identity,
    knownHostsFile: rig.knownHosts,
    strictHostKeyChecking: true,
    // The rig's known_hosts is shared; nothing may rewrite it.
    updateHostKeys: false,
    ...extra,
  };
}

/**
 * The two ways the backend serves a scope: the long-lived workspace worker
 * (the default) and a run of its own for every operation (`workspaceWorker:
 * false`, for targets that want no long-lived process). Every test of a
 * behaviour of the backend runs on both, in one run of the suite; a test
 * whose subject never reaches the target (OpenClaw's registry, its prompt and
 * `sandbox explain` with the target unreachable, the plugin's installation)
 * runs once, on the default. OCC_TEST_WORKSPACE_WORKER=1 (or 0) keeps only
 * the worker (or the one-shot path).
 */
export const PATHS = [
  { name: "worker", config: {} },
  { name: "one-shot", config: { workspaceWorker: false } },
].filter((p) => {
  const only = process.env.OCC_TEST_WORKSPACE_WORKER;
  return only === undefined || only === "" || (only !== "0") === (p.name === "worker");
});

/** The path a test whose subject is not the path runs on. */
export const DEFAULT_PATH = PATHS[0];

/**
 * `test(name, options, body)` once per path, each named after its path:
 * "<name> (worker)" and "<name> (one-shot)"; `body(path)`.
 */
export function testEachPath(name, options, body) {
  for (const path of PATHS) test(`${name} (${path.name})`, options, () => body(path));
}

/** The Installation document for the sandbox component, serving scopes by `path`. */
export function installation({ ssh, localWorkspaces, sandbox = {}, path = DEFAULT_PATH }) {
  return {
    drivers: {
      sandbox: {
        component,
        approvedScripts: approvedScripts(),
        localWorkspaces,
        ...path.config,
        configuration: {
          agents: { defaults: { sandbox: { mode: "all", backend: "ssh", scope: "session", workspaceAccess: "rw", ...sandbox, ssh } } },
        },
      },
    },
  };
}

// The tests' own looks at a host share one connection per host (a fresh
// handshake costs tens of milliseconds of CPU on each side, thousands of times
// a run); a master that an outage ended is replaced by the next command.
const mux = ["-o", `ControlPath=${join(dirname(rig.identity), "mux-%C")}`, "-o", "ControlMaster=auto", "-o", "ControlPersist=60"];

/** Run a shell command on a rig host; its stdout. */
export function sh(host, script) {
  return execFileSync(
    "ssh",
    ["-F", "none", "-i", rig.identity, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", `UserKnownHostsFile=${rig.knownHosts}`, ...mux, "-o", "LogLevel=ERROR", `root@${host.address}`, script],
    { encoding: "utf8" },
  ).trim();
}

/** A listing of a remote tree: relative path, type, mode and a hash of the contents. */
export function remoteTree(host, dir) {
  return sh(
    host,
    `cd ${dir} && find . -mindepth 1 | LC_ALL=C sort | while read -r p; do ` +
      `if [ -L "$p" ]; then echo "$p link $(readlink "$p")"; ` +
      `elif [ -d "$p" ]; then echo "$p dir $(stat -c %a "$p")"; ` +
      `else echo "$p file $(stat -c %a "$p") $(sha256sum < "$p" | cut -c1-16)"; fi; done`,
  );
}
