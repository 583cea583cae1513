// Types of the OCC Compute Driver package backed by occ-driver-host. The OCC
// types are those of `packages/contracts/src/index.ts` in
// openclaw/openclaw-enterprise, restated for what this package reads and returns.

export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

export type NamespaceStatus = "provisioning" | "ready" | "failed" | "deleting";
export interface Namespace {
  readonly id: string;
  readonly name: string;
  /** SSH Compute refuses it: existing namespaces are not adopted. */
  readonly existingNamespace?: string;
  readonly status: NamespaceStatus;
  readonly createdAt: string;
}

export interface Agent {
  readonly id: string;
  readonly namespaceId: string;
  readonly name: string;
  readonly servicePrincipalId: string;
  readonly [field: string]: unknown;
}

export interface ComputeAgentBinding {
  readonly namespace: Readonly<Namespace>;
  readonly agent: Readonly<Agent>;
}

export interface RevisionHarnessDescriptor {
  readonly id: string;
  readonly version: string;
  readonly mode: "embedded" | "dedicated";
}

/** SSH Compute admits exactly `{ method: "runtime" }`. */
export type HarnessAuthSnapshot = { readonly method: "runtime" } | { readonly method: string; readonly [field: string]: unknown };

export interface SecretBinding {
  readonly source: { readonly kind: "secret"; readonly id: string; readonly namespaceId: string };
  readonly delivery?: { readonly type: "env" };
}

export interface AgentRevision {
  readonly id: string;
  readonly namespaceId: string;
  readonly agentId: string;
  readonly revision: number;
  readonly backendId: string | null;
  readonly configurationId: string;
  readonly configurationKind: "agent";
  readonly configurationGeneration: number;
  readonly configuration: { readonly [key: string]: JSONValue };
  readonly harness: RevisionHarnessDescriptor;
  readonly compute: { readonly id: string; readonly implementation: string };
  /** Refused by SSH Compute. */
  readonly sandboxDriverId?: string;
  readonly secretDriverId?: string;
  /** Refused by SSH Compute unless empty. */
  readonly secretBindings?: Readonly<Record<string, SecretBinding>>;
  /** Refused by SSH Compute unless `plugins` is empty. */
  readonly plugins?: { readonly driver: { readonly id: string; readonly implementation: string }; readonly plugins: Readonly<Record<string, unknown>> };
  /** Refused by SSH Compute when defined, an empty list included. */
  readonly pluginApprovers?: readonly { readonly channel: string; readonly id: string }[];
  readonly harnessAuth: HarnessAuthSnapshot;
  readonly servicePrincipalId: string;
  readonly createdAt: string;
}

/** OCC's `packages/contracts/src/workspace-setup.ts`: private delivery state of Agent creation. */
export type InitialWorkspaceFileName = "AGENTS.md" | "SOUL.md" | "IDENTITY.md" | "USER.md";
export interface WorkspaceSetup {
  readonly id: string;
  readonly namespaceId: string;
  readonly agentId: string;
  /** SHA-256 of the stock documents the Console showed. */
  readonly defaultsId?: string;
  /** Well-formed Unicode without NUL, at most 16 KiB each; absent once completed. */
  readonly files?: Partial<Record<InitialWorkspaceFileName, string>>;
  readonly completed: boolean;
}

export interface ComputeRevisionContext {
  /** Refused by SSH Compute unless empty. */
  readonly secretEnvironment: readonly { readonly name: string; readonly [field: string]: unknown }[];
  readonly harnessAuth?: unknown;
  /** Delivered into the Agent's OpenClaw workspace by prepare and activate. */
  readonly workspaceSetup?: Readonly<WorkspaceSetup>;
}

export type NamespaceLifecycleFailure = "retryable" | "permanent";

export interface NamespaceEnsureResult {
  readonly namespaceId: string;
  readonly namespaceReady: boolean;
  readonly failure?: NamespaceLifecycleFailure;
  /** At most 256 printable characters naming the failure; never a secret. */
  readonly reason?: string;
}

/** OCC's shape exactly: no `reason`. */
export interface NamespaceDeleteResult {
  readonly namespaceId: string;
  readonly namespaceDeleted: boolean;
  readonly failure?: NamespaceLifecycleFailure;
}

export interface ComputeAgentRevisionBinding extends ComputeAgentBinding {
  readonly revision: Readonly<AgentRevision>;
}

/** OCC's runtime shapes (packages/contracts/src/index.ts). An SSH Agent's one pod is its gateway unit. */
export interface AgentRuntimeContainerStatus {
  readonly name: string;
  readonly state: "waiting" | "running" | "terminated" | "unknown";
  readonly reason: string | null;
  readonly ready: boolean;
  readonly restartCount: number;
  readonly startedAt: string | null;
  readonly lastTermination: { readonly reason: string | null; readonly exitCode: number | null; readonly finishedAt: string | null } | null;
}
export interface AgentRuntimeEvent {
  readonly type: "Normal" | "Warning";
  readonly container: string | null;
  readonly reason: string;
  readonly message: string;
  readonly count: number;
  readonly lastObservedAt: string | null;
}
export interface AgentRuntimePodStatus {
  readonly role: "gateway" | "agent";
  readonly cluster: "control" | "execution";
  /** The gateway's systemd unit. */
  readonly name: string;
  /** The unit's InvocationID: a restart is a new uid. */
  readonly uid: string;
  readonly phase: string;
  readonly ready: boolean;
  readonly createdAt: string | null;
  readonly containers: readonly AgentRuntimeContainerStatus[];
  /** Newest first, at most 100. */
  readonly events: readonly AgentRuntimeEvent[];
}
export interface AgentRuntimeLogSource {
  readonly id: "gateway" | "agent" | "sandbox";
  readonly kind: "container" | "sandbox";
  readonly pods: readonly { readonly name: string; readonly uid: string; readonly container: string; readonly restartCount: number }[];
  readonly available: boolean;
  readonly unavailableCode?: "NO_POD";
  readonly retention: string;
}
export interface AgentRuntimeDescription {
  readonly revisionId: string;
  readonly observedAt: string;
  readonly pods: readonly AgentRuntimePodStatus[];
  readonly sources: readonly AgentRuntimeLogSource[];
}
export interface AgentRuntimeDescribeOptions {
  readonly source?: "gateway" | "agent";
  readonly events?: boolean;
}
export interface AgentRuntimeLogRequest {
  readonly source: "gateway" | "agent";
  readonly pod: string;
  readonly podUid: string;
  readonly container: string;
  readonly previous: boolean;
  readonly tailLines: number;
  readonly sinceSeconds?: number;
  readonly limitBytes: number;
  readonly signal?: AbortSignal;
}
export interface AgentRuntimeLogChunk {
  readonly stream: { readonly source: "gateway"; readonly pod: string; readonly podUid: string; readonly container: string; readonly restartCount: number };
  readonly observedAt: string;
  readonly lines: readonly { readonly time: string | null; readonly raw: string }[];
  readonly truncated: boolean;
}
export interface AgentDeploymentDiagnostics {
  readonly revisionId: string;
  readonly observedAt: string;
  readonly checks: readonly {
    readonly component: string;
    readonly check: string;
    readonly state: "succeeded" | "failed" | "unknown";
    readonly checkedAt: string | null;
    readonly code?: string;
  }[];
}
export interface ComputePrepareRevisionFailureDiagnostic {
  readonly code: string;
  readonly stage: string;
  readonly errorClass?: string;
  readonly message?: string;
  readonly status?: number;
}
export declare function describePrepareRevisionFailure(error: unknown): ComputePrepareRevisionFailureDiagnostic | undefined;

export interface ComputeReadiness {
  readonly namespaceId: string;
  readonly agentId: string;
  readonly revisionId: string;
  readonly ready: boolean;
}

export interface ComputePreflightResult {
  readonly warnings: readonly { readonly code: string; readonly message: string }[];
}

export interface WorkloadLaunchContext {
  environment: Record<string, string>;
}

export interface ComputeLifecycleHooks {
  afterNamespacePrepared?(namespace: Readonly<Namespace>, signal: AbortSignal): Promise<void>;
  beforeWorkloadStart?(revision: Readonly<AgentRevision>, launch: WorkloadLaunchContext, signal: AbortSignal): Promise<void>;
  beforeWorkloadStop?(revision: Readonly<AgentRevision>, signal: AbortSignal): Promise<void>;
  beforeNamespaceDelete?(namespace: Readonly<Namespace>, signal: AbortSignal): Promise<void>;
}

/** A driver OCC selected for lifecycle hooks (Configuration, Sandbox, IAM). */
export interface LifecycleDriver {
  readonly id: string;
  readonly capability: string;
  readonly computeLifecycleHooks?: ComputeLifecycleHooks;
}

/** The package's own settings, beside the driver configuration. */
export interface DriverHostSettings {
  /** The driver component (.wasm); default: $OCC_DRIVER_COMPONENT, then the one this package carries. This setting wins over the variable. */
  component?: string;
  /** The occ-driver-host executable; default: $OCC_DRIVER_HOST, then the installed platform package's. The plugin spells it `binary` too. */
  binary?: string;
  /** SHA-256 of each audited helper the driver may run (drivers.compute.approvedHelpers). */
  approvedHelpers?: string[];
  /** Append the host's audit records to this file. */
  auditLog?: string;
  /** Directory of precompiled components, private to this user. */
  cacheDir?: string;
  /** Sessions one SSH connection to a host keeps open at once (1 to 64, default 8). */
  maxSessions?: number;
}

export interface SshComputeConfiguration {
  ssh: { identityFile: string; knownHostsFile: string; connectTimeoutSeconds?: number };
  hosts: Record<string, { address: string; port?: number; user: "root"; nodePath?: string; openclawPath?: string }>;
  runtime: { nodePath: string; openclawPath: string; user: string; root: string; systemdUnitDirectory?: string };
  network: { gatewayPortRange: { start: number; end: number } };
  driverHost?: DriverHostSettings;
}

export interface CreateDriverOptions {
  id: string;
  implementation: string;
  configuration: SshComputeConfiguration;
  platformState?: unknown;
  getOperationAbortSignal?: () => AbortSignal | undefined;
  onProgress?: (progress: { id: number | string; host: string; step?: string; message?: string }) => void;
  onStderr?: (chunk: string) => void;
}

export interface ComputeDriver {
  readonly id: string;
  readonly implementation: string;
  readonly capability: "compute";
  /** OCC's worker passes `context.workspaceSetup` to prepare and activate. */
  readonly supportsWorkspaceSetup: true;
  /** Credentials live in the operator's `<agentDir>/env`; OCC admits SecretRefs naming them. */
  readonly operatorProvisionedSecrets: true;
  /** Throws (permanent) naming a native gateway setting SSH Compute cannot serve; teardown never calls it. */
  validateGatewaySettings(configuration: Readonly<Record<string, unknown>>): void;
  setLifecycleDrivers(drivers: readonly LifecycleDriver[]): void;
  preflight(): Promise<void | ComputePreflightResult>;
  ensureNamespace(namespace: Namespace): Promise<NamespaceEnsureResult>;
  deleteNamespace(namespace: Namespace): Promise<NamespaceDeleteResult>;
  bindAgent(binding: ComputeAgentBinding): Promise<void>;
  validateHarnessAuth(
    harness: RevisionHarnessDescriptor,
    auth: HarnessAuthSnapshot,
    configuration?: unknown,
    secretBindings?: Readonly<Record<string, SecretBinding>>,
    credentialSourceType?: string,
  ): void;
  prepareRevision(revision: AgentRevision, context?: ComputeRevisionContext): Promise<ComputeReadiness>;
  activateRevision(revision: AgentRevision, context?: ComputeRevisionContext): Promise<void>;
  deactivateRevision(revision: AgentRevision): Promise<void>;
  stopRevision(revision: AgentRevision): Promise<void>;
  retireRevision(revision: AgentRevision): Promise<void>;
  deleteAgentRuntimeCredentials(binding: ComputeAgentBinding): Promise<void>;
  describeAgentRuntime(
    binding: ComputeAgentRevisionBinding,
    signal?: AbortSignal,
    options?: AgentRuntimeDescribeOptions,
  ): Promise<AgentRuntimeDescription>;
  readAgentRuntimeLogs(binding: ComputeAgentRevisionBinding, request: AgentRuntimeLogRequest): Promise<AgentRuntimeLogChunk>;
  diagnoseAgentDeployment(binding: ComputeAgentRevisionBinding): Promise<AgentDeploymentDiagnostics>;
  describePrepareRevisionFailure(error: unknown): ComputePrepareRevisionFailureDiagnostic | undefined;
  readonly pid: number | undefined;
  close(): Promise<void>;
}

/** A failed call: the driver's verdict or the host's. */
export declare class DriverError extends Error {
  readonly failure: "retryable" | "permanent";
  readonly code: string;
  readonly host: string | null;
  /** The host's own refusal during the call, when it refused the component something. */
  readonly refusal: string | null;
  readonly rpcCode: number | null;
}

export declare const configurationSchema: Readonly<Record<string, unknown>>;
/** The settings `validateGatewaySettings` refuses: [path, refused value, why]. */
export declare const REFUSED_GATEWAY_SETTINGS: readonly (readonly [readonly string[], unknown, string])[];
export declare function validateGatewaySettings(configuration: Readonly<Record<string, unknown>>): void;
export declare function validateConfiguration(configuration: unknown): void;
/**
 * The occ-driver-host binary the package runs: `override`, then
 * $OCC_DRIVER_HOST, then the installed platform package's. Throws a
 * DriverError (code "host-missing") naming the package to install and
 * `setting`, the override, when there is none.
 */
export declare function resolveHostBinary(override: string | undefined, setting: string): string;
export declare function createDriver(options: CreateDriverOptions): ComputeDriver;
export declare const METHODS: readonly { readonly name: string; readonly params: string }[];
export declare class LifecycleDispatcher {
  constructor(drivers: readonly LifecycleDriver[]);
  selects(phase: keyof ComputeLifecycleHooks): boolean;
}
export declare function validateLaunch(launch: WorkloadLaunchContext): boolean;
