# Sourced by scripts that bring test hosts up for a run (tests/run.sh,
# tests/bench-sandbox.sh), never run: track the hosts this run started, in any
# of its rigs (tests/rig/up.sh appends "<rig> <name>" to $OCC_RIG_STARTED), and
# tear down only those, whatever happened, unless OCC_KEEP_RIG is set. A host
# found up is left up. The EXIT trap is set here unless the caller sets
# RIG_STARTED_TRAP=no and calls rig_teardown_started from its own.
export OCC_RIG_STARTED
OCC_RIG_STARTED="$(mktemp)"
rig_teardown_started() {
  [ -f "$OCC_RIG_STARTED" ] || return 0
  if [ -n "${OCC_KEEP_RIG:-}" ]; then
    rm -f "$OCC_RIG_STARTED"
    return 0
  fi
  local rig names status=0
  for rig in $(awk '{ print $1 }' "$OCC_RIG_STARTED" | sort -u); do
    names=$(awk -v r="$rig" '$1 == r { print $2 }' "$OCC_RIG_STARTED" | sort -u | tr '\n' ' ')
    # shellcheck disable=SC2086
    OCC_RIG=$rig bash tests/rig/down.sh $names ||
      { echo "test hosts: teardown failed; run OCC_RIG=$rig bash tests/rig/down.sh $names" >&2; status=1; }
  done
  rm -f "$OCC_RIG_STARTED"
  return "$status"
}
if [ "${RIG_STARTED_TRAP:-yes}" != no ]; then
  trap rig_teardown_started EXIT
fi
