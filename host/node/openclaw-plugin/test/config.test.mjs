// The plugin's config as OpenClaw validates it (openclaw.plugin.json): every
// drivers.sandbox key a plugin user may need, the override keys spelled as the
// compute package spells them, and the old name still read with a warning.
// No host, no OpenClaw.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

import { binaryOf } from "../sandbox.mjs";
import { configurationSchema } from "../../compute/index.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = join(here, "../../../..");
const manifest = JSON.parse(readFileSync(join(here, "../openclaw.plugin.json"), "utf8"));
const properties = manifest.configSchema.properties;

/** The keys the host accepts under drivers.sandbox (SANDBOX_KEYS). */
const hostKeys = () => {
  const text = readFileSync(join(repo, "host/src/world/ssh_sandbox_backend/installation/mod.rs"), "utf8");
  return [...text.match(/const SANDBOX_KEYS: &\[&str\] = &\[([^\]]*)\]/)[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]);
};

test("every drivers.sandbox key but the ones the plugin writes itself is a plugin setting", () => {
  // id: the host's default; configuration: OpenClaw's own sandbox block.
  for (const key of hostKeys().filter((k) => !["id", "configuration"].includes(k))) {
    assert.ok(key in properties, `openclaw.plugin.json lacks ${key}`);
  }
});

test("the host's own settings are spelled as the compute package's driverHost", () => {
  const driverHost = configurationSchema.properties.driverHost.properties;
  for (const key of ["binary", "component", "auditLog", "cacheDir", "maxSessions"]) {
    assert.ok(key in driverHost, `driverHost lacks ${key}`);
    assert.ok(key in properties, `the plugin lacks ${key}`);
    assert.equal(properties[key].type, driverHost[key].type, key);
  }
  assert.equal(properties.hostBinary.deprecated, true);
});

test("hostBinary, the former name, is still read, with one deprecation line", () => {
  const lines = [];
  const warn = (line) => lines.push(line);
  assert.equal(binaryOf({ binary: "/new" }, warn), "/new");
  assert.equal(binaryOf({ binary: "/new", hostBinary: "/old" }, warn), "/new");
  assert.deepEqual(lines, []);
  assert.equal(binaryOf({ hostBinary: "/old" }, warn), "/old");
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^occ-ssh: plugins\.entries\.occ-ssh\.config\.hostBinary is deprecated: name the binary in binary/);
  assert.equal(binaryOf({}, warn), undefined);
  assert.equal(lines.length, 1);
});
