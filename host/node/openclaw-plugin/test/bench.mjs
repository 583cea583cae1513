// The sandbox benchmark: OpenClaw's own SSH backend (the installed openclaw
// package: its backend factory, its fs bridge, its exec spec, its edit tool)
// against ours (occ-ssh: the sandbox.mjs client over `occ-driver-host serve`),
// on the same target and the same kind of scope, measured pair by pair (ours,
// theirs, ours, theirs ...) in one run, beside the floors of the transport.
// Prints one Markdown table on stdout; progress goes to stderr. Figures are
// printed, never asserted: they vary with the machine's load.
//
//   bash tests/bench-sandbox.sh        # brings up the rig host, then runs this with Node 24
//
// Only public surfaces are used (the client, the CLI), so the bench measures
// whatever the host does underneath. Environment:
//   OCC_RIG, OCC_BENCH_HOST   the rig and its host (default: the rig's first host)
//   OCC_DRIVER_HOST, OCC_SANDBOX_COMPONENT   the binaries under test
//   OCC_BENCH_N=20            pairs per operation row and per floor row
//   OCC_BENCH_SEED_N=3        first uses per seeding row
//   OCC_BENCH_ROUNDS=5        rounds of write/read/stat per scope, per concurrency level
//   OCC_BENCH_RT_N=200        round trips on the open channel
//   OCC_BENCH_LATENCY_MS=25   the latency section's delay each way (a relay of
//                             tests/rig/relay.mjs in front of the target: a
//                             round trip costs twice this)
//   OCC_BENCH_LEVELS=1,4,16,64   the concurrency section's numbers of scopes
//   OCC_BENCH_ONLY=floor,ops,breakdown,seed,concurrency,latency   a subset of the sections
//   OCC_BENCH_JSON=FILE       also write every sample there
//   OCC_BENCH_HOST_LOG=FILE   append the serve process's stderr there (with
//                             RUST_LOG=occ_driver_host=debug: each exec's time)
//   OCC_BENCH_MARKS=FILE      append `begin <stretch>` and `end <stretch>` around each concurrency run

import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

import { startSandboxHost } from "../sandbox.mjs";
import { component, hostBinary, installation, repo, rig, sshBlock, unique } from "./rig.mjs";

const int = (name, fallback) => {
  const v = Number.parseInt(process.env[name] ?? "", 10);
  return Number.isFinite(v) && v > 0 ? v : fallback;
};
const N = int("OCC_BENCH_N", 20);
const SEED_N = int("OCC_BENCH_SEED_N", 3);
const ROUNDS = int("OCC_BENCH_ROUNDS", 5);
const RT_N = int("OCC_BENCH_RT_N", 200);
const LEVELS = (process.env.OCC_BENCH_LEVELS ?? "1,4,16,64").split(",").map(Number).filter((n) => n > 0);
const LATENCY_MS = int("OCC_BENCH_LATENCY_MS", 25);
const only = new Set((process.env.OCC_BENCH_ONLY ?? "floor,ops,breakdown,seed,concurrency,latency").split(",").map((s) => s.trim()));

const host = process.env.OCC_BENCH_HOST ? rig.hosts.find((h) => h.name === process.env.OCC_BENCH_HOST) : rig.hosts[0];
if (!host) throw new Error(`no host ${process.env.OCC_BENCH_HOST ?? ""} in the rig's hosts.json`);
const openclawDir = dirname(dirname(rig.openclaw));
const dist = join(openclawDir, "dist");
const sdk = await import(pathToFileURL(join(dist, "plugin-sdk/sandbox.js")).href);
const openclawVersion = JSON.parse(readFileSync(join(openclawDir, "package.json"), "utf8")).version;

/**
 * OpenClaw's own edit tool (`createSandboxedEditTool`, what an Agent's `edit`
 * runs with a sandbox), from the bundle chunk that exports it: the chunk's
 * name carries a content hash, its export list names the binding.
 */
async function openclawEditTool() {
  for (const name of readdirSync(dist).filter((n) => /^agent-tools\.read-.*\.mjs$/.test(n))) {
    const text = readFileSync(join(dist, name), "utf8");
    const alias = text.match(/createSandboxedEditTool as (\w+)/)?.[1];
    if (alias) return (await import(pathToFileURL(join(dist, name)).href))[alias];
  }
  throw new Error(`OpenClaw's createSandboxedEditTool not found in ${dist}`);
}
const createSandboxedEditTool = await openclawEditTool();

/** The scripts the component under test carries, as `occ-driver-host inspect` prints them. */
function carriedScripts() {
  const out = execFileSync(hostBinary, ["inspect", component], { encoding: "utf8" });
  const scripts = Object.fromEntries([...out.matchAll(/^script\s+(\S+)\s+sha256\s+([0-9a-f]{64})/gm)].map((m) => [m[1], m[2]]));
  if (!Object.keys(scripts).length) throw new Error(`inspect ${component} names no scripts`);
  return scripts;
}
const approved = carriedScripts();

// --- timing and statistics ---------------------------------------------------------

const now = () => Number(process.hrtime.bigint()) / 1e6;
async function timed(f) {
  const t = now();
  const value = await f();
  return { ms: now() - t, value };
}
function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  if (!s.length) return null;
  const mid = s.length >> 1;
  return {
    n: s.length,
    median: s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2,
    min: s[0],
    max: s.at(-1),
    p90: s[Math.min(s.length - 1, Math.ceil(0.9 * s.length) - 1)],
  };
}
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(2)} ms`);
const range = (st) => `${fmt(st.median)} (${fmt(st.min)} to ${fmt(st.max)})`;
const p90 = (st) => `${fmt(st.median)} (p90 ${fmt(st.p90)})`;
/** Baseline over measured, worded. */
function ratio(measured, baseline) {
  const r = baseline / measured;
  return r >= 1 ? `${r.toFixed(r >= 10 ? 0 : 1)}x faster` : `${(1 / r).toFixed(1)}x slower`;
}
const say = (m) => process.stderr.write(`bench: ${m}\n`);
/** With OCC_BENCH_MARKS=FILE, a line there as a measured stretch begins and ends (for a profiler watching from outside). */
const mark = (m) => process.env.OCC_BENCH_MARKS && appendFileSync(process.env.OCC_BENCH_MARKS, `${m}\n`);

// --- processes and the plain ssh baselines -----------------------------------------

/** Run argv to its end: its exit code and output. */
function run(argv, { input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    const out = [];
    const err = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => err.push(d));
    child.on("error", reject);
    child.stdin.on("error", () => {});
    child.stdin.end(input ?? "");
    child.on("exit", (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}
async function ok(argv, options) {
  const r = await run(argv, options);
  if (r.code !== 0) throw new Error(`${argv.join(" ")}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

const base = mkdtempSync(join(tmpdir(), "occ-bench-"));
// The options OpenClaw's backend writes into its per-operation ssh config,
// for the same target: the plain-ssh baselines use exactly these.
const sshConfig = join(base, "ssh_config");
writeFileSync(
  sshConfig,
  [
    "Host bench-target",
    `  HostName ${host.address}`,
    `  Port ${host.port ?? 22}`,
    "  User root",
    "  BatchMode yes",
    "  ConnectTimeout 5",
    "  ServerAliveInterval 15",
    "  ServerAliveCountMax 3",
    "  StrictHostKeyChecking yes",
    "  UpdateHostKeys no",
    `  UserKnownHostsFile ${rig.knownHosts}`,
    `  IdentityFile ${rig.identity}`,
    "  IdentitiesOnly yes",
    "  LogLevel ERROR",
    "",
  ].join("\n"),
  { mode: 0o600 },
);
const controlSocket = join(base, "master.sock");
const freshSsh = (command) => ["ssh", "-F", sshConfig, "-T", "bench-target", command];
const muxSsh = (command) => ["ssh", "-F", sshConfig, "-S", controlSocket, "-o", "ControlMaster=no", "-T", "bench-target", command];

/** A ControlMaster with the rig's key and known hosts, for the floors, the tar baseline and cleanup. */
async function startMaster() {
  const child = spawn("ssh", ["-F", sshConfig, "-M", "-S", controlSocket, "-o", "ControlPersist=no", "-N", "bench-target"], { stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    if ((await run(["ssh", "-F", sshConfig, "-S", controlSocket, "-O", "check", "bench-target"])).code === 0) return child;
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error("the ControlMaster did not come up");
}
const remote = (command) => ok(muxSsh(command));

// --- local workspaces ----------------------------------------------------------------

const KIB = Buffer.alloc(1024, "x");
const EDIT_TEXT = Array.from({ length: 40 }, (_, i) => `line ${i}: the quick brown fox\n`).join("") + "marker: alpha\n";

/** The workspace the operations and concurrency rows use: 1 KiB files, a file to edit, 100 entries. */
function smallWorkspace(dir) {
  mkdirSync(join(dir, "bench"), { recursive: true });
  mkdirSync(join(dir, "dir100"));
  writeFileSync(join(dir, "README.md"), "benchmark workspace\n");
  writeFileSync(join(dir, "bench/r.txt"), KIB);
  writeFileSync(join(dir, "bench/1mib.bin"), randomBytes(1 << 20));
  writeFileSync(join(dir, "edit.txt"), EDIT_TEXT);
  for (let i = 0; i < 100; i++) writeFileSync(join(dir, "dir100", `entry-${String(i).padStart(3, "0")}.txt`), `${i}\n`);
}
/** 100 MiB in four files that do not compress. */
function bigWorkspace(dir) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < 4; i++) writeFileSync(join(dir, `blob-${i}.bin`), randomBytes(25 << 20));
}
/** 20,000 files of 1 KiB, in 20 directories of 1,000. */
function manyWorkspace(dir) {
  for (let d = 0; d < 20; d++) {
    const sub = join(dir, `d${String(d).padStart(2, "0")}`);
    mkdirSync(sub, { recursive: true });
    for (let f = 0; f < 1000; f++) writeFileSync(join(sub, `f${String(f).padStart(4, "0")}.txt`), randomBytes(1024));
  }
}

// --- the two backends ------------------------------------------------------------------

const local = (name) => ({ workspace: join(base, name) });
/** OpenClaw's resolved sandbox config, as its factory receives it (as in openclaw.test.mjs). */
function openclawCfg(ssh) {
  return { mode: "all", backend: "ssh", scope: "session", workspaceAccess: "rw", docker: { env: {}, binds: [] }, browser: { enabled: false }, ssh: { command: "ssh", ...ssh } };
}
function params(ws, sessionKey, cfg) {
  const scopeKey = `${sessionKey}:workspace:${createHash("sha256").update(ws.workspace).digest("hex").slice(0, 32)}`;
  return { sessionKey, scopeKey, workspaceDir: ws.workspace, agentWorkspaceDir: ws.workspace, cfg };
}
function bridgeContext(ws, handle) {
  return {
    workspaceDir: ws.workspace,
    agentWorkspaceDir: ws.workspace,
    workspaceAccess: "rw",
    containerName: handle.runtimeId,
    containerWorkdir: handle.workdir,
    docker: { binds: [] },
    backend: { runShellCommand: (p) => handle.runShellCommand(p) },
  };
}
/** Ours: one `occ-driver-host serve` for the installation, through the client. */
function startOurs(workspaceRoot) {
  const doc = installation({ ssh: sshBlock(host, workspaceRoot), localWorkspaces: [base] });
  doc.drivers.sandbox.approvedScripts = approved;
  return startSandboxHost({ installation: doc, hostBinary, onStderr: process.env.OCC_BENCH_HOST_LOG ? (c) => appendFileSync(process.env.OCC_BENCH_HOST_LOG, c) : undefined });
}
const theirFactory = sdk.getSandboxBackendFactory("ssh");
const theirHandle = (ws, session, workspaceRoot, extra) => theirFactory(params(ws, session, openclawCfg(sshBlock(host, workspaceRoot, extra))));

/** One scope's tools: its bridge and OpenClaw's edit tool over it. */
function tools(ws, handle) {
  const bridge = handle.createFsBridge({ sandbox: bridgeContext(ws, handle) });
  const edit = createSandboxedEditTool({ root: ws.workspace, bridge });
  let marker = "alpha";
  return {
    handle,
    bridge,
    /** One edit that changes the file, alternating so that each one does. */
    async edit() {
      const next = marker === "alpha" ? "beta" : "alpha";
      const r = await edit.execute("bench-edit", { path: "edit.txt", edits: [{ oldText: `marker: ${marker}`, newText: `marker: ${next}` }] });
      const text = r.content?.[0]?.text ?? "";
      if (!text.startsWith("Successfully replaced")) throw new Error(`edit: ${text}`);
      marker = next;
    },
  };
}

/** Run what a handle's buildExecSpec returns, as OpenClaw's supervisor does; then finalize. */
async function exec(handle, command) {
  const spec = await handle.buildExecSpec({ command, env: {}, usePty: false });
  const child = spawn(spec.argv[0], spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: ["pipe", "ignore", "pipe"] });
  child.stdin.end();
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  await handle.finalizeExec?.({ status: code === 0 ? "completed" : "failed", exitCode: code, timedOut: false, token: spec.finalizeToken });
  if (code !== 0) throw new Error(`exec ${command}: exit ${code}: ${stderr.trim()}`);
}

/** The operations of the operation rows, by name: what each does through a scope's tools. */
const OPERATIONS = [
  ["write 1 KiB", "`bridge.writeFile`", (t) => t.bridge.writeFile({ filePath: "bench/w.txt", data: KIB, mkdir: true })],
  [
    "read 1 KiB",
    "`bridge.readFile`",
    async (t) => {
      if ((await t.bridge.readFile({ filePath: "bench/r.txt" })).length !== 1024) throw new Error("read: not 1 KiB");
    },
  ],
  [
    "stat",
    "`bridge.stat` of a file",
    async (t) => {
      if ((await t.bridge.stat({ filePath: "bench/r.txt" }))?.size !== 1024) throw new Error("stat: wrong size");
    },
  ],
  [
    "readDirectory, 100 entries",
    "`bridge.readDirectory`",
    async (t) => {
      if ((await t.bridge.readDirectory({ filePath: "dir100" })).length !== 100) throw new Error("readDirectory: not 100 entries");
    },
  ],
  // The tool checks the file (stat), reads it, writes it and verifies the
  // write (stat, read): five bridge calls, and for OpenClaw's bridge a
  // canonical-path lookup first for its mutation queue.
  ["edit", "OpenClaw's `edit` tool over the bridge: stat, read, write, stat, read", (t) => t.edit()],
  ["exec `true`", "`buildExecSpec`, spawn, `finalizeExec`", (t) => exec(t.handle, "true")],
  ["exec `cat` of 1 MiB", "`buildExecSpec`, spawn (its stdout read to the end), `finalizeExec`", (t) => exec(t.handle, "cat bench/1mib.bin")],
];

/** The first use of a fresh scope: the handle, and one shell command, which seeds. */
const firstUse = async (make) => {
  const handle = await make();
  await handle.runShellCommand({ script: "true" });
  return handle;
};
const scopeRoot = (handle) => dirname(handle.workdir);

// --- the sections ----------------------------------------------------------------------

const rows = [];
const samples = {};
const row = (benchmark, measured, baseline, r) => rows.push({ benchmark, measured, baseline, ratio: r });

async function floorSection() {
  say(`floor: ${N} rounds of ssh -S true, a fresh ssh true and ssh -S python3, then ${RT_N} round trips on an open channel`);
  const mux = [];
  const fresh = [];
  const python = [];
  for (let i = 0; i < N; i++) {
    mux.push((await timed(() => ok(muxSsh("true")))).ms);
    fresh.push((await timed(() => ok(freshSsh("true")))).ms);
    python.push((await timed(() => ok(muxSsh("python3 -c ''")))).ms);
  }
  // One long-lived `cat` over the master: a line out, the same line back.
  const cat = spawn(muxSsh("cat")[0], muxSsh("cat").slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  let buffered = "";
  let waiter = null;
  cat.stdout.setEncoding("utf8");
  cat.stdout.on("data", (d) => {
    buffered += d;
    if (waiter && buffered.includes("\n")) {
      buffered = "";
      waiter();
    }
  });
  const roundTrip = () => new Promise((resolve) => ((waiter = resolve), cat.stdin.write("ping\n")));
  for (let i = 0; i < 5; i++) await roundTrip();
  const rt = [];
  for (let i = 0; i < RT_N; i++) rt.push((await timed(roundTrip)).ms);
  cat.stdin.end();
  await new Promise((r) => cat.on("exit", r));
  const [m, f, py, r] = [stats(mux), stats(fresh), stats(python), stats(rt)];
  Object.assign(samples, { floorMux: mux, floorFresh: fresh, floorPython: python, floorRoundTrip: rt });
  row("floor: `ssh -S <master> host true` (a new session on an open ControlMaster)", range(m), `a fresh \`ssh host true\` ${range(f)}`, ratio(m.median, f.median));
  // The remote side of a sandbox script that is Python (both backends run python3 on the target).
  row("floor: `ssh -S <master> host python3 -c ''` (a Python start on the target)", range(py), `\`ssh -S <master> host true\` ${fmt(m.median)}`, ratio(py.median, m.median));
  row("floor: one round trip on an open channel (a line through a long-lived `ssh host cat`)", p90(r), `\`ssh -S <master> host true\` ${fmt(m.median)}`, ratio(r.median, m.median));
}

/** How many ssh processes OpenClaw's backend starts for each operation (an untimed pass through a counting wrapper). */
async function countTheirSsh(small) {
  const log = join(base, "ssh-count.log");
  const wrapper = join(base, "counting-ssh");
  writeFileSync(wrapper, `#!/bin/sh\necho x >> '${log}'\nexec ssh "$@"\n`);
  chmodSync(wrapper, 0o755);
  writeFileSync(log, "");
  const count = () => readFileSync(log, "utf8").length / 2;
  const root = `/tmp/${unique("occ-bench-count")}`;
  const counts = {};
  const handle = await firstUse(() => theirHandle(small, unique("agent:main:count"), root, { command: wrapper }));
  counts["first use"] = count();
  const t = tools(small, handle);
  for (const [name, , op] of OPERATIONS) {
    const before = count();
    await op(t);
    counts[name] = count() - before;
  }
  await remote(`rm -rf ${root}`);
  return counts;
}

let sshPerOp = {};

async function opsSection(ours, small) {
  const theirsRoot = `/tmp/${unique("occ-bench-openclaw")}`;
  const session = unique("agent:main:ops");
  say("operations: seeding one scope on each side");
  const mine = tools(small, await firstUse(() => ours.createHandle(params(small, session, null))));
  const theirs = tools(small, await firstUse(() => theirHandle(small, session, theirsRoot)));
  for (const [name, what, op] of OPERATIONS) {
    say(`operations: ${name}, ${N} pairs`);
    // One untimed pair first: nothing measured pays for a first call.
    await op(mine);
    await op(theirs);
    const a = [];
    const b = [];
    for (let i = 0; i < N; i++) {
      a.push((await timed(() => op(mine))).ms);
      b.push((await timed(() => op(theirs))).ms);
    }
    samples[`ops: ${name}`] = { ours: a, openclaw: b };
    const [sa, sb] = [stats(a), stats(b)];
    row(`${name} (${what})`, `occ-ssh ${range(sa)}`, `OpenClaw \`ssh\` ${range(sb)}, ${sshPerOp[name]} ssh processes`, ratio(sa.median, sb.median));
  }
  await remote(`rm -rf ${theirsRoot} ${scopeRoot(mine.handle)}`);
}

/**
 * Where a warm call of ours spends its time, measured on its own: the host's
 * side alone (`resolveWorkdir`, which the component answers without the
 * target: the Node client, JSON-RPC, a fresh instance) against a stat that
 * goes to the target, and exec `true` by phase.
 */
async function breakdownSection(ours, small) {
  say(`breakdown: where a warm call of ours spends its time, ${N * 5} samples each`);
  const mine = tools(small, await firstUse(() => ours.createHandle(params(small, unique("agent:main:breakdown"), null))));
  await mine.bridge.writeFile({ filePath: "bench/r.txt", data: KIB, mkdir: true });
  const refused = [];
  const stat = [];
  const phases = { build: [], relay: [], run: [], finalize: [] };
  for (let i = 0; i < N * 5; i++) {
    refused.push((await timed(() => ours.call("resolveWorkdir", { scope: mine.handle.scope }))).ms);
    stat.push((await timed(() => mine.bridge.stat({ filePath: "bench/r.txt" }))).ms);
    let t = now();
    const spec = await mine.handle.buildExecSpec({ command: "true", env: {}, usePty: false });
    phases.build.push(now() - t);
    t = now();
    const child = spawn(spec.argv[0], spec.argv.slice(1), { env: spec.env, cwd: spec.cwd, stdio: ["pipe", "ignore", "ignore"] });
    await new Promise((resolve) => child.on("spawn", resolve));
    phases.relay.push(now() - t);
    t = now();
    child.stdin.end();
    const code = await new Promise((resolve) => child.on("exit", resolve));
    phases.run.push(now() - t);
    t = now();
    await mine.handle.finalizeExec?.({ status: code === 0 ? "completed" : "failed", exitCode: code, timedOut: false, token: spec.finalizeToken });
    phases.finalize.push(now() - t);
    if (code !== 0) throw new Error(`exec true: exit ${code}`);
  }
  await remote(`rm -rf ${scopeRoot(mine.handle)}`);
  samples["breakdown"] = { refused, stat, ...phases };
  const [sr, ss] = [stats(refused), stats(stat)];
  row("breakdown: `resolveWorkdir`, a call the component answers alone (the host's side: the client, JSON-RPC, a fresh instance; no target)", `occ-ssh ${range(sr)}`, `a stat on the target ${range(ss)}`, `${(ss.median - sr.median).toFixed(2)} ms on the way to the target and back`);
  const m = (x) => stats(x).median;
  row(
    "breakdown: exec `true` by phase (medians)",
    `buildExecSpec ${m(phases.build).toFixed(2)} ms, spawn of the relay ${m(phases.relay).toFixed(2)} ms, its run to exit ${m(phases.run).toFixed(2)} ms, finalizeExec ${m(phases.finalize).toFixed(2)} ms`,
    "",
    "",
  );
}

async function seedSection(ours) {
  const workspaces = [
    ["100 MiB in 4 files", "big", bigWorkspace],
    ["20,000 files of 1 KiB", "many", manyWorkspace],
  ];
  const theirsRoot = `/tmp/${unique("occ-bench-seed-openclaw")}`;
  const tarRoot = `/tmp/${unique("occ-bench-seed-tar")}`;
  for (const [label, dir, make] of workspaces) {
    say(`seeding: writing the local workspace, ${label}`);
    const ws = local(dir);
    make(ws.workspace);
    const files = Number((await ok(["sh", "-c", `find '${ws.workspace}' -type f | wc -l`])).trim());
    const tar = (via, dest) => ok(["bash", "-o", "pipefail", "-c", `tar -C '${ws.workspace}' -cf - . | ${via.map((a) => `'${a}'`).join(" ")}`]).then(() => dest);
    const s = { ours: [], openclaw: [], tarMux: [], tarFresh: [] };
    for (let i = 0; i < SEED_N; i++) {
      say(`seeding: ${label}, round ${i + 1} of ${SEED_N}`);
      const session = unique("agent:main:seed");
      const a = await timed(() => firstUse(() => ours.createHandle(params(ws, session, null))));
      const b = await timed(() => firstUse(() => theirHandle(ws, session, theirsRoot)));
      const destMux = `${tarRoot}/mux-${i}`;
      const c = await timed(() => tar(muxSsh(`mkdir -p ${destMux} && tar -C ${destMux} -xf -`), destMux));
      const destFresh = `${tarRoot}/fresh-${i}`;
      const d = await timed(() => tar(freshSsh(`mkdir -p ${destFresh} && tar -C ${destFresh} -xf -`), destFresh));
      // Each copy is whole (untimed), then removed before the next round.
      const seeded = [a.value.workdir, b.value.workdir, destMux, destFresh];
      const counted = (await remote(seeded.map((p) => `find ${p} -type f | wc -l`).join("; "))).trim().split("\n").map(Number);
      if (counted.some((n) => n !== files)) throw new Error(`seeding ${label}: ${counted.join(", ")} files on the target, ${files} local`);
      await remote(`rm -rf ${scopeRoot(a.value)} ${scopeRoot(b.value)} ${destMux} ${destFresh}`);
      s.ours.push(a.ms);
      s.openclaw.push(b.ms);
      s.tarMux.push(c.ms);
      s.tarFresh.push(d.ms);
    }
    samples[`seed: ${label}`] = s;
    const [so, st, sm, sf] = [stats(s.ours), stats(s.openclaw), stats(s.tarMux), stats(s.tarFresh)];
    row(
      `seed ${label}: first use of a fresh scope (the handle, then one \`runShellCommand\`)`,
      `occ-ssh ${range(so)}`,
      `OpenClaw \`ssh\` ${range(st)}, ${sshPerOp["first use"]} ssh processes`,
      ratio(so.median, st.median),
    );
    row(`seed ${label}: occ-ssh against \`tar \\| ssh tar\` on an open ControlMaster`, `occ-ssh ${fmt(so.median)}`, `\`tar \\| ssh -S\` ${range(sm)}`, ratio(so.median, sm.median));
    row(`seed ${label}: OpenClaw against \`tar \\| ssh tar\` on a new connection`, `OpenClaw \`ssh\` ${fmt(st.median)}`, `\`tar \\| ssh\` ${range(sf)}`, ratio(st.median, sf.median));
    rmSync(ws.workspace, { recursive: true, force: true });
  }
  await remote(`rm -rf ${theirsRoot} ${tarRoot}`);
}

/**
 * The operations again, through a relay that holds every chunk LATENCY_MS
 * each way (a round trip of twice that), for both backends: what a call
 * costs across a real network, and how many round trips that is.
 */
async function latencySection(small) {
  const rtt = 2 * LATENCY_MS;
  const relay = spawn(process.execPath, [join(repo, "tests/rig/relay.mjs"), "--to", `${host.address}:${host.port ?? 22}`, "--delay-ms", String(LATENCY_MS)], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    relay.stdout.setEncoding("utf8");
    relay.stdout.once("data", (d) => resolve(Number(d.match(/listening (\d+)/)[1])));
    relay.once("exit", () => reject(new Error("the relay ended")));
  });
  // The target's own key, under the relay's address.
  const key = readFileSync(rig.knownHosts, "utf8").split("\n").find((l) => l.startsWith(`${host.address} `));
  const knownHosts = join(base, "known_hosts_relay");
  writeFileSync(knownHosts, `[127.0.0.1]:${port} ${key.split(" ").slice(1).join(" ")}\n`);
  const via = { target: `root@127.0.0.1:${port}`, knownHostsFile: knownHosts };
  try {
    const oursRoot = `/tmp/${unique("occ-bench-lat-ours")}`;
    const theirsRoot = `/tmp/${unique("occ-bench-lat-openclaw")}`;
    const doc = installation({ ssh: sshBlock(host, oursRoot, via), localWorkspaces: [base] });
    doc.drivers.sandbox.approvedScripts = approved;
    const ours = await startSandboxHost({ installation: doc, hostBinary });
    try {
      say(`latency: seeding one scope on each side through a ${rtt} ms round trip`);
      const session = unique("agent:main:lat");
      const mine = tools(small, await firstUse(() => ours.createHandle(params(small, session, null))));
      const theirs = tools(small, await firstUse(() => theirFactory(params(small, session, openclawCfg(sshBlock(host, theirsRoot, via))))));
      const n = Math.max(5, Math.floor(N / 2));
      for (const [name, , op] of OPERATIONS.filter(([name]) => ["write 1 KiB", "read 1 KiB", "stat", "exec `true`"].includes(name))) {
        say(`latency: ${name}, ${n} pairs`);
        await op(mine);
        await op(theirs);
        const a = [];
        const b = [];
        for (let i = 0; i < n; i++) {
          a.push((await timed(() => op(mine))).ms);
          b.push((await timed(() => op(theirs))).ms);
        }
        samples[`latency: ${name}`] = { ours: a, openclaw: b, rttMs: rtt };
        const [sa, sb] = [stats(a), stats(b)];
        const trips = (ms) => `${(ms / rtt).toFixed(1)} round trips`;
        row(
          `${name} across a ${rtt} ms round trip`,
          `occ-ssh ${range(sa)} (${trips(sa.median)}; +${fmt(sa.median - rtt)} over one)`,
          `OpenClaw \`ssh\` ${range(sb)} (${trips(sb.median)})`,
          ratio(sa.median, sb.median),
        );
      }
      await remote(`rm -rf ${oursRoot} ${theirsRoot}`);
    } finally {
      await ours.close();
    }
  } finally {
    relay.stdin.end();
    relay.kill();
  }
}

/** VmHWM (peak resident set) of a process, in KiB. */
const vmHwm = (pid) => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmHWM:\s+(\d+)\s+kB/m)[1]);

/**
 * Every process's CPU so far, in ms, with its name and parent, read from
 * /proc, where the rig's hosts' processes are visible too: each thread's time
 * on a CPU in nanoseconds (schedstat), and the children it reaped (in ticks,
 * all /proc keeps of them).
 */
function processTable() {
  const tick = 1000 / 100; // USER_HZ
  const table = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, "utf8");
      const close = s.lastIndexOf(")");
      const f = s.slice(close + 2).split(" ");
      let cpu = (Number(f[13]) + Number(f[14])) * tick;
      for (const t of readdirSync(`/proc/${d}/task`)) {
        cpu += Number(readFileSync(`/proc/${d}/task/${t}/schedstat`, "utf8").split(" ")[0]) / 1e6;
      }
      table.set(Number(d), { comm: s.slice(s.indexOf("(") + 1, close), ppid: Number(f[1]), start: f[19], cpu });
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** CPU ms by process name over the stretch from `before` to `after`, in `root`'s tree. */
function cpuOf(before, after, root) {
  const tree = treeOf(after, root);
  const by = {};
  for (const pid of tree) {
    const a = after.get(pid);
    if (!a) continue;
    const b = before.get(pid);
    by[a.comm] = (by[a.comm] ?? 0) + a.cpu - (b && b.start === a.start ? b.cpu : 0);
  }
  return by;
}

/** The CPU of ssh processes outside this process's tree (the serve process's masters run detached). */
function sshMasters(before, after) {
  const mine = treeOf(after, process.pid);
  let ms = 0;
  for (const [pid, a] of after) {
    if (a.comm !== "ssh" || mine.has(pid)) continue;
    const b = before.get(pid);
    ms += a.cpu - (b && b.start === a.start ? b.cpu : 0);
  }
  return ms ? { "ssh (master)": ms } : {};
}

/** `root` and every process below it in `table`. */
function treeOf(table, root) {
  const tree = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, p] of table) {
      if (!tree.has(pid) && tree.has(p.ppid)) {
        tree.add(pid);
        grew = true;
      }
    }
  }
  return tree;
}

/** "python3 1.20 ms, sshd 0.31 ms" per op, the largest first; names under 0.01 ms left out. */
function perOp(by, ops) {
  const parts = Object.entries(by)
    .map(([name, ms]) => [name, ms / ops])
    .filter(([, ms]) => ms >= 0.01)
    .sort((x, y) => y[1] - x[1]);
  const total = parts.reduce((n, [, ms]) => n + ms, 0);
  return `${total.toFixed(2)} ms (${parts.map(([name, ms]) => `${name} ${ms.toFixed(2)}`).join(", ") || "none"})`;
}

/** `k` scopes at once, each doing ROUNDS of write, read and stat: every op's duration, and the failures. */
async function concurrently(scopes) {
  const durations = [];
  const failures = [];
  const t = now();
  await Promise.all(
    scopes.map(async (t) => {
      for (let r = 0; r < ROUNDS; r++) {
        for (const op of [
          () => t.bridge.writeFile({ filePath: "bench/c.txt", data: KIB, mkdir: true }),
          () => t.bridge.readFile({ filePath: "bench/c.txt" }),
          () => t.bridge.stat({ filePath: "bench/c.txt" }),
        ]) {
          try {
            durations.push((await timed(op)).ms);
          } catch (e) {
            failures.push(String(e.message).split("\n")[0]);
          }
        }
      }
    }),
  );
  return { durations, failures, opsPerSecond: (durations.length / (now() - t)) * 1000 };
}

async function concurrencySection(small) {
  for (const k of LEVELS) {
    say(`concurrency: ${k} scopes, occ-ssh (a serve process of its own)`);
    const oursRoot = `/tmp/${unique(`occ-bench-conc${k}-ours`)}`;
    const ours = await startOurs(oursRoot);
    const idle = vmHwm(ours.pid);
    const mine = [];
    for (let j = 0; j < k; j++) mine.push(tools(small, await firstUse(() => ours.createHandle(params(small, unique("agent:main:conc"), null)))));
    mark(`begin concurrency ${k} occ-ssh`);
    let before = processTable();
    const a = await concurrently(mine);
    let after = processTable();
    mark(`end concurrency ${k} occ-ssh`);
    const serveTree = cpuOf(before, after, ours.pid);
    const cpuOurs = {
      target: cpuOf(before, after, host.nspawnPid),
      host: { ...serveTree, ...sshMasters(before, after) },
      client: cpuOf(before, after, process.pid),
    };
    // The client's tree holds the serve process: its own row says what that took.
    for (const [name, ms] of Object.entries(serveTree)) cpuOurs.client[name] -= ms;
    const peak = vmHwm(ours.pid);
    await ours.close();
    say(`concurrency: ${k} scopes, OpenClaw`);
    const theirsRoot = `/tmp/${unique(`occ-bench-conc${k}-openclaw`)}`;
    const theirs = [];
    for (let j = 0; j < k; j++) theirs.push(tools(small, await firstUse(() => theirHandle(small, unique("agent:main:conc"), theirsRoot))));
    mark(`begin concurrency ${k} openclaw`);
    before = processTable();
    const b = await concurrently(theirs);
    after = processTable();
    mark(`end concurrency ${k} openclaw`);
    const cpuTheirs = { target: cpuOf(before, after, host.nspawnPid), client: cpuOf(before, after, process.pid) };
    await remote(`rm -rf ${oursRoot} ${theirsRoot}`);
    samples[`concurrency: ${k}`] = { ours: a, openclaw: b, vmHwmKiB: { idle, peak }, cpuMs: { ours: cpuOurs, openclaw: cpuTheirs } };
    const [sa, sb] = [stats(a.durations), stats(b.durations)];
    const failed = (x) => (x.failures.length ? `, ${x.failures.length} of ${x.failures.length + x.durations.length} failed (${x.failures[0]})` : "");
    const cell = (who, st, x) => (st ? `${who} ${p90(st)}, ${x.opsPerSecond.toFixed(1)} ops/s${failed(x)}` : `${who}: every op failed (${x.failures[0]})`);
    row(
      `${k} scope${k > 1 ? "s" : ""} at once, per op (write/read/stat 1 KiB, ${ROUNDS} round${ROUNDS > 1 ? "s" : ""} each)`,
      cell("occ-ssh", sa, a),
      cell("OpenClaw `ssh`", sb, b),
      sa && sb ? ratio(sa.median, sb.median) : "",
    );
    const scopes = `${k} scope${k > 1 ? "s" : ""} at once`;
    row(`${scopes}: CPU per op on the target (every process of the rig host)`, `occ-ssh ${perOp(cpuOurs.target, a.durations.length)}`,
      `OpenClaw \`ssh\` ${perOp(cpuTheirs.target, b.durations.length)}`, "");
    row(`${scopes}: CPU per op on this machine (the serve process and its ssh; the Node client and what it spawned)`,
      `occ-ssh: serve ${perOp(cpuOurs.host, a.durations.length)}; client ${perOp(cpuOurs.client, a.durations.length)}`,
      `OpenClaw \`ssh\`: client ${perOp(cpuTheirs.client, b.durations.length)}`, "");
    const mb = (kib) => `${(kib / 1024).toFixed(1)} MiB`;
    row(
      `${k} scope${k > 1 ? "s" : ""} at once: serve process peak RSS (VmHWM)`,
      `${mb(peak)}, ${mb(peak / k)} per scope`,
      `the same process listening, before any call ${mb(idle)}`,
      `+${mb((peak - idle) / k)} per scope`,
    );
  }
}

// --- the run ------------------------------------------------------------------------------

const started = now();
const master = await startMaster();
let ours;
try {
  const small = local("small");
  smallWorkspace(small.workspace);
  say(`target ${host.name} (${host.address}); openclaw ${openclawVersion}; host ${hostBinary}; component ${component}`);
  const oursRoot = `/tmp/${unique("occ-bench-ours")}`;
  if (only.has("ops") || only.has("seed") || only.has("breakdown")) ours = await startOurs(oursRoot);
  if (only.has("floor")) await floorSection();
  if (ours) sshPerOp = await countTheirSsh(small);
  if (only.has("ops")) await opsSection(ours, small);
  if (only.has("breakdown")) await breakdownSection(ours, small);
  if (only.has("seed")) await seedSection(ours);
  if (ours) {
    await ours.close();
    ours = null;
    await remote(`rm -rf ${oursRoot}`);
  }
  if (only.has("concurrency")) await concurrencySection(small);
  if (only.has("latency")) await latencySection(small);
} finally {
  await ours?.close();
  // The master removes its socket as it exits: removing the directory
  // meanwhile races with it, so wait for it first.
  if (master.exitCode === null && master.signalCode === null) {
    const gone = new Promise((resolve) => master.on("exit", resolve));
    master.kill();
    await gone;
  }
  rmSync(base, { recursive: true, force: true });
}

const seconds = ((now() - started) / 1000).toFixed(0);
const cpus = (() => {
  try {
    return readFileSync("/proc/cpuinfo", "utf8").match(/^processor/gm).length;
  } catch {
    return "?";
  }
})();
const lines = [
  `Sandbox benchmark: occ-ssh (\`occ-driver-host serve\` through host/node/openclaw-plugin/sandbox.mjs) against OpenClaw ${openclawVersion}'s own \`ssh\` backend, ` +
    `on rig host ${host.name}, ${cpus} CPUs, ${seconds} s; operation rows ${N} pairs, seeding ${SEED_N}, ratio = baseline / measured.`,
  "",
  "| benchmark | measured | baseline | ratio |",
  "| --- | --- | --- | --- |",
  ...rows.map((r) => `| ${r.benchmark} | ${r.measured} | ${r.baseline} | ${r.ratio} |`),
];
process.stdout.write(lines.join("\n") + "\n");
if (process.env.OCC_BENCH_JSON) writeFileSync(process.env.OCC_BENCH_JSON, JSON.stringify({ rows, samples }, null, 1));
