// validateGatewaySettings: OCC's SSH driver's refusals of native gateway settings,
// table-driven, through the package's synchronous method and through the driver
// component's own admission at prepare (the one-shot host with no helper approved:
// a refused document stops at admission, an admitted one gets as far as the exec,
// which the host refuses before any connection). The two must agree on every case.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import * as pkg from "../index.mjs";
import { agent, component, hostBinary, namespace, repo, revision } from "./occ.mjs";

const codex = (approvalPolicy) => ({
  gateway: { mode: "local" },
  plugins: { entries: { codex: { config: { appServer: { approvalPolicy } } } } },
});

// [document, the setting refused (or null)].
const CASES = [
  [{ gateway: { mode: "local", tls: { enabled: true, keyPath: "/etc/secret/key.pem" } } }, "gateway.tls.enabled"],
  [codex("untrusted"), "plugins.entries.codex.config.appServer.approvalPolicy"],
  [{ gateway: { mode: "local", tls: { enabled: false } } }, null],
  [{ gateway: { mode: "local", tls: { enabled: "true" } } }, null],
  [codex("on-request"), null],
  [{ gateway: { mode: "local" }, plugins: { entries: { other: { config: { appServer: { approvalPolicy: "untrusted" } } } } } }, null],
  [{ gateway: { mode: "local" } }, null],
];

test("the package refuses each setting by name, never quoting the document", () => {
  for (const [document, setting] of CASES) {
    if (setting === null) {
      assert.equal(pkg.validateGatewaySettings(document), undefined, JSON.stringify(document));
      continue;
    }
    assert.throws(() => pkg.validateGatewaySettings(document), (error) => {
      assert.ok(error instanceof pkg.DriverError);
      assert.equal(error.failure, "permanent");
      assert.equal(error.code, "unsupported-gateway-setting");
      assert.ok(error.message.startsWith(`configuration.${setting}: `), error.message);
      assert.doesNotMatch(error.message, /secret\/key\.pem/);
      return true;
    });
  }
  assert.deepEqual(pkg.REFUSED_GATEWAY_SETTINGS.map(([path]) => path.join(".")),
    ["gateway.tls.enabled", "plugins.entries.codex.config.appServer.approvalPolicy"]);
});

test("the component's admission at prepare refuses exactly what the package refuses", () => {
  const dir = mkdtempSync(join(tmpdir(), "occ-gateway-settings-"));
  try {
    const configuration = JSON.parse(readFileSync(join(repo, "guest-ssh-driver/tests/fixtures/valid-spec-example.json"), "utf8"));
    const installation = join(dir, "installation.yaml");
    writeFileSync(installation, JSON.stringify({
      drivers: { compute: { id: "compute-ssh", component, approvedHelpers: [], configuration } },
    }));
    const ns = namespace("stable");
    const a = agent(ns);
    for (const [document, setting] of CASES) {
      const rev = revision(a, 1, { configuration: document, compute: { id: "compute-ssh", implementation: "occ/ssh" } });
      const params = JSON.stringify({ revision: rev, binding: { namespace: ns, agent: a } });
      const out = spawnSync(hostBinary, ["call", "prepareRevision", "--installation", installation, "--json", "--params", params],
        { encoding: "utf8" });
      const answer = JSON.parse(out.stdout || "{}");
      if (setting === null) {
        // Admitted: the component asked to run the helper, which no one approved here.
        assert.equal(answer.code, "exec-refused", `${JSON.stringify(document)}: ${out.stdout}`);
        assert.match(answer.refusal, /no helper is approved/);
      } else {
        assert.equal(out.status, 65, out.stdout + out.stderr);
        assert.equal(answer.code, "unsupported-gateway-setting", out.stdout);
        assert.ok(answer.message.includes(`configuration.${setting}: `), answer.message);
        // The same sentence as the package's.
        const [, , why] = pkg.REFUSED_GATEWAY_SETTINGS.find(([path]) => path.join(".") === setting);
        assert.ok(answer.message.includes(why), `${answer.message}\n${why}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
