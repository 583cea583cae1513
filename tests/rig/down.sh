#!/usr/bin/env bash
# Powers off rig hosts and removes their mounts, namespaces and veths.
# `down.sh` tears down every host under ${OCC_RIG:-/run/occ-rig}/hosts; `down.sh occ-h2`
# only the named ones. Safe to run when nothing is up. The client key stays, so a
# later up.sh authorizes the same identity.
set -euo pipefail
RIG_TOOL=rig-down
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root"
names=()
if [ "$#" -gt 0 ]; then
  for name in "$@"; do host_index "$name" >/dev/null; names+=("$name"); done
else
  if [ -d "$RIG_HOSTS_DIR" ]; then
    for dir in "$RIG_HOSTS_DIR"/occ-h*; do [ -d "$dir" ] && names+=("$(basename "$dir")"); done
  fi
  # Namespaces and veths left by a run whose state directory is gone.
  while read -r ns _; do
    [[ "$ns" =~ ^occ-h[0-9]+$ ]] && [[ ! " ${names[*]-} " =~ " $ns " ]] && names+=("$ns")
  done < <(ip netns list 2>/dev/null || true)
fi
for name in "${names[@]}"; do teardown_host "$name"; done
if [ -d "$OCC_RIG" ]; then write_inventory; fi
say "down: ${names[*]:-nothing was up}"
