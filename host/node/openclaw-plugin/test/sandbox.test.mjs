// The Node client of the sandbox backend against the real host binary, the
// real component and a real test host: OpenClaw's handle and bridge shapes,
// exec as OpenClaw runs it (spawning the handle's argv), cancellation.
//
//   OCC_RIG=/run/occ-rig-sandbox OCC_DRIVER_HOST=.../occ-driver-host \
//     node --test host/node/openclaw-plugin/test/sandbox.test.mjs

import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";

import { SandboxError, startSandboxHost } from "../sandbox.mjs";
import { abortTwenty, runSpec as run, timesText } from "./aborts.mjs";
import { hostBinary, installation, localWorkspace, remoteTree, rig, sh, sshBlock, testEachPath, unique } from "./rig.mjs";

const host = rig.hosts[0];

async function fixture(path) {
  const local = localWorkspace();
  const workspaceRoot = `/tmp/${unique("occ-sbx-node")}`;
  const sandboxHost = await startSandboxHost({
    installation: installation({ ssh: sshBlock(host, workspaceRoot), localWorkspaces: [local.base], path }),
    hostBinary,
  });
  const handle = await sandboxHost.createHandle({ sessionKey: unique("agent:main"), workspaceDir: local.workspace });
  return {
    local,
    workspaceRoot,
    sandboxHost,
    handle,
    bridge: handle.createFsBridge({ sandbox: {} }),
    async close() {
      await sandboxHost.close();
      sh(host, `rm -rf ${workspaceRoot}`);
      local.cleanup();
    },
  };
}

testEachPath("the handle has OpenClaw's shape and the bridge works on the target", {}, async (path) => {
  const f = await fixture(path);
  try {
    const { handle, bridge } = f;
    assert.equal(handle.id, "occ-ssh");
    assert.match(handle.runtimeId, /^openclaw-ssh-workspace-[0-9a-f]{32}$/);
    assert.equal(handle.workdir, `${f.workspaceRoot}/${handle.runtimeId}/workspace`);
    assert.equal(handle.workdirValidation, "backend");
    assert.equal(handle.configLabelKind, "Target");
    assert.equal(handle.capabilities.browser, undefined, "no browser on this backend");
    // The first operation seeds the workspace.
    assert.equal((await bridge.readFile({ filePath: "README.md" })).toString(), "hello from the local workspace\n");
    await bridge.writeFile({ filePath: "dir/new.txt", data: "new\n" });
    assert.equal(await bridge.createFileExclusive({ filePath: "dir/new.txt", data: "again" }), "exists");
    assert.deepEqual(await bridge.stat({ filePath: "dir/new.txt" }).then((s) => [s.type, s.size]), ["file", 4]);
    assert.equal(await bridge.stat({ filePath: "nope" }), null);
    await bridge.rename({ from: "dir/new.txt", to: "moved.txt" });
    const names = (await bridge.readDirectory({ filePath: "." })).map((e) => `${e.name}:${e.isDirectory}`);
    assert.deepEqual(names, ["README.md:false", "dir:true", "moved.txt:false", "src:true"]);
    await bridge.remove({ filePath: "dir", recursive: true });
    // resolvePath agrees with what the component does, synchronously.
    const r = bridge.resolvePath({ filePath: "src/../moved.txt" });
    assert.deepEqual(r, { hostPath: `${f.local.workspace}/moved.txt`, relativePath: "moved.txt", containerPath: `${handle.workdir}/moved.txt` });
    assert.throws(() => bridge.resolvePath({ filePath: "../../etc/passwd" }), /Sandbox path escapes allowed mounts/);
    await assert.rejects(bridge.readFile({ filePath: "/etc/passwd" }), (e) => e instanceof SandboxError && e.code === "escapes-workspace");
    assert.equal(await handle.validateWorkdir("/etc"), null);
    assert.equal(await handle.validateWorkdir("src"), `${handle.workdir}/src`);
    // The remote tree is what the bridge made of it.
    assert.equal(
      remoteTree(host, handle.workdir).split("\n").map((l) => l.split(" ").slice(0, 2).join(" ")).join("\n"),
      "./README.md file\n./moved.txt file\n./src dir\n./src/main.rs file\n./src/readme link",
    );
  } finally {
    await f.close();
  }
});

testEachPath("exec as OpenClaw runs it: streamed output, exit code, env; a kill ends the remote command", {}, async (path) => {
  const f = await fixture(path);
  try {
    const spec = await f.handle.buildExecSpec({ command: 'echo "$GREETING"; echo oops >&2; pwd; exit 3', workdir: "src", env: { GREETING: "it's ok" } });
    assert.equal(spec.stdinMode, "pipe-open");
    const { code, stdout, stderr } = await run(spec).done;
    assert.equal(code, 3);
    assert.equal(stdout, `it's ok\n${f.handle.workdir}/src\n`);
    assert.equal(stderr, "oops\n");
    // OpenClaw kills the spawned process on a timeout or an abort.
    const marker = unique("occ-node-kill");
    const long = await f.handle.buildExecSpec({ command: `echo started; sh -c 'sleep 600; : ${marker}'` });
    const started = run(long, { onStdout: (text, child) => text.includes("started") && child.kill("SIGTERM") });
    const ended = await started.done;
    assert.equal(ended.signal, "SIGTERM");
    const pattern = `[${marker[0]}]${marker.slice(1)}`;
    sh(host, `timeout 20 sh -c 'while pgrep -f "${pattern}" >/dev/null; do sleep 0.05; done'`);
  } finally {
    await f.close();
  }
});

testEachPath("a relay's stdin reaches its own command, in its own scope, and no other", {}, async (path) => {
  const f = await fixture(path);
  try {
    // A second scope on the same serving host.
    const other = await f.sandboxHost.createHandle({ sessionKey: unique("agent:other"), workspaceDir: f.local.workspace });
    assert.notEqual(other.runtimeId, f.handle.runtimeId);
    const reader = 'read -r line; echo "got:$line in $(pwd)"';
    const mine = run(await f.handle.buildExecSpec({ command: reader }));
    const theirs = run(await other.buildExecSpec({ command: reader }));
    mine.child.stdin.write("for my command only\n");
    const a = await mine.done;
    // The other command's input ends with nothing in it.
    theirs.child.stdin.end();
    const b = await theirs.done;
    assert.equal(a.stdout, `got:for my command only in ${f.handle.workdir}\n`);
    assert.equal(b.stdout, `got: in ${other.workdir}\n`);
    // Closing the relay's stdin closes the command's: `cat` ends.
    const cat = run(await f.handle.buildExecSpec({ command: "cat; echo end" }));
    cat.child.stdin.end("last\n");
    assert.deepEqual(await cat.done, { code: 0, signal: null, stdout: "last\nend\n", stderr: "" });
  } finally {
    await f.close();
  }
});

testEachPath("drivers.sandbox.maxRunSeconds ends a command that runs longer, and its processes", {}, async (path) => {
  const local = localWorkspace();
  const workspaceRoot = `/tmp/${unique("occ-sbx-bound")}`;
  const doc = installation({ ssh: sshBlock(host, workspaceRoot), localWorkspaces: [local.base], path });
  doc.drivers.sandbox.maxRunSeconds = 3;
  const sandboxHost = await startSandboxHost({ installation: doc, hostBinary });
  try {
    const handle = await sandboxHost.createHandle({ sessionKey: unique("agent:main"), workspaceDir: local.workspace });
    const marker = unique("occ-node-bound");
    const started = Date.now();
    const r = await run(await handle.buildExecSpec({ command: `echo started; sh -c 'sleep 600; : ${marker}'; echo late` })).done;
    // The host's bound, not the command, ended it: the relay's 124.
    assert.deepEqual([r.code, r.stdout], [124, "started\n"]);
    assert.ok(Date.now() - started < 60_000);
    const pattern = `[${marker[0]}]${marker.slice(1)}`;
    sh(host, `timeout 20 sh -c 'while pgrep -f "${pattern}" >/dev/null; do sleep 0.05; done'`);
  } finally {
    await sandboxHost.close();
    sh(host, `rm -rf ${workspaceRoot}`);
    local.cleanup();
  }
});

testEachPath("runShellCommand with stdin, failures and an abort signal", {}, async (path) => {
  const f = await fixture(path);
  try {
    const r = await f.handle.runShellCommand({ script: 'printf "%s|" "$0" "$@"; cat', args: ["a b", "c"], stdin: Buffer.from("in") });
    assert.equal(r.code, 0);
    assert.equal(r.stdout.toString(), "occ-sandbox-shell|a b|c|in");
    // A failure as OpenClaw's own session throws it: stderr as the message,
    // the exit status as the code, the output on the error.
    await assert.rejects(
      f.handle.runShellCommand({ script: "echo out; echo boom >&2; exit 4" }),
      (e) => e.code === 4 && e.message === "boom" && e.stdout.toString() === "out\n" && e.stderr.toString() === "boom\n",
    );
    assert.equal((await f.handle.runShellCommand({ script: "exit 4", allowFailure: true })).code, 4);
    const controller = new AbortController();
    const pending = f.handle.runShellCommand({ script: "sleep 600", signal: controller.signal });
    setImmediate(() => controller.abort());
    await assert.rejects(pending, (e) => e.code === "cancelled" || e.name === "AbortError");
  } finally {
    await f.close();
  }
});

testEachPath("a write up to the bridge's 8 MiB bound arrives whole; a larger one fails at once, too-large, and writes nothing", { timeout: 120_000 }, async (path) => {
  const f = await fixture(path);
  try {
    const { bridge, handle } = f;
    const sha = (b) => createHash("sha256").update(b).digest("hex");
    // 3.5 MiB and 8 MiB: their base64 is over the host's old 4 MiB message
    // bound, where a write used to wait forever for an answer.
    for (const size of [(7 << 20) / 2, 8 << 20]) {
      const data = randomBytes(size);
      await bridge.writeFile({ filePath: `big/${size}.bin`, data });
      assert.equal(sha(await bridge.readFile({ filePath: `big/${size}.bin` })), sha(data), `${size} bytes read back`);
      assert.equal(sh(host, `sha256sum ${handle.workdir}/big/${size}.bin`).split(" ")[0], sha(data));
    }
    // Over the bound: the component refuses (9 MiB) or the client does before
    // sending (13 MiB); both at once, and nothing appears under the name.
    for (const size of [9 << 20, 13 << 20]) {
      const started = Date.now();
      await assert.rejects(
        bridge.writeFile({ filePath: `big/over-${size}.bin`, data: randomBytes(size) }),
        (e) => e instanceof SandboxError && e.code === "too-large" && e.failure === "permanent" && /bound/.test(e.message),
      );
      assert.ok(Date.now() - started < 60_000, `refused in ${Date.now() - started} ms`);
      assert.equal(await bridge.stat({ filePath: `big/over-${size}.bin` }), null);
    }
    assert.equal(sh(host, `ls -A ${handle.workdir}/big`).trim().split("\n").sort().join(" "), [`${8 << 20}.bin`, `${(7 << 20) / 2}.bin`].sort().join(" "));
    // The session goes on serving after both refusals.
    await bridge.writeFile({ filePath: "after.txt", data: "ok" });
    assert.equal((await bridge.readFile({ filePath: "after.txt" })).toString(), "ok");
  } finally {
    await f.close();
  }
});

testEachPath("a client that exits without closing takes its host with it", {}, async (path) => {
  const local = localWorkspace();
  try {
    const script = `
      const { startSandboxHost } = await import(${JSON.stringify(new URL("../sandbox.mjs", import.meta.url).href)});
      const h = await startSandboxHost({ installation: JSON.parse(process.argv[1]), hostBinary: ${JSON.stringify(hostBinary)} });
      await h.call("validateConfiguration", {});
      console.log(h.pid);`;
    const doc = installation({ ssh: sshBlock(host, "/tmp/unused"), localWorkspaces: [local.base], path });
    const pid = Number(execFileSync(process.execPath, ["--input-type=module", "-e", script, JSON.stringify(doc)], { encoding: "utf8" }).trim());
    assert.ok(pid > 0);
    // The host saw its stdin close; wait for it to be gone.
    const gone = () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    for (let i = 0; i < 200 && !gone(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(gone(), `host ${pid} outlived its client`);
  } finally {
    local.cleanup();
  }
});

/** Every file below `dir` whose bytes hold `needle` (grep, as an operator would). */
/**
 * Every regular file below `dir`, on `dir`'s own filesystem, whose bytes hold
 * `needle`: the test's own temporary directory, never what else the machine
 * mounts below /tmp (another container's root holds copies of the rig's key).
 */
function filesHolding(dir, needle) {
  const r = spawnSync("find", [dir, "-xdev", "-type", "f", "-exec", "grep", "-lsF", "--", needle, "{}", "+"], { encoding: "utf8" });
  // grep, and find with it, exits 1 when no file holds the needle: only what it printed counts.
  assert.equal(r.error, undefined, String(r.error));
  return r.stdout.trim().split("\n").filter(Boolean);
}

testEachPath("a client killed with SIGKILL while a session holds identityData leaves the key on no disk", {}, async (path) => {
  const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
  const { tmpdir: systemTmp } = await import("node:os");
  // The client and both hosts get a temporary directory of this test's own:
  // where the host would write an inline key, and all the test searches.
  const tmp = mkdtempSync(join(systemTmp(), "occ-sbx-kill-"));
  const tmpdir = () => tmp;
  const key = readFileSync(rig.identity, "utf8");
  // The second body line holds this key's own public half (the first is the
  // same for every OpenSSH key).
  const needle = key.split("\n").filter((l) => !l.startsWith("-----") && l.length > 40)[1];
  const local = localWorkspace();
  const workspaceRoot = `/tmp/${unique("occ-sbx-node")}`;
  const inst = installation({ ssh: sshBlock(host, workspaceRoot, { identityFile: undefined, identityData: key }), localWorkspaces: [local.base], path });
  delete inst.drivers.sandbox.configuration.agents.defaults.sandbox.ssh.identityFile;
  // A client of its own, which this test kills outright mid-session.
  const script = `
    import { startSandboxHost } from ${JSON.stringify(new URL("../sandbox.mjs", import.meta.url).href)};
    const h = await startSandboxHost({ installation: JSON.parse(process.env.INST), hostBinary: ${JSON.stringify(hostBinary)} });
    const handle = await h.createHandle({ sessionKey: "agent:main:kill", workspaceDir: ${JSON.stringify(local.workspace)} });
    await handle.createFsBridge({}).writeFile({ filePath: "alive.txt", data: "yes" });
    console.log("serving " + h.pid);
    setInterval(() => {}, 1000);
  `;
  const client = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, TMPDIR: tmp, INST: JSON.stringify(inst) }, stdio: ["ignore", "pipe", "inherit"] });
  try {
    const hostPid = await new Promise((resolve, reject) => {
      let out = "";
      client.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/serving (\d+)/);
        if (m) resolve(Number(m[1]));
      });
      client.on("exit", (code) => reject(new Error(`client exited ${code}: ${out}`)));
    });
    assert.equal(sh(host, `cat ${workspaceRoot}/*/workspace/alive.txt`), "yes");
    // While the session is open: the key is in no file (the installation came
    // through a pipe; the host's inline file lived only for the handshake).
    assert.deepEqual(filesHolding(tmpdir(), needle), []);
    client.kill("SIGKILL");
    await new Promise((resolve) => client.once("exit", resolve));
    // The host sees its stdin close and ends; within 10 s nothing is left.
    const deadline = Date.now() + 10_000;
    const alive = () => {
      try {
        process.kill(hostPid, 0);
        return true;
      } catch {
        return false;
      }
    };
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(alive(), false, "the host outlived its client by 10 s");
    assert.deepEqual(filesHolding(tmpdir(), needle), []);
    // And the next host start finds nothing of it to clean either.
    const next = await startSandboxHost({ installation: inst, hostBinary, env: { ...process.env, TMPDIR: tmp } });
    await next.call("validateConfiguration", {});
    assert.deepEqual(filesHolding(tmpdir(), needle), []);
    await next.close();
  } finally {
    client.kill("SIGKILL");
    sh(host, `rm -rf ${workspaceRoot}`);
    local.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  }
});

testEachPath("aborts leave the scope healthy: 20 commands killed or cancelled mid-output, then exec and read answer as before, and nothing of them is left on the target", { timeout: 180_000 }, async (path) => {
  const f = await fixture(path);
  try {
    const { before, after, left } = await abortTwenty({ handle: f.handle, bridge: f.bridge, host });
    process.stderr.write(`after 20 aborts: ${timesText(before, after)}\n`);
    // The next calls of the same scope answer (a wedged scope never does:
    // the test's timeout ends it), as fast as before: the median of five
    // within 2x of the warm median of the same run (or 0.5 s of it, room
    // for a noisy shared machine; a scope slowed by what the aborts left
    // takes seconds).
    for (const op of ["exec", "read"]) assert.ok(after[op] <= Math.max(2 * before[op], before[op] + 500), `${op}: ${after[op]} ms after the aborts, ${before[op]} ms warm`);
    // Nothing of the aborted commands runs on the target.
    assert.equal(left, "");
  } finally {
    await f.close();
  }
});
