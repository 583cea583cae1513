// The Node client against the real host binary and the real driver component.
// The lifecycle test needs the disposable test hosts (tests/run.sh brings them
// up and exports OCC_RIG_*); the others need only the built artifacts.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

import { DriverError, createComponentDriver } from "../index.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const target = process.env.CARGO_TARGET_DIR ?? join(repo, "target");
const hostBinary = process.env.OCC_DRIVER_HOST ?? join(target, "release/occ-driver-host");
const component = join(target, "wasm32-wasip2/release/guest_ssh_driver.wasm");
const hash12 = (s) => createHash("sha256").update(s).digest("hex").slice(0, 12);
const ROOT = "/var/lib/openclaw-enterprise";

function specInstallation() {
  const configuration = JSON.parse(
    readFileSync(join(repo, "guest-ssh-driver/tests/fixtures/valid-spec-example.json"), "utf8"),
  );
  return { drivers: { compute: { id: "compute-ssh", component, configuration } } };
}

test("validates, refuses unmapped Namespaces in the result, and rejects bad params", async () => {
  const driver = await createComponentDriver({ installation: specInstallation(), hostBinary });
  try {
    const valid = await driver.validateConfiguration();
    assert.equal(valid.ok, true);
    const unmapped = await driver.ensureNamespace({ id: "ns-x", name: "nowhere" });
    assert.equal(unmapped.namespaceReady, false);
    assert.equal(unmapped.failure, "permanent");
    assert.match(unmapped.message, /nowhere/);
    await assert.rejects(driver.bindAgent({ namespace: { id: "n", name: "stable" } }), (error) => {
      assert.ok(error instanceof DriverError);
      assert.equal(error.rpcCode, -32602);
      assert.equal(error.failure, "permanent");
      assert.match(error.message, /binding\.agent/);
      return true;
    });
  } finally {
    await driver.close();
  }
});

test("refuses unknown hooks and reports a missing host binary", async () => {
  await assert.rejects(
    createComponentDriver({ installation: specInstallation(), hostBinary, hooks: { beforeStart() {} } }),
    /unknown hook beforeStart/,
  );
  const driver = await createComponentDriver({ installation: specInstallation(), hostBinary: "/nonexistent/occ-driver-host" });
  await assert.rejects(driver.preflight(), (error) => error.code === "host-missing" || error.code === "host-exited");
  await driver.close();
});

const rig = process.env.OCC_RIG_IDENTITY
  ? {
      identity: process.env.OCC_RIG_IDENTITY,
      knownHosts: process.env.OCC_RIG_KNOWN_HOSTS,
      node: process.env.OCC_RIG_NODE,
      openclaw: process.env.OCC_RIG_OPENCLAW,
      hosts: JSON.parse(readFileSync(process.env.OCC_RIG_HOSTS_JSON, "utf8")),
    }
  : null;

function onHost(host, script) {
  return execFileSync(
    "ssh",
    ["-F", "none", "-i", rig.identity, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
      "-o", `UserKnownHostsFile=${rig.knownHosts}`, "-o", "LogLevel=ERROR", `root@${host.address}`, script],
    { encoding: "utf8" },
  ).trim();
}

test(
  "full lifecycle on a real host with hooks, compensation and cancellation",
  // In CI the test hosts must be there: a missing rig fails instead of skipping.
  { skip: rig || process.env.CI ? false : "needs the test hosts: run tests/run.sh", timeout: 900_000 },
  async () => {
    assert.ok(rig, "CI is set but OCC_RIG_* is not exported: the test hosts are missing");
    const host = rig.hosts[rig.hosts.length - 1];
    const installation = {
      drivers: {
        compute: {
          id: "compute-ssh",
          configuration: {
            ssh: { identityFile: rig.identity, knownHostsFile: rig.knownHosts, connectTimeoutSeconds: 5 },
            hosts: { node: { address: host.address, port: host.port ?? 22, user: "root" } },
            runtime: { nodePath: rig.node, openclawPath: rig.openclaw, user: "openclaw", root: ROOT, systemdUnitDirectory: "/etc/systemd/system" },
            network: { gatewayPortRange: { start: 18850, end: 18899 } },
          },
        },
      },
    };
    const calls = [];
    let startBehaviour = "ok";
    const hooks = {
      afterNamespacePrepared: ({ namespace }) => void calls.push(["afterNamespacePrepared", namespace.id]),
      beforeWorkloadStart: async ({ binding, revisionId }) => {
        calls.push(["beforeWorkloadStart", revisionId]);
        if (startBehaviour === "refuse") throw new Error("IAM denied the workload");
        if (startBehaviour === "reserved") return { environment: { PATH: "opaque-evil" } };
        if (startBehaviour === "slow") await new Promise((r) => setTimeout(r, 5_000));
        return { environment: { IAM_SESSION: `opaque-iam-${binding.agent.id.slice(-8)}` } };
      },
      beforeWorkloadStop: ({ revisionId }) => void calls.push(["beforeWorkloadStop", revisionId]),
      beforeNamespaceDelete: ({ namespace }) => void calls.push(["beforeNamespaceDelete", namespace.id]),
    };
    const progress = [];
    const driver = await createComponentDriver({ component, installation, hostBinary, hooks, onProgress: (p) => progress.push(p) });
    const namespace = { id: `ns-${randomUUID()}`, name: "node", status: "provisioning" };
    const agent = { id: `agent-${randomUUID()}`, namespaceId: namespace.id, servicePrincipalId: `sp-${randomUUID()}` };
    const revision = (number, extra = {}) => ({
      id: `revision-${randomUUID()}`, namespaceId: namespace.id, agentId: agent.id, revision: number,
      harness: { id: "openclaw", mode: "embedded", version: "2026.9.6" }, harnessAuth: { method: "runtime" },
      configuration: { gateway: { mode: "local" }, ...extra }, servicePrincipalId: agent.servicePrincipalId,
    });
    const agentDir = `${ROOT}/namespaces/${hash12(namespace.id)}/agents/${hash12(agent.id)}`;
    const unitPath = `/etc/systemd/system/openclaw-enterprise-gateway-${hash12(agent.id)}.service`;
    const served = () => JSON.parse(onHost(host, `cat ${agentDir}/served.json`)).revisionId;
    const current = () => onHost(host, `readlink ${agentDir}/current`);
    const readyz = () => onHost(host, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$(sed -n 's/.*"port":\\([0-9]*\\).*/\\1/p' ${agentDir}/agent.json)/readyz || true`);
    try {
      await driver.preflight();
      assert.deepEqual(await driver.ensureNamespace(namespace), { namespaceReady: true });
      assert.deepEqual(calls.shift(), ["afterNamespacePrepared", namespace.id]);
      await driver.bindAgent({ namespace, agent });

      const first = revision(1);
      assert.equal((await driver.prepareRevision(first, { secretEnvironment: [] })).ready, true);
      await driver.activateRevision(first);
      assert.deepEqual(calls.shift(), ["beforeWorkloadStart", first.id]);
      assert.equal(served(), first.id);
      assert.equal(readyz(), "200");
      // The placeholder from the hook is projected into the unit.
      assert.match(onHost(host, `cat ${unitPath}`), new RegExp(`^Environment="IAM_SESSION=opaque-iam-${agent.id.slice(-8)}"$`, "m"));
      assert.ok(progress.some((p) => p.host === "node"), "no progress notifications");

      const second = revision(2, { agents: { defaults: { timeoutSeconds: 90 } } });
      assert.equal((await driver.prepareRevision(second, { secretEnvironment: [] })).ready, true);

      // A refusing hook prevents the launch: nothing on the host changes.
      startBehaviour = "refuse";
      await assert.rejects(driver.activateRevision(second), (e) => e.code === "hook-refused" && /IAM denied/.test(e.message));
      assert.deepEqual(calls.splice(0), [["beforeWorkloadStart", second.id]]);
      assert.equal(served(), first.id);
      assert.equal(current(), `revisions/${hash12(first.id)}`);

      // A failure after the hook accepted runs the beforeWorkloadStop compensation.
      startBehaviour = "reserved";
      await assert.rejects(driver.activateRevision(second), (e) => e.failure === "permanent" && /PATH/.test(e.message));
      assert.deepEqual(calls.splice(0), [["beforeWorkloadStart", second.id], ["beforeWorkloadStop", second.id]]);
      assert.equal(served(), first.id);

      // Cancelled mid-activation: the call answers cancelled, the previous revision serves on.
      startBehaviour = "slow";
      const abort = new AbortController();
      setTimeout(() => abort.abort(), 1_000);
      await assert.rejects(driver.activateRevision(second, { signal: abort.signal }), (e) => e.code === "cancelled" && e.failure === "retryable");
      calls.splice(0);
      assert.equal(served(), first.id);
      assert.equal(current(), `revisions/${hash12(first.id)}`);
      assert.equal(readyz(), "200");

      // The retry converges.
      startBehaviour = "ok";
      await driver.activateRevision(second);
      assert.equal(served(), second.id);
      assert.equal(readyz(), "200");
      calls.splice(0);

      await driver.stopRevision(second);
      assert.deepEqual(calls.shift(), ["beforeWorkloadStop", second.id]);
      assert.notEqual(onHost(host, `systemctl is-active openclaw-enterprise-gateway-${hash12(agent.id)} || true`), "active");
      await driver.retireRevision(first);
      await driver.retireRevision(second);
      calls.splice(0);
      assert.deepEqual(await driver.deleteNamespace(namespace), { namespaceDeleted: true });
      assert.deepEqual(calls.shift(), ["beforeNamespaceDelete", namespace.id]);
      assert.equal(onHost(host, `test -e ${ROOT}/namespaces/${hash12(namespace.id)} && echo present || echo gone`), "gone");
    } finally {
      await driver.close();
    }
  },
);
