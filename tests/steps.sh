# Sourced by tests/run.sh, never run: the run's steps, each timed, counted and
# logged, lanes of steps that run side by side, and the table that ends a run.
#
# A step writes its whole output to $STEPS_LOGS/<NN>-<name>.log and one line to
# $STEPS_LOGS/steps.tsv when it ends: its name, its lane, seconds, the tests
# it saw pass and fail (from libtest's "test result:" lines and node --test's
# summary), and its exit status. A step in the foreground also shows its
# output; a lane's steps only log it, and a failed step's log is printed when
# the run ends, so that lanes running together never interleave their output.

: "${STEPS_LOGS:?set STEPS_LOGS before sourcing tests/steps.sh}"
mkdir -p "$STEPS_LOGS"
: >"$STEPS_LOGS/steps.tsv"
STEPS_STARTED=$SECONDS
steps_seq=0

# steps_count LOG: "<passed> <failed>" counted from a test log; "- -" when it ran no tests.
steps_count() {
  python3 - "$1" <<'PY'
import re, sys
passed = failed = 0
seen = False
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if m:
        seen = True
        passed += int(m.group(1))
        failed += int(m.group(2))
        continue
    # node --test: the spec reporter's summary ("ℹ pass 24") or TAP's ("# pass 24").
    m = re.match(r"^(?:\u2139|#) (pass|fail) (\d+)$", line)
    if m:
        seen = True
        if m.group(1) == "pass":
            passed += int(m.group(2))
        else:
            failed += int(m.group(2))
print(f"{passed} {failed}" if seen else "- -")
PY
}

# step NAME CMD...: runs CMD in the foreground, its output shown and logged.
# Fails the run (set -e) when CMD fails.
step() {
  local name=$1 log start rc=0
  shift
  steps_seq=$((steps_seq + 1))
  log=$(printf '%s/%02d-%s.log' "$STEPS_LOGS" "$steps_seq" "${name//[^A-Za-z0-9._-]/_}")
  printf '\n== %s (at %d s)\n' "$name" "$((SECONDS - STEPS_STARTED))" >&2
  start=$SECONDS
  # pipefail: the pipeline's status is the command's, tee's being 0.
  "$@" 2>&1 | tee "$log" || rc=$?
  steps_record "$name" "-" "$((SECONDS - start))" "$log" "$rc"
  return "$rc"
}

# steps_record NAME LANE SECONDS LOG RC
steps_record() {
  local counts
  counts=$(steps_count "$4")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${counts% *}" "${counts#* }" "$5" "$4" >>"$STEPS_LOGS/steps.tsv"
}

# lane NAME FUNCTION: runs FUNCTION in the background as lane NAME; inside it,
# lane_step runs each step. A lane goes on after a failed step (its other
# steps test other things) and fails when one did. lanes_wait waits for all.
STEPS_LANES=()
lane() {
  local name=$1 body=$2
  (
    STEPS_LANE=$name
    STEPS_LANE_STATUS=0
    "$body"
    exit "$STEPS_LANE_STATUS"
  ) &
  STEPS_LANES+=("$!:$name")
}

# lane_step NAME CMD...: one step of the current lane, its output logged only.
lane_step() {
  local name=$1 log start rc=0
  shift
  log=$(printf '%s/%s-%s.log' "$STEPS_LOGS" "$STEPS_LANE" "${name//[^A-Za-z0-9._-]/_}")
  printf '   [%s] %s: started at %d s\n' "$STEPS_LANE" "$name" "$((SECONDS - STEPS_STARTED))" >&2
  start=$SECONDS
  "$@" >"$log" 2>&1 </dev/null || rc=$?
  steps_record "$name" "$STEPS_LANE" "$((SECONDS - start))" "$log" "$rc"
  if [ "$rc" = 0 ]; then
    printf '   [%s] %s: ok in %d s\n' "$STEPS_LANE" "$name" "$((SECONDS - start))" >&2
  else
    printf '   [%s] %s: FAILED (exit %d) in %d s\n' "$STEPS_LANE" "$name" "$rc" "$((SECONDS - start))" >&2
    STEPS_LANE_STATUS=1
  fi
}

# lanes_wait: waits for every lane; fails when one did.
lanes_wait() {
  local entry status=0
  for entry in "${STEPS_LANES[@]}"; do
    wait "${entry%%:*}" || status=1
  done
  STEPS_LANES=()
  return "$status"
}

# steps_table: the run's closing table, and the log of every failed step.
steps_table() {
  python3 - "$STEPS_LOGS/steps.tsv" "$((SECONDS - STEPS_STARTED))" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
total = int(sys.argv[2])
w = max([len(r[0]) + (len(r[1]) + 3 if r[1] != "-" else 0) for r in rows] + [4])
print()
print(f"{'step':<{w}}  {'time':>7}  {'passed':>6}  {'failed':>6}  result")
print("-" * (w + 36))
passed = failed = 0
for name, lane, secs, p, f, rc, log in rows:
    label = f"[{lane}] {name}" if lane != "-" else name
    result = "ok" if rc == "0" else f"FAILED (exit {rc})"
    print(f"{label:<{w}}  {secs + ' s':>7}  {p:>6}  {f:>6}  {result}")
    passed += int(p) if p.isdigit() else 0
    failed += int(f) if f.isdigit() else 0
print("-" * (w + 36))
print(f"{'whole run (wall clock)':<{w}}  {str(total) + ' s':>7}  {passed:>6}  {failed:>6}")
for name, lane, secs, p, f, rc, log in rows:
    if rc != "0":
        print(f"\n== the log of the failed step {name!r} ({log}), its last 150 lines:")
        lines = open(log, errors="replace").read().splitlines()
        print("\n".join(lines[-150:]))
PY
  echo "every step's log: $STEPS_LOGS"
}
