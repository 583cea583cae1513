// The lifecycle dispatcher against OCC's semantics (lifecycle-hooks.ts): hook
// order, frozen subjects, the shared launch, compensation in reverse order, and
// the fresh 5 s signal of a cancelled rollback.

import assert from "node:assert/strict";
import test from "node:test";

import { CLEANUP_MS, LifecycleDispatcher, validateLaunch } from "../lifecycle.mjs";
import { agent, namespace, revision } from "./occ.mjs";

function recorder(calls, id, behaviour = {}) {
  const hook = (phase) =>
    async (subject, ...rest) => {
      const signal = rest.at(-1);
      calls.push({ id, phase, subject, launch: rest.length === 2 ? rest[0] : undefined, signal });
      await behaviour[phase]?.(subject, ...rest);
    };
  return {
    id,
    capability: id,
    computeLifecycleHooks: {
      afterNamespacePrepared: hook("afterNamespacePrepared"),
      beforeWorkloadStart: hook("beforeWorkloadStart"),
      beforeWorkloadStop: hook("beforeWorkloadStop"),
      beforeNamespaceDelete: hook("beforeNamespaceDelete"),
    },
  };
}

const ns = namespace("stable");
const rev = revision(agent(ns), 1);

test("start hooks run in selection order on frozen copies and share one launch", async () => {
  const calls = [];
  const dispatcher = new LifecycleDispatcher([
    recorder(calls, "configuration", { beforeWorkloadStart: (_r, launch) => { launch.environment.CONFIG_TOKEN = "opaque-config-1"; } }),
    recorder(calls, "iam", { beforeWorkloadStart: (_r, launch) => { launch.environment.IAM_SESSION = "opaque-iam-1"; } }),
  ]);
  const launch = await dispatcher.beforeWorkloadStart(rev);
  assert.deepEqual(calls.map((c) => c.id), ["configuration", "iam"]);
  assert.deepEqual(launch, { environment: { CONFIG_TOKEN: "opaque-config-1", IAM_SESSION: "opaque-iam-1" } });
  assert.ok(Object.isFrozen(launch));
  // Each hook got its own frozen copy, equal to the revision.
  assert.notEqual(calls[0].subject, rev);
  assert.notEqual(calls[0].subject, calls[1].subject);
  assert.ok(Object.isFrozen(calls[0].subject));
  assert.deepEqual(calls[0].subject, rev);
  assert.equal(calls[0].launch, calls[1].launch);
});

test("stop and delete hooks run in reverse selection order", async () => {
  const calls = [];
  const dispatcher = new LifecycleDispatcher([recorder(calls, "configuration"), recorder(calls, "sandbox"), recorder(calls, "iam")]);
  await dispatcher.beforeWorkloadStop(rev);
  await dispatcher.beforeNamespaceDelete(ns);
  assert.deepEqual(calls.map((c) => `${c.phase}:${c.id}`), [
    "beforeWorkloadStop:iam", "beforeWorkloadStop:sandbox", "beforeWorkloadStop:configuration",
    "beforeNamespaceDelete:iam", "beforeNamespaceDelete:sandbox", "beforeNamespaceDelete:configuration",
  ]);
});

test("a refusing start hook compensates the hooks that completed, in reverse, and names its owner", async () => {
  const calls = [];
  const dispatcher = new LifecycleDispatcher([
    recorder(calls, "configuration"),
    recorder(calls, "sandbox"),
    recorder(calls, "iam", { beforeWorkloadStart: () => { throw Object.assign(new Error("IAM denied"), { failure: "permanent" }); } }),
  ]);
  await assert.rejects(dispatcher.beforeWorkloadStart(rev), (error) => {
    assert.match(error.message, /beforeWorkloadStart failed for iam:iam/);
    assert.equal(error.cause.message, "IAM denied");
    assert.equal(error.failure, "permanent");
    return true;
  });
  assert.deepEqual(calls.map((c) => `${c.phase}:${c.id}`), [
    "beforeWorkloadStart:configuration", "beforeWorkloadStart:sandbox", "beforeWorkloadStart:iam",
    "beforeWorkloadStop:sandbox", "beforeWorkloadStop:configuration",
  ]);
});

test("a namespace hook failure runs beforeNamespaceDelete for the hooks that completed", async () => {
  const calls = [];
  const dispatcher = new LifecycleDispatcher([
    recorder(calls, "configuration"),
    recorder(calls, "iam", { afterNamespacePrepared: () => { throw new Error("quota"); } }),
  ]);
  await assert.rejects(dispatcher.afterNamespacePrepared(ns), /afterNamespacePrepared failed for iam:iam/);
  assert.deepEqual(calls.map((c) => `${c.phase}:${c.id}`), [
    "afterNamespacePrepared:configuration", "afterNamespacePrepared:iam", "beforeNamespaceDelete:configuration",
  ]);
});

test("an unsafe launch contribution is refused permanent and compensated", async () => {
  for (const environment of [{ PATH: "opaque-x" }, { TOKEN: "sk-live-secret" }, { "bad name": "opaque-x" }, { LD_PRELOAD: "opaque-x" }]) {
    const calls = [];
    const dispatcher = new LifecycleDispatcher([
      recorder(calls, "iam", { beforeWorkloadStart: (_r, launch) => Object.assign(launch.environment, environment) }),
    ]);
    await assert.rejects(dispatcher.beforeWorkloadStart(rev), (error) => {
      assert.equal(error.failure, "permanent");
      assert.match(error.message, /Unsafe workload launch environment/);
      return true;
    });
    assert.deepEqual(calls.map((c) => c.phase), ["beforeWorkloadStart", "beforeWorkloadStop"], JSON.stringify(environment));
  }
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "opaque-x"]));
  assert.equal(validateLaunch({ environment: many }), false);
  assert.equal(validateLaunch({ environment: { IAM_SESSION: "opaque-iam:1.a_b-c" } }), true);
});

test("a cancelled operation aborts the hooks and its rollback still gets a fresh 5 s signal", async () => {
  const calls = [];
  const operation = new AbortController();
  const dispatcher = new LifecycleDispatcher([
    recorder(calls, "configuration"),
    recorder(calls, "iam", { beforeWorkloadStart: () => { operation.abort(new Error("claim lost")); } }),
  ]);
  await assert.rejects(dispatcher.beforeWorkloadStart(rev, operation.signal), /claim lost/);
  const rollback = calls.find((c) => c.phase === "beforeWorkloadStop");
  assert.equal(rollback.id, "configuration");
  assert.equal(rollback.signal.aborted, false, "the rollback got the aborted signal");
  assert.notEqual(rollback.signal, operation.signal);
  assert.equal(CLEANUP_MS, 5_000);

  // The host marks a compensating stop as cleanup: it runs although the operation was aborted.
  calls.length = 0;
  await dispatcher.beforeWorkloadStop(rev, { cleanup: true }, operation.signal);
  assert.deepEqual(calls.map((c) => c.id), ["iam", "configuration"]);
  assert.equal(calls[0].signal.aborted, false);
  // A plain stop of an aborted operation does not run.
  calls.length = 0;
  await assert.rejects(dispatcher.beforeWorkloadStop(rev, { cleanup: false }, operation.signal), /claim lost/);
  assert.equal(calls.length, 0);
});

test("selects reports only the phases some driver hooks", () => {
  const dispatcher = new LifecycleDispatcher([{ id: "iam", capability: "iam", computeLifecycleHooks: { beforeWorkloadStart: async () => {} } }]);
  assert.equal(dispatcher.selects("beforeWorkloadStart"), true);
  assert.equal(dispatcher.selects("afterNamespacePrepared"), false);
  assert.throws(() => new LifecycleDispatcher("iam"), /expected an array/);
  assert.throws(() => new LifecycleDispatcher([{ id: "x", capability: "iam", computeLifecycleHooks: {} }]), /has no computeLifecycleHooks/);
});
