// An OCC Compute Driver package backed by a WebAssembly driver component: OCC's
// controller loads it like any driver package (configurationSchema,
// validateConfiguration, createDriver) and calls the ComputeDriver object it
// returns with OCC's own types. Each driver runs `occ-driver-host serve` with the
// component; the component's policy runs sandboxed there, with only the SSH hosts
// and the helper the installation grants. Node built-ins only.
//
//   import { createDriver } from "occ-driver-host-compute";
//   const driver = createDriver({ id: "compute-ssh", implementation, configuration,
//                                 getOperationAbortSignal });
//   driver.setLifecycleDrivers([configurationDriver]);
//   await driver.preflight();
//   await driver.ensureNamespace(namespace);   // { namespaceId, namespaceReady: true }

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { DriverError, RPC, spawnHost } from "./client.mjs";
import { validateGatewaySettings } from "./gateway-settings.mjs";
import { hostEnvironment, resolveHostBinary } from "occ-driver-host-rpc/host-binary";
import { EXIT_STATUS } from "occ-driver-host-rpc/codes";
import { LifecycleDispatcher } from "./lifecycle.mjs";

export { DriverError } from "./client.mjs";
export { REFUSED_GATEWAY_SETTINGS, validateGatewaySettings } from "./gateway-settings.mjs";
export { LifecycleDispatcher, validateLaunch } from "./lifecycle.mjs";
// Which occ-driver-host this package runs: resolveHostBinary(configuration.driverHost?.binary, label).
export { resolveHostBinary } from "occ-driver-host-rpc/host-binary";

const here = dirname(fileURLToPath(import.meta.url));

/**
 * Where a refused preparation stopped: the driver host itself, the connection
 * to the host, the helper's work on it, or (no host named) admission before
 * any host was touched (docs/occ.md, "Why a deploy failed").
 */
const PREPARE_STAGES = {
  host_connection: new Set([
    "unknown-host", "exec-refused", "ssh-auth", "ssh-connect", "host-key-mismatch", "ssh-timeout",
    "ssh-io", "output-too-large", "local-ssh-files",
  ]),
  driver_host: new Set(["audit-unavailable", "cpu-limit", "memory-limit", "call-timeout", "driver-panic",
    "driver-trap", "engine", "resource-limit", "result-too-large", "invalid-runtime-record",
    "invalid-schema", "host-missing", "host-exited", "closed", "cancelled"]),
};

/**
 * OCC's `describePrepareRevisionFailure`: a rejected prepareRevision mapped to
 * bounded operational fields (`code`, `stage`, `errorClass`, `message`). The
 * code is ours, upper-cased with an `SSH_` prefix as OCC's drivers name theirs;
 * the message is the operator's text, one line of at most 256 characters. An
 * error that is not this package's is described by nothing.
 */
export function describePrepareRevisionFailure(error) {
  if (!error || typeof error.code !== "string" || !/^[a-z0-9-]{1,64}$/.test(error.code)) return undefined;
  // What fails with no host named was refused before any host was touched.
  const stage = Object.entries(PREPARE_STAGES).find(([, codes]) => codes.has(error.code))?.[0] ??
    (error.host ? "host_prepare" : "admission");
  const message = String(error.message ?? "").replace(/[\x00-\x1f\x7f]+/g, " ").trim().slice(0, 256);
  return {
    code: `SSH_${error.code.toUpperCase().replace(/-/g, "_")}`,
    stage,
    errorClass: error.failure === "permanent" ? "PermanentDriverError" : "RetryableDriverError",
    ...(message ? { message } : {}),
  };
}

/**
 * The methods the host serves and how each takes its arguments: the one list
 * this package builds from (`methods.json`, kept equal to the host's by a test).
 */
export const METHODS = JSON.parse(readFileSync(join(here, "methods.json"), "utf8")).methods;

/** The component's own configuration schema (`occ-driver-host schema`), checked by a test. */
const COMPONENT_SCHEMA = JSON.parse(readFileSync(join(here, "schema.json"), "utf8"));

/** Settings of this package rather than of the driver: where the host and the component are. */
const DRIVER_HOST_SCHEMA = Object.freeze({
  type: "object",
  additionalProperties: false,
  description: "Where the driver host and its component are, and what the operator approved.",
  properties: {
    component: { type: "string", description: "The driver component (.wasm); default: $OCC_DRIVER_COMPONENT, then the one this package carries." },
    binary: { type: "string", description: "The occ-driver-host executable; default $OCC_DRIVER_HOST, then the one of the platform package installed with this package (occ-driver-host-linux-x64-gnu)." },
    approvedHelpers: {
      type: "array",
      items: { type: "string", pattern: "^[0-9a-f]{64}$" },
      description: "SHA-256 of each audited helper the driver may run on hosts (occ-driver-host check prints it).",
    },
    auditLog: { type: "string", description: "Append an audit record for every capability call to this file." },
    cacheDir: { type: "string", description: "Directory of precompiled components (private to this user)." },
    maxSessions: {
      type: "integer", minimum: 1, maximum: 64,
      description: "Sessions one SSH connection to a host keeps open at once (default 8); keep it at most the hosts' sshd MaxSessions (10 as shipped): preflight warns when a host allows fewer.",
    },
  },
});

/** OCC's closed configuration schema for this package: the component's plus `driverHost`. */
export const configurationSchema = Object.freeze({
  ...COMPONENT_SCHEMA,
  properties: { ...COMPONENT_SCHEMA.properties, driverHost: DRIVER_HOST_SCHEMA },
});

function settings(configuration) {
  if (configuration === null || typeof configuration !== "object" || Array.isArray(configuration)) {
    throw new DriverError("configuration must be an object", { code: "invalid-configuration" });
  }
  const { driverHost = {}, ...driverConfiguration } = configuration;
  for (const key of Object.keys(driverHost)) {
    if (!(key in DRIVER_HOST_SCHEMA.properties)) {
      throw new DriverError(`configuration.driverHost.${key}: unknown key`, { code: "invalid-configuration" });
    }
  }
  if (driverHost.maxSessions !== undefined &&
      !(Number.isInteger(driverHost.maxSessions) && driverHost.maxSessions >= 1 && driverHost.maxSessions <= 64)) {
    throw new DriverError("configuration.driverHost.maxSessions: must be a whole number of sessions from 1 to 64",
      { code: "invalid-configuration" });
  }
  const bundled = join(here, "guest_ssh_driver.wasm");
  return {
    maxSessions: driverHost.maxSessions,
    binary: resolveHostBinary(driverHost.binary, "configuration.driverHost.binary"),
    component: driverHost.component ?? process.env.OCC_DRIVER_COMPONENT ?? (existsSync(bundled) ? bundled : undefined),
    approvedHelpers: driverHost.approvedHelpers ?? [],
    auditLog: driverHost.auditLog,
    globalArgs: driverHost.cacheDir ? ["--cache-dir", driverHost.cacheDir] : [],
    driverConfiguration,
  };
}

/** Writes the host's installation document into a private directory. */
function writeInstallation(id, implementation, s) {
  if (!s.component) {
    throw new DriverError(
      "configuration.driverHost.component: no driver component; name it there or in $OCC_DRIVER_COMPONENT",
      { code: "invalid-configuration" },
    );
  }
  // mkdtemp makes the directory 0700: the document names the SSH identity and hosts.
  const dir = mkdtempSync(join(tmpdir(), "occ-driver-"));
  const path = join(dir, "installation.yaml");
  const document = {
    drivers: {
      compute: {
        id,
        implementation,
        component: s.component,
        approvedHelpers: s.approvedHelpers,
        ...(s.maxSessions === undefined ? {} : { maxSessions: s.maxSessions }),
        configuration: s.driverConfiguration,
      },
    },
  };
  // JSON is YAML: the host reads it like any installation file.
  writeFileSync(path, JSON.stringify(document), { mode: 0o600 });
  return { dir, path };
}

/** An error from a one-shot `occ-driver-host` run: its JSON on stdout, or its stderr. */
function cliError(result) {
  let data = {};
  try {
    data = JSON.parse(result.stdout);
  } catch {
    // Not JSON: the host could not load the driver at all.
  }
  const message = data.message ?? (result.stderr.trim().replace(/^error: /, "") || `occ-driver-host exited ${result.status}`);
  return new DriverError(message, {
    failure: data.failure ?? (result.status === EXIT_STATUS.retryable ? "retryable" : "permanent"),
    code: data.code ?? "invalid-configuration",
    host: data.host,
    refusal: data.refusal,
  });
}

function runOnce(s, args) {
  const result = spawnSync(s.binary, [...s.globalArgs, ...args], { encoding: "utf8", maxBuffer: 16 << 20, env: hostEnvironment() });
  if (result.error) {
    throw new DriverError(`cannot run ${s.binary}: ${result.error.message}`, { code: "host-missing" });
  }
  return result;
}

/**
 * OCC's `validateConfiguration`: synchronous, returns nothing, throws naming the
 * key at fault. The component validates its own configuration; this package
 * validates `driverHost`.
 */
export function validateConfiguration(configuration) {
  const s = settings(configuration);
  const { dir, path } = writeInstallation("compute-ssh", "occ/ssh", s);
  try {
    const result = runOnce(s, ["check", path, "--json"]);
    if (result.status !== 0) throw cliError(result);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const NEVER = new AbortController().signal;

/**
 * OCC's `reason` of a failed Namespace result: at most 256 characters of
 * letters, digits, spaces and `. _ : / @ -` (what OCC's log keeps), naming the
 * failure as the host does.
 */
function reason(error) {
  const text = `${error?.code ?? "driver-error"}: ${error?.message ?? String(error)}`;
  return text.replace(/[^A-Za-z0-9._:/@-]+/g, " ").trim().slice(0, 256).trim();
}

/**
 * A workspace setup's strings must be well-formed Unicode, as OCC's contract
 * requires: a lone surrogate cannot cross to the host as JSON at all.
 */
function checkWellFormed(context) {
  const setup = context?.workspaceSetup;
  if (setup === null || typeof setup !== "object") return;
  const strings = [["id", setup.id], ["namespaceId", setup.namespaceId], ["agentId", setup.agentId],
    ...Object.entries(setup.files ?? {}).map(([name, text]) => [`files.${name}`, text])];
  for (const [field, value] of strings) {
    if (typeof value === "string" && !value.isWellFormed()) {
      throw new DriverError(`context.workspaceSetup.${field}: must be well-formed Unicode`, {
        code: "invalid-params",
      });
    }
  }
}

function notSelected(phase) {
  const error = new Error(`no ${phase} hook is selected`);
  error.rpcCode = RPC.METHOD_NOT_FOUND;
  return error;
}

/**
 * OCC's `createDriver`: the ComputeDriver object. `getOperationAbortSignal`
 * (OCC passes it to Compute factories) gives the signal of the operation in
 * progress; when it aborts, the host cancels the call: its ssh client is killed,
 * and a compensating hook still runs, for 5 s.
 */
export function createDriver({ id, implementation, configuration, getOperationAbortSignal, onProgress, onStderr } = {}) {
  if (typeof id !== "string" || typeof implementation !== "string") {
    throw new TypeError("createDriver: id and implementation must be strings");
  }
  const s = settings(configuration);
  const { dir, path } = writeInstallation(id, implementation, s);
  let dispatcher = null;
  let started = false;
  /** The operation signal of each call in flight, by request id, for its hooks. */
  const operations = new Map();

  const onRequest = async (method, params, hostSignal) => {
    const phase = method.replace(/^hooks\//, "");
    if (!dispatcher || !dispatcher.selects(phase)) throw notSelected(phase);
    const operation = operations.get(String(params.callId)) ?? NEVER;
    const signal = AbortSignal.any([hostSignal, operation]);
    switch (phase) {
      case "afterNamespacePrepared":
        return dispatcher.afterNamespacePrepared(params.namespace, signal);
      case "beforeWorkloadStart": {
        const launch = await dispatcher.beforeWorkloadStart(params.revision, signal);
        return { environment: launch.environment };
      }
      case "beforeWorkloadStop":
        // A compensation keeps running when the operation was cancelled.
        return dispatcher.beforeWorkloadStop(params.revision, { cleanup: params.cleanup === true },
          params.cleanup === true ? hostSignal : signal);
      case "beforeNamespaceDelete":
        return dispatcher.beforeNamespaceDelete(params.namespace, signal);
      default:
        throw notSelected(phase);
    }
  };

  // One `serve` process at a time. A process that died (OOM, a kill, a crash)
  // is replaced on the next call: calls in flight when it died fail retryable,
  // and the new process is told every binding bindAgent accepted before it
  // runs anything else, as the controller would not call bindAgent again.
  const bindings = new Map();
  let host = null;
  let starting = null;
  let closedByCaller = false;
  const spawnServe = () => spawnHost({
    binary: s.binary,
    // The host's global options (--cache-dir) may follow the subcommand.
    args: [...s.globalArgs, "--installation", path, ...(s.auditLog ? ["--audit-log", s.auditLog] : [])],
    env: hostEnvironment(),
    onRequest,
    onProgress,
    onStderr,
  });
  const current = async () => {
    if (closedByCaller) throw new DriverError("driver closed", { code: "closed" });
    if (host && !host.closed) return host;
    if (!starting) {
      starting = (async () => {
        const fresh = spawnServe();
        for (const binding of bindings.values()) await fresh.call("bindAgent", binding);
        host = fresh;
      })().finally(() => {
        starting = null;
      });
    }
    await starting;
    return host;
  };
  host = spawnServe();

  const invoke = async (method, params, callSignal) => {
    started = true;
    const operation = getOperationAbortSignal?.() ?? undefined;
    const signals = [operation, callSignal].filter(Boolean);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const serve = await current();
    const callId = serve.nextId();
    if (signal) operations.set(String(callId), signal);
    try {
      return await serve.call(method, params, { signal, id: callId });
    } finally {
      operations.delete(String(callId));
    }
  };

  const revisionBinding = (binding) => ({
    namespace: binding?.namespace, agent: binding?.agent, revision: binding?.revision,
  });

  // Namespace methods report failure in their result, exactly in OCC's shape
  // (NamespaceEnsureResult, NamespaceDeleteResult), and never reject.
  const namespaceCall = (method, flag) => async (namespace) => {
    try {
      const result = await invoke(method, { namespace });
      if (result?.[flag] === true) {
        for (const [agentId, binding] of bindings) {
          if (method === "deleteNamespace" && binding.namespace?.id === namespace?.id) bindings.delete(agentId);
        }
      }
      return result;
    } catch (error) {
      const failed = { namespaceId: namespace?.id, [flag]: false, failure: error.failure ?? "retryable" };
      // OCC's NamespaceDeleteResult has no `reason`; its NamespaceEnsureResult may.
      return method === "deleteNamespace" ? failed : { ...failed, reason: reason(error) };
    }
  };

  const driver = {
    id,
    implementation,
    capability: "compute",
    /** OCC's worker delivers `context.workspaceSetup` (the Console's documents) to this driver. */
    supportsWorkspaceSetup: true,
    /**
     * Credentials come from the operator's `<agentDir>/env` file, never from OCC
     * Secrets: OCC admits channel SecretRefs that name them.
     */
    operatorProvisionedSecrets: true,
    validateGatewaySettings,
    setLifecycleDrivers(drivers) {
      if (started) throw new Error("Compute lifecycle Drivers cannot change after lifecycle operations begin.");
      dispatcher = new LifecycleDispatcher(drivers);
    },
    async preflight() {
      const result = await invoke("preflight", {});
      return result?.warnings?.length ? { warnings: result.warnings } : undefined;
    },
    ensureNamespace: namespaceCall("ensureNamespace", "namespaceReady"),
    deleteNamespace: namespaceCall("deleteNamespace", "namespaceDeleted"),
    async bindAgent(binding) {
      const accepted = { namespace: binding?.namespace, agent: binding?.agent };
      await invoke("bindAgent", accepted);
      bindings.set(String(binding.agent.id), structuredClone(accepted));
    },
    /** OCC calls this synchronously at admission: one short host run. */
    validateHarnessAuth(harness, auth, _configuration, secretBindings) {
      const params = JSON.stringify({ harness, auth, ...(secretBindings === undefined ? {} : { secretBindings }) });
      const result = runOnce(s, ["call", "validateHarnessAuth", "--installation", path, "--json", "--params", params]);
      if (result.status !== 0) throw cliError(result);
    },
    async prepareRevision(revision, context) {
      checkWellFormed(context);
      return invoke("prepareRevision", { revision, ...(context ? { context } : {}) });
    },
    async activateRevision(revision, context) {
      checkWellFormed(context);
      await invoke("activateRevision", { revision, ...(context ? { context } : {}) });
    },
    async deactivateRevision(revision) {
      await invoke("deactivateRevision", { revision });
    },
    async stopRevision(revision) {
      await invoke("stopRevision", { revision });
    },
    async retireRevision(revision) {
      await invoke("retireRevision", { revision });
    },
    async deleteAgentRuntimeCredentials(binding) {
      await invoke("deleteAgentRuntimeCredentials", { namespace: binding?.namespace, agent: binding?.agent });
      bindings.delete(String(binding?.agent?.id));
    },
    /**
     * OCC's runtime view of one exact revision (the Console's Logs tab, `occ
     * agent runtime`): its gateway unit as the one pod, the unit's events and
     * the `gateway` log source. Read-only.
     */
    async describeAgentRuntime(binding, signal, options) {
      const { source, events } = options ?? {};
      const opts = { ...(source === undefined ? {} : { source }), ...(events === undefined ? {} : { events }) };
      return invoke("describeAgentRuntime", {
        ...revisionBinding(binding), ...(Object.keys(opts).length ? { options: opts } : {}),
      }, signal);
    },
    /** Raw lines of the gateway unit's output, bounded on the host by the request. */
    async readAgentRuntimeLogs(binding, request) {
      const { signal, ...fields } = request ?? {};
      return invoke("readAgentRuntimeLogs", { ...revisionBinding(binding), request: fields }, signal);
    },
    /** The current checks of the revision's deployment on its host. */
    async diagnoseAgentDeployment(binding) {
      return invoke("diagnoseAgentDeployment", revisionBinding(binding));
    },
    describePrepareRevisionFailure,
    /** The process id of the host serving now. */
    get pid() {
      return host?.pid;
    },
    /** Stop the host; in-flight calls are cancelled, and no host is started again. */
    async close() {
      closedByCaller = true;
      await starting?.catch(() => {});
      await host?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // Every method the host serves is here: the list is the host's (METHODS).
  for (const { name } of METHODS) {
    if (!(name in driver) && !["configurationSchema", "validateConfiguration"].includes(name)) {
      throw new Error(`occ-driver-host serves ${name}, which this package does not expose`);
    }
  }
  return driver;
}
