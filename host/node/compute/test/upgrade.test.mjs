// Upgrading and rolling back OCC's driver package while an Agent serves, as OCC
// does it (docs/operators.md, "Upgrading and rolling back"): the previous
// release's own tarballs ($OCC_PREVIOUS_DIST, built from its commit by
// tests/previous-release.sh) deploy an Agent; this release's ($OCC_DIST)
// ensures the Namespace again and deploys a new revision of the same Agent,
// stops it; the previous release, rolled back to, ensures and deploys again
// over what this one wrote; this one deletes everything. Both releases' helpers
// are approved throughout, as during a rollout. What this release creates, the
// previous one (which predates the rules) refuses, changing nothing.
//
// Each release is installed in a controller of its own (OCC restarts with the
// new package), loaded by Node's export resolution, and named as OCC names it:
// `occ-driver-host-compute@<installed version>`.
//
// Needs the disposable test hosts: tests/run.sh brings them up and exports
// OCC_RIG_*, OCC_DIST and OCC_PREVIOUS_DIST.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { pathToFileURL } from "node:url";

import * as occ from "./occ.mjs";

const { rig, onHost } = occ;

// Each release runs what it carries, nothing of the checkout's.
delete process.env.OCC_DRIVER_HOST;
delete process.env.OCC_DRIVER_COMPONENT;

const current = process.env.OCC_DIST;
const previous = process.env.OCC_PREVIOUS_DIST;
const manifest = (dir) => (dir ? JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) : null);
const needs = rig && current && previous ? false : process.env.CI ? false : "needs the test hosts and both releases: run tests/run.sh";
const hash12 = (s) => createHash("sha256").update(s).digest("hex").slice(0, 12);
const helperOf = (release) => release.components.find((c) => c.file === "guest_ssh_driver.wasm").helper.sha256;

/** The driver package of the release in `dist`, installed in `dir` and loaded as OCC loads it. */
async function loadRelease(dist, dir) {
  const release = manifest(dist);
  occ.installRelease(dir, dist, release.version);
  const entry = createRequire(join(dir, "package.json")).resolve("occ-driver-host-compute");
  const pkg = await import(pathToFileURL(entry).href);
  const installed = JSON.parse(readFileSync(join(dir, "node_modules/occ-driver-host-compute/package.json"), "utf8"));
  assert.equal(installed.version, release.version);
  return { pkg, release, implementation: `${installed.name}@${installed.version}` };
}

test("an Agent deployed by the previous release is ensured, redeployed, stopped and deleted by this one, and the previous one, rolled back to, deploys it again", {
  skip: needs,
  timeout: 1_200_000,
}, async () => {
  assert.ok(rig && current && previous, "CI is set but the test hosts or a release are missing");
  const scratch = mkdtempSync(join(tmpdir(), "occ-upgrade-"));
  const host = rig.hosts[rig.hosts.length - 1];
  const root = `/var/lib/occ-upgrade-${process.pid}`;
  const drivers = [];
  const namespaces = [];
  let cleanup = null;
  let passed = false;
  try {
    const old = await loadRelease(previous, join(scratch, "previous"));
    const now = await loadRelease(current, join(scratch, "current"));
    assert.notEqual(old.release.version, now.release.version, "two releases");
    // Both helpers approved at once, as during a rollout.
    const approvedHelpers = [helperOf(old.release), helperOf(now.release)];
    assert.notEqual(approvedHelpers[0], approvedHelpers[1], "the helper changed between the releases");
    const configuration = {
      ssh: { identityFile: rig.identity, knownHostsFile: rig.knownHosts, connectTimeoutSeconds: 5 },
      // A Namespace's name is its host's alias: two names, one host.
      hosts: Object.fromEntries(["upgrade", "upgrade-new"].map((name) =>
        [name, { address: host.address, port: host.port ?? 22, user: "root", nodePath: rig.node, openclawPath: rig.openclaw }])),
      runtime: { nodePath: rig.node, openclawPath: rig.openclaw, user: "openclaw", root, systemdUnitDirectory: "/etc/systemd/system" },
      network: { gatewayPortRange: { start: 19880, end: 19889 } },
      driverHost: { approvedHelpers },
    };
    const driverOf = ({ pkg, implementation }) => {
      assert.equal(pkg.validateConfiguration(configuration), undefined);
      const driver = pkg.createDriver({ id: occ.DRIVER_ID, implementation, configuration });
      driver.setLifecycleDrivers([]);
      drivers.push(driver);
      return driver;
    };
    const before = driverOf(old);
    const after = driverOf(now);
    cleanup = after;

    const namespace = occ.namespace("upgrade");
    namespaces.push(namespace);
    const agent = occ.agent(namespace);
    const nsDir = `${root}/namespaces/${hash12(namespace.id)}`;
    const agentDir = `${nsDir}/agents/${hash12(agent.id)}`;
    const unit = `openclaw-enterprise-gateway-${hash12(agent.id)}.service`;
    const account = `openclaw-${hash12(`${namespace.id}:${agent.id}`)}`;
    const marker = (file) => JSON.parse(onHost(host, `cat ${agentDir}/${file}`));
    const deploy = async (driver, implementation, number) => {
      const revision = occ.revision(agent, number, { compute: { id: occ.DRIVER_ID, implementation } });
      const context = occ.context();
      assert.deepEqual(await driver.ensureNamespace(namespace), { namespaceId: namespace.id, namespaceReady: true });
      await driver.bindAgent({ namespace, agent });
      assert.equal((await driver.prepareRevision(revision, context)).ready, true);
      await driver.activateRevision(revision, context);
      return revision;
    };
    // One gateway of this Agent runs, on its one port, and answers.
    const serving = (revision) => {
      const port = marker("agent.json").port;
      assert.equal(marker("served.json").revisionId, revision.id);
      assert.equal(onHost(host, `systemctl is-active ${unit}`), "active");
      // The account's processes systemd started: its gateways (their workers are their children).
      assert.equal(onHost(host, `ps -o ppid= -u ${account} | grep -cx ' *1' || true`), "1", "one gateway process");
      assert.equal(onHost(host, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/readyz`), "200");
      return port;
    };

    // The previous release deploys the Agent.
    const first = await deploy(before, old.implementation, 1);
    const port = serving(first);
    const nsMarker = onHost(host, `cat ${nsDir}/namespace.json`);
    assert.equal(JSON.parse(nsMarker).implementation, old.implementation);

    // Upgraded: this release ensures the Namespace and redeploys the same Agent.
    const second = await deploy(after, now.implementation, 2);
    assert.equal(serving(second), port, "the same port");
    // What the previous release wrote is adopted as it is; what this one
    // writes names its format and writer, under the owner the Namespace
    // recorded.
    assert.equal(onHost(host, `cat ${nsDir}/namespace.json`), nsMarker);
    const written = JSON.parse(onHost(host, `cat ${agentDir}/revisions/${hash12(second.id)}/revision.json`));
    assert.equal(written.implementation, old.implementation);
    assert.equal(written.format, 2);
    assert.deepEqual(written.writtenBy, { implementation: now.implementation, helper: approvedHelpers[1] });
    assert.deepEqual(marker("served.json").writtenBy, { implementation: now.implementation, helper: approvedHelpers[1] });
    await after.stopRevision(second, occ.context());
    assert.equal(onHost(host, `systemctl is-active ${unit} || true`), "inactive");

    // Rolled back: the previous release ensures and deploys the Agent again
    // over what this one wrote.
    const third = await deploy(before, old.implementation, 3);
    assert.equal(serving(third), port);

    // What this release creates, the previous one refuses, changing nothing.
    const fresh = occ.namespace("upgrade-new");
    namespaces.push(fresh);
    assert.deepEqual(await after.ensureNamespace(fresh), { namespaceId: fresh.id, namespaceReady: true });
    const freshDir = `${root}/namespaces/${hash12(fresh.id)}`;
    // Everything the helpers wrote; not the serving Agent's own home and
    // state, which its gateway writes while it runs (npm's logs among them).
    const state = () =>
      onHost(
        host,
        `cd ${root} && find . \\( -path './namespaces/*/agents/*/home' -o -path './namespaces/*/agents/*/state' \\) -prune -o -print | LC_ALL=C sort | xargs stat -c '%n %s %Y %a' && sha256sum ${freshDir}/namespace.json`,
      );
    const unchanged = state();
    assert.equal(JSON.parse(onHost(host, `cat ${freshDir}/namespace.json`)).format, 2);
    // (OCC's namespace calls answer with a result, never a rejection.)
    const refused = await before.ensureNamespace(fresh);
    assert.equal(refused.namespaceReady, false, JSON.stringify(refused));
    assert.equal(refused.failure, "permanent");
    assert.match(JSON.stringify(refused.reason), /foreign-marker/);
    assert.deepEqual(await before.deleteNamespace(fresh), { namespaceId: fresh.id, namespaceDeleted: false, failure: "permanent" });
    // Compared line by line, so that a failure names what changed.
    const later = new Set(state().split("\n"));
    const was = new Set(unchanged.split("\n"));
    assert.deepEqual(
      { gone: [...was].filter((l) => !later.has(l)), added: [...later].filter((l) => !was.has(l)) },
      { gone: [], added: [] },
    );

    // This release removes both, the one the previous release made included.
    for (const ns of [namespace, fresh]) {
      assert.deepEqual(await after.deleteNamespace(ns), { namespaceId: ns.id, namespaceDeleted: true });
    }
    assert.equal(onHost(host, `ls -A ${root}/namespaces; ls /etc/systemd/system | grep -c ${hash12(agent.id)} || true`), "0");
    passed = true;
  } finally {
    // After a failure, what the test made goes the way it would have (its
    // gateways first), and a failure of that is reported, never in place of
    // the test's own.
    const tidy = async () => {
      if (!passed && cleanup) for (const ns of namespaces) await cleanup.deleteNamespace(ns);
      for (const driver of drivers) await driver.close();
      if (rig) onHost(rig.hosts[rig.hosts.length - 1], `rm -rf ${root}`);
    };
    try {
      await tidy();
    } catch (error) {
      if (passed) throw error;
      process.stderr.write(`cleaning up after the failure: ${error.message}\n`);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }
});
