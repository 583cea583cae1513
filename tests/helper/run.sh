#!/usr/bin/env bash
# Runs the helper's own test suite (tests/helper/*.test.js) against a real rig host.
#
#   tests/helper/run.sh                 # all files
#   tests/helper/run.sh gateway         # only tests/helper/gateway.test.js
#
# Installs the rig's prerequisites if missing and brings up host occ-h1 if it is not
# up (both steps are idempotent and quick when already done). The rig is left running
# for the next run or for other suites: tear it down with `tests/rig/down.sh`.
# OCC_HELPER_PATH=<file> runs the suite against another copy of the helper.
# build.test.js, render.test.js and envelope.test.js are pure (the helper and its
# modules required, no host): they also run alone, with no rig and on any Node from 20, as
#   node --test tests/helper/build.test.js tests/helper/render.test.js tests/helper/envelope.test.js
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

bash "$repo/tests/rig/install.sh" >/dev/null
bash "$repo/tests/rig/up.sh" "${OCC_HELPER_RIG_HOST:-occ-h1}" >/dev/null

files=()
if [ "$#" -gt 0 ]; then
  for name in "$@"; do files+=("$here/${name%.test.js}.test.js"); done
else
  files=("$here"/*.test.js)
fi
# Files run one after another: each uses its own root and port range on the host, but
# real gateways are heavy and the lock timings are measured.
cd "$repo"
exec node --test --test-concurrency=1 "${files[@]}"
