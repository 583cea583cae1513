// Types of the Node.js client of occ-driver-host.

export type Failure = "retryable" | "permanent";

export class DriverError extends Error {
  readonly failure: Failure;
  /** A stable code, e.g. "unmapped-namespace", "cancelled", "host-key". */
  readonly code: string;
  /** The configured host alias involved, if any. */
  readonly host: string | null;
  /** The JSON-RPC error code (-32000 driver failure, -32800 cancelled, -32602 bad params). */
  readonly rpcCode: number | null;
}

export interface Namespace {
  id: string;
  name: string;
  [key: string]: unknown;
}

export interface AgentBinding {
  namespace: Namespace;
  agent: { id: string; servicePrincipalId: string; [key: string]: unknown };
}

export interface AgentRevision {
  id: string;
  namespaceId: string;
  agentId: string;
  revision: number;
  harness: { id: string; mode: string; version?: string };
  harnessAuth: unknown;
  configuration: unknown;
  requestedPlugins?: Record<string, unknown>;
  defaultPluginApproverPolicy?: unknown;
  secretBindings?: { name: string; secretId: string }[];
  [key: string]: unknown;
}

export interface Warning {
  code: string;
  message: string;
}

export interface NamespaceResult {
  namespaceReady?: boolean;
  namespaceDeleted?: boolean;
  failure?: Failure;
  code?: string;
  message?: string;
  host?: string;
}

export interface CallOptions {
  /** Aborting sends $/cancelRequest: the ssh client is killed, the call rejects with code "cancelled". */
  signal?: AbortSignal;
  /** A binding for this call only (otherwise the one from bindAgent). */
  binding?: AgentBinding;
}

export interface LifecycleHooks {
  afterNamespacePrepared?(params: { namespace: Namespace }): unknown | Promise<unknown>;
  /** Return the opaque environment placeholders to project into the workload. */
  beforeWorkloadStart?(params: {
    binding: AgentBinding;
    revisionId: string;
  }): { environment?: Record<string, string> | { name: string; value: string }[] } | void | Promise<{ environment?: Record<string, string> | { name: string; value: string }[] } | void>;
  beforeWorkloadStop?(params: { binding: AgentBinding; revisionId: string }): unknown | Promise<unknown>;
  beforeNamespaceDelete?(params: { namespace: Namespace }): unknown | Promise<unknown>;
}

export interface Progress {
  id: number;
  host: string;
  step?: string;
  message?: string;
}

export interface ComponentDriverOptions {
  /** The driver component (.wasm); overrides drivers.compute.component. */
  component?: string;
  /** The installation file, or the Installation document itself. */
  installation: string | Record<string, unknown>;
  hooks?: LifecycleHooks;
  /** The occ-driver-host binary; default $OCC_DRIVER_HOST or occ-driver-host on PATH. */
  hostBinary?: string;
  auditLog?: string;
  env?: NodeJS.ProcessEnv;
  onProgress?(progress: Progress): void;
  onStderr?(chunk: string): void;
}

export interface ComponentDriver {
  validateConfiguration(options?: CallOptions): Promise<{ ok: true; warnings: Warning[] }>;
  preflight(options?: CallOptions): Promise<{ ok: true; warnings: Warning[] }>;
  ensureNamespace(namespace: Namespace, options?: CallOptions): Promise<NamespaceResult>;
  bindAgent(binding: AgentBinding, options?: CallOptions): Promise<{ ok: true }>;
  validateHarnessAuth(revision: AgentRevision, options?: CallOptions): Promise<{ ok: true; warnings: Warning[] }>;
  prepareRevision(
    revision: AgentRevision,
    context?: { secretEnvironment?: unknown[] },
    options?: CallOptions,
  ): Promise<{ ready: boolean; warnings: Warning[] }>;
  activateRevision(revision: AgentRevision, options?: CallOptions): Promise<{ ok: true }>;
  deactivateRevision(revision: AgentRevision, options?: CallOptions): Promise<{ ok: true }>;
  stopRevision(revision: AgentRevision, options?: CallOptions): Promise<{ ok: true }>;
  retireRevision(revision: AgentRevision, options?: CallOptions): Promise<{ ok: true }>;
  deleteNamespace(namespace: Namespace, options?: CallOptions): Promise<NamespaceResult>;
  readonly pid: number | undefined;
  close(): Promise<void>;
}

export function createComponentDriver(options: ComponentDriverOptions): Promise<ComponentDriver>;
