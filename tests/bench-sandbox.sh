#!/usr/bin/env bash
# The sandbox benchmark (host/node/openclaw-plugin/test/bench.mjs): OpenClaw's own SSH
# backend against ours (occ-ssh) on one rig host, operation by operation,
# seeding, the transport's floor and concurrent scopes; prints one Markdown
# table on stdout. About 8 minutes on a loaded 2-core machine.
#
#   bash tests/bench-sandbox.sh
#   OCC_DRIVER_HOST=.../occ-driver-host OCC_SANDBOX_COMPONENT=.../guest_ssh_sandbox.wasm \
#     bash tests/bench-sandbox.sh        # measure given binaries: nothing is built
#
# Without OCC_DRIVER_HOST it builds the host (cargo xtask host), without
# OCC_SANDBOX_COMPONENT the components (cargo guests), into $CARGO_TARGET_DIR
# (default /var/cache/occ/target) as tests/run.sh does. The rig is $OCC_RIG
# (default /run/occ-rig-bench) and its host $OCC_BENCH_HOST (default the rig's
# first host, else occ-h5): brought up if it is not, and then torn down again
# unless OCC_KEEP_RIG is set; a host found up is left up. The bench's own knobs
# (OCC_BENCH_N, OCC_BENCH_SEED_N, ...) are described in bench.mjs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/occ/target}"
export OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
export OCC_RIG="${OCC_RIG:-/run/occ-rig-bench}"
say() { printf 'bench-sandbox: %s\n' "$*" >&2; }

bash tests/rig/install.sh >/dev/null
if [ -z "${OCC_SANDBOX_COMPONENT:-}" ]; then
  say "building the components (cargo guests)"
  rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target list --installed | grep -q wasm32-wasip2
  cargo guests
  export OCC_SANDBOX_COMPONENT="$CARGO_TARGET_DIR/wasm32-wasip2/release/guest_ssh_sandbox.wasm"
fi
if [ -z "${OCC_DRIVER_HOST:-}" ]; then
  say "building the host as the release ships it (cargo xtask host)"
  OCC_DRIVER_HOST=$(cargo xtask host --print-path)
  export OCC_DRIVER_HOST
fi
[ -x "$OCC_DRIVER_HOST" ] || { say "error: no host binary at $OCC_DRIVER_HOST"; exit 1; }
[ -r "$OCC_SANDBOX_COMPONENT" ] || { say "error: no component at $OCC_SANDBOX_COMPONENT"; exit 1; }

if [ -z "${OCC_BENCH_HOST:-}" ]; then
  OCC_BENCH_HOST="$(sed -n 's/^\[{"name":"\(occ-h[0-9]*\)".*/\1/p' "$OCC_RIG/hosts.json" 2>/dev/null || true)"
  OCC_BENCH_HOST="${OCC_BENCH_HOST:-occ-h5}"
fi
export OCC_BENCH_HOST
# shellcheck source=tests/rig/started.sh
. tests/rig/started.sh
bash tests/rig/up.sh "$OCC_BENCH_HOST" >&2   # stdout is the table alone
# shellcheck disable=SC1091
set -a; . "$OCC_RIG/env"; set +a

"$OCC_RIG_NODE" host/node/openclaw-plugin/test/bench.mjs
