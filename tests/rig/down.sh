#!/usr/bin/env bash
# Powers off rig hosts and removes their mounts, namespaces and veths.
# `down.sh` tears down every host of this rig (${OCC_RIG:-/run/occ-rig}/hosts); `down.sh
# occ-h2` only the named ones, which must belong to this rig. Hosts of other rigs (the
# demo's, another run's) are never touched. Safe to run when nothing is up. The client
# key stays, so a later up.sh authorizes the same identity.
set -euo pipefail
RIG_TOOL=rig-down
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root"
names=()
if [ "$#" -gt 0 ]; then
  for name in "$@"; do
    host_index "$name" >/dev/null
    if owned "$name"; then names+=("$name"); else say "$name is not a host of $OCC_RIG; left alone"; fi
  done
elif [ -d "$RIG_HOSTS_DIR" ]; then
  for dir in "$RIG_HOSTS_DIR"/occ-h*; do [ -d "$dir" ] && names+=("$(basename "$dir")"); done
fi
for name in "${names[@]+"${names[@]}"}"; do teardown_host "$name"; done
if [ -d "$OCC_RIG" ]; then write_inventory; fi
say "down: ${names[*]:-nothing was up}"
