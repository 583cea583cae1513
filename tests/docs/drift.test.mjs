// The manual cannot drift from the code: every installation key, CLI flag,
// error code and repository path that README.md, docs/*.md and the other
// READMEs of the tree name is checked against what the code defines, and every
// error code the code can return is in docs/errors.md. Each failure names the
// page and line. No test host; a few seconds.
//
//   node --test tests/docs/drift.test.mjs
//
// The binary whose --help and `schema` are read: $OCC_DRIVER_HOST (tests/run.sh
// exports the one it built), else the release build under $CARGO_TARGET_DIR.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const read = (rel) => readFileSync(path.join(root, rel), "utf8");

// ---------------------------------------------------------------------------
// The tree and the pages.

/** Every file of the repository, as paths relative to its root. */
const files = (() => {
  try {
    return execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: root, encoding: "utf8" }).split("\0").filter(Boolean)
      .filter((f) => existsSync(path.join(root, f)));
  } catch {
    const out = [];
    const walk = (dir) => {
      for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
        if (e.name === ".git" || e.name === "node_modules" || e.name === "target") continue;
        const rel = dir ? `${dir}/${e.name}` : e.name;
        if (e.isDirectory()) walk(rel);
        else out.push(rel);
      }
    };
    walk("");
    return out;
  }
})();
const fileSet = new Set(files);
const dirSet = new Set(files.flatMap((f) => f.split("/").slice(0, -1).map((_, i, a) => a.slice(0, i + 1).join("/"))));
const topDirs = [...new Set(files.filter((f) => f.includes("/")).map((f) => f.split("/")[0]))];

/** The pages: the README, docs/, and every other README of the tree. */
const pages = files
  .filter((f) => f === "README.md" || /^docs\/[^/]+\.md$/.test(f) || /(^|\/)README\.md$/.test(f))
  .filter((f) => !f.includes("node_modules/"))
  .sort();

/**
 * A page's code: each inline `span` of prose and each line of a fenced block
 * (a shell line continued with `\` joined to the next), with its line number.
 */
function codeOf(page) {
  const lines = read(page).split("\n");
  const spans = [];
  const fenced = [];
  let inFence = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim().startsWith("```")) {
      inFence = !inFence;
      continue;
    }
    if (inFence) {
      let text = line;
      const at = i + 1;
      while (text.endsWith("\\") && i + 1 < lines.length && !lines[i + 1].trim().startsWith("```")) {
        text = text.slice(0, -1) + " " + lines[++i].trim();
      }
      fenced.push({ line: at, text });
      continue;
    }
    for (const m of line.matchAll(/`([^`]+)`/g)) spans.push({ line: i + 1, text: m[1] });
  }
  return { spans, fenced, lines };
}
const pageCode = new Map(pages.map((p) => [p, codeOf(p)]));

// ---------------------------------------------------------------------------
// The binary.

const binary = [
  process.env.OCC_DRIVER_HOST,
  path.join(process.env.CARGO_TARGET_DIR || "/var/cache/occ/target", "x86_64-unknown-linux-gnu/release/occ-driver-host"),
  "/var/cache/occ/target/release/occ-driver-host",
].find((b) => b && existsSync(b));
const run = (...args) => execFileSync(binary, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

/** The flags a --help text lists (`-i, --installation <FILE>` gives -i and --installation). */
const flagsOf = (help) => new Set([...help.matchAll(/^\s+(?:(-[A-Za-z]), )?(--[a-z0-9][a-z0-9-]*)/gm)].flatMap((m) => [m[1], m[2]].filter(Boolean)));
const help = (() => {
  if (!binary) return null;
  const top = run("--help");
  const commands = [...top.slice(top.indexOf("Commands:")).matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]).filter((c) => c !== "help");
  const perCommand = new Map(commands.map((c) => [c, flagsOf(run(c, "--help"))]));
  return { global: flagsOf(top), perCommand, all: new Set([...flagsOf(top), ...[...perCommand.values()].flatMap((s) => [...s])]) };
})();

// ---------------------------------------------------------------------------
// Installation keys: what each schema and parser accepts, as a tree.
//
// A node is a Map from a key to its node; OPEN accepts anything below it (a
// value that is a document of its own: a host alias's map, a script name's
// hash, OpenClaw's docker block), LEAF nothing.

const OPEN = "open";
const LEAF = "leaf";

/** The names in a Rust `const NAME: &[&str] = &[...]` of `file`. */
function rustList(file, name) {
  const m = read(file).match(new RegExp(`const ${name}: &\\[&str\\] = &\\[([^\\]]*)\\]`));
  assert.ok(m, `${file}: no const ${name}: the drift test reads the keys the host accepts from it`);
  return [...m[1].matchAll(/"([^"]+)"/g)].map((x) => x[1]);
}

/** A JSON Schema as a key tree. */
function fromSchema(schema) {
  if (!schema || typeof schema !== "object") return LEAF;
  const variants = schema.oneOf ?? schema.anyOf;
  if (variants) {
    const merged = new Map();
    for (const v of variants) {
      const t = fromSchema(v);
      if (t === OPEN) return OPEN;
      if (t instanceof Map) for (const [k, n] of t) merged.set(k, n);
    }
    return merged.size ? merged : LEAF;
  }
  if (schema.properties) {
    const node = new Map(Object.entries(schema.properties).map(([k, v]) => [k, fromSchema(v)]));
    if (schema.additionalProperties && typeof schema.additionalProperties === "object") node.set("*", fromSchema(schema.additionalProperties));
    return node;
  }
  if (schema.additionalProperties && typeof schema.additionalProperties === "object") return new Map([["*", fromSchema(schema.additionalProperties)]]);
  return schema.type === "object" ? OPEN : LEAF;
}
const listNode = (names, children = {}) => new Map(names.map((k) => [k, children[k] ?? LEAF]));
const union = (...nodes) => new Map(nodes.flatMap((n) => [...n]));

const keys = (() => {
  // The compute component's configuration: `occ-driver-host schema`, else the
  // package's copy (a package test keeps the two equal).
  const componentFile = path.join(process.env.CARGO_TARGET_DIR || "/var/cache/occ/target", "wasm32-wasip2/release/guest_ssh_driver.wasm");
  let computeSchema;
  if (binary && existsSync(componentFile)) {
    try {
      computeSchema = JSON.parse(run("schema", componentFile));
    } catch {
      computeSchema = undefined;
    }
  }
  computeSchema ??= JSON.parse(read("host/node/compute/schema.json"));
  const computeConfiguration = fromSchema(computeSchema);

  // The sandbox component's configuration: OpenClaw's agents.defaults.sandbox
  // block as the component parses it; docker, browser and prune are OpenClaw's.
  const sandboxConfig = "guest-ssh-sandbox/src/config/mod.rs";
  const sandboxBlock = listNode(rustList(sandboxConfig, "SANDBOX_KEYS"), {
    ssh: listNode(rustList(sandboxConfig, "SSH_KEYS")), docker: OPEN, browser: OPEN, prune: OPEN,
  });

  // The installation file as the host parses it.
  const compute = listNode(rustList("host/src/world/ssh_compute_driver/installation.rs", "COMPUTE_KEYS"), {
    approvedHelpers: LEAF, configuration: computeConfiguration,
  });
  const sandbox = listNode(rustList("host/src/world/ssh_sandbox_backend/installation/mod.rs", "SANDBOX_KEYS"), {
    approvedScripts: OPEN,
    workspaceWorker: new Map([["requestSeconds", LEAF]]),
    configuration: new Map([["agents", new Map([["defaults", new Map([["sandbox", sandboxBlock]])]])]]),
  });

  // The packages: the compute package's driverHost block, the plugin's config.
  const manifest = JSON.parse(read("host/node/openclaw-plugin/openclaw.plugin.json"));
  const plugin = fromSchema(manifest.configSchema);

  return {
    compute, sandbox, sandboxBlock, computeConfiguration, plugin, pluginId: manifest.id,
  };
})();

/** The compute package's configurationSchema (imported: it reads only its own files). */
const computePackage = await import(path.join(root, "host/node/compute/index.mjs"));
const packageDriverHost = fromSchema(computePackage.configurationSchema.properties.driverHost);

/**
 * Where a dotted key of the docs is looked up: its first segments name the
 * document it belongs to. Keys of other documents (OCC's revision, OpenClaw's
 * own settings, the helper's envelope) start otherwise and are not checked.
 */
function rootsFor(key) {
  const k = keys;
  const rules = [
    ["drivers.compute.", k.compute],
    ["drivers.sandbox.", k.sandbox],
    ["drivers.", new Map([["compute", k.compute], ["sandbox", k.sandbox]])],
    ["configuration.driverHost.", packageDriverHost],
    ["driverHost.", packageDriverHost],
    [`plugins.entries.${k.pluginId}.config.`, k.plugin],
    ["agents.defaults.sandbox.", k.sandboxBlock],
    // OpenClaw's sandbox block, named from `sandbox.` on.
    ["sandbox.", k.sandboxBlock],
    // The compute configuration's own keys, and the sandbox's ssh block.
    ["configuration.", k.computeConfiguration],
    ["ssh.", union(k.computeConfiguration.get("ssh"), k.sandboxBlock.get("ssh"))],
    ["hosts.", k.computeConfiguration.get("hosts")],
    ["network.", k.computeConfiguration.get("network")],
    ["runtime.", k.computeConfiguration.get("runtime")],
  ];
  for (const [prefix, node] of rules) if (key.startsWith(prefix)) return { prefix, node, rest: key.slice(prefix.length).split(".") };
  return null;
}

// Dotted names that start like a key but name something else, each with why.
const NOT_KEYS = new Map([
  // The helper's envelope field (docs/security.md's table), not a setting: the
  // setting is configuration.runtime.systemdUnitDirectory.
  ["runtime.unitDirectory", "the helper envelope's field"],
]);

/** Whether `rest` (segments) exists under `node`. */
function resolves(node, rest) {
  for (const seg of rest) {
    if (node === OPEN || seg === "*" || seg === "" || /^<.*>$/.test(seg) && !(node instanceof Map && node.has("*"))) return true;
    if (!(node instanceof Map)) return false;
    if (node.has(seg)) node = node.get(seg);
    else if (node.has("*")) node = node.get("*");
    else return false;
  }
  return true;
}

const CODE_FILE_EXT = /\.(rs|mjs|cjs|js|py|sh|wit|toml|ts|json|md|yaml|yml|jsonl|tgz|wasm|txt|env|conf|service|socket)$/;

test("every installation key the docs name exists in a schema or in the host's parser", () => {
  const failures = [];
  let checked = 0;
  for (const [page, { spans, fenced }] of pageCode) {
    for (const { line, text } of [...spans, ...fenced]) {
      for (const m of text.matchAll(/(?<![\w.$/-])([A-Za-z][\w-]*(?:\.(?:[\w-]+|<[\w-]+>|\*))+)/g)) {
        const key = m[1].replace(/\.$/, "");
        if (CODE_FILE_EXT.test(key) || NOT_KEYS.has(key)) continue;
        const where = rootsFor(key);
        if (!where) continue;
        checked++;
        if (!resolves(where.node, where.rest)) failures.push(`${page}:${line}: \`${key}\`: no such key (looked up under ${where.prefix.replace(/\.$/, "")})`);
      }
    }
  }
  assert.deepEqual(failures, [], `installation keys the code does not define:\n${failures.join("\n")}`);
  assert.ok(checked >= 30, `only ${checked} keys found: is the scan broken?`);
});

// ---------------------------------------------------------------------------
// CLI flags.

// Flags the docs name that belong to another program, each with its owner.
const OTHER_FLAGS = new Map([
  ["--serve", "the workspace script's worker mode, its first frame (docs/security.md)"],
  ["--no-reload", "systemctl's"],
  ["--no-block", "systemctl's"],
  ["--remap-path-prefix", "rustc's"],
  ["--quick", "tests/run.sh's"],
  ["--now", "systemctl's"],
]);

test("every flag the docs give occ-driver-host is in that command's --help", { skip: !binary && "no occ-driver-host binary" }, () => {
  const failures = [];
  let checked = 0;
  const commandWords = /(?:^|[\s`(/])occ-driver-host((?:\s+[^\s#|;&)]+)*)/g;
  for (const [page, { spans, fenced }] of pageCode) {
    for (const { line, text } of [...spans, ...fenced]) {
      for (const m of text.matchAll(commandWords)) {
        if (/(?:-p|--package)\s*$/.test(text.slice(0, m.index + 1))) continue; // cargo's package, not the binary
        const words = m[1].trim().split(/\s+/).filter(Boolean);
        if (!words.length) continue;
        const command = help.perCommand.has(words[0]) ? words[0] : null;
        if (!command && !words[0].startsWith("-")) continue; // prose: "occ-driver-host serves ..."
        const allowed = command ? help.perCommand.get(command) : help.global;
        for (const w of words.slice(command ? 1 : 0)) {
          const flag = w.match(/^(--?[A-Za-z][\w-]*)(=.*)?$/)?.[1];
          if (!flag) continue;
          checked++;
          if (!allowed.has(flag) && !help.global.has(flag)) {
            failures.push(`${page}:${line}: \`occ-driver-host ${command ?? ""} ${flag}\`: ${command ? `\`${command} --help\`` : "`--help`"} has no ${flag}`);
          }
        }
      }
    }
    // A flag alone in a span (`--since`, `--audit-log FILE`): some command's.
    for (const { line, text } of spans) {
      const m = text.match(/^(--[a-z][\w-]*)(?:[ =].*)?$/);
      if (!m || OTHER_FLAGS.has(m[1])) continue;
      checked++;
      if (!help.all.has(m[1])) failures.push(`${page}:${line}: \`${m[1]}\`: no occ-driver-host command has this flag`);
    }
  }
  assert.deepEqual(failures, [], `flags --help does not list:\n${failures.join("\n")}`);
  assert.ok(checked >= 40, `only ${checked} flags found: is the scan broken?`);
});

// ---------------------------------------------------------------------------
// Error codes: read from the code that returns them.

/** A source file's text without its `#[cfg(test)] mod tests` (test-only codes). */
const withoutTests = (text) => text.split(/#\[cfg\(test\)\]\s*mod tests\b/)[0];
const under = (dir, ext) => files.filter((f) => f.startsWith(dir) && f.endsWith(ext) && !/(^|\/)tests?(\.rs|\/)/.test(f));
const grab = (text, re) => [...text.matchAll(re)].flatMap((m) => m.slice(1).filter(Boolean));

// Quoted words in the scanned sources below that are not codes.
const NOT_CODES = new Set([
  "MESSAGE", // helper/src/runtime.js: the journal's field of a line's text
]);

/** The one list of the host's and its Node packages' codes: code to failure. */
const hostCodes = new Map(
  [...withoutTests(read("host/src/error/code.rs")).matchAll(/^\s*\w+ = "([a-z0-9-]+)", (Retryable|Permanent), (?:Host|Packages);$/gm)]
    .map((m) => [m[1], m[2].toLowerCase()]),
);

/** Every code the code can return or record, with where it comes from. */
const codes = (() => {
  const found = new Map();
  const add = (from, list) => {
    for (const c of list) if (!found.has(c)) found.set(c, from);
  };
  // The host's and its Node packages' list, the host's other CallError
  // codes, and the audit records' exec outcomes.
  add("host", hostCodes.keys());
  for (const f of under("host/src/", ".rs")) {
    const t = withoutTests(read(f));
    add("host", grab(t, /CallError::new\(\s*[\w:]*FailureKind::\w+,\s*"([a-z0-9-]+)"/g));
  }
  add("audit record", grab(read("host/src/capability/ssh_exec/backend.rs"), /ExecError::\w+(?:\(_\))? => "([a-z-]+)"/g));
  // The compute driver: its variants, its admission refusals, its warnings
  // and the host checks of a diagnosis it writes itself.
  for (const f of under("guest-ssh-driver/src/", ".rs")) {
    const t = withoutTests(read(f));
    add("compute driver", grab(t, /Self::\w+(?: \{ \.\. \}|\(_\))? => "([a-z0-9-]+)"/g));
    add("compute driver", grab(t, /ExecError::\w+(?:\(_\))? => "([a-z0-9-]+)"/g));
    add("compute driver", grab(t, /Error::refused\(\s*"([a-z0-9-]+)"/g));
    add("compute driver", grab(t, /code: "([a-z0-9-]+)"\.into\(\)/g));
    add("compute driver", grab(t, /unwrap_or\("([a-z0-9-]+)"\)/g));
    add("warning", grab(t, /Warning::new\(\s*"([a-z0-9-]+)"/g));
    add("diagnosis", grab(t, /"[a-z-]+" => "([A-Z][A-Z0-9_]+)"|_ => "([A-Z][A-Z0-9_]+)"/g));
  }
  // The sandbox backend: its codes and warnings.
  for (const f of under("guest-ssh-sandbox/src/", ".rs")) {
    const t = withoutTests(read(f));
    add("sandbox", grab(t, /Code::\w+ => "([a-z0-9-]+)"/g));
    add("warning", grab(t, /Warning::new\(\s*"([a-z0-9-]+)"/g));
  }
  // The sandbox scripts' own codes (the backend maps them, docs/errors.md says how).
  for (const f of files.filter((f) => f.startsWith("guest-ssh-sandbox/scripts/") && /\.(py|sh)$/.test(f) && !f.endsWith("workspace.py"))) {
    const t = read(f);
    add("sandbox script", grab(t, /(?:Refusal|SetupError)\(\s*"([a-z0-9-]+)"/g));
    add("sandbox script", grab(t, /"error":\s*"([a-z0-9-]+)"/g));
    add("sandbox script", grab(t, /errno\.E\w+: "([a-z0-9-]+)"/g));
    add("sandbox script", grab(t, /code = "([a-z0-9-]+)" if/g));
  }
  // The compute helper: its codes, the result line's own, its warnings and
  // its diagnosis codes.
  for (const f of under("helper/src/", ".js")) {
    const t = read(f);
    add("helper", grab(t, /HelperError\(\s*(?:[\w.]+\s*<\s*\w+\s*\?\s*)?'([a-z0-9-]+)'(?:\s*:\s*'([a-z0-9-]+)')?/g));
    add("helper", grab(t, /error: \{ code: '([a-z0-9-]+)'/g));
    add("helper", grab(t, /error instanceof HelperError \?[^;]*: '([a-z0-9-]+)';/g));
    if (/probe\.js$|runtime\.js$/.test(f)) add(f.endsWith("probe.js") ? "warning" : "diagnosis", grab(t, /'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,})'/g).filter((c) => !NOT_CODES.has(c)));
  }
  // The Node packages' own.
  for (const f of files.filter((f) => f.startsWith("host/node/") && f.endsWith(".mjs") && !f.includes("/test/"))) {
    const t = read(f);
    add("node", grab(t, /code: "([A-Za-z0-9-]+)"/g));
    add("node", grab(t, /this\.code = code \?\? "([a-z0-9-]+)"/g));
  }
  return found;
})();

/** The JSON-RPC error numbers the host answers with. */
const rpcNumbers = new Set(grab(read("host/src/rpc/message.rs"), /: i64 = (-\d+);/g));

// Codes the docs name that come from elsewhere, each with its owner.
const FOREIGN_CODES = new Map([
  ["COMPUTE_DRIVER_MISMATCH", "OCC's, when it finalizes revisions of an older implementation"],
  ["SECRET_SURFACE_UNAVAILABLE", "OpenClaw's, when a provider's key is missing"],
]);
// Code families written with a placeholder: a prefix and what follows it.
const CODE_FAMILIES = [
  [/^SSH_/, (c) => codes.has(c.slice(4).toLowerCase().replace(/_/g, "-")) || c === "SSH_<CODE>"],
  [/^READYZ_/, () => true], // READYZ_<status>: the HTTP status /readyz answered
  [/^UNIT_/, () => true], // UNIT_<ActiveState>: systemd's state of the unit
];
const isCode = (c) => codes.has(c) || FOREIGN_CODES.has(c) || CODE_FAMILIES.some(([re, ok]) => re.test(c) && ok(c));

/**
 * The vocabulary of the tree: every word of its source outside comments and
 * every path segment. A word the docs name as code (`foo-bar`, `FOO_BAR`)
 * must be one of these or a code: a stale name is neither.
 */
const vocabulary = (() => {
  const words = new Set(files.flatMap((f) => f.split(/[/.]/)));
  for (const f of files) {
    if (/\.(md|lock|wasm|tgz|png|jpg)$/.test(f) || f.includes("/golden/")) continue;
    let text;
    try {
      if (statSync(path.join(root, f)).size > 1 << 20) continue;
      text = read(f);
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      const t = line.trim();
      if (/^(\/\/|\/\*|\*|#(?!\[|!|include))/.test(t)) continue; // a comment, not code
      for (const w of t.match(/[A-Za-z0-9_-]+/g) ?? []) words.add(w).add(w.replace(/^-+|-+$/g, ""));
    }
  }
  return words;
})();

// Names the docs give that the code no longer has, on purpose, each with why.
const FORMER_NAMES = new Map([
  ["occ-sandbox-ssh", "the plugin's id before 0.3.0 (docs/openclaw.md says it was renamed)"],
  ["sandbox-ssh", "the default drivers.sandbox.id before 0.3.0 (docs/openclaw.md's names table)"],
]);

const codeLike = /^(?:[a-z][a-z0-9]*(?:-[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9<>a-z]+)+)$/;

test("every error code the docs name is one the code returns (or a name the code defines)", () => {
  const failures = [];
  for (const [page, { spans }] of pageCode) {
    for (const { line, text } of spans) {
      const word = text.trim();
      if (!codeLike.test(word)) continue;
      if (isCode(word) || vocabulary.has(word) || FORMER_NAMES.has(word)) continue;
      failures.push(`${page}:${line}: \`${word}\`: no code returns it and no source names it`);
    }
  }
  assert.deepEqual(failures, [], `names the code does not have:\n${failures.join("\n")}`);
});

test("the Node packages fail only with codes of the one list, and their copy of it is the list", async () => {
  assert.ok(hostCodes.size >= 20, `only ${hostCodes.size} codes read from host/src/error/code.rs: is the scan broken?`);
  const { CODES } = await import(path.join(root, "host/node/rpc/codes.mjs"));
  assert.deepEqual(new Map(Object.entries(CODES)), hostCodes, "host/node/rpc/codes.mjs is not host/src/error/code.rs's list");
  const failures = [];
  for (const f of files.filter((f) => f.startsWith("host/node/") && f.endsWith(".mjs") && !f.includes("/test/"))) {
    for (const c of grab(read(f), /code: "([a-z0-9-]+)"/g)) {
      if (!hostCodes.has(c)) failures.push(`${f}: \`${c}\` is not in host/src/error/code.rs`);
    }
  }
  assert.deepEqual(failures, [], failures.join("\n"));
});

test("docs/errors.md lists every code the code returns, and only those", () => {
  const page = "docs/errors.md";
  assert.ok(fileSet.has(page), "docs/errors.md is missing");
  const text = read(page);
  const lines = text.split("\n");
  const named = new Set([...text.matchAll(/`([^`]+)`/g)].map((m) => m[1].trim()));
  const failures = [];
  for (const [code, from] of codes) {
    if (!named.has(code)) failures.push(`${page}: \`${code}\` (${from}) is returned by the code and not listed`);
  }
  for (const n of rpcNumbers) if (!named.has(n)) failures.push(`${page}: JSON-RPC error ${n} is not listed`);
  // Each table row's first cell names codes: each must exist.
  lines.forEach((l, i) => {
    if (!l.startsWith("| `")) return;
    const first = l.split("|")[1];
    for (const m of first.matchAll(/`([^`]+)`/g)) {
      const c = m[1].trim();
      if (/^-32\d{3}$/.test(c)) {
        if (!rpcNumbers.has(c)) failures.push(`${page}:${i + 1}: JSON-RPC error ${c} is not one the host answers with`);
      } else if (/^\d+$/.test(c)) {
        continue; // an exit status: checked against --help below
      } else if (!isCode(c)) {
        failures.push(`${page}:${i + 1}: \`${c}\`: no code returns it`);
      }
    }
  });
  // The exit statuses it gives are the ones --help gives.
  if (binary) {
    const top = run("--help");
    for (const status of ["0", "1", "2", "65", "75"]) {
      if (!new RegExp(`\\b${status} `).test(top.slice(top.indexOf("Exit status")))) failures.push(`--help no longer names exit status ${status}`);
      if (!named.has(status)) failures.push(`${page}: exit status ${status} is not listed`);
    }
  }
  assert.deepEqual(failures, [], failures.join("\n"));
});

// ---------------------------------------------------------------------------
// Repository paths.

/** The checks of a diagnosis (`host/reachable`): named like paths, they are not. */
const diagnosisChecks = new Set([...read("helper/src/runtime.js").matchAll(/check\('([a-z-]+)', '([a-z-]+)'/g)].map((m) => `${m[1]}/${m[2]}`));

test("every repository path the docs name exists", () => {
  const failures = [];
  let checked = 0;
  const top = topDirs.filter((d) => !d.startsWith(".") || d === ".ci").map((d) => d.replace(/[.]/g, "\\.")).join("|");
  const repoPath = new RegExp(`(?<![\\w./~$@-])((?:${top})/[\\w./<>*{}@-]*)`, "g");
  const exists = (p) => fileSet.has(p) || dirSet.has(p.replace(/\/$/, ""));
  for (const page of pages) {
    const lines = read(page).split("\n");
    lines.forEach((l, i) => {
      for (const m of l.matchAll(repoPath)) {
        let p = m[1].replace(/[.,:;)]+$/, "");
        if (/[<>*{}]|\.\.\./.test(p) || diagnosisChecks.has(p)) continue; // a pattern or a check, not a path
        p = p.replace(/\/+$/, "/");
        checked++;
        if (!exists(p)) failures.push(`${page}:${i + 1}: \`${p}\`: no such path in the tree`);
      }
    });
    // A source file named alone or by its tail (`seal.rs`, `envelope/tests.rs`).
    for (const { line, text } of pageCode.get(page).spans) {
      const t = text.trim();
      if (!/^[\w.-]+(?:\/[\w.-]+)*\.(rs|mjs|cjs|js|py|sh|wit|toml)$/.test(t) || t.startsWith(".")) continue;
      if (new RegExp(`^(?:${top})/`).test(t)) continue; // checked above
      checked++;
      if (!files.some((f) => f === t || f.endsWith(`/${t}`))) failures.push(`${page}:${line}: \`${t}\`: no file of the tree is called that`);
    }
  }
  assert.deepEqual(failures, [], `paths that do not exist:\n${failures.join("\n")}`);
  assert.ok(checked >= 50, `only ${checked} paths found: is the scan broken?`);
});

// ---------------------------------------------------------------------------
// Links: every relative link names a file of the tree and, with an anchor, a
// heading of it (as GitHub spells anchors). tests/tests/docs.rs checks the same
// in the Rust suite; here it runs in the fast loop with the rest.

/** A page's anchors: its headings as GitHub slugs them, repeats as `-1`, `-2`. */
function anchorsOf(page) {
  const seen = new Set();
  let fenced = false;
  for (const line of read(page).split("\n")) {
    if (line.trim().startsWith("```")) fenced = !fenced;
    const m = !fenced && line.match(/^#+ (.*)$/);
    if (!m) continue;
    const base = m[1].replace(/`/g, "").trim().toLowerCase().replace(/ /g, "-").replace(/[^\p{L}\p{N}_-]/gu, "");
    let anchor = base;
    for (let n = 1; seen.has(anchor); n++) anchor = `${base}-${n}`;
    seen.add(anchor);
  }
  return seen;
}

test("every relative link and anchor of the docs resolves", () => {
  const failures = [];
  for (const page of pages) {
    let fenced = false;
    read(page).split("\n").forEach((line, i) => {
      if (line.trim().startsWith("```")) fenced = !fenced;
      if (fenced) return;
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#");
        const resolved = file ? path.posix.normalize(path.posix.join(path.posix.dirname(page), file)).replace(/\/$/, "") : page;
        if (!fileSet.has(resolved) && !dirSet.has(resolved)) {
          failures.push(`${page}:${i + 1}: (${target}): no such file`);
        } else if (anchor && fileSet.has(resolved) && !anchorsOf(resolved).has(anchor)) {
          failures.push(`${page}:${i + 1}: (${target}): ${resolved} has no heading #${anchor}`);
        }
      }
    });
  }
  assert.deepEqual(failures, [], `broken links:\n${failures.join("\n")}`);
});
