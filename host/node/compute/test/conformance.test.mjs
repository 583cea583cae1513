// OCC conformance on a real host: a controller written against OCC's types
// drives `createDriver` through the whole lifecycle with OCC's own objects, its
// operation signal (AsyncLocalStorage, as OCC's worker keeps it) and a
// Configuration driver's lifecycle hooks, and a real OpenClaw gateway serves.
//
// Needs the disposable test hosts: tests/run.sh brings them up and exports
// OCC_RIG_*. In CI a missing rig fails instead of skipping.

import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import { DriverError, createDriver, describePrepareRevisionFailure, validateConfiguration } from "../index.mjs";
import * as occ from "./occ.mjs";

const ROOT = "/var/lib/openclaw-enterprise";
const UNIT_DIR = "/etc/systemd/system";
const sha = (s) => createHash("sha256").update(s).digest("hex");
const hash12 = (s) => sha(s).slice(0, 12);

const { rig, onHost } = occ;

/** Everything the driver may change on a host: its tree, its units, its accounts. */
const listing = (host) =>
  onHost(host, `{ find ${ROOT} -printf '%p %m %u:%g %s\\n' 2>/dev/null | sort; ls -l ${UNIT_DIR} | grep openclaw-enterprise-gateway; getent passwd | grep '^openclaw-'; } || true`);

/** OCC's worker keeps the operation's signal in AsyncLocalStorage; so do we. */
const operation = new AsyncLocalStorage();
const withOperation = (signal, fn) => operation.run(signal, fn);

test("OCC conformance: the package deploys, refuses, compensates, cancels and deletes on a real host", {
  skip: rig || process.env.CI ? false : "needs the test hosts: run tests/run.sh",
  timeout: 900_000,
}, async (t) => {
  assert.ok(rig, "CI is set but OCC_RIG_* is not exported: the test hosts are missing");
  const host = rig.hosts[rig.hosts.length - 1];
  const scratch = mkdtempSync(join(tmpdir(), "occ-conformance-"));
  const configuration = {
    ssh: { identityFile: rig.identity, knownHostsFile: rig.knownHosts, connectTimeoutSeconds: 5 },
    hosts: { conformance: { address: host.address, port: host.port ?? 22, user: "root", nodePath: rig.node, openclawPath: rig.openclaw } },
    runtime: { nodePath: rig.node, openclawPath: rig.openclaw, user: "openclaw", root: ROOT, systemdUnitDirectory: UNIT_DIR },
    network: { gatewayPortRange: { start: 18800, end: 18899 } },
    driverHost: { binary: occ.hostBinary, component: occ.component, auditLog: join(scratch, "audit.jsonl") },
  };
  // The helper the operator audited and pinned.
  const check = JSON.parse(execFileSync(occ.hostBinary, ["inspect", occ.component, "--json"], { encoding: "utf8" }));
  configuration.driverHost.approvedHelpers = [check.helper.sha256];
  validateConfiguration(configuration);

  // A Configuration driver's hooks, as OCC's worker passes lifecycle drivers.
  const calls = [];
  let start = () => ({ IAM_SESSION: "opaque-iam-1" });
  const configurationDriver = {
    id: "configuration-default",
    capability: "configuration",
    implementation: "occ/configuration",
    computeLifecycleHooks: {
      async afterNamespacePrepared(namespace, signal) {
        calls.push(["afterNamespacePrepared", namespace, signal.aborted]);
      },
      async beforeWorkloadStart(revision, launch, signal) {
        calls.push(["beforeWorkloadStart", revision, signal.aborted]);
        Object.assign(launch.environment, await start(revision, signal));
      },
      async beforeWorkloadStop(revision, signal) {
        calls.push(["beforeWorkloadStop", revision, signal.aborted]);
      },
      async beforeNamespaceDelete(namespace, signal) {
        calls.push(["beforeNamespaceDelete", namespace, signal.aborted]);
      },
    },
  };
  const phases = () => calls.splice(0).map(([phase, subject]) => `${phase}:${subject.id}`);

  const progress = [];
  const driver = createDriver({
    id: occ.DRIVER_ID,
    implementation: occ.IMPLEMENTATION,
    configuration,
    getOperationAbortSignal: () => operation.getStore(),
    onProgress: (p) => progress.push(p),
  });
  driver.setLifecycleDrivers(Object.freeze([configurationDriver]));
  const run = (fn) => withOperation(new AbortController().signal, fn);

  const namespace = occ.namespace("conformance");
  const agent = occ.agent(namespace);
  const nsDir = `${ROOT}/namespaces/${hash12(namespace.id)}`;
  const agentDir = `${nsDir}/agents/${hash12(agent.id)}`;
  const unit = `openclaw-enterprise-gateway-${hash12(agent.id)}`;
  const served = () => JSON.parse(onHost(host, `cat ${agentDir}/served.json`));
  const current = () => onHost(host, `readlink ${agentDir}/current || true`);
  const port = () => JSON.parse(onHost(host, `cat ${agentDir}/agent.json`)).port;
  const readyz = () => onHost(host, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port()}/readyz || true`);

  try {
    await t.test("preflight and ensureNamespace answer in OCC's shapes", async () => {
      const preflight = await run(() => driver.preflight());
      assert.ok(preflight === undefined || Array.isArray(preflight.warnings));
      assert.deepEqual(await run(() => driver.ensureNamespace(namespace)), { namespaceId: namespace.id, namespaceReady: true });
      const [[phase, subject, aborted]] = calls.splice(0);
      assert.equal(phase, "afterNamespacePrepared");
      assert.deepEqual(subject, namespace);
      assert.equal(aborted, false);
      await run(() => driver.bindAgent({ namespace, agent }));
    });

    await t.test("every admission refusal names OCC's field and changes nothing on the host", async () => {
      const before = listing(host);
      const r = (extra) => occ.revision(agent, 1, extra);
      const cases = [
        [r({ harness: { id: "openclaw", version: "2026.9.6", mode: "dedicated" } }), /^revision\.harness:/],
        [r({ harness: { id: "codex", version: "1.0.0", mode: "embedded" } }), /^revision\.harness:/],
        [r({ harnessAuth: { method: "api_key", source: { kind: "secret", id: "k", namespaceId: namespace.id }, secretDriverId: "secret-k8s" } }), /^revision\.harnessAuth:/],
        [r({ secretBindings: { OPENAI_API_KEY: { source: { kind: "secret", id: "k", namespaceId: namespace.id } } } }), /^revision\.secretBindings:.*OPENAI_API_KEY/],
        [r({ plugins: { driver: { id: "plugins", implementation: "occ/plugins" }, plugins: { github: { enabled: true } } } }), /^revision\.plugins\.plugins:.*github/],
        [r({ pluginApprovers: [] }), /^revision\.pluginApprovers:/],
        [r({ sandboxDriverId: "sandbox-k8s" }), /^revision\.sandboxDriverId:/],
        [r({ configurationKind: "team" }), /^revision\.configurationKind:/],
        [r({ configurationGeneration: 0 }), /^revision\.configurationGeneration:/],
        [r({ compute: { id: "compute-k8s", implementation: occ.IMPLEMENTATION } }), /^revision\.compute:/],
        [r({ servicePrincipalId: "sp-someone-else" }), /^revision\.servicePrincipalId:/],
        [r({ agentId: "agent-never-bound" }), /^revision\.agentId:/],
      ];
      for (const [revision, message] of cases) {
        await assert.rejects(run(() => driver.prepareRevision(revision, occ.context())), (error) => {
          assert.ok(error instanceof DriverError, String(error));
          assert.equal(error.failure, "permanent", error.message);
          assert.match(error.message, message);
          return true;
        });
        await assert.rejects(run(() => driver.activateRevision(revision, occ.context())), (error) => error.failure === "permanent");
      }
      // The context is checked too: OCC Secret projections are refused.
      const good = r();
      await assert.rejects(
        run(() => driver.prepareRevision(good, occ.context({ secretEnvironment: [{ name: "OPENAI_API_KEY", secretId: "k", namespaceId: namespace.id, agentId: agent.id, backendRef: { namespaceName: "n", name: "s", key: "k", uid: "u" } }] }))),
        (error) => error.failure === "permanent" && /secretEnvironment/.test(error.message),
      );
      assert.equal(listing(host), before, "a refused revision changed the host");
      assert.deepEqual(calls, [], "a refused revision ran a hook");
    });

    const first = occ.revision(agent, 1);
    const second = occ.revision(agent, 2, { configuration: { gateway: { mode: "local" }, agents: { defaults: { timeoutSeconds: 90 } } } });

    await t.test("prepare echoes OCC's IDs; activation runs the start hook with the full revision and serves", async () => {
      assert.deepEqual(await run(() => driver.prepareRevision(first, occ.context())), {
        namespaceId: namespace.id, agentId: agent.id, revisionId: first.id, ready: true,
      });
      await run(() => driver.activateRevision(first, occ.context()));
      const [[phase, subject]] = calls.splice(0);
      assert.equal(phase, "beforeWorkloadStart");
      assert.deepEqual(subject, first);
      assert.equal(served().revisionId, first.id);
      assert.equal(readyz(), "200");
      // The placeholder from the hook is projected into the unit, nothing else from it.
      assert.match(onHost(host, `cat ${UNIT_DIR}/${unit}.service`), /^Environment="IAM_SESSION=opaque-iam-1"$/m);
      assert.ok(progress.some((p) => p.host === "conformance"), "no progress notifications");
      assert.deepEqual(await run(() => driver.prepareRevision(second, occ.context())), {
        namespaceId: namespace.id, agentId: agent.id, revisionId: second.id, ready: true,
      });
    });

    await t.test("a hook refusal carries its failure and prevents the launch", async () => {
      start = () => {
        throw Object.assign(new Error("IAM denied the workload"), { failure: "permanent" });
      };
      await assert.rejects(run(() => driver.activateRevision(second, occ.context())), (error) => {
        assert.equal(error.failure, "permanent");
        assert.match(error.message, /beforeWorkloadStart/);
        return true;
      });
      assert.deepEqual(phases(), [`beforeWorkloadStart:${second.id}`]);
      assert.equal(served().revisionId, first.id);
      assert.equal(current(), `revisions/${hash12(first.id)}`);
    });

    await t.test("an unsafe launch contribution is refused and compensated", async () => {
      start = () => ({ PATH: "opaque-evil" });
      await assert.rejects(run(() => driver.activateRevision(second, occ.context())), (error) => error.failure === "permanent");
      assert.deepEqual(phases(), [`beforeWorkloadStart:${second.id}`, `beforeWorkloadStop:${second.id}`]);
      assert.equal(served().revisionId, first.id);
      assert.equal(readyz(), "200");
    });

    await t.test("cancelled through the operation signal after the start hook answered: compensation still runs", async () => {
      const controller = new AbortController();
      start = () => {
        // The worker loses its claim while the host waits for readiness.
        setTimeout(() => controller.abort(new Error("claim lost")), 200);
        return { IAM_SESSION: "opaque-iam-2" };
      };
      await assert.rejects(withOperation(controller.signal, () => driver.activateRevision(second, occ.context())), (error) => {
        assert.equal(error.code, "cancelled", error.message);
        assert.equal(error.failure, "retryable");
        return true;
      });
      const seen = calls.splice(0);
      assert.deepEqual(seen.map(([phase, subject]) => `${phase}:${subject.id}`),
        [`beforeWorkloadStart:${second.id}`, `beforeWorkloadStop:${second.id}`]);
      // The compensating stop ran with a live signal although the operation was aborted.
      assert.equal(seen[1][2], false);
    });

    await t.test("the retry converges and cuts over", async () => {
      start = () => ({ IAM_SESSION: "opaque-iam-2" });
      await run(() => driver.activateRevision(second, occ.context()));
      assert.deepEqual(phases(), [`beforeWorkloadStart:${second.id}`]);
      assert.equal(served().revisionId, second.id);
      assert.equal(current(), `revisions/${hash12(second.id)}`);
      assert.equal(readyz(), "200");
      await run(() => driver.deactivateRevision(first));
      assert.equal(served().revisionId, second.id, "deactivating the old revision touched the serving one");
    });

    await t.test("the Console's runtime view: the unit as OCC's pod, its journal bounded, its checks", async () => {
      const binding = { namespace, agent, revision: second };
      const invocation = onHost(host, `systemctl show -p InvocationID --value ${unit}.service`);
      const described = await driver.describeAgentRuntime(binding, AbortSignal.timeout(10_000), { events: false });
      assert.equal(described.revisionId, second.id);
      assert.equal(described.pods.length, 1);
      const [pod] = described.pods;
      assert.equal(pod.name, `${unit}.service`);
      assert.equal(pod.uid, invocation);
      assert.equal(pod.ready, true);
      assert.deepEqual(pod.events, [], "events: false lists none");
      assert.deepEqual(described.sources.map((s) => [s.id, s.kind, s.available]), [["gateway", "container", true]]);
      // The first revision does not run: no pod for it.
      const old = await driver.describeAgentRuntime({ namespace, agent, revision: first }, AbortSignal.timeout(10_000));
      assert.deepEqual(old.pods, []);
      assert.equal(old.sources[0].unavailableCode, "NO_POD");
      const chunk = await driver.readAgentRuntimeLogs(binding, {
        source: "gateway", pod: pod.name, podUid: pod.uid, container: "gateway", previous: false,
        tailLines: 5, limitBytes: 1024 * 1024, signal: AbortSignal.timeout(10_000),
      });
      assert.ok(chunk.lines.length > 0 && chunk.lines.length <= 5, JSON.stringify(chunk));
      assert.equal(chunk.stream.podUid, invocation);
      assert.equal(chunk.stream.source, "gateway");
      const diagnosis = await driver.diagnoseAgentDeployment(binding);
      const failed = diagnosis.checks.filter((c) => c.state !== "succeeded");
      assert.deepEqual(failed, [], JSON.stringify(diagnosis));
      assert.ok(diagnosis.checks.some((c) => c.check === "openclaw-version"), JSON.stringify(diagnosis));
      // The same revision as if committed for another OpenClaw: the check names it.
      const other = { ...second, harness: { ...second.harness, version: "2026.1.0" } };
      const mismatch = await driver.diagnoseAgentDeployment({ namespace, agent, revision: other });
      assert.deepEqual(mismatch.checks.filter((c) => c.state !== "succeeded")
        .map(({ component, check, state, code }) => ({ component, check, state, code })),
      [{ component: "host", check: "openclaw-version", state: "failed", code: "OPENCLAW_VERSION" }]);
      // A request out of OCC's bounds is refused before any host is touched.
      await assert.rejects(driver.readAgentRuntimeLogs(binding, {
        source: "gateway", pod: pod.name, podUid: pod.uid, container: "gateway", previous: false,
        tailLines: 5000, limitBytes: 1024,
      }), (error) => error.failure === "permanent" && /tailLines/.test(error.message));
      // A refused preparation described in OCC's bounded fields.
      assert.deepEqual(describePrepareRevisionFailure({ code: "ssh-connect", failure: "retryable", host: "conformance", message: "x" }),
        { code: "SSH_SSH_CONNECT", stage: "host_connection", errorClass: "RetryableDriverError", message: "x" });
    });

    await t.test("deleteAgentRuntimeCredentials removes the Agent's unit, tree and account; absent is success", async () => {
      const other = occ.agent(namespace);
      const otherDir = `${nsDir}/agents/${hash12(other.id)}`;
      const otherUnit = `openclaw-enterprise-gateway-${hash12(other.id)}`;
      const account = `openclaw-${hash12(`${namespace.id}:${other.id}`)}`;
      await run(() => driver.bindAgent({ namespace, agent: other }));
      const revision = occ.revision(other, 1);
      await run(() => driver.prepareRevision(revision, occ.context()));
      start = () => ({});
      await run(() => driver.activateRevision(revision, occ.context()));
      calls.splice(0);
      assert.equal(onHost(host, `systemctl is-active ${otherUnit}`), "active");
      await run(() => driver.deleteAgentRuntimeCredentials({ namespace, agent: other }));
      assert.equal(onHost(host, `systemctl is-active ${otherUnit} || true`), "inactive");
      assert.equal(onHost(host, `test -e ${UNIT_DIR}/${otherUnit}.service && echo present || echo gone`), "gone");
      assert.equal(onHost(host, `test -e ${otherDir} && echo present || echo gone`), "gone");
      assert.equal(onHost(host, `getent passwd ${account} || echo gone`), "gone");
      await run(() => driver.deleteAgentRuntimeCredentials({ namespace, agent: other }));
      // The first Agent serves on.
      assert.equal(readyz(), "200");
    });

    await t.test("stop stops and disables the gateway; retire and deleteNamespace answer in OCC's shapes", async () => {
      await run(() => driver.stopRevision(second));
      assert.deepEqual(phases(), [`beforeWorkloadStop:${second.id}`]);
      assert.equal(onHost(host, `systemctl is-active ${unit} || true`), "inactive");
      assert.equal(onHost(host, `systemctl is-enabled ${unit} 2>/dev/null || true`), "disabled");
      assert.equal(current(), "");
      // Retirement runs the stop hooks too (the spec: "retireRevision invokes selected
      // beforeWorkloadStop hooks and removes only that snapshot").
      await run(() => driver.retireRevision(first));
      await run(() => driver.retireRevision(second));
      assert.deepEqual(phases(), [`beforeWorkloadStop:${first.id}`, `beforeWorkloadStop:${second.id}`]);
      assert.equal(onHost(host, `ls ${agentDir}/revisions | wc -l`), "0");
      assert.deepEqual(await run(() => driver.deleteNamespace(namespace)), { namespaceId: namespace.id, namespaceDeleted: true });
      assert.deepEqual(phases(), [`beforeNamespaceDelete:${namespace.id}`]);
      assert.equal(onHost(host, `test -e ${nsDir} && echo present || echo gone`), "gone");
      assert.equal(onHost(host, `getent passwd openclaw-${hash12(`${namespace.id}:${agent.id}`)} || echo gone`), "gone");
      // The audit log recorded each capability call of this driver.
      const audit = readFileSync(configuration.driverHost.auditLog, "utf8");
      assert.match(audit, /"ssh-exec"/);
      assert.match(audit, /"lifecycle-hooks"/);
    });
  } finally {
    await driver.close();
    rmSync(scratch, { recursive: true, force: true });
  }
});
