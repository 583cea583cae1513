// An OpenClaw plugin that registers the `occ-ssh` sandbox backend: OpenClaw's
// SSH backend, run as a sandboxed WebAssembly component by occ-driver-host.
//
// Select it with agents.defaults.sandbox.backend: "occ-ssh" and the usual
// agents.defaults.sandbox.ssh block. Install the release's tarball, which
// carries the component and the host binary (`openclaw plugins install
// occ-driver-host-openclaw-<version>.tgz`), or load a checkout with
// plugins.load.paths and name both; give it the scripts you approved:
//
//   plugins: {
//     entries: { "occ-ssh": { config: {
//       approvedScripts: { preflight: "<sha256>", workspace: "<sha256>", exec: "<sha256>" },
//       // while two releases roll out, a name may list both: workspace: ["<old>", "<new>"]
//       // from a checkout: component: "/opt/occ/guest_ssh_sandbox.wasm", binary: "..."
//     } } },
//   }
//
// One host process serves every handle of the same sandbox configuration; it
// is stopped when the plugin is disabled or the gateway stops.

import os from "node:os";
import path from "node:path";

import { registerSandboxBackend } from "openclaw/plugin-sdk/sandbox";

import { BACKEND_ID, binaryOf, bundledComponent, resolveWorkdirSync, startSandboxHost } from "./sandbox.mjs";

// The plugin id is the backend id: OpenClaw's CLI (sandbox explain, list,
// recreate) loads the plugin whose id is a configured backend's, and no other.
const PLUGIN_ID = BACKEND_ID;

/** Where seeds may be read from: the plugin's list, or OpenClaw's state directory. */
const localWorkspaces = (pluginConfig) =>
  pluginConfig.localWorkspaces ?? [process.env.OPENCLAW_STATE_DIR || path.join(os.homedir(), ".openclaw")];

/** The Installation document for OpenClaw's resolved sandbox config `cfg`. */
export function installationFor(cfg, pluginConfig) {
  const ssh = Object.fromEntries(
    Object.entries(cfg?.ssh ?? {}).filter(([, v]) => v !== undefined && v !== null && v !== ""),
  );
  const block = { ssh };
  for (const key of ["mode", "scope", "workspaceAccess"]) if (cfg?.[key] !== undefined) block[key] = cfg[key];
  block.backend = BACKEND_ID;
  return {
    drivers: {
      sandbox: {
        component: pluginConfig.component ?? bundledComponent(),
        approvedScripts: pluginConfig.approvedScripts ?? {},
        localWorkspaces: localWorkspaces(pluginConfig),
        ...(pluginConfig.maxRunSeconds !== undefined ? { maxRunSeconds: pluginConfig.maxRunSeconds } : {}),
        ...(pluginConfig.workspaceWorker !== undefined ? { workspaceWorker: pluginConfig.workspaceWorker } : {}),
        ...(pluginConfig.reconnectSeconds !== undefined ? { reconnectSeconds: pluginConfig.reconnectSeconds } : {}),
        ...(pluginConfig.maxSessions !== undefined ? { maxSessions: pluginConfig.maxSessions } : {}),
        configuration: { agents: { defaults: { sandbox: block } } },
      },
    },
  };
}

export default {
  id: PLUGIN_ID,
  name: "OCC SSH sandbox (WebAssembly)",
  description: "OpenClaw's SSH sandbox backend as a sandboxed WebAssembly component.",
  register(api) {
    if (api.registrationMode && api.registrationMode !== "full") return;
    const pluginConfig = api.pluginConfig ?? {};
    const binary = binaryOf(pluginConfig, (line) => api.logger?.warn?.(line));
    if (!pluginConfig.component && !bundledComponent()) {
      api.logger?.warn?.(`${PLUGIN_ID}: no component: set plugins.entries.${PLUGIN_ID}.config.component (this copy of the plugin carries none); the ${BACKEND_ID} backend is not registered`);
      return;
    }
    const hosts = new Map();
    const hostFor = (cfg) => {
      const installation = installationFor(cfg, pluginConfig);
      const key = JSON.stringify(installation);
      if (!hosts.has(key)) {
        const started = startSandboxHost({
          installation,
          binary,
          cacheDir: pluginConfig.cacheDir,
          auditLog: pluginConfig.auditLog,
          onStderr: (chunk) => api.logger?.warn?.(`${PLUGIN_ID}: ${chunk.trim()}`),
        });
        // A host that failed to start is not kept: the next use tries again.
        started.catch(() => hosts.delete(key));
        hosts.set(key, started);
      }
      return hosts.get(key);
    };
    const localRoot = () => localWorkspaces(pluginConfig)[0];
    // A registry entry names its scope key (OpenClaw stores it as sessionKey).
    const scopeOf = (entry) => ({ scopeKey: entry.sessionKey, workspaceDir: localRoot() });
    const managerFor = async (config) => (await hostFor(config?.agents?.defaults?.sandbox ?? {})).manager(scopeOf);
    const closeAll = async () => {
      const all = [...hosts.values()];
      hosts.clear();
      await Promise.allSettled(all.map(async (h) => (await h).close()));
    };
    // OpenClaw asks where a scope's workspace is (the Agent's prompt,
    // `openclaw sandbox explain`) without provisioning it, synchronously:
    // the host answers from the settings and the scope alone, and the answer
    // never changes for the same ones, so it is kept.
    const workdirs = new Map();
    const resolveWorkdir = (params) => {
      const installation = installationFor(params.cfg, pluginConfig);
      const key = JSON.stringify([installation, params.scopeKey, params.sessionKey, params.workspaceDir, params.agentWorkspaceDir]);
      if (!workdirs.has(key)) {
        if (workdirs.size >= 1024) workdirs.clear();
        workdirs.set(key, resolveWorkdirSync({ installation, binary, cacheDir: pluginConfig.cacheDir }, params).workdir);
      }
      return workdirs.get(key);
    };
    const unregister = registerSandboxBackend(BACKEND_ID, {
      factory: async (params) => (await hostFor(params.cfg)).createHandle(params),
      resolveWorkdir,
      manager: {
        describeRuntime: async (p) => (await managerFor(p.config)).describeRuntime(p),
        removeRuntime: async (p) => (await managerFor(p.config)).removeRuntime(p),
      },
    });
    api.lifecycle?.registerRuntimeLifecycle?.({
      id: `${PLUGIN_ID}-cleanup`,
      cleanup: ({ reason, sessionKey, runId }) => {
        if (sessionKey !== undefined || runId !== undefined) return;
        if (reason === "disable" || reason === "restart") {
          unregister();
          void closeAll();
        }
      },
    });
    api.registerService?.({ id: `${PLUGIN_ID}-hosts`, start() {}, stop: closeAll });
  },
};
