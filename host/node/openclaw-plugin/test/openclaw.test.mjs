// The component's backend beside OpenClaw's own, through OpenClaw itself
// (openclaw 2026.9.6 as installed on the rig; Node 24):
// - the plugin registers `occ-ssh` in OpenClaw's own backend registry, and
//   OpenClaw's own remote filesystem bridge runs over our handle;
// - a differential run: one sequence of operations through OpenClaw's SSH
//   backend and through ours, on the same host, for the same scope: the same
//   results and the same remote workspaces; and again with `ssh.command`
//   naming a copy of ssh at another path, which both run.
//
//   OCC_RIG=/run/occ-rig-sandbox OCC_DRIVER_HOST=.../occ-driver-host \
//     $NODE24 --test host/node/openclaw-plugin/test/openclaw.test.mjs

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { abortTwenty, timesText } from "./aborts.mjs";
import { approvedScripts, component, DEFAULT_PATH, hostBinary, installation, localWorkspace, PATHS, remoteTree, rig, sh, sshBlock, testEachPath, unique } from "./rig.mjs";

const host = rig.hosts[0];
const openclawDir = dirname(dirname(rig.openclaw));
const sdk = await import(pathToFileURL(join(openclawDir, "dist/plugin-sdk/sandbox.js")).href);

/**
 * The plugin, loaded as OpenClaw's plugin loader would find it: from a
 * directory where `openclaw` resolves (a copy of the plugin's folder, with
 * node_modules/openclaw and node_modules/occ-driver-host-rpc links, as an
 * install lays them out).
 */
async function loadPlugin() {
  const here = dirname(fileURLToPath(import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), "occ-plugin-"));
  for (const f of ["index.mjs", "sandbox.mjs", "exec-command.mjs", "openclaw.plugin.json", "package.json"]) cpSync(join(here, "..", f), join(dir, f));
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(openclawDir, join(dir, "node_modules/openclaw"));
  symlinkSync(join(here, "../../rpc"), join(dir, "node_modules/occ-driver-host-rpc"));
  const plugin = (await import(pathToFileURL(join(dir, "index.mjs")).href)).default;
  return { plugin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fake plugin API with what register() uses; it runs the cleanups it was given. */
function pluginApi(pluginConfig) {
  const services = [];
  return {
    api: {
      registrationMode: "full",
      pluginConfig,
      logger: { warn: () => {}, info: () => {} },
      lifecycle: { registerRuntimeLifecycle: () => {} },
      registerService: (s) => services.push(s),
    },
    stop: () => Promise.all(services.map((s) => s.stop())),
  };
}

/** OpenClaw's resolved sandbox config, as a factory receives it. */
function openclawCfg(backend, ssh) {
  return {
    mode: "all",
    backend,
    scope: "session",
    workspaceAccess: "rw",
    docker: { env: {}, binds: [] },
    browser: { enabled: false },
    ssh: { command: "ssh", ...ssh },
  };
}

function params(local, sessionKey, cfg) {
  const scopeKey = `${sessionKey}:workspace:${createHash("sha256").update(local.workspace).digest("hex").slice(0, 32)}`;
  return { sessionKey, scopeKey, workspaceDir: local.workspace, agentWorkspaceDir: local.workspace, cfg };
}

function bridgeContext(local, handle) {
  return {
    workspaceDir: local.workspace,
    agentWorkspaceDir: local.workspace,
    workspaceAccess: "rw",
    containerName: handle.runtimeId,
    containerWorkdir: handle.workdir,
    docker: { binds: [] },
    backend: { runShellCommand: (p) => handle.runShellCommand(p) },
  };
}

/**
 * The rows of `sequence` through OpenClaw's backend (`theirs`) and ours
 * (`mine`) are equal, except where ours differs on purpose: there each side's
 * answer is pinned, and the remote trees (compared by the caller) still agree.
 * OpenClaw resolves a recursive remove of `into-skills/demo` (`into-skills` a
 * link to `skills`) by the link's parent, so it looks for `demo` beside the
 * link, finds nothing and reports success with the skill still there; ours
 * resolves the link and refuses, as the skills directory is read-only.
 */
function sameBesidesOnPurpose(theirs, mine, path) {
  const onPurpose = { "remove through a link": { theirs: null, ours: "error" } };
  for (const [name, { theirs: t, ours: o }] of Object.entries(onPurpose)) {
    assert.deepEqual(theirs.find(([n]) => n === name)?.[1], t, `OpenClaw's backend: ${name}`);
    assert.deepEqual(mine.find(([n]) => n === name)?.[1], o, `ours (${path.name}): ${name}`);
  }
  const agreed = (rows) => rows.filter(([name]) => !(name in onPurpose));
  assert.deepEqual(agreed(mine), agreed(theirs), `ours (${path.name}) against OpenClaw's own backend`);
}

/**
 * OpenClaw's own backend and ours side by side for `local`, OpenClaw's once
 * and ours on each of its paths (the worker, one-shot): a host of ours per
 * path on the rig host, and a workspace root of its own for each backend and
 * path, named after `name`. `body({ ours, theirsRoot })` runs with them,
 * `ours` a list of `{ path, host, root }`; the hosts, the roots and `local`
 * are gone afterwards. OpenClaw's own backend is the reference: one run of
 * it serves the comparison with each of ours.
 */
async function bothBackends(local, name, body, ssh = {}) {
  const theirsRoot = `/tmp/${unique(`${name}-openclaw`)}`;
  const { startSandboxHost } = await import("../sandbox.mjs");
  const ours = [];
  try {
    for (const path of PATHS) {
      const root = `/tmp/${unique(`${name}-ours-${path.name}`)}`;
      const served = await startSandboxHost({ installation: installation({ ssh: sshBlock(host, root, ssh), localWorkspaces: [local.base], path }), hostBinary });
      ours.push({ path, host: served, root });
    }
    return await body({ ours, theirsRoot });
  } finally {
    for (const { host: served } of ours) await served.close();
    sh(host, `rm -rf ${theirsRoot} ${ours.map((o) => o.root).join(" ")}`);
    local.cleanup();
  }
}

/** Run what a handle's buildExecSpec returns, as OpenClaw does; then finalize. */
async function exec(handle, command) {
  const spec = await handle.buildExecSpec({ command, env: {}, usePty: false });
  const child = spawn(spec.argv[0], spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end();
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  await handle.finalizeExec?.({ status: code === 0 ? "completed" : "failed", exitCode: code, timedOut: false, token: spec.finalizeToken });
  return { code, stdout, stderr };
}

/**
 * Spawn what buildExecSpec returns, as OpenClaw's supervisor does: stdin open
 * or closed as the spec says. `drive(child, output)` talks to it; `output()`
 * resolves once stdout holds a text.
 */
async function spawnExec(handle, command, { usePty = false, killAfterMs, drive } = {}) {
  const spec = await handle.buildExecSpec({ command, env: {}, usePty });
  const child = spawn(spec.argv[0], spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: ["pipe", "pipe", "pipe"] });
  if (spec.stdinMode === "pipe-closed") child.stdin.end();
  child.stdin.on("error", () => {});
  let stdout = "";
  let stderr = "";
  const waiters = [];
  child.stdout.on("data", (d) => {
    stdout += d;
    for (const w of waiters.filter((w) => stdout.includes(w.text))) w.resolve();
  });
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const seen = (text) => (stdout.includes(text) ? Promise.resolve() : new Promise((resolve) => waiters.push({ text, resolve })));
  // OpenClaw's exec timeout: it kills the process tree it spawned.
  const timer = killAfterMs && setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  if (drive) await drive(child, seen);
  const { code, signal } = await exited;
  clearTimeout(timer);
  await handle.finalizeExec?.({ status: code === 0 ? "completed" : "failed", exitCode: code, timedOut: Boolean(signal), token: spec.finalizeToken });
  return { stdinMode: spec.stdinMode, code, signal, stdout, stderr };
}

/** The first line of what buildExecSpec threw for `command`, or what it returned. */
async function refusal(handle, command) {
  try {
    const spec = await handle.buildExecSpec({ command, env: {}, usePty: false });
    await handle.finalizeExec?.({ status: "completed", exitCode: 0, timedOut: false, token: spec.finalizeToken });
    return "accepted";
  } catch (e) {
    return String(e.message).split("\n")[0];
  }
}

/** One sequence of operations; what each returned (errors as "error"). */
async function sequence(handle, local) {
  const bridge = handle.createFsBridge({ sandbox: bridgeContext(local, handle) });
  const out = [];
  // `shell`: a row whose failure is a shell's, compared with its exit status
  // and output. Elsewhere OpenClaw's bridge fails through its own internal
  // shell helpers (a Python traceback with exit status 1 for a write onto a
  // directory); ours refuses before anything runs, so only errno codes are
  // compared there.
  const step = async (name, f, { shell = false } = {}) => {
    try {
      const v = await f();
      out.push([name, v === undefined ? null : v]);
    } catch (e) {
      // OpenClaw's own codes (errno names, a shell's exit status with its
      // output) are part of the contract; the message text is not.
      const shaped = {};
      if (typeof e.code === "string" && /^E[A-Z]+$/.test(e.code)) shaped.code = e.code;
      if (shell && typeof e.code === "number") shaped.code = e.code;
      if (shell && Buffer.isBuffer(e.stdout)) shaped.stdout = e.stdout.toString();
      if (shell && Buffer.isBuffer(e.stderr)) shaped.stderr = e.stderr.toString();
      out.push([name, Object.keys(shaped).length ? { error: shaped } : "error"]);
    }
  };
  await step("read README", async () => (await bridge.readFile({ filePath: "README.md" })).toString());
  await step("write notes/a", () => bridge.writeFile({ filePath: "notes/a.txt", data: "alpha\n", mkdir: true }));
  await step("create notes/b", () => bridge.createFileExclusive({ filePath: "notes/b.txt", data: "beta\n", mkdir: true }));
  await step("create notes/b again", () => bridge.createFileExclusive({ filePath: "notes/b.txt", data: "again\n", mkdir: true }));
  await step("mkdirp deep/er", () => bridge.mkdirp({ filePath: "deep/er" }));
  await step("rename a", () => bridge.rename({ from: "notes/a.txt", to: "deep/er/a2.txt" }));
  await step("stat a2", async () => {
    const s = await bridge.stat({ filePath: "deep/er/a2.txt" });
    return s && [s.type, s.size];
  });
  await step("stat missing", () => bridge.stat({ filePath: "nope.txt" }));
  await step("list", async () => (await bridge.readDirectory({ filePath: "." })).map((e) => `${e.name}:${e.isDirectory}`).sort());
  await step("remove notes/b", () => bridge.remove({ filePath: "notes/b.txt" }));
  await step("read /etc/passwd", async () => (await bridge.readFile({ filePath: "/etc/passwd" })).length);
  await step("read ../escape", async () => (await bridge.readFile({ filePath: "../escape" })).length);
  await step("read a link", async () => (await bridge.readFile({ filePath: "src/readme" })).toString());
  await step("stat a link", async () => {
    const s = await bridge.stat({ filePath: "src/readme" });
    return s && [s.type, s.size];
  });
  await step("write onto a link", () => bridge.writeFile({ filePath: "src/readme", data: "through the link\n" }));
  await step("exec", () => exec(handle, "echo hi; ls; echo err >&2; exit 2"));
  await step("shell", async () => (await handle.runShellCommand({ script: 'wc -c < "$1"', args: [`${handle.workdir}/deep/er/a2.txt`] })).stdout.toString().trim());
  // Error paths and OpenClaw's path rules.
  await step("read missing", async () => (await bridge.readFile({ filePath: "missing.txt" })).toString());
  await step("read a directory", async () => (await bridge.readFile({ filePath: "deep" })).toString());
  await step("write onto a directory", () => bridge.writeFile({ filePath: "deep", data: "x" }));
  await step("read with white space", async () => (await bridge.readFile({ filePath: "  README.md\n" })).toString());
  await step("read with backslashes", async () => (await bridge.readFile({ filePath: `${handle.workdir}\\deep\\er\\a2.txt`.replace(/\//g, "\\") })).toString());
  await step("read with source", async () => {
    const r = await bridge.readFileWithSource({ filePath: "deep/er/a2.txt" });
    return [r.data.toString(), r.canonicalPath === `${handle.workdir}/deep/er/a2.txt`, r.workspaceRelativePath];
  });
  await step("copy a2", () => bridge.copyFile({ sourcePath: "deep/er/a2.txt", destinationPath: "copies/a3.txt" }));
  await step("read the copy", async () => (await bridge.readFile({ filePath: "copies/a3.txt" })).toString());
  await step("remove missing, not forced", () => bridge.remove({ filePath: "never.txt", force: false }));
  await step("mkdirp outside", () => bridge.mkdirp({ filePath: "/tmp/occ-diff-outside" }));
  await step("write ../escape", () => bridge.writeFile({ filePath: "../escape.txt", data: "x" }));
  // OpenClaw's protected skills directories are read-only while they exist.
  await step("write into skills", () => bridge.writeFile({ filePath: "skills/demo/SKILL.md", data: "changed\n" }));
  await step("mkdirp into .agents/skills", () => bridge.mkdirp({ filePath: ".agents/skills/new" }));
  await step("remove skills", () => bridge.remove({ filePath: "skills", recursive: true, force: true }));
  await step("rename out of skills", () => bridge.rename({ from: "skills/demo/SKILL.md", to: "stolen.md" }));
  await step("write beside skills", () => bridge.writeFile({ filePath: "skillset/a.md", data: "fine\n", mkdir: true }));
  // Links a sandboxed command makes into them: the path as resolved counts.
  await step("link into skills", () => exec(handle, "ln -s skills into-skills && ln -s .agents into-agents && echo linked"));
  await step("write through a link into skills", () => bridge.writeFile({ filePath: "into-skills/demo/SKILL.md", data: "changed\n" }));
  await step("create through a link into skills", () => bridge.createFileExclusive({ filePath: "into-skills/fresh.md", data: "x" }));
  await step("mkdirp through a link into .agents/skills", () => bridge.mkdirp({ filePath: "into-agents/skills/new" }));
  await step("rename out through a link", () => bridge.rename({ from: "into-skills/demo/SKILL.md", to: "stolen2.md" }));
  await step("remove through a link", () => bridge.remove({ filePath: "into-skills/demo", recursive: true }));
  await step("remove the link itself", () => bridge.remove({ filePath: "into-agents" }));
  await step("read skills", async () => (await bridge.readFile({ filePath: "skills/demo/SKILL.md" })).toString());
  // Exec as OpenClaw's exec tool runs it: the time limit is OpenClaw's (it
  // kills what it spawned); stdin stays open for `process write`.
  await step("exec killed at OpenClaw's timeout", async () => {
    const r = await spawnExec(handle, "echo started; sleep 30; echo late", { killAfterMs: 1500 });
    return [r.code, r.signal, r.stdout];
  });
  await step("process write to a running command", async () => {
    const r = await spawnExec(handle, 'read line; echo "got $line"; cat; echo "stdin closed"', {
      drive: async (child, seen) => {
        child.stdin.write("hello\n");
        await seen("got hello");
        child.stdin.write("more\n");
        await seen("more");
        child.stdin.end();
      },
    });
    return [r.stdinMode, r.code, r.stdout];
  });
  await step("a command on a terminal", async () => {
    const r = await spawnExec(handle, 'test -t 0 && echo tty; echo "$TERM"; exit 4', { usePty: true });
    // OpenClaw's `ssh -tt` adds its client's own "Connection to <host>
    // closed." to stderr; that line is ssh's, not the command's.
    return [r.code, r.stdout];
  });
  for (const command of ["echo 'unclosed", 'echo "$(date', "cat <<EOF\nno end", "echo trailing \\", "cat <input-file>", "echo `date", "echo $((1 + 2)", "echo fine # 'comment"]) {
    await step(`malformed? ${JSON.stringify(command)}`, () => refusal(handle, command));
  }
  await step("shell exits 3", () => handle.runShellCommand({ script: "echo out; echo err >&2; exit 3" }), { shell: true });
  await step("shell exits 3, allowed", async () => {
    const r = await handle.runShellCommand({ script: "echo out; exit 3", allowFailure: true });
    return [r.code, r.stdout.toString()];
  });
  return out;
}

testEachPath("the plugin registers occ-ssh in OpenClaw's registry, and OpenClaw's own bridge runs over our handle", {}, async (path) => {
  const local = localWorkspace();
  const workspaceRoot = `/tmp/${unique("occ-sbx-plugin")}`;
  const { plugin, cleanup } = await loadPlugin();
  const { api, stop } = pluginApi({ component, approvedScripts: approvedScripts(), hostBinary, localWorkspaces: [local.base], ...path.config });
  try {
    assert.equal(plugin.id, "occ-ssh");
    plugin.register(api);
    const factory = sdk.requireSandboxBackendFactory("occ-ssh");
    const cfg = openclawCfg("occ-ssh", sshBlock(host, workspaceRoot));
    const p = params(local, unique("agent:main"), cfg);
    const handle = await factory(p);
    assert.equal(handle.id, "occ-ssh");
    // The same runtime id OpenClaw computes for the scope.
    const builtin = await sdk.getSandboxBackendFactory("ssh")({ ...p, cfg: openclawCfg("ssh", sshBlock(host, workspaceRoot)) });
    assert.equal(handle.runtimeId, builtin.runtimeId);
    // OpenClaw's own remote-shell filesystem bridge (its Python, its path
    // rules) over our handle: our exec script runs its scripts.
    const theirs = sdk.createRemoteShellSandboxFsBridge({
      sandbox: bridgeContext(local, handle),
      runtime: { remoteWorkspaceDir: handle.workdir, remoteAgentWorkspaceDir: handle.workdir, runRemoteShellScript: (x) => handle.runShellCommand(x) },
    });
    await handle.ensureRuntime();
    await theirs.writeFile({ filePath: "through-openclaw.txt", data: "written by OpenClaw's bridge\n" });
    assert.equal((await theirs.readFile({ filePath: "through-openclaw.txt" })).toString(), "written by OpenClaw's bridge\n");
    assert.equal(sh(host, `cat ${handle.workdir}/through-openclaw.txt`), "written by OpenClaw's bridge");
    await assert.rejects(theirs.readFile({ filePath: "/etc/passwd" }), /escapes allowed mounts/);
    // OpenClaw's manager lookup finds ours; describe and remove work.
    const manager = sdk.getSandboxBackendManager("occ-ssh");
    const entry = { sessionKey: p.scopeKey, containerName: handle.runtimeId, image: handle.configLabel };
    assert.deepEqual(await manager.describeRuntime({ entry, config: { agents: { defaults: { sandbox: cfg } } } }), {
      running: true,
      actualConfigLabel: handle.configLabel,
      configLabelMatch: true,
    });
    await manager.removeRuntime({ entry, config: { agents: { defaults: { sandbox: cfg } } } });
    assert.equal(sh(host, `[ -e ${handle.workdir} ] && echo present || echo gone`), "gone");
  } finally {
    await stop();
    sh(host, `rm -rf ${workspaceRoot}`);
    cleanup();
    local.cleanup();
  }
});

test("OpenClaw's workdir resolver finds ours: the built-in's answer, without touching the target", async () => {
  const local = localWorkspace();
  const workspaceRoot = `/tmp/${unique("occ-sbx-workdir")}`;
  const { plugin, cleanup } = await loadPlugin();
  // The host binary behind a wrapper that logs every command line it is
  // given: the scope must not be on one.
  const argvLog = join(local.base, "argv.log");
  const wrapper = join(local.base, "occ-driver-host");
  writeFileSync(wrapper, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${argvLog}'\nexec '${hostBinary}' "$@"\n`);
  chmodSync(wrapper, 0o755);
  // Resolving reaches no target: the path does not matter, the default serves.
  const { api, stop } = pluginApi({ component, approvedScripts: approvedScripts(), hostBinary: wrapper, localWorkspaces: [local.base], ...DEFAULT_PATH.config });
  const sessionKeys = [];
  try {
    plugin.register(api);
    const resolve = sdk.getSandboxBackendWorkdirResolver("occ-ssh");
    assert.equal(typeof resolve, "function", "occ-ssh registers resolveWorkdir");
    const builtin = sdk.getSandboxBackendWorkdirResolver("ssh");
    // A target nothing answers at (TEST-NET-1): a resolver that connected
    // would fail there instead of answering.
    const nowhere = { ...sshBlock(host, workspaceRoot), target: "root@192.0.2.1:22" };
    for (const sessionKey of [unique("agent:main"), unique("agent:other:subagent")]) {
      sessionKeys.push(sessionKey);
      const p = params(local, sessionKey, openclawCfg("occ-ssh", nowhere));
      const ours = resolve(p);
      assert.equal(typeof ours, "string", "answered synchronously");
      assert.equal(ours, builtin({ ...p, cfg: openclawCfg("ssh", nowhere) }));
    }
    // And it is where a handle of the same scope works, on a real target.
    const p = params(local, unique("agent:main"), openclawCfg("occ-ssh", sshBlock(host, workspaceRoot)));
    const handle = await sdk.requireSandboxBackendFactory("occ-ssh")(p);
    assert.equal(resolve(p), handle.workdir);
    assert.equal(sh(host, `[ -e ${workspaceRoot} ] && echo present || echo absent`), "absent", "resolving provisioned nothing");
    const lines = readFileSync(argvLog, "utf8");
    assert.match(lines, /^call resolveWorkdir /m, "the resolver ran the wrapped host");
    for (const secret of [...sessionKeys, local.workspace]) assert.ok(!lines.includes(secret), `${secret} on a command line:\n${lines}`);
  } finally {
    await stop();
    sh(host, `rm -rf ${workspaceRoot}`);
    cleanup();
    local.cleanup();
  }
});

test("differential: OpenClaw's SSH backend and ours, one sequence, the same results and workspaces", async () => {
  const local = localWorkspace();
  mkdirSync(join(local.workspace, "skills/demo"), { recursive: true });
  writeFileSync(join(local.workspace, "skills/demo/SKILL.md"), "# demo skill\n");
  mkdirSync(join(local.workspace, ".agents/skills"), { recursive: true });
  await bothBackends(local, "occ-diff", async ({ ours, theirsRoot }) => {
    const session = unique("agent:main");
    const theirHandle = await sdk.getSandboxBackendFactory("ssh")(params(local, session, openclawCfg("ssh", sshBlock(host, theirsRoot))));
    const theirs = await sequence(theirHandle, local);
    for (const { path, host: served, root: oursRoot } of ours) {
      const p = params(local, session, null);
      const ourHandle = await served.createHandle(p);
      assert.equal(ourHandle.runtimeId, theirHandle.runtimeId, "the same runtime id for the same scope");
      const mine = await sequence(ourHandle, local);
      sameBesidesOnPurpose(theirs, mine, path);
      // Closing a terminal command's stdin ends its input: ours sends the
      // terminal's end-of-file character. (OpenClaw's own `ssh -tt` sends an
      // SSH end of input, which sshd does not pass to a terminal: its command
      // waits on.)
      const eof = await spawnExec(ourHandle, 'read line; echo "got $line"; cat; echo "stdin closed"', {
        usePty: true,
        drive: async (child, seen) => {
          child.stdin.write("hello\n");
          await seen("got hello");
          child.stdin.end();
        },
      });
      assert.equal(eof.code, 0);
      assert.match(eof.stdout, /got hello\r\n[\s\S]*stdin closed\r\n$/);
      // Ours killed the remote command with the relay (whatever OpenClaw's own
      // left running is in its root, not ours).
      const left = sh(host, `for p in $(pgrep -f 'sleep 3[0]; echo late'); do readlink /proc/$p/cwd; done; true`);
      assert.ok(!left.includes(oursRoot), `left running in ${oursRoot}: ${left}`);
      // The rows that carry OpenClaw's codes did carry them.
      const row = (name) => mine.find(([n]) => n === name)[1];
      assert.deepEqual(row("read missing"), { error: { code: "ENOENT" } });
      assert.equal(row("write into skills"), "error");
      assert.equal(row("write through a link into skills"), "error");
      assert.equal(row("remove the link itself"), null);
      assert.equal(row("read skills"), "# demo skill\n");
      assert.deepEqual(row("shell exits 3"), { error: { code: 3, stdout: "out\n", stderr: "err\n" } });
      assert.deepEqual(row("exec killed at OpenClaw's timeout"), [null, "SIGKILL", "started\n"]);
      assert.deepEqual(row("process write to a running command"), ["pipe-open", 0, "got hello\nmore\nstdin closed\n"]);
      assert.equal(row(`malformed? ${JSON.stringify("echo 'unclosed")}`), "Malformed SSH/OpenShell exec command: unclosed single quote.");
      assert.equal(row(`malformed? ${JSON.stringify("echo fine # 'comment")}`), "accepted");
      assert.deepEqual(row("a command on a terminal"), [4, "tty\r\nxterm-256color\r\n"]);
      const tree = (dir) => remoteTree(host, dir);
      assert.equal(tree(ourHandle.workdir), tree(theirHandle.workdir), path.name);
      assert.equal(
        sh(host, `stat -c %a ${oursRoot}/${ourHandle.runtimeId}`),
        sh(host, `stat -c %a ${theirsRoot}/${theirHandle.runtimeId}`),
      );
    }
  });
});

/** The argument vectors of the processes whose program is `program`. */
function processesRunning(program) {
  const found = [];
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      if (readlinkSync(`/proc/${pid}/exe`) !== program) continue;
      found.push(readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" "));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

test("differential: ssh.command naming a copy of ssh, both backends run it, the same results", async () => {
  const local = localWorkspace();
  const clients = mkdtempSync(join(tmpdir(), "occ-named-ssh-"));
  const client = join(clients, "named-ssh");
  cpSync(execFileSync("sh", ["-c", "command -v ssh"]).toString().trim(), client);
  chmodSync(client, 0o755);
  try {
    await bothBackends(
      local,
      "occ-diffcmd",
      async ({ ours, theirsRoot }) => {
        const session = unique("agent:main");
        const theirHandle = await sdk.getSandboxBackendFactory("ssh")(
          params(local, session, openclawCfg("ssh", sshBlock(host, theirsRoot, { command: client }))),
        );
        const theirs = await sequence(theirHandle, local);
        for (const { path, host: served } of ours) {
          const ourHandle = await served.createHandle(params(local, session, null));
          const mine = await sequence(ourHandle, local);
          sameBesidesOnPurpose(theirs, mine, path);
          assert.equal(remoteTree(host, ourHandle.workdir), remoteTree(host, theirHandle.workdir), path.name);
        }
        // Each of our hosts runs its master with the named client: one per host.
        const masters = processesRunning(client).filter((args) => args.includes(" -M "));
        assert.equal(masters.length, ours.length, JSON.stringify(processesRunning(client)));
      },
      { command: client },
    );
  } finally {
    rmSync(clients, { recursive: true, force: true });
  }
});

test("differential: the skills OpenClaw materialized for a scope are refreshed before each operation", async () => {
  const local = localWorkspace();
  // Where OpenClaw materializes a scope's skills with workspaceAccess "rw".
  const skills = join(local.base, "skills-workspaces", "scope", ".openclaw", "sandbox-skills");
  mkdirSync(join(skills, "skills/demo"), { recursive: true });
  writeFileSync(join(skills, "skills/demo/SKILL.md"), "# demo\n");
  await bothBackends(local, "occ-skills", async ({ ours, theirsRoot }) => {
    const session = unique("agent:main");
    const withSkills = (cfg) => ({ ...params(local, session, cfg), skillsWorkspaceDir: skills });
    const theirHandle = await sdk.getSandboxBackendFactory("ssh")(withSkills(openclawCfg("ssh", sshBlock(host, theirsRoot))));
    const listing = "cd .openclaw/sandbox-skills 2>/dev/null && find . | LC_ALL=C sort && cat skills/demo/SKILL.md 2>/dev/null; true";
    const run = async (handle) => {
      const bridge = handle.createFsBridge({ sandbox: bridgeContext(local, handle) });
      const out = [];
      const step = async (name, f) => {
        try {
          out.push([name, await f()]);
        } catch (e) {
          out.push([name, typeof e.code === "string" && /^E[A-Z]+$/.test(e.code) ? { error: e.code } : "error"]);
        }
      };
      writeFileSync(join(skills, "skills/demo/SKILL.md"), "# demo\n");
      await step("exec sees the skills", () => exec(handle, listing));
      // A sandboxed command's change to the copy is undone by the next refresh.
      await step("a command plants a file", () => exec(handle, "echo planted > .openclaw/sandbox-skills/skills/planted.md && echo ok"));
      writeFileSync(join(skills, "skills/demo/SKILL.md"), "# demo, changed\n");
      await step("the next exec sees the change, not the plant", () => exec(handle, listing));
      writeFileSync(join(skills, "skills/demo/SKILL.md"), "# demo, changed again\n");
      await step("a shell script sees the change", async () => (await handle.runShellCommand({ script: 'cat "$1"', args: [`${handle.workdir}/.openclaw/sandbox-skills/skills/demo/SKILL.md`] })).stdout.toString());
      writeFileSync(join(skills, "skills/demo/SKILL.md"), "# demo, read through the bridge\n");
      await step("the bridge reads the change", async () => (await bridge.readFile({ filePath: ".openclaw/sandbox-skills/skills/demo/SKILL.md" })).toString());
      await step("the bridge may not write there", () => bridge.writeFile({ filePath: ".openclaw/sandbox-skills/skills/demo/SKILL.md", data: "x" }));
      rmSync(join(local.base, "skills-workspaces"), { recursive: true, force: true });
      await step("no local skills: the copy is emptied", () => exec(handle, listing));
      mkdirSync(join(skills, "skills/demo"), { recursive: true });
      return out;
    };
    const theirs = await run(theirHandle);
    for (const { path, host: served } of ours) {
      const ourHandle = await served.createHandle(withSkills(null));
      const mine = await run(ourHandle);
      assert.deepEqual(mine, theirs, path.name);
      const row = (name) => mine.find(([n]) => n === name)[1];
      assert.match(row("exec sees the skills").stdout, /\.\/skills\/demo\/SKILL\.md\n# demo\n$/);
      assert.doesNotMatch(row("the next exec sees the change, not the plant").stdout, /planted/);
      assert.equal(row("the bridge reads the change"), "# demo, read through the bridge\n");
      assert.equal(row("the bridge may not write there"), "error");
      assert.equal(row("no local skills: the copy is emptied").stdout, ".\n");
      assert.equal(remoteTree(host, ourHandle.workdir), remoteTree(host, theirHandle.workdir), path.name);
    }
  });
});

test("differential: a reader of the skills during 50 refreshes never finds them missing or half-replaced; OpenClaw's own backend clears them in place", { timeout: 600_000 }, async () => {
  const local = localWorkspace();
  const skills = join(local.base, "skills-workspaces", "scope", ".openclaw", "sandbox-skills");
  const SKILLS = 10;
  const version = (v) => {
    for (let i = 0; i < SKILLS; i++) {
      mkdirSync(join(skills, `skills/s${i}`), { recursive: true });
      writeFileSync(join(skills, `skills/s${i}/SKILL.md`), `# skill ${i}, version ${v}\n`);
    }
  };
  version(0);
  // On the target, as any process there reads the skills (by path, as
  // OpenClaw's skill loader does): every listing must hold all of them, each
  // SKILL.md whole, until the stop file appears. It polls every half
  // millisecond rather than spinning: a refresh that clears in place leaves
  // the skills missing for longer than that, and a spinning reader took a
  // whole core from everything else on the machine for the minute OpenClaw's
  // own backend takes over its 50 refreshes.
  const reader = [
    "import json, os, sys, time",
    "d, out, stop, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])",
    "polls = missing = partial = 0",
    "while not os.path.exists(stop):",
    "    time.sleep(0.0005)",
    "    polls += 1",
    "    try:",
    "        names = os.listdir(d)",
    "    except FileNotFoundError:",
    "        missing += 1",
    "        continue",
    "    whole = len(names) == n",
    "    for name in names if whole else []:",
    "        try:",
    "            with open(os.path.join(d, name, 'SKILL.md')) as f:",
    "                whole = f.read().endswith('\\n')",
    "        except OSError:",
    "            whole = False",
    "        if not whole:",
    "            break",
    "    partial += 0 if whole else 1",
    "json.dump({'polls': polls, 'missing': missing, 'partial': partial}, open(out, 'w'))",
  ].join("\n");
  const scratch = `/tmp/${unique("occ-skills-reader")}`;
  sh(host, `mkdir -p ${scratch} && cat > ${scratch}/reader.py <<'EOF'\n${reader}\nEOF`);
  try {
    await bothBackends(local, "occ-skills", async ({ ours, theirsRoot }) => {
      const session = unique("agent:main");
      const withSkills = (cfg) => ({ ...params(local, session, cfg), skillsWorkspaceDir: skills });
      const read = async (handle, who) => {
        // The first exec seeds the workspace and materializes the skills.
        assert.equal((await exec(handle, "true")).code, 0);
        const dir = `${handle.workdir}/.openclaw/sandbox-skills/skills`;
        const out = `${scratch}/${who}.json`;
        const stop = `${scratch}/${who}.stop`;
        sh(host, `nohup python3 ${scratch}/reader.py ${dir} ${out} ${stop} ${SKILLS} >/dev/null 2>&1 & echo started`);
        for (let v = 1; v <= 50; v++) {
          version(v);
          assert.equal((await exec(handle, "true")).code, 0);
        }
        sh(host, `touch ${stop}; for i in $(seq 100); do [ -s ${out} ] && break; sleep 0.1; done`);
        const seen = JSON.parse(sh(host, `cat ${out}`));
        // The last refresh is the one the skills show.
        assert.equal(sh(host, `cat ${dir}/s3/SKILL.md`), "# skill 3, version 50");
        return seen;
      };
      const theirs = await read(await sdk.getSandboxBackendFactory("ssh")(withSkills(openclawCfg("ssh", sshBlock(host, theirsRoot)))), "theirs");
      // The reader finds OpenClaw's in-place clear: it can see what it looks for.
      assert.ok(theirs.missing + theirs.partial > 0, JSON.stringify(theirs));
      for (const { path, host: served, root: oursRoot } of ours) {
        const mine = await read(await served.createHandle(withSkills(null)), `ours-${path.name}`);
        process.stderr.write(`skills during 50 refreshes: OpenClaw's own backend ${JSON.stringify(theirs)}, ours (${path.name}) ${JSON.stringify(mine)}\n`);
        assert.ok(mine.polls > 50, JSON.stringify(mine));
        assert.deepEqual({ missing: mine.missing, partial: mine.partial }, { missing: 0, partial: 0 }, path.name);
        // Nothing of the swaps shows in the workspace.
        const ourWorkdir = sh(host, `ls -d ${oursRoot}/*/workspace`);
        assert.equal(sh(host, `ls -A ${ourWorkdir}/.openclaw`), "sandbox-skills");
      }
    });
  } finally {
    sh(host, `rm -rf ${scratch}`);
  }
});

test("differential: a file OpenClaw stages for a turn after the seed reaches our remote workspace; OpenClaw's own backend leaves it local", async () => {
  const local = localWorkspace();
  // OpenClaw's own staging of a turn's inbound file (stageSandboxMedia, as
  // its reply path runs it): from its media store into the sandbox's local
  // workspace, under a fresh media/inbound/openclaw-staged-<uuid>/.
  const dist = join(openclawDir, "dist");
  const runtime = readdirSync(dist).find((n) => /^stage-sandbox-media\.runtime-.*\.mjs$/.test(n));
  const { stageSandboxMedia } = await import(pathToFileURL(join(dist, runtime)).href);
  const state = join(local.base, "state");
  const store = join(state, "media/inbound");
  mkdirSync(store, { recursive: true });
  const photo = Buffer.from("\x89PNG\r\n\x1a\nstaged photo", "binary");
  writeFileSync(join(store, "photo.png"), photo);
  await bothBackends(local, "occ-inputs", async ({ ours, theirsRoot }) => {
    // A session key OpenClaw resolves to its agent, as a real turn's is.
    const session = `agent:main:${unique("inputs")}`;
    const theirHandle = await sdk.getSandboxBackendFactory("ssh")(params(local, session, openclawCfg("ssh", sshBlock(host, theirsRoot))));
    const ourHandles = [];
    for (const { path, host: served } of ours) ourHandles.push({ path, handle: await served.createHandle(params(local, session, null)) });
    // All seeded before anything is staged.
    for (const handle of [theirHandle, ...ourHandles.map((o) => o.handle)]) assert.equal((await exec(handle, "echo seeded")).code, 0);
    const stateDir = process.env.OPENCLAW_STATE_DIR;
    process.env.OPENCLAW_STATE_DIR = state;
    const ctx = { media: [{ path: join(store, "photo.png"), contentType: "image/png" }] };
    try {
      const cfg = { agents: { defaults: { sandbox: openclawCfg("ssh", sshBlock(host, theirsRoot)) } } };
      await stageSandboxMedia({ ctx, sessionCtx: ctx, cfg, sessionKey: session, workspaceDir: local.workspace, agentId: "main" });
    } finally {
      if (stateDir === undefined) delete process.env.OPENCLAW_STATE_DIR;
      else process.env.OPENCLAW_STATE_DIR = stateDir;
    }
    // The path the agent is told: relative to its workspace.
    const path = ctx.media[0].path;
    assert.match(path, /^media\/inbound\/openclaw-staged-[0-9a-f-]{36}\/input-photo\.png$/);
    const directory = dirname(path);
    const read = async (handle) => {
      const bridge = handle.createFsBridge({ sandbox: bridgeContext(local, handle) });
      try {
        return (await bridge.readFile({ filePath: path })).toString("binary");
      } catch (e) {
        return { error: e.code };
      }
    };
    // Theirs: the staged file never leaves this machine.
    assert.deepEqual(await read(theirHandle), { error: "ENOENT" });
    assert.notEqual((await exec(theirHandle, `cat ${path}`)).code, 0);
    for (const { path: served, handle: ourHandle } of ourHandles) {
      // Ours: the next operation brings it, byte for byte, with OpenClaw's marker.
      assert.equal(await read(ourHandle), photo.toString("binary"), served.name);
      const cat = await exec(ourHandle, `cat ${directory}/.gitignore && od -c ${path} | head -1`);
      assert.equal(cat.code, 0, cat.stderr);
      assert.match(cat.stdout, /^# Raw task inputs remain private/);
      // A sandboxed command's change to its copy stands: nothing is sent again.
      assert.equal((await exec(ourHandle, `echo edited > ${path}`)).code, 0);
      assert.equal(await read(ourHandle), "edited\n", served.name);
    }
  });
});

test("differential: 20 commands killed or cancelled mid-output, then exec and read, on each backend: the scope answers as before and nothing of the commands is left on the target", { timeout: 300_000 }, async () => {
  const local = localWorkspace();
  await bothBackends(local, "occ-aborts", async ({ ours, theirsRoot }) => {
    const session = `agent:main:${unique("aborts")}`;
    const runOn = async (handle) => abortTwenty({ handle, bridge: handle.createFsBridge({ sandbox: bridgeContext(local, handle) }), host });
    const theirs = await runOn(await sdk.getSandboxBackendFactory("ssh")(params(local, session, openclawCfg("ssh", sshBlock(host, theirsRoot)))));
    for (const { path, host: served } of ours) {
      const mine = await runOn(await served.createHandle(params(local, session, null)));
      process.stderr.write(`after 20 aborts: OpenClaw's own backend ${timesText(theirs.before, theirs.after)}; ours (${path.name}) ${timesText(mine.before, mine.after)}\n`);
      process.stderr.write(`left on the target: OpenClaw's own backend ${JSON.stringify(theirs.left)}, ours (${path.name}) ${JSON.stringify(mine.left)}\n`);
      assert.equal(mine.left, "", path.name);
    }
  });
});
