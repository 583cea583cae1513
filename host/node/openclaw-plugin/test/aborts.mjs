// Commands stopped mid-output the ways OpenClaw stops one, and what a
// handle's scope answers afterwards: the same sequence for our handle
// (sandbox.test.mjs) and for OpenClaw's own SSH backend's (the differential
// in openclaw.test.mjs).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";

import { sh, unique } from "./rig.mjs";

/** Spawn what buildExecSpec returns, as OpenClaw's process supervisor does. */
export function runSpec(spec, { onStdout } = {}) {
  const child = spawn(spec.argv[0], spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: [spec.stdinMode === "pipe-closed" ? "ignore" : "pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
    onStdout?.(d.toString(), child);
  });
  child.stderr.on("data", (d) => (stderr += d));
  return { child, done: new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, stdout, stderr }))) };
}

const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];

/**
 * Twenty commands of `handle`'s scope on `host`, each writing without pause
 * in a process group of its own, stopped the way OpenClaw stops one: its
 * relay killed (a timeout: SIGKILL; an abort: SIGTERM), a pty's relay
 * killed, or runShellCommand's signal aborted. Returns the median of five
 * `exec true` and five reads of `README.md` through `bridge` before and
 * after (ms), and what of the commands still runs on the target after up
 * to 20 s.
 */
export async function abortTwenty({ handle, bridge, host }) {
  const timed = async (op) => {
    const started = performance.now();
    await op();
    return performance.now() - started;
  };
  const execTrue = async () => {
    const spec = await handle.buildExecSpec({ command: "true", env: {}, usePty: false });
    const { code } = await runSpec(spec).done;
    await handle.finalizeExec?.({ status: "completed", exitCode: code, timedOut: false, token: spec.finalizeToken });
    assert.equal(code, 0);
  };
  const read = async () => assert.equal((await bridge.readFile({ filePath: "README.md" })).toString(), "hello from the local workspace\n");
  const warm = async () => {
    const e = [];
    const r = [];
    for (let i = 0; i < 5; i++) {
      e.push(await timed(execTrue));
      r.push(await timed(read));
    }
    return { exec: median(e), read: median(r) };
  };
  const before = await warm();
  const marker = unique("occ-abort");
  const pattern = `[${marker[0]}]${marker.slice(1)}`;
  const command = (i) => `sh -c 'while :; do echo ${marker}-${i}; done; : ${marker}' & wait`;
  const killed = async (i, signal, usePty) => {
    const spec = await handle.buildExecSpec({ command: command(i), env: {}, usePty });
    const r = runSpec(spec, { onStdout: (t, child) => t.includes(`${marker}-${i}`) && child.kill(signal) });
    // Our relay dies of the signal; OpenClaw's ssh catches SIGTERM and
    // exits 255.
    const { code, signal: got } = await r.done;
    assert.ok(got === signal || (signal === "SIGTERM" && code === 255), `${command(i)}: ended with ${got ?? code}, not ${signal}`);
    await handle.finalizeExec?.({ status: "failed", exitCode: null, timedOut: signal === "SIGKILL", token: spec.finalizeToken });
  };
  const kinds = [
    (i) => killed(i, "SIGKILL", false),
    (i) => killed(i, "SIGTERM", false),
    (i) => killed(i, "SIGKILL", true),
    async (i) => {
      const controller = new AbortController();
      const pending = handle.runShellCommand({ script: command(i), signal: controller.signal });
      setTimeout(() => controller.abort(), 200);
      await assert.rejects(pending);
    },
  ];
  for (let i = 0; i < 20; i++) await kinds[i % kinds.length](i);
  const after = await warm();
  sh(host, `timeout 20 sh -c 'while pgrep -f "${pattern}" >/dev/null; do sleep 0.05; done'; true`);
  return { before, after, left: sh(host, `pgrep -af "${pattern}"; true`) };
}

/** `before` and `after` of abortTwenty as a line. */
export function timesText(before, after) {
  const op = (name, label) => `${label} ${after[name].toFixed(1)} ms (warm ${before[name].toFixed(1)} ms, ${(after[name] / before[name]).toFixed(2)}x)`;
  return `${op("exec", "exec true")}, ${op("read", "read")}`;
}
