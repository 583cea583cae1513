// The package as OCC's controller loads it (driver-packages.ts and
// installation-config.ts): the module surface, the closed schema, synchronous
// validation, the driver object's shape, and answers that need no host.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import test from "node:test";

import * as pkg from "../index.mjs";
import { DRIVER_ID, IMPLEMENTATION, agent, component, hostBinary, namespace, repo, revision } from "./occ.mjs";

const specConfiguration = () => ({
  ...JSON.parse(readFileSync(join(repo, "guest-ssh-driver/tests/fixtures/valid-spec-example.json"), "utf8")),
  driverHost: { binary: hostBinary, component },
});

function create(configuration = specConfiguration(), extra = {}) {
  return pkg.createDriver({ id: DRIVER_ID, implementation: IMPLEMENTATION, configuration, ...extra });
}

test("exports what OCC's package loader requires, from an .mjs root export", () => {
  const manifest = JSON.parse(readFileSync(join(repo, "host/node/compute/package.json"), "utf8"));
  assert.equal(manifest.type, "module");
  assert.match(manifest.exports["."].default, /\.mjs$/);
  assert.equal(typeof pkg.validateConfiguration, "function");
  assert.equal(typeof pkg.createDriver, "function");
  assert.equal(typeof pkg.configurationSchema, "object");
  // installation-config.ts refuses a schema that is open at the top level.
  assert.equal(pkg.configurationSchema.additionalProperties, false);
});

test("the schema is the component's own, plus the package's closed driverHost block", () => {
  const live = JSON.parse(execFileSync(hostBinary, ["schema", component], { encoding: "utf8" }));
  const { driverHost, ...componentProperties } = pkg.configurationSchema.properties;
  assert.deepEqual({ ...pkg.configurationSchema, properties: componentProperties }, live);
  assert.equal(driverHost.additionalProperties, false);
  assert.deepEqual(Object.keys(driverHost.properties).sort(),
    ["approvedHelpers", "auditLog", "binary", "cacheDir", "component", "maxSessions"]);
});

test("describePrepareRevisionFailure: a failure of the host process itself is never admission", () => {
  for (const code of ["driver-trap", "engine", "result-too-large", "invalid-runtime-record", "host-exited", "cpu-limit"]) {
    assert.equal(pkg.describePrepareRevisionFailure({ code, failure: "retryable", message: "m" }).stage, "driver_host", code);
  }
  assert.equal(pkg.describePrepareRevisionFailure({ code: "unbound-agent", failure: "permanent" }).stage, "admission");
  assert.equal(pkg.describePrepareRevisionFailure({ code: "foreign-marker", failure: "permanent", host: "a" }).stage, "host_prepare");
  assert.equal(pkg.describePrepareRevisionFailure(new Error("not ours")), undefined);
});

test("driverHost.maxSessions reaches the host's installation, held to its bounds", () => {
  const withSessions = (n) => ({ ...specConfiguration(), driverHost: { ...specConfiguration().driverHost, maxSessions: n } });
  assert.equal(pkg.validateConfiguration(withSessions(4)), undefined);
  for (const bad of [0, 65, 2.5, "8"]) {
    assert.throws(() => pkg.validateConfiguration(withSessions(bad)), (error) => {
      assert.equal(error.failure, "permanent");
      assert.match(error.message, /^configuration\.driverHost\.maxSessions: must be a whole number of sessions from 1 to 64/);
      return true;
    }, String(bad));
  }
});

test("driverHost.component wins over $OCC_DRIVER_COMPONENT, which the host would read otherwise", () => {
  const saved = process.env.OCC_DRIVER_COMPONENT;
  process.env.OCC_DRIVER_COMPONENT = "/nonexistent/other.wasm";
  try {
    // The host's --component reads the variable: were it passed on, `check`
    // would load the other file and fail.
    assert.equal(pkg.validateConfiguration(specConfiguration()), undefined);
  } finally {
    if (saved === undefined) delete process.env.OCC_DRIVER_COMPONENT;
    else process.env.OCC_DRIVER_COMPONENT = saved;
  }
});

test("validateConfiguration returns nothing for the spec's example and throws naming the key at fault", () => {
  assert.equal(pkg.validateConfiguration(specConfiguration()), undefined);

  const unknown = specConfiguration();
  unknown.runtime.colour = "blue";
  assert.throws(() => pkg.validateConfiguration(unknown), (error) => {
    assert.ok(error instanceof pkg.DriverError);
    assert.equal(error.failure, "permanent");
    assert.match(error.message, /runtime\.colour/);
    return true;
  });

  const lowPorts = specConfiguration();
  lowPorts.network.gatewayPortRange = { start: 80, end: 90 };
  assert.throws(() => pkg.validateConfiguration(lowPorts), /network\.gatewayPortRange\.start/);

  const rootRuntime = specConfiguration();
  rootRuntime.runtime.user = "root";
  assert.throws(() => pkg.validateConfiguration(rootRuntime), /runtime\.user/);

  const driverHostTypo = specConfiguration();
  driverHostTypo.driverHost.compnent = "/x.wasm";
  assert.throws(() => pkg.validateConfiguration(driverHostTypo), /driverHost\.compnent: unknown key/);

  const missingComponent = specConfiguration();
  missingComponent.driverHost.component = "/nonexistent/driver.wasm";
  assert.throws(() => pkg.validateConfiguration(missingComponent), /\/nonexistent\/driver\.wasm/);

  assert.throws(() => pkg.validateConfiguration([]), /configuration must be an object/);
});

test("createDriver returns the ComputeDriver object OCC's structural and production checks accept", async () => {
  const driver = create();
  try {
    assert.equal(driver.id, DRIVER_ID);
    assert.equal(driver.implementation, IMPLEMENTATION);
    assert.equal(driver.capability, "compute");
    // createExternalDriver, worker validDriver and the production stage check.
    for (const method of [
      "ensureNamespace", "deleteNamespace", "prepareRevision", "stopRevision", "retireRevision",
      "activateRevision", "deactivateRevision", "setLifecycleDrivers", "deleteAgentRuntimeCredentials",
      "preflight", "bindAgent", "validateHarnessAuth",
    ]) {
      assert.equal(typeof driver[method], "function", method);
    }
    // Nothing OCC reads as an option it did not ask for.
    assert.equal(driver.activationOrder, undefined);
    assert.equal(driver.maintenanceIntervalMs, undefined);
    // What OCC's own SSH driver declares: the worker delivers the Console's
    // workspace documents, and admits SecretRefs to the operator's env file.
    assert.equal(driver.supportsWorkspaceSetup, true);
    assert.equal(driver.operatorProvisionedSecrets, true);
    assert.equal(typeof driver.validateGatewaySettings, "function");
  } finally {
    await driver.close();
  }
});

test("validateHarnessAuth is synchronous: runtime passes, every other method throws permanent", async () => {
  const driver = create();
  try {
    const harness = { id: "openclaw", version: "2026.9.6", mode: "embedded" };
    assert.equal(driver.validateHarnessAuth(harness, { method: "runtime" }, {}), undefined);
    const secret = { kind: "secret", id: "key", namespaceId: "ns" };
    for (const auth of [
      { method: "api_key", source: secret, secretDriverId: "secret-k8s" },
      { method: "codex_pat", source: secret, secretDriverId: "secret-k8s" },
      { method: "credential_source", sourceId: "s", credentialGatewayId: "g", sourceType: "t", loginMode: "api_key" },
    ]) {
      assert.throws(() => driver.validateHarnessAuth(harness, auth, {}), (error) => {
        assert.equal(error.failure, "permanent", auth.method);
        assert.match(error.message, /harnessAuth/);
        return true;
      });
    }
    assert.throws(
      () => driver.validateHarnessAuth({ ...harness, mode: "dedicated" }, { method: "runtime" }, {}),
      /harness/,
    );
  } finally {
    await driver.close();
  }
});

test("namespace methods answer in OCC's result shape and never reject", async () => {
  const driver = create();
  try {
    const unmapped = namespace("nowhere");
    const ensured = await driver.ensureNamespace(unmapped);
    // OCC's NamespaceEnsureResult, and nothing else.
    assert.deepStrictEqual(Object.keys(ensured).sort(), ["failure", "namespaceId", "namespaceReady", "reason"]);
    assert.equal(ensured.namespaceId, unmapped.id);
    assert.equal(ensured.namespaceReady, false);
    assert.equal(ensured.failure, "permanent");
    // reason: bounded, printable, names the failure.
    assert.match(ensured.reason, /^[\x20-\x7e]{1,256}$/);
    assert.match(ensured.reason, /nowhere/);

    const adopted = namespace("stable", { existingNamespace: "legacy" });
    const refused = await driver.ensureNamespace(adopted);
    assert.equal(refused.namespaceReady, false);
    assert.equal(refused.failure, "permanent");
    assert.match(refused.reason, /existingNamespace/);

    // OCC's NamespaceDeleteResult exactly: it has no `reason`.
    const deleted = await driver.deleteNamespace(unmapped);
    assert.deepStrictEqual(deleted, { namespaceId: unmapped.id, namespaceDeleted: false, failure: "permanent" });
  } finally {
    await driver.close();
  }
});

test("bindAgent refuses by OCC's field names before anything reaches a host", async () => {
  const driver = create();
  try {
    const ns = namespace("stable");
    const other = namespace("stable");
    await assert.rejects(driver.bindAgent({ namespace: ns, agent: agent(other) }), (error) => {
      assert.ok(error instanceof pkg.DriverError);
      assert.equal(error.failure, "permanent");
      assert.match(error.message, /agent\.namespaceId/);
      return true;
    });
    await assert.rejects(driver.bindAgent({ namespace: ns }), (error) => {
      assert.equal(error.failure, "permanent");
      assert.match(error.message, /agent/);
      return true;
    });
    // A revision of an Agent that was never bound is refused too.
    const a = agent(ns);
    await assert.rejects(driver.prepareRevision(revision(a, 1), { harnessAuth: { method: "runtime" }, secretEnvironment: [] }),
      (error) => error.failure === "permanent");
  } finally {
    await driver.close();
  }
});

test("lifecycle drivers are fixed once an operation began, and must carry hooks", async () => {
  const driver = create();
  try {
    assert.throws(() => driver.setLifecycleDrivers([{ id: "c", capability: "configuration" }]), /computeLifecycleHooks/);
    assert.throws(
      () => driver.setLifecycleDrivers([{ id: "c", capability: "configuration", computeLifecycleHooks: { beforeStart() {} } }]),
      /beforeStart is not a lifecycle hook/,
    );
    driver.setLifecycleDrivers([]);
    await driver.ensureNamespace(namespace("nowhere"));
    assert.throws(() => driver.setLifecycleDrivers([]), /cannot change after lifecycle operations begin/);
  } finally {
    await driver.close();
  }
});

test("a missing host binary is a permanent error naming it", async () => {
  const configuration = specConfiguration();
  configuration.driverHost.binary = "/nonexistent/occ-driver-host";
  const driver = create(configuration);
  await assert.rejects(driver.preflight(), (error) => {
    assert.equal(error.failure, "permanent");
    assert.match(error.message, /\/nonexistent\/occ-driver-host/);
    return true;
  });
  await driver.close();
});

test("a host process that dies is replaced on the next call, with the bindings bindAgent accepted", async () => {
  // A host that accepts a connection and never speaks SSH: a call to it stays in
  // flight until ssh's connect timeout.
  const sockets = new Set();
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const closeSilent = () => new Promise((resolve) => {
    silent.close(() => resolve());
    for (const socket of sockets) socket.destroy();
  });
  await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const configuration = specConfiguration();
  configuration.ssh.connectTimeoutSeconds = 20;
  configuration.hosts.stable = { ...configuration.hosts.stable, address: "127.0.0.1", port: silent.address().port };
  configuration.driverHost.approvedHelpers = [
    createHash("sha256").update(readFileSync(join(repo, "helper/helper.js"))).digest("hex"),
  ];
  const driver = create(configuration);
  try {
    const ns = namespace("stable");
    const a = agent(ns);
    await driver.bindAgent({ namespace: ns, agent: a });
    const rev = revision(a, 1);

    // Killed mid-call: the call in flight fails retryable.
    const first = driver.pid;
    const inFlight = driver.deactivateRevision(rev);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    process.kill(first, "SIGKILL");
    await assert.rejects(inFlight, (error) => {
      assert.ok(error instanceof pkg.DriverError);
      assert.equal(error.failure, "retryable");
      assert.equal(error.code, "host-exited");
      return true;
    });

    // The next call runs on a new process that knows the binding: it gets as far
    // as the host (now refusing connections), not "unbound-agent".
    await closeSilent();
    await assert.rejects(driver.deactivateRevision(rev), (error) => {
      assert.notEqual(error.code, "unbound-agent", error.message);
      assert.equal(error.failure, "retryable");
      assert.match(error.code, /^ssh-/);
      return true;
    });
    assert.ok(driver.pid && driver.pid !== first, `a new host process serves (${first} -> ${driver.pid})`);

    // Killed between calls: the next call succeeds on a new process.
    const second = driver.pid;
    process.kill(second, "SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await driver.bindAgent({ namespace: ns, agent: a });
    assert.notEqual(driver.pid, second);
  } finally {
    if (silent.listening) await closeSilent();
    await driver.close();
  }
  // Closed by the caller: nothing starts again.
  await assert.rejects(driver.bindAgent({ namespace: namespace("stable"), agent: agent(namespace("stable")) }),
    (error) => error.code === "closed");
});
