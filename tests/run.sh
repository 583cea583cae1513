#!/usr/bin/env bash
# The project's whole test run, from a fresh machine: installs what the tests need
# (Debian packages, the wasm32-wasip2 target, Node.js 24 and OpenClaw from npm),
# builds the driver component and the host, runs every Rust test, brings up two
# disposable test hosts (systemd-nspawn with real systemd and sshd), runs the
# helper's tests, the end-to-end suites (compute driver and sandbox backend) and
# the Node tests (OCC's driver package, OpenClaw's sandbox seam) against them,
# and tears the hosts down again, whatever happened.
#
#   bash tests/run.sh            # everything
#   OCC_KEEP_RIG=1 bash tests/run.sh   # leave the test hosts up afterwards
#
# Build output goes to $CARGO_TARGET_DIR (default /var/cache/occ/target): outside
# the clone, so that later runs and CI reuse the compiled wasmtime.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/occ/target}"
export OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
started=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" "$((SECONDS - started))" >&2; }

step "install: packages, wasm target, Node 24 and OpenClaw"
bash tests/rig/install.sh >/dev/null
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target list --installed | grep -q wasm32-wasip2

step "build: driver component, test guests and host"
cargo guests
cargo build --release -p occ-driver-host

step "release: the npm packages the install tests use (cargo xtask dist)"
# The stripped host binary (a build of its own the first time), the OCC driver
# package and the OpenClaw plugin, as users install them: the install tests
# (host/node/compute/test/occ-loader.test.mjs, host/node/openclaw-plugin/test/install.test.mjs)
# take nothing else from this checkout.
export OCC_DIST="$OCC_CACHE/dist"
rm -rf "$OCC_DIST"
cargo xtask dist --out "$OCC_DIST"

step "rust tests: unit, runtime bounds, driver policy"
# The test guests are wasm32-wasip2 components only: compiling them natively would
# change dependency features and rebuild wasmtime for nothing.
cargo test --release --workspace --exclude fault-guest --exclude fs-guest --exclude sandbox-hostile-guest --exclude compute-hostile-guest

step "reproducible release: one commit built in two clones under two HOMEs"
# The tarballs (binary, components, packages) and the manifest, compared with
# a second clone's, in target directories of their own that later runs reuse.
# A tree with uncommitted changes is not its commit: two fresh clones then.
if grep -q '"commit": "[0-9a-f]*-modified"' "$OCC_DIST/manifest.json"; then
  bash tests/reproducible.sh
else
  bash tests/reproducible.sh --against "$OCC_DIST"
fi

step "test hosts: up"
# The test hosts are occ-h1 and occ-h2 of $OCC_RIG (default /run/occ-rig); the demo's
# host lives in a rig of its own and is never touched. Only hosts this run started
# are torn down afterwards.
export OCC_RIG="${OCC_RIG:-/run/occ-rig}"
# shellcheck source=tests/rig/started.sh
. tests/rig/started.sh
bash tests/rig/up.sh occ-h1 occ-h2
# shellcheck disable=SC1091
set -a; . "$OCC_RIG/env"; set +a

step "helper tests on the test hosts"
bash tests/helper/run.sh

step "end-to-end suite: the host binary deploys real gateways"
cargo test --release -p occ-e2e -- --ignored --test-threads=1 --nocapture

step "Node tests: the OCC driver package, and OpenClaw with the sandbox backend"
export OCC_DRIVER_HOST="$CARGO_TARGET_DIR/release/occ-driver-host"
# Node 24, the one OpenClaw needs (the system's node may be older); the globs are
# node's own, so quote them. --test-force-exit: a test past its timeout fails
# and its file ends, instead of whatever it left running holding the run.
"$OCC_RIG_NODE" --test --test-force-exit 'host/node/compute/test/*.test.mjs'
"$OCC_RIG_NODE" --test --test-force-exit --test-concurrency=1 'host/node/openclaw-plugin/test/*.test.mjs'

step "the sandbox suites again, a run of its own for every operation (workspaceWorker: false)"
# The long-lived workspace worker is the default; targets that want no
# long-lived process get the one-shot path, held to the same tests.
OCC_TEST_WORKSPACE_WORKER=0 cargo test --release -p occ-e2e --test sandbox -- --ignored --test-threads=1
OCC_TEST_WORKSPACE_WORKER=0 "$OCC_RIG_NODE" --test --test-force-exit --test-concurrency=1 'host/node/openclaw-plugin/test/*.test.mjs'

step "done in $((SECONDS - started)) s"
