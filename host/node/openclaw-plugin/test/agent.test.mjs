// Real OpenClaw runs a real agent turn with the component as its sandbox:
// `openclaw agent --local` (2026.9.6, Node 24) loads the plugin from
// plugins.load.paths, selects agents.defaults.sandbox.backend "occ-ssh", and
// its coding tools (write, exec, edit, read) run on a rig host through the
// host and the component. The model is a scripted OpenAI-compatible endpoint
// in this test that asks for one tool per turn; what the tools returned comes
// back to it, and the test reads the remote workspace over SSH. One turn is
// served by `openclaw gateway` itself (the client without --local), so the
// plugin must register in the gateway's own process.
//
//   OCC_RIG=/run/occ-rig-sandbox OCC_DRIVER_HOST=.../occ-driver-host \
//     $NODE24 --test host/node/openclaw-plugin/test/agent.test.mjs

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

import { agentTurn, scriptedModel, scriptedProvider, toolResults } from "./model.mjs";
import { approvedScripts, component, DEFAULT_PATH, hostBinary, PATHS, rig, sh, testEachPath, unique } from "./rig.mjs";

const host = rig.hosts[0];
const plugin = join(dirname(fileURLToPath(import.meta.url)), "..");

testEachPath("an OpenClaw agent turn runs its tools in the component's sandbox", { timeout: 300_000 }, async (path) => {
  const steps = [
    { tool: "write", args: { path: "agent-note.txt", content: "written by an agent turn\n" } },
    { tool: "exec", args: { command: "cat agent-note.txt seed.txt; uname -n" } },
    { tool: "edit", args: { path: "agent-note.txt", oldText: "an agent turn", newText: "an edited agent turn" } },
    { tool: "read", args: { path: "agent-note.txt" } },
    { text: "done" },
  ];
  const { results, workspaceRoot, remote } = await turn("occ-ssh", steps, {
    path,
    message: "write a note and show it",
    inspect: (root) => sh(host, `cat ${root}/*/workspace/agent-note.txt`),
  });
  assert.equal(results.length, 4, JSON.stringify(results));
  const workdirPattern = new RegExp(`${workspaceRoot}/openclaw-ssh-workspace-[0-9a-f]{32}/workspace/agent-note.txt`);
  assert.match(results[0], workdirPattern, "write went to the remote workspace");
  // exec ran on the rig host, in the seeded workspace.
  assert.equal(results[1].trimEnd(), `written by an agent turn\nseeded from the agent workspace\n${host.name}`);
  assert.match(results[2], /Successfully replaced 1 block/);
  assert.match(results[3], /written by an edited agent turn/);
  assert.equal(remote, "written by an edited agent turn");
});

test("openclaw sandbox explain names the remote workdir, as for OpenClaw's own ssh backend, with the target unreachable", { timeout: 300_000 }, async () => {
  const base = mkdtempSync(join(tmpdir(), "occ-explain-"));
  // TEST-NET-1: nothing answers there; an explain that connected would fail.
  const target = "root@192.0.2.1:22";
  const workspaceRoot = `/tmp/${unique("occ-sbx-explain")}`;
  try {
    for (const d of ["home", "state", "workspace"]) mkdirSync(join(base, d));
    const explain = (backend) => {
      writeFileSync(join(base, "state/openclaw.json"), JSON.stringify(openclawConfig({ base, backend, workspaceRoot, target })));
      const env = { ...process.env, HOME: join(base, "home"), OPENCLAW_STATE_DIR: join(base, "state"), OPENCLAW_CONFIG_PATH: join(base, "state/openclaw.json") };
      const r = spawnSync(process.execPath, [rig.openclaw, "sandbox", "explain", "--session", "agent:main:main", "--json"], { env, encoding: "utf8", timeout: 120_000 });
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout.slice(r.stdout.indexOf("{")));
    };
    const theirs = explain("ssh");
    const ours = explain("occ-ssh");
    const workdirs = (x) => JSON.stringify(x).match(new RegExp(`${workspaceRoot}/[^"]*`, "g")) ?? [];
    assert.ok(workdirs(theirs).length > 0, `OpenClaw's own backend names a remote workdir: ${JSON.stringify(theirs)}`);
    assert.deepEqual(workdirs(ours), workdirs(theirs), "ours names the same remote workdir");
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

/**
 * OpenClaw's configuration for a turn or a CLI run in `base`: the plugin
 * loaded from this checkout, `backend` as the sandbox backend on `target`
 * (the rig host unless given), and the scripted model at `modelPort`.
 */
function openclawConfig({ base, backend, workspaceRoot, modelPort = 9, execTimeoutSeconds, target = `root@${host.address}:22`, pluginConfig = {}, path = DEFAULT_PATH }) {
  return {
    plugins: {
      load: { paths: [plugin] },
      entries: { "occ-ssh": { enabled: true, config: { component, approvedScripts: approvedScripts(), hostBinary, localWorkspaces: [base], ...path.config, ...pluginConfig } } },
    },
    models: scriptedProvider(modelPort),
    tools: { profile: "coding", ...(execTimeoutSeconds ? { exec: { timeoutSeconds: execTimeoutSeconds } } : {}) },
    agents: {
      defaults: {
        workspace: join(base, "workspace"),
        model: { primary: "scripted/steps" },
        sandbox: {
          mode: "all",
          backend,
          scope: "session",
          workspaceAccess: "rw",
          ssh: { target, workspaceRoot, identityFile: rig.identity, knownHostsFile: rig.knownHosts, updateHostKeys: false },
        },
      },
    },
  };
}

/**
 * The environment of an OpenClaw run in `base`, with the host's ssh log at
 * debug: a failed turn prints OpenClaw's stderr, which carries the host's
 * (the plugin passes it on), and says where the time went.
 */
function turnEnv(base) {
  return {
    ...process.env,
    RUST_LOG: process.env.RUST_LOG ?? "warn,occ_driver_host::capability::ssh_exec=debug",
    HOME: join(base, "home"),
    OPENCLAW_STATE_DIR: join(base, "state"),
    OPENCLAW_CONFIG_PATH: join(base, "state/openclaw.json"),
  };
}

/**
 * One turn of `steps` (model steps) with `backend` as the sandbox backend on
 * a rig host, from a workspace holding seed.txt; the tool results the model
 * saw, where the workspace root was, and what `inspect(workspaceRoot)` found
 * there before it was removed.
 */
async function turn(backend, steps, { execTimeoutSeconds, message = "talk to a process", inspect, pluginConfig, target, path } = {}) {
  const base = mkdtempSync(join(tmpdir(), "occ-agent-"));
  const workspaceRoot = `/tmp/${unique(`occ-sbx-agent-${backend}`)}`;
  const model = await scriptedModel(steps);
  try {
    for (const d of ["home", "state", "workspace"]) mkdirSync(join(base, d));
    writeFileSync(join(base, "workspace/seed.txt"), "seeded from the agent workspace\n");
    const config = openclawConfig({ base, backend, workspaceRoot, modelPort: model.port, execTimeoutSeconds, pluginConfig, target, path });
    writeFileSync(join(base, "state/openclaw.json"), JSON.stringify(config));
    const env = turnEnv(base);
    const { code, stderr } = await agentTurn(rig.openclaw, env, message);
    assert.equal(code, 0, stderr);
    return { results: toolResults(model.requests), requests: model.requests, workspaceRoot, remote: inspect?.(workspaceRoot) };
  } finally {
    model.server.close();
    sh(host, `rm -rf ${workspaceRoot}`);
    rmSync(base, { recursive: true, force: true });
  }
}

test("an agent turn writes to a running command's stdin and outlives no exec timeout, as with OpenClaw's own backend", { timeout: 600_000 }, async () => {
  const session = (results) => /session ([A-Za-z0-9_-]+)/.exec(results[0] ?? "")?.[1] ?? "none";
  const steps = [
    // Both lines are read before anything is printed, and printed in one
    // write: OpenClaw's poll returns as soon as any output is pending, not
    // when the process ends, so output printed between the two writes made
    // the log that follows hold only the first line whenever the second's
    // round trip outlasted two tool calls (seen once on a loaded machine).
    { tool: "exec", args: { command: `read line; read again; printf 'got %s\\nthen %s\\n' "$line" "$again"`, background: true } },
    (r) => ({ tool: "process", args: { action: "write", sessionId: session(r), data: "hello\n" } }),
    (r) => ({ tool: "process", args: { action: "write", sessionId: session(r), data: "world\n", eof: true } }),
    (r) => ({ tool: "process", args: { action: "poll", sessionId: session(r), timeout: 20000 } }),
    (r) => ({ tool: "process", args: { action: "log", sessionId: session(r) } }),
    // Longer than the exec timeout the configuration sets (3 s).
    { tool: "exec", args: { command: "echo before; sleep 60; echo late-output" } },
    { text: "done" },
  ];
  // Ours on each path; each timed-out command is gone from the target
  // (checked before the next turn runs the same one).
  const oursOn = [];
  for (const path of PATHS) {
    oursOn.push({ path, ours: await turn("occ-ssh", steps, { execTimeoutSeconds: 3, path }) });
    assert.equal(sh(host, "pgrep -f 'sleep 6[0]; echo late-output' || echo none"), "none", path.name);
  }
  // OpenClaw's own backend is the reference here, not the subject: on a
  // loaded machine its background exec (a fresh ssh per step) has once come
  // back without a session. Its first answer is printed, and its turn run
  // once more, so that the comparison is with a reference that ran.
  let theirs = await turn("ssh", steps, { execTimeoutSeconds: 3 });
  if (session(theirs.results) === "none") {
    process.stderr.write(`OpenClaw's own backend started no session; its first answer: ${theirs.results[0]}\n`);
    theirs = await turn("ssh", steps, { execTimeoutSeconds: 3 });
  }
  assert.notEqual(session(theirs.results), "none", `OpenClaw's own backend started no session: ${JSON.stringify(theirs.results)}`);
  for (const { path, ours } of oursOn) {
    assert.equal(ours.results.length, 6, `${path.name}: ${JSON.stringify(ours.results)}`);
    // Session ids, process ids and timings differ between runs; the rest is
    // what the Agent sees, and is the same.
    const shaped = (results) =>
      results.map((r) =>
        r
          .replace(/session [A-Za-z0-9_-]+/g, "session S")
          .replace(/"sessionId":"[^"]*"/g, '"sessionId":"S"')
          .replace(/pid [0-9]+/g, "pid P")
          .replace(/[0-9.]+ ?m?s\b/g, "T"),
      );
    assert.match(ours.results[1], /Wrote 6 bytes/);
    assert.match(ours.results[2], /Wrote 6 bytes .*\(stdin closed\)/);
    assert.match(ours.results[4], /got hello\nthen world/);
    assert.match(ours.results[5], /before/);
    assert.match(ours.results[5], /timed out/i);
    assert.doesNotMatch(ours.results[5], /late-output/);
    assert.deepEqual(shaped([ours.results[4], ours.results[5]]), shaped([theirs.results[4], theirs.results[5]]), path.name);
    assert.deepEqual(shaped(ours.results.slice(1, 3)), shaped(theirs.results.slice(1, 3)), path.name);
  }
});

test("the Agent's system prompt names the remote workdir with the target unreachable, as with OpenClaw's own ssh backend", { timeout: 300_000 }, async () => {
  // TEST-NET-1: nothing answers there; a handle that connected would fail
  // the turn before the model is asked anything.
  const target = "root@192.0.2.1:22";
  const prompt = async (backend) => {
    const r = await turn(backend, [{ text: "done" }], { target, message: "where do your tools run?" });
    const system = (r.requests[0]?.messages ?? []).filter((m) => m.role === "system" || m.role === "developer");
    const text = system.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
    return { text, root: r.workspaceRoot };
  };
  const ours = await prompt("occ-ssh");
  const theirs = await prompt("ssh");
  // Each turn has a local workspace of its own, which the runtime id hashes.
  const lines = ({ text, root }) =>
    text
      .split("\n")
      .filter((l) => l.includes(root))
      .map((l) => l.replaceAll(root, "<workspaceRoot>").replace(/openclaw-ssh-workspace-[0-9a-f]{32}/g, "<runtimeId>").replace(/\/tmp\/occ-agent-[A-Za-z0-9]+/g, "<base>"));
  const workdir = "Sandbox container workdir: <workspaceRoot>/<runtimeId>/workspace";
  process.stderr.write(`the prompt's lines that name the workspace root: ours ${lines(ours).length}, OpenClaw's own backend ${lines(theirs).length}\n`);
  assert.ok(lines(theirs).includes(workdir), `OpenClaw's own backend names the remote workdir in the prompt: ${theirs.text}`);
  assert.ok(lines(ours).includes(workdir), `ours names the remote workdir in the prompt: ${ours.text}`);
  assert.deepEqual(lines(ours), lines(theirs));
});

/** Whether the rig host's sshd takes a TCP connection now. */
function sshdAnswers() {
  return spawnSync("bash", ["-c", `exec 3<>/dev/tcp/${host.address}/22`], { timeout: 5_000 }).status === 0;
}

/**
 * The rig host's sshd down for `seconds`: the listener stopped and every
 * session's process killed (the host's connection among them), then started
 * again, by a unit of the host's own systemd. Returns once the outage has
 * begun; true when sshd then refused a connection.
 */
function sshdOutage(seconds) {
  const unit = unique("occ-outage");
  sh(host, `systemd-run --quiet --collect --unit ${unit} sh -c 'sleep 0.5; systemctl stop ssh.service; pkill -x sshd; pkill -x sshd-session; sleep ${seconds}; systemctl start ssh.service'`);
  spawnSync("sleep", ["1"]);
  return !sshdAnswers();
}

/** Wait (up to a minute) for the rig host's sshd to take connections again. */
function sshdBack() {
  for (let i = 0; i < 300 && !sshdAnswers(); i++) spawnSync("sleep", ["0.2"]);
  return sshdAnswers();
}

test("bounded reconnects: sshd down 3 s mid-turn, the next tool waits and runs once; down past reconnectSeconds, the tool's error names the target and the budget, and nothing ran; OpenClaw's own backend fails the first", { timeout: 400_000 }, async () => {
  // Each command appends a line to a counter file on the target: a command
  // run twice, or run despite the error, shows there.
  const counter = (tag) => ({ tool: "exec", args: { command: `echo ${tag} >> counter.txt; echo counted ${tag}` } });
  const stepsOf = (outages, { long }) => [
    counter("first"),
    () => {
      outages.push(sshdOutage(3));
      return counter("during-short");
    },
    ...(long
      ? [
          () => {
            sshdBack();
            outages.push(sshdOutage(15));
            return counter("during-long");
          },
        ]
      : []),
    () => {
      outages.push(sshdBack());
      return counter("after");
    },
    { tool: "read", args: { path: "counter.txt" } },
    { text: "done" },
  ];
  const inspect = (root) => sh(host, `cat ${root}/*/workspace/counter.txt`);
  for (const path of PATHS) {
    const outages = [];
    const ours = await turn("occ-ssh", stepsOf(outages, { long: true }), { message: "count", pluginConfig: { reconnectSeconds: 5 }, inspect, path });
    assert.deepEqual(outages, [true, true, true], `${path.name}: sshd refused connections during each outage and came back`);
    const [first, short, long, after, read] = ours.results;
    process.stderr.write(`past the budget, the tool answered (${path.name}): ${long}\n`);
    assert.match(first, /counted first/);
    // The short outage is waited out: the command ran, once.
    assert.match(short, /counted during-short/);
    // The long one is not: one error naming the target and the budget.
    assert.doesNotMatch(long, /counted/);
    assert.match(long, new RegExp(`root@${host.address.replaceAll(".", "\\.")}:22`));
    assert.match(long, /reconnect budget of 5 s/);
    // The scope serves again once the target is back.
    assert.match(after, /counted after/);
    assert.match(read, /first\nduring-short\nafter/);
    assert.equal(ours.remote, "first\nduring-short\nafter", path.name);
  }
  // The documented difference: OpenClaw's own backend runs a fresh ssh per
  // call and tries once, so the call in the short outage fails (#105462).
  const theirOutages = [];
  const theirs = await turn("ssh", stepsOf(theirOutages, { long: false }), { message: "count", inspect });
  assert.deepEqual(theirOutages, [true, true]);
  process.stderr.write(`in a 3 s outage, OpenClaw's own backend answered: ${theirs.results[1]}\n`);
  assert.match(theirs.results[0], /counted first/);
  assert.doesNotMatch(theirs.results[1], /counted/);
  assert.match(theirs.results[2], /counted after/);
  assert.equal(theirs.remote, "first\nafter");
});

test("a turn the gateway serves runs its tools in the component's sandbox: the plugin registers in the gateway's process", { timeout: 600_000 }, async () => {
  const base = mkdtempSync(join(tmpdir(), "occ-gateway-"));
  const workspaceRoot = `/tmp/${unique("occ-sbx-gateway")}`;
  const steps = [
    { tool: "write", args: { path: "gateway-note.txt", content: "written in a gateway turn\n" } },
    { tool: "exec", args: { command: "cat gateway-note.txt; uname -n" } },
    { text: "done" },
  ];
  const model = await scriptedModel(steps);
  // A port nothing listens on now.
  const port = await new Promise((resolve) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  const token = `occ-test-${unique("token")}`;
  let gateway;
  try {
    for (const d of ["home", "state", "workspace"]) mkdirSync(join(base, d));
    const config = {
      ...openclawConfig({ base, backend: "occ-ssh", workspaceRoot, modelPort: model.port }),
      gateway: { mode: "local", port, bind: "loopback", auth: { mode: "token", token } },
    };
    writeFileSync(join(base, "state/openclaw.json"), JSON.stringify(config));
    const env = turnEnv(base);
    // In a process group of its own, so that it goes with everything it started.
    gateway = spawn(process.execPath, [rig.openclaw, "gateway", "--port", String(port)], { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let log = "";
    gateway.stdout.on("data", (d) => (log += d));
    gateway.stderr.on("data", (d) => (log += d));
    const listening = await new Promise((resolve) => {
      const timer = setInterval(() => {
        if (/http server listening/.test(log)) done(true);
      }, 100);
      const done = (ok) => {
        clearInterval(timer);
        clearTimeout(limit);
        resolve(ok);
      };
      const limit = setTimeout(() => done(false), 120_000);
      gateway.on("exit", () => done(false));
    });
    assert.ok(listening, `the gateway did not start:\n${log}`);
    // The turn goes to the gateway (no --local): the gateway's process runs
    // it, loads the plugin and spawns the serving host. Not spawnSync: the
    // scripted model answers from this process's event loop.
    const client = spawn(process.execPath, [rig.openclaw, "agent", "--session-key", "agent:main:main", "--message", "write a note and show it", "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let clientErr = "";
    client.stderr.on("data", (d) => (clientErr += d));
    client.stdout.resume();
    const status = await new Promise((resolve) => client.on("exit", resolve));
    assert.equal(status, 0, `${clientErr}\n--- gateway:\n${log}`);
    const results = toolResults(model.requests);
    assert.equal(results.length, 2, JSON.stringify(results));
    assert.match(results[0], new RegExp(`${workspaceRoot}/openclaw-ssh-workspace-[0-9a-f]{32}/workspace/gateway-note.txt`));
    assert.equal(results[1].trimEnd(), `written in a gateway turn\n${host.name}`);
    // The serving host is the gateway's child, not the client's.
    const servers = spawnSync("pgrep", ["-P", String(gateway.pid), "-f", "occ-driver-host serve"], { encoding: "utf8" }).stdout.trim();
    assert.notEqual(servers, "", `no serving host under the gateway (pid ${gateway.pid})`);
  } finally {
    // Its state goes only once the gateway and what it started (its spawn
    // broker, the serving host) have stopped writing it.
    if (gateway) {
      const alive = () => {
        try {
          process.kill(-gateway.pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      if (alive()) process.kill(-gateway.pid, "SIGTERM");
      for (let i = 0; i < 200 && alive(); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      if (alive()) process.kill(-gateway.pid, "SIGKILL");
    }
    model.server.close();
    sh(host, `rm -rf ${workspaceRoot}`);
    rmSync(base, { recursive: true, force: true });
  }
});
