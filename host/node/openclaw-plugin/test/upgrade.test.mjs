// Upgrading and rolling back the OpenClaw plugin while a scope lives on its
// target, as an OpenClaw user does it (docs/operators.md, "Upgrading and
// rolling back"): the previous release's tarball ($OCC_PREVIOUS_DIST, built
// from its commit by tests/previous-release.sh) installed with `openclaw
// plugins install`, an agent turn; this release's tarball ($OCC_DIST)
// installed over it with --force and both releases' scripts approved, the next
// turn, with the workspace the first one left; the previous release installed
// back, its scripts approved again, a third turn over what this one did. The
// scope's runtime, laid out by the previous release, is adopted as it is.
//
//   OCC_RIG=/run/occ-rig-sandbox OCC_DIST=... OCC_PREVIOUS_DIST=... \
//     $NODE24 --test host/node/openclaw-plugin/test/upgrade.test.mjs

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";

import { agentTurn, scriptedModel, scriptedProvider, toolResults } from "./model.mjs";
import { installedPluginAgents, openclawHome, rig, sh, unique } from "./rig.mjs";

const host = rig.hosts[0];
const manifest = (dir) => (dir ? JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) : null);
const current = manifest(process.env.OCC_DIST);
const previous = manifest(process.env.OCC_PREVIOUS_DIST);
// The plugin's package: its name, and its name before 0.3.0 (a previous release's).
const PLUGIN = ["occ-driver-host-openclaw", "@occ/openclaw-sandbox-ssh"];
const tarball = (dir, release) => join(dir, release.packages.find((p) => PLUGIN.includes(p.name)).file);
const scriptsOf = (release) =>
  Object.fromEntries(Object.entries(release.components.find((c) => c.file === "guest_ssh_sandbox.wasm").scripts).map(([k, v]) => [k, v.sha256]));

test("openclaw plugins install --force of this release over the previous one with a scope on the target: the next turn runs with the workspace it had, and so does one after a rollback", {
  skip: current && previous ? false : process.env.CI ? false : "needs both releases: run tests/run.sh",
  timeout: 900_000,
}, async () => {
  assert.ok(current && previous, "CI is set but OCC_DIST or OCC_PREVIOUS_DIST is not: a release is missing");
  assert.notEqual(current.version, previous.version);
  const { base, configPath, env } = openclawHome("occ-upgrade-", "seeded before the upgrade\n");
  const workspaceRoot = `/tmp/${unique("occ-sbx-upgrade")}`;
  const openclaw = (...args) => {
    const r = spawnSync(process.execPath, [rig.openclaw, ...args], { env, encoding: "utf8", timeout: 300_000 });
    assert.equal(r.status, 0, `openclaw ${args.join(" ")}:\n${r.stdout}\n${r.stderr}`);
    return r.stdout + r.stderr;
  };
  // The plugin of `release` installed over whatever is there, then
  // `approvedScripts`. OpenClaw checks the settings against the plugins'
  // schemas as it installs, and 0.2.0's takes one hash per script: so the
  // release's own scripts, one hash each, are approved first, which both
  // schemas take. The rest of the configuration stays as the user wrote it.
  const approve = (approvedScripts) => {
    const config = JSON.parse(readFileSync(configPath, "utf8"));
    config.plugins ??= {};
    config.plugins.entries ??= {};
    config.plugins.entries["occ-ssh"] = { ...config.plugins.entries["occ-ssh"], config: { approvedScripts } };
    writeFileSync(configPath, JSON.stringify(config));
  };
  const install = (dir, release, approvedScripts) => {
    if (JSON.parse(readFileSync(configPath, "utf8")).plugins) approve(scriptsOf(release));
    assert.match(openclaw("plugins", "install", "--force", "--accept-capabilities", tarball(dir, release)), /Installed plugin: occ-ssh/);
    approve(approvedScripts);
    const installed = JSON.parse(readFileSync(join(base, "state/extensions/occ-ssh/package.json"), "utf8"));
    assert.equal(installed.version, release.version);
  };
  // The turns are one session's: the model sees the earlier turns' tool
  // results too, and each turn's are those after them.
  let earlier = 0;
  const turn = async (steps, message) => {
    const model = await scriptedModel(steps);
    try {
      const config = JSON.parse(readFileSync(configPath, "utf8"));
      config.models = scriptedProvider(model.port);
      writeFileSync(configPath, JSON.stringify(config));
      const { code, stderr } = await agentTurn(rig.openclaw, env, message);
      assert.equal(code, 0, stderr);
      const all = toolResults(model.requests);
      const mine = all.slice(earlier);
      earlier = all.length;
      return mine;
    } finally {
      model.server.close();
    }
  };
  const runtime = () => sh(host, `cd ${workspaceRoot} && ls -d openclaw-ssh-workspace-*`);
  try {
    install(process.env.OCC_PREVIOUS_DIST, previous, scriptsOf(previous));
    const config = JSON.parse(readFileSync(configPath, "utf8"));
    config.tools = { profile: "coding" };
    config.agents = installedPluginAgents(base, host, workspaceRoot);
    writeFileSync(configPath, JSON.stringify(config));
    openclaw("plugins", "enable", "occ-ssh");

    // The previous release's turn: its scope's runtime, laid out by it (no
    // layout record: format 1).
    const first = await turn([
      { tool: "write", args: { path: "one.txt", content: `written with ${previous.version}\n` } },
      { tool: "exec", args: { command: "cat seed.txt one.txt" } },
      { text: "done" },
    ], "write a note");
    assert.equal(first[1].trimEnd(), `seeded before the upgrade\nwritten with ${previous.version}`);
    const made = runtime();
    assert.equal(sh(host, `[ -e ${workspaceRoot}/${made}/layout.json ] && echo record || echo none`), "none");

    // This release over it, both releases' scripts approved (a list each):
    // the next turn finds the workspace as it was and adds to it.
    const both = Object.fromEntries(Object.entries(scriptsOf(current)).map(([k, v]) => [k, [scriptsOf(previous)[k], v]]));
    install(process.env.OCC_DIST, current, both);
    const second = await turn([
      { tool: "exec", args: { command: "cat one.txt" } },
      { tool: "write", args: { path: "two.txt", content: `written with ${current.version}\n` } },
      { text: "done" },
    ], "read the note and write another");
    assert.equal(second[0].trimEnd(), `written with ${previous.version}`);
    assert.equal(runtime(), made, "the same runtime, adopted, not made anew");
    assert.equal(sh(host, `[ -e ${workspaceRoot}/${made}/layout.json ] && echo record || echo none`), "none", "adopted as it is");

    // Rolled back: the previous release, its own scripts approved again,
    // works on in what this one left.
    install(process.env.OCC_PREVIOUS_DIST, previous, scriptsOf(previous));
    const third = await turn([
      { tool: "exec", args: { command: "cat one.txt two.txt" } },
      { text: "done" },
    ], "read both notes");
    assert.equal(third[0].trimEnd(), `written with ${previous.version}\nwritten with ${current.version}`);
    assert.equal(runtime(), made);
  } finally {
    sh(host, `rm -rf ${workspaceRoot}`);
    rmSync(base, { recursive: true, force: true });
  }
});
