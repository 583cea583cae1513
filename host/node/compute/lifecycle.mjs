// Lifecycle hooks of the drivers OCC selects (Configuration, Sandbox, IAM), run
// the way OCC's own Compute drivers run them: each hook gets a frozen copy of its
// subject and the operation's AbortSignal; `beforeWorkloadStart` hooks share one
// launch object whose environment must hold only opaque placeholders; a failure
// compensates the hooks that completed, in reverse order; a cleanup whose
// operation was already aborted gets a fresh 5 s signal.

const PHASES = ["afterNamespacePrepared", "beforeWorkloadStart", "beforeWorkloadStop", "beforeNamespaceDelete"];
const NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
const RESERVED = /^(?:HOME|PATH|TMPDIR|CODEX_HOME|NODE_OPTIONS|NODE_PATH|BASH_ENV|ENV|LOG_FORMAT|RUST_LOG|XDG_.*|OPENCLAW_.*|OTEL_.*|LD_.*|DYLD_.*)$/;
const VALUE = /^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MAX_PLACEHOLDERS = 64;
/** OCC gives a cancelled rollback this long. */
export const CLEANUP_MS = 5_000;

const NEVER = new AbortController().signal;

function frozen(value) {
  return Object.freeze(structuredClone(value));
}

function hookFailure(phase, owner, cause) {
  const error = new Error(`Compute lifecycle hook ${phase} failed for ${owner.capability}:${owner.id}`, { cause });
  error.phase = phase;
  if (cause?.failure === "permanent") error.failure = "permanent";
  return error;
}

/** Whether `launch.environment` holds only what OCC admits. */
export function validateLaunch(launch) {
  const env = launch?.environment;
  if (env === null || typeof env !== "object" || Array.isArray(env)) return false;
  const entries = Object.entries(env);
  if (entries.length > MAX_PLACEHOLDERS) return false;
  return entries.every(([name, value]) => NAME.test(name) && !RESERVED.test(name) && typeof value === "string" && VALUE.test(value));
}

/** Checks the lifecycle drivers OCC passes to `setLifecycleDrivers`. */
function owners(drivers) {
  if (!Array.isArray(drivers)) throw new TypeError("setLifecycleDrivers: expected an array of drivers");
  return drivers.map((driver) => {
    const hooks = driver?.computeLifecycleHooks;
    if (hooks === null || typeof hooks !== "object" || Array.isArray(hooks) || Object.keys(hooks).length === 0) {
      throw new TypeError(`setLifecycleDrivers: ${driver?.capability}:${driver?.id} has no computeLifecycleHooks`);
    }
    const callbacks = {};
    for (const [phase, hook] of Object.entries(hooks)) {
      if (!PHASES.includes(phase) || typeof hook !== "function") {
        throw new TypeError(`setLifecycleDrivers: ${driver.capability}:${driver.id}: ${phase} is not a lifecycle hook`);
      }
      callbacks[phase] = hook.bind(hooks);
    }
    return { capability: driver.capability, id: driver.id, callbacks };
  });
}

export class LifecycleDispatcher {
  constructor(drivers) {
    this.owners = owners(drivers);
  }

  /** Whether any selected driver has a hook for `phase`. */
  selects(phase) {
    return this.owners.some((o) => o.callbacks[phase]);
  }

  async #run(phase, owner, signal, ...args) {
    const hook = owner.callbacks[phase];
    if (!hook) return false;
    signal.throwIfAborted();
    try {
      await hook(...args, signal);
    } catch (error) {
      throw hookFailure(phase, owner, error);
    }
    signal.throwIfAborted();
    return true;
  }

  async #cleanup(phase, subject, completed, signal) {
    // A rollback whose operation was already aborted still gets 5 s.
    const cleanupSignal = signal.aborted ? AbortSignal.timeout(CLEANUP_MS) : signal;
    for (const owner of [...completed].reverse()) {
      await this.#run(phase, owner, cleanupSignal, frozen(subject));
    }
  }

  async afterNamespacePrepared(namespace, signal = NEVER) {
    const completed = [];
    try {
      for (const owner of this.owners) {
        if (await this.#run("afterNamespacePrepared", owner, signal, frozen(namespace))) completed.push(owner);
      }
    } catch (error) {
      await this.#cleanup("beforeNamespaceDelete", namespace, completed, signal).catch(() => {});
      throw error;
    }
  }

  /** Runs every beforeWorkloadStart; returns the frozen launch context. */
  async beforeWorkloadStart(revision, signal = NEVER) {
    const launch = { environment: {} };
    const completed = [];
    try {
      for (const owner of this.owners) {
        if (await this.#run("beforeWorkloadStart", owner, signal, frozen(revision), launch)) completed.push(owner);
      }
      if (!validateLaunch(launch)) {
        const error = new Error("Unsafe workload launch environment contribution");
        error.failure = "permanent";
        throw error;
      }
    } catch (error) {
      await this.#cleanup("beforeWorkloadStop", revision, completed, signal).catch(() => {});
      throw error;
    }
    return frozen(launch);
  }

  async beforeWorkloadStop(revision, { cleanup = false } = {}, signal = NEVER) {
    const hookSignal = cleanup && signal.aborted ? AbortSignal.timeout(CLEANUP_MS) : signal;
    for (const owner of [...this.owners].reverse()) {
      await this.#run("beforeWorkloadStop", owner, hookSignal, frozen(revision));
    }
  }

  async beforeNamespaceDelete(namespace, signal = NEVER) {
    for (const owner of [...this.owners].reverse()) {
      await this.#run("beforeNamespaceDelete", owner, signal, frozen(namespace));
    }
  }
}
