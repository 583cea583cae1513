# Sourced by scripts that bring test hosts up for a run (tests/run.sh,
# tests/bench-sandbox.sh), never run: track the hosts this run started
# (tests/rig/up.sh names them in $OCC_RIG_STARTED) and tear down only those,
# whatever happened, unless OCC_KEEP_RIG is set. A host found up is left up.
export OCC_RIG_STARTED
OCC_RIG_STARTED="$(mktemp)"
rig_teardown_started() {
  local started
  started="$(sort -u "$OCC_RIG_STARTED" | tr '\n' ' ')"
  rm -f "$OCC_RIG_STARTED"
  [ -n "$started" ] || return 0
  # shellcheck disable=SC2086
  bash tests/rig/down.sh $started ||
    echo "test hosts: teardown failed; run OCC_RIG=$OCC_RIG bash tests/rig/down.sh $started" >&2
}
if [ -z "${OCC_KEEP_RIG:-}" ]; then
  trap rig_teardown_started EXIT
fi
