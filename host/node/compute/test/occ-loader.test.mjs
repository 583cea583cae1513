// The package as OCC's controller installs and loads it, from the release's
// tarballs alone ($OCC_DIST, written by `cargo xtask dist`; tests/run.sh builds
// it): an exact-version direct dependency of a controller-like package with the
// platform package that carries the host binary beside it, installed
// production-only with lifecycle scripts disabled (OCC's image build runs
// `pnpm install --frozen-lockfile --prod --ignore-scripts`), resolved by Node's own
// export resolution from the controller, `createDriver` synchronous, the
// implementation `<package>@<version>`, the schema closed; no binary, component
// or checkout path in its configuration or environment. Then OCC's Console's
// create flow: an Agent deployed with the four workspace documents, which land in
// its workspace as its own files, and a second deploy after a lost acknowledgement
// changes nothing on the host.
//
// Needs the disposable test hosts: tests/run.sh brings them up and exports OCC_RIG_*.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import test from "node:test";

import * as occ from "./occ.mjs";

const { rig, onHost } = occ;

// This file tests the installed release alone: nothing of the checkout's may
// point the package at a binary or a component.
delete process.env.OCC_DRIVER_HOST;
delete process.env.OCC_DRIVER_COMPONENT;

const { PLATFORM_PACKAGE } = occ;
const dist = process.env.OCC_DIST;
const release = dist ? JSON.parse(readFileSync(join(dist, "manifest.json"), "utf8")) : null;
const needs = rig && dist ? false : process.env.CI ? false : "needs the test hosts and a release: run tests/run.sh";
const install = (dir, version, npmArgs) => occ.installRelease(dir, dist, version, npmArgs);
const hash12 = (s) => createHash("sha256").update(s).digest("hex").slice(0, 12);

// The Console's create form pre-fills these four.
const FILES = {
  "AGENTS.md": "# AGENTS.md\n\nKeep answers short. Loader test.\n",
  "SOUL.md": "# SOUL.md\n\nPatient and exact.\n",
  "IDENTITY.md": "# IDENTITY.md\n\n- **Name:** Loader\n",
  "USER.md": "# USER.md\n\n- Prefer bullet lists.\n",
};

test("OCC installs the packed package, loads it by export resolution, and deploys an Agent with its workspace files", {
  skip: needs,
  timeout: 900_000,
}, async () => {
  assert.ok(rig, "CI is set but OCC_RIG_* is not exported: the test hosts are missing");
  assert.ok(release, "CI is set but OCC_DIST is not: the release is missing");
  const scratch = mkdtempSync(join(tmpdir(), "occ-loader-"));
  const host = rig.hosts[rig.hosts.length - 1];
  const root = `/var/lib/occ-loader-${process.pid}`;
  try {
    // The release as it ships (`cargo xtask dist`): the driver package pinned
    // to its exact version, the platform package it names beside it, nothing
    // else; npm offline with a cache of its own, so nothing can come from a
    // registry, and no cargo, checkout or OCC_DRIVER_HOST in sight.
    const version = release.version;
    const controller = join(scratch, "controller");
    install(controller, version);
    const source = { name: "occ-driver-host-compute", version };
    const installed = JSON.parse(readFileSync(join(controller, "node_modules", source.name, "package.json"), "utf8"));
    // OCC pins the exact version it reviewed.
    assert.equal(installed.version, version);
    const platformDir = join(controller, "node_modules", PLATFORM_PACKAGE);
    assert.equal(JSON.parse(readFileSync(join(platformDir, "package.json"), "utf8")).version, version);

    // Node's export resolution, from the controller's own location.
    const entry = createRequire(join(controller, "package.json")).resolve(source.name);
    assert.ok(entry.startsWith(join(controller, "node_modules", source.name)), entry);
    const pkg = await import(pathToFileURL(entry).href);
    assert.equal(pkg.configurationSchema.additionalProperties, false);
    const implementation = `${installed.name}@${installed.version}`;
    // The binary it runs is the platform package's, found from the package itself.
    assert.equal(pkg.resolveHostBinary(undefined, "configuration.driverHost.binary"), join(platformDir, "bin/occ-driver-host"));

    // What the operator approves: the helper's hash as the release manifest
    // lists it (and `occ-driver-host inspect` prints it).
    const helper = release.components.find((c) => c.file === "guest_ssh_driver.wasm").helper.sha256;
    const configuration = {
      ssh: { identityFile: rig.identity, knownHostsFile: rig.knownHosts, connectTimeoutSeconds: 5 },
      hosts: { loader: { address: host.address, port: host.port ?? 22, user: "root", nodePath: rig.node, openclawPath: rig.openclaw } },
      runtime: { nodePath: rig.node, openclawPath: rig.openclaw, user: "openclaw", root, systemdUnitDirectory: "/etc/systemd/system" },
      network: { gatewayPortRange: { start: 19860, end: 19879 } },
      driverHost: { approvedHelpers: [helper] },
    };
    assert.equal(pkg.validateConfiguration(configuration), undefined);
    const driver = pkg.createDriver({ id: occ.DRIVER_ID, implementation, configuration });
    // Synchronous: the object itself, not a promise of one.
    assert.equal(typeof driver.then, "undefined");
    assert.equal(driver.implementation, implementation);
    assert.equal(driver.supportsWorkspaceSetup, true);
    driver.setLifecycleDrivers([]);

    const namespace = occ.namespace("loader");
    const agent = occ.agent(namespace);
    const agentDir = `${root}/namespaces/${hash12(namespace.id)}/agents/${hash12(agent.id)}`;
    const account = `openclaw-${hash12(`${namespace.id}:${agent.id}`)}`;
    const workspace = `${agentDir}/state/workspace`;
    const revision = occ.revision(agent, 1, { compute: { id: occ.DRIVER_ID, implementation } });
    // OCC's worker: the private setup record beside the revision, never in it.
    const context = occ.context({
      workspaceSetup: { id: `setup-${agent.id}`, namespaceId: namespace.id, agentId: agent.id, completed: false, files: { ...FILES } },
    });
    try {
      assert.deepEqual(await driver.ensureNamespace(namespace), { namespaceId: namespace.id, namespaceReady: true });
      await driver.bindAgent({ namespace, agent });
      const ready = await driver.prepareRevision(revision, context);
      assert.equal(ready.ready, true);
      await driver.activateRevision(revision, context);

      // Each document, read as the Agent's own account.
      for (const [name, text] of Object.entries(FILES)) {
        assert.equal(onHost(host, `runuser -u ${account} -- cat ${workspace}/${name}`), text.trim(), name);
      }
      assert.equal(onHost(host, `stat -c '%U %a' ${workspace}/SOUL.md`), `${account} 600`);
      const port = JSON.parse(onHost(host, `cat ${agentDir}/agent.json`)).port;
      assert.equal(onHost(host, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/readyz`), "200");

      // The acknowledgement was lost: OCC's worker deploys the same revision with
      // the same setup again. What the setup wrote stays exactly as it was.
      const setupState = () => onHost(host,
        `cd ${agentDir} && stat -c '%n %s %Y %a %U' workspace-setup.json workspace-setup.cjs state/workspace/*.md ` +
        `state/workspace/.oce-workspace-setup.json && sha256sum workspace-setup.json state/workspace/*.md`);
      const before = setupState();
      assert.equal((await driver.prepareRevision(revision, context)).ready, true);
      await driver.activateRevision(revision, context);
      assert.equal(setupState(), before);

      // A document over OCC's bound is refused before any host is touched.
      const oversized = occ.context({
        workspaceSetup: { ...context.workspaceSetup, files: { "USER.md": "x".repeat(16 * 1024 + 1) } },
      });
      await assert.rejects(driver.prepareRevision(revision, oversized), (error) => {
        assert.equal(error.failure, "permanent");
        assert.match(error.message, /context\.workspaceSetup\.files\.USER\.md: is 16385 bytes/);
        return true;
      });
      // So is one that is not well-formed Unicode.
      const lone = occ.context({
        workspaceSetup: { ...context.workspaceSetup, files: { "SOUL.md": "half a pair \ud800" } },
      });
      await assert.rejects(driver.prepareRevision(revision, lone), /context\.workspaceSetup\.files\.SOUL\.md: must be well-formed Unicode/);
      assert.equal(setupState(), before);
    } finally {
      assert.deepEqual(await driver.deleteNamespace(namespace), { namespaceId: namespace.id, namespaceDeleted: true });
      await driver.close();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    if (rig) onHost(rig.hosts[rig.hosts.length - 1], `rm -rf ${root}`);
  }
});

test("a machine the platform package does not fit gets an error that names the package to install and the override", {
  skip: dist ? false : process.env.CI ? false : "needs a release: run tests/run.sh",
  timeout: 300_000,
}, async () => {
  assert.ok(release, "CI is set but OCC_DIST is not: the release is missing");
  const scratch = mkdtempSync(join(tmpdir(), "occ-other-cpu-"));
  try {
    // npm installs for another CPU: it skips the optional platform package,
    // as on an arm64 machine.
    const controller = join(scratch, "controller");
    install(controller, release.version, ["--cpu=arm64"]);
    assert.ok(!existsSync(join(controller, "node_modules", PLATFORM_PACKAGE)), "npm skipped the x64 package");
    const entry = createRequire(join(controller, "package.json")).resolve("occ-driver-host-compute");
    const pkg = await import(pathToFileURL(entry).href);
    const configuration = { ssh: { identityFile: "/nonexistent/id" }, hosts: {} };
    for (const call of [() => pkg.validateConfiguration(configuration), () => pkg.createDriver({ id: "compute-ssh", implementation: "x@1", configuration })]) {
      assert.throws(call, (error) => {
        assert.equal(error.name, "DriverError");
        assert.equal(error.code, "host-missing");
        assert.equal(error.failure, "permanent");
        assert.match(error.message, new RegExp(`install ${PLATFORM_PACKAGE}`));
        assert.match(error.message, /configuration\.driverHost\.binary or \$OCC_DRIVER_HOST/);
        assert.doesNotMatch(error.message, /\n\s+at /, "a sentence, not a stack trace");
        return true;
      });
    }
    // The override the message names works.
    assert.equal(pkg.resolveHostBinary("/opt/occ/occ-driver-host", "x"), "/opt/occ/occ-driver-host");
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
