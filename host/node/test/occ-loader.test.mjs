// The package as OCC's controller installs and loads it, from the packed tarball:
// an exact-version direct dependency of a controller-like package, installed
// production-only with lifecycle scripts disabled (OCC's image build runs
// `pnpm install --frozen-lockfile --prod --ignore-scripts`), resolved by Node's own
// export resolution from the controller, `createDriver` synchronous, the
// implementation `<package>@<version>`, the schema closed. Then OCC's Console's
// create flow: an Agent deployed with the four workspace documents, which land in
// its workspace as its own files, and a second deploy after a lost acknowledgement
// changes nothing on the host.
//
// Needs the disposable test hosts: tests/run.sh brings them up and exports OCC_RIG_*.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import test from "node:test";

import * as occ from "./occ.mjs";

const { rig, onHost } = occ;
const hash12 = (s) => createHash("sha256").update(s).digest("hex").slice(0, 12);

// The Console's create form pre-fills these four.
const FILES = {
  "AGENTS.md": "# AGENTS.md\n\nKeep answers short. Loader test.\n",
  "SOUL.md": "# SOUL.md\n\nPatient and exact.\n",
  "IDENTITY.md": "# IDENTITY.md\n\n- **Name:** Loader\n",
  "USER.md": "# USER.md\n\n- Prefer bullet lists.\n",
};

test("OCC installs the packed package, loads it by export resolution, and deploys an Agent with its workspace files", {
  skip: rig || process.env.CI ? false : "needs the test hosts: run tests/run.sh",
  timeout: 900_000,
}, async () => {
  assert.ok(rig, "CI is set but OCC_RIG_* is not exported: the test hosts are missing");
  const scratch = mkdtempSync(join(tmpdir(), "occ-loader-"));
  const host = rig.hosts[rig.hosts.length - 1];
  const root = `/var/lib/occ-loader-${process.pid}`;
  try {
    // The package as it ships: a tarball of what its manifest lists.
    const source = JSON.parse(readFileSync(join(occ.repo, "host/node/package.json"), "utf8"));
    const packed = execFileSync("npm", ["pack", "--silent", "--pack-destination", scratch, join(occ.repo, "host/node")],
      { encoding: "utf8" }).trim().split("\n").pop();
    const controller = join(scratch, "controller");
    mkdirSync(controller);
    writeFileSync(join(controller, "package.json"), JSON.stringify({
      name: "occ-controller-under-test", version: "0.0.0", private: true, type: "module",
      dependencies: { [source.name]: `file:${join(scratch, packed)}` },
    }));
    execFileSync("npm", ["install", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund"],
      { cwd: controller, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
    const installed = JSON.parse(readFileSync(join(controller, "node_modules", source.name, "package.json"), "utf8"));
    // OCC pins the exact version it reviewed.
    assert.equal(installed.version, source.version);
    const lock = JSON.parse(readFileSync(join(controller, "package-lock.json"), "utf8"));
    assert.equal(lock.packages[`node_modules/${source.name}`].version, source.version);

    // Node's export resolution, from the controller's own location.
    const entry = createRequire(join(controller, "package.json")).resolve(source.name);
    assert.ok(entry.startsWith(join(controller, "node_modules", source.name)), entry);
    const pkg = await import(pathToFileURL(entry).href);
    assert.equal(pkg.configurationSchema.additionalProperties, false);
    const implementation = `${installed.name}@${installed.version}`;

    const check = JSON.parse(execFileSync(occ.hostBinary, ["inspect", occ.component, "--json"], { encoding: "utf8" }));
    const configuration = {
      ssh: { identityFile: rig.identity, knownHostsFile: rig.knownHosts, connectTimeoutSeconds: 5 },
      hosts: { loader: { address: host.address, port: host.port ?? 22, user: "root", nodePath: rig.node, openclawPath: rig.openclaw } },
      runtime: { nodePath: rig.node, openclawPath: rig.openclaw, user: "openclaw", root, systemdUnitDirectory: "/etc/systemd/system" },
      network: { gatewayPortRange: { start: 19860, end: 19879 } },
      driverHost: { binary: occ.hostBinary, component: occ.component, approvedHelpers: [check.helper.sha256] },
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
