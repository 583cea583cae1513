// The plugin as an OpenClaw user installs it, from the release's tarball alone
// ($OCC_DIST, written by `cargo xtask dist`; tests/run.sh builds it):
// `openclaw plugins install <tarball>` with the real `openclaw` CLI, Node 24 and
// npm alone on PATH, npm offline (the tarball carries the component and the
// host binary: our packages are on no registry), no OCC_DRIVER_HOST, and a
// configuration that names neither a binary, a component nor a checkout path:
// the backend selected, the approved scripts as the release manifest lists
// them. Then one agent turn whose write and exec run on a rig host.
//
//   OCC_RIG=/run/occ-rig OCC_DIST=/var/cache/occ/dist \
//     $NODE24 --test host/node/openclaw-plugin/test/install.test.mjs

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";

import { agentTurn, scriptedModel, scriptedProvider, toolResults } from "./model.mjs";
import { DEFAULT_PATH, installedPluginAgents, openclawHome, repo, rig, sh, unique } from "./rig.mjs";

const host = rig.hosts[0];
const dist = process.env.OCC_DIST;
const release = dist ? JSON.parse(readFileSync(join(dist, "manifest.json"), "utf8")) : null;

test("openclaw plugins install of the release's tarball, then an agent turn on the target with nothing else configured", {
  skip: dist ? false : process.env.CI ? false : "needs a release: run tests/run.sh",
  timeout: 600_000,
}, async () => {
  assert.ok(release, "CI is set but OCC_DIST is not: the release is missing");
  // The Agent's workspace where OpenClaw keeps it, under its state directory:
  // where the plugin reads seeds from unless told otherwise (localWorkspaces).
  const { base, configPath, env } = openclawHome("occ-install-", "seeded from the installed plugin's workspace\n");
  const workspaceRoot = `/tmp/${unique("occ-sbx-install")}`;
  const tarball = join(dist, release.packages.find((p) => p.name === "occ-driver-host-openclaw").file);
  const model = await scriptedModel([
    { tool: "write", args: { path: "installed-note.txt", content: "written through the installed plugin\n" } },
    { tool: "exec", args: { command: "cat installed-note.txt seed.txt; uname -n" } },
    { text: "done" },
  ]);
  try {
    // A script's install: --force after reviewing a local archive (OpenClaw
    // asks a person), --accept-capabilities for the surfaces it declares.
    const openclaw = (...args) => spawnSync(process.execPath, [rig.openclaw, ...args], { env, encoding: "utf8", timeout: 300_000 });
    const installed = openclaw("plugins", "install", "--force", "--accept-capabilities", tarball);
    assert.equal(installed.status, 0, `${installed.stdout}\n${installed.stderr}`);
    // It needs its approved scripts before it may be enabled.
    assert.match(installed.stdout + installed.stderr, /Installed plugin: occ-ssh/);
    // Where OpenClaw put it: its own extensions directory, with the
    // component and the binary from inside the tarball.
    const dir = join(base, "state/extensions/occ-ssh");
    assert.ok(existsSync(join(dir, "guest_ssh_sandbox.wasm")), readdirSync(dir).join(" "));
    assert.ok(existsSync(join(dir, "node_modules/occ-driver-host-linux-x64-gnu/bin/occ-driver-host")));
    const config = JSON.parse(readFileSync(configPath, "utf8"));
    assert.ok(!JSON.stringify(config).includes(repo), "no checkout path in OpenClaw's configuration");

    // The user's part: select the backend and approve the scripts the
    // release manifest lists (which `occ-driver-host inspect` prints too).
    const scripts = release.components.find((c) => c.file === "guest_ssh_sandbox.wasm").scripts;
    config.plugins.entries = {
      ...config.plugins.entries,
      "occ-ssh": {
        ...config.plugins.entries?.["occ-ssh"],
        config: { approvedScripts: Object.fromEntries(Object.entries(scripts).map(([k, v]) => [k, v.sha256])), ...DEFAULT_PATH.config },
      },
    };
    config.models = scriptedProvider(model.port);
    config.tools = { profile: "coding" };
    config.agents = installedPluginAgents(base, host, workspaceRoot);
    writeFileSync(configPath, JSON.stringify(config));
    const enabled = openclaw("plugins", "enable", "occ-ssh");
    assert.equal(enabled.status, 0, `${enabled.stdout}\n${enabled.stderr}`);
    assert.equal(JSON.parse(readFileSync(configPath, "utf8")).plugins.entries["occ-ssh"].enabled, true);

    const { code, stderr } = await agentTurn(rig.openclaw, env, "write a note and show it");
    assert.equal(code, 0, stderr);
    const results = toolResults(model.requests);
    assert.equal(results.length, 2, JSON.stringify(results));
    assert.match(results[0], new RegExp(`${workspaceRoot}/openclaw-ssh-workspace-[0-9a-f]{32}/workspace/installed-note.txt`));
    assert.equal(results[1].trimEnd(), `written through the installed plugin\nseeded from the installed plugin's workspace\n${host.name}`);
    assert.equal(sh(host, `cat ${workspaceRoot}/*/workspace/installed-note.txt`), "written through the installed plugin");
  } finally {
    model.server.close();
    sh(host, `rm -rf ${workspaceRoot}`);
    rmSync(base, { recursive: true, force: true });
  }
});
