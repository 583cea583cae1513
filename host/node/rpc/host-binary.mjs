// Where the occ-driver-host binary is: an override the operator gave, else
// the platform package npm or pnpm installed beside this package (an
// optional dependency with npm's os, cpu and libc fields: the package manager
// installs the one that fits this machine and skips the others). Node's own
// resolution finds it from this file's location, so it works from any
// node_modules layout, pnpm's included. Node built-ins only.

import { createRequire } from "node:module";

import { DriverError } from "./rpc.mjs";

/** The platform packages a release carries (xtask/src/dist/ builds them). */
export const PLATFORM_PACKAGES = Object.freeze({
  "linux-x64-glibc": "occ-driver-host-linux-x64-gnu",
});

/**
 * The environment a package starts the host with: `env` without
 * $OCC_DRIVER_COMPONENT. The host's --component reads that variable and would
 * let it override the component the package wrote into the installation, which
 * already took it into account (the package's own setting, then the variable,
 * then the component it carries): the setting wins, as the packages document.
 */
export function hostEnvironment(env = process.env) {
  const { OCC_DRIVER_COMPONENT: _ignored, ...rest } = env;
  return rest;
}

/** This machine as the platform packages name it: `linux-x64-glibc`. */
export function currentPlatform() {
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  const libc = process.platform === "linux" ? (glibc ? "glibc" : "musl") : "";
  return [process.platform, process.arch, libc].filter(Boolean).join("-");
}

/**
 * The binary to run: `override` (a setting), then $OCC_DRIVER_HOST, then the
 * installed platform package's. Throws a DriverError that names the package
 * to install and the overrides when there is none.
 *
 * `setting` names the override for the message ("configuration.driverHost.binary").
 */
export function resolveHostBinary(override, setting, { platform = currentPlatform(), from = import.meta.url } = {}) {
  if (override) return override;
  if (process.env.OCC_DRIVER_HOST) return process.env.OCC_DRIVER_HOST;
  const pkg = PLATFORM_PACKAGES[platform];
  if (pkg) {
    try {
      return createRequire(from).resolve(`${pkg}/bin/occ-driver-host`);
    } catch {
      // Not installed: said below.
    }
  }
  const wanted = pkg
    ? `the package ${pkg} is not installed (npm and pnpm skip it when its os, cpu or libc do not match, or when optional dependencies are omitted): install ${pkg} beside this package`
    : `no occ-driver-host package is built for ${platform} (built: ${Object.keys(PLATFORM_PACKAGES).join(", ")}): build occ-driver-host for this machine from source`;
  throw new DriverError(
    `no occ-driver-host binary for this machine (${platform}): ${wanted}, or name a binary in ${setting} or $OCC_DRIVER_HOST`,
    { code: "host-missing" },
  );
}
