// The native gateway settings an SSH Compute gateway cannot serve, as OCC's own
// SSH driver refuses them (its `validateGatewaySettings`). The driver component
// refuses the same at prepare and activate (guest-ssh-driver/src/admission.rs,
// REFUSED_GATEWAY_SETTINGS); test/gateway-settings.test.mjs holds both to one
// table of cases. A refusal names the setting, never the document's value.
// Node built-ins only.

import { DriverError } from "occ-driver-host-rpc";

/** [path, the refused value, why]. */
export const REFUSED_GATEWAY_SETTINGS = Object.freeze([
  Object.freeze([
    ["gateway", "tls", "enabled"],
    true,
    "gateway TLS is unsupported by SSH Compute: OCC reaches the gateway over loopback HTTP on its host; remove the setting",
  ]),
  Object.freeze([
    ["plugins", "entries", "codex", "config", "appServer", "approvalPolicy"],
    "untrusted",
    "the untrusted approval policy of the Codex app server is unsupported by SSH Compute: it asks a person to approve each command, and an SSH Agent has no one to ask; choose another approval policy",
  ]),
]);

function at(document, path) {
  let value = document;
  for (const key of path) {
    if (value === null || typeof value !== "object" || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
    value = value[key];
  }
  return value;
}

/**
 * OCC's `validateGatewaySettings(configuration)`: synchronous, throws a
 * permanent DriverError naming the first refused setting. Teardown
 * (deactivate, stop, retire) never calls it, so an older revision can still be
 * stopped.
 */
export function validateGatewaySettings(configuration) {
  for (const [path, refused, why] of REFUSED_GATEWAY_SETTINGS) {
    if (at(configuration, path) === refused) {
      throw new DriverError(`configuration.${path.join(".")}: ${why}`, {
        code: "unsupported-gateway-setting",
      });
    }
  }
}
