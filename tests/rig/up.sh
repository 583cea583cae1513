#!/usr/bin/env bash
# Brings up disposable test hosts: `up.sh N` starts occ-h1..occ-hN, `up.sh occ-h3 occ-h7`
# starts the named ones. Hosts that are already up are left as they are; a host left
# half set up by an earlier run is torn down and started afresh. See RIG.md.
#
# With OCC_RIG_STARTED=FILE, the hosts this call started (not those it found up) are
# appended to FILE, one "<rig directory> <name>" a line, so that a caller can tear
# down only those.
#
# Outputs (under ${OCC_RIG:-/run/occ-rig}):
#   client/id_ed25519   the client key, authorized for root on every host (made once)
#   known_hosts         one line per host that is up
#   hosts.json          [{"name","address","port":22,"user":"root","nspawnPid"}]
#   env                 OCC_RIG_* variables (identity, known hosts, node and openclaw paths)
set -euo pipefail
RIG_TOOL=rig-up
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (netns, mounts, nspawn)"
[ "$#" -ge 1 ] || die "usage: up.sh N | up.sh occ-hK..."
for tool in systemd-nspawn ip ssh ssh-keygen mountpoint; do
  command -v "$tool" >/dev/null || die "$tool not found: run tests/rig/install.sh"
done
[ -x "$RIG_NODE" ] || die "Node 24 not found at $RIG_NODE: run tests/rig/install.sh"
[ -r "$RIG_OPENCLAW" ] || die "OpenClaw not found at $RIG_OPENCLAW: run tests/rig/install.sh"

names=()
if [ "$#" -eq 1 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  [ "$1" -ge 1 ] && [ "$1" -le 254 ] || die "host count must be 1..254"
  for ((k = 1; k <= $1; k++)); do names+=("occ-h$k"); done
else
  for name in "$@"; do host_index "$name" >/dev/null; names+=("$name"); done
fi

BOOT_TIMEOUT="${OCC_RIG_BOOT_TIMEOUT:-120}"
mkdir -p "$OCC_RIG/client" "$RIG_HOSTS_DIR"
chmod 0700 "$OCC_RIG/client"
if [ ! -f "$RIG_KEY" ]; then
  ssh-keygen -q -t ed25519 -N '' -C occ-rig-client -f "$RIG_KEY"
fi

ssh_host() {
  # ssh_host K CMD...: one command on host K with exactly the rig's key and known host.
  local k="$1"; shift
  ssh -F none -i "$RIG_KEY" -o IdentitiesOnly=yes -o BatchMode=yes \
    -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$(host_dir "occ-h$k")/known_hosts" \
    -o ConnectTimeout=3 -o LogLevel=ERROR "root@10.201.$k.2" "$@"
}

# The hosts see the machine's / through their overlay; the npm cache must be on that
# filesystem or it has to be bound in explicitly.
extra_binds=()
if [ "$(findmnt -no TARGET -T "$OCC_CACHE")" != "/" ]; then
  extra_binds+=("--bind-ro=$OCC_CACHE")
fi

# Units of the machine's / that a test host must not start.
MASK=(postgresql.service e2scrub_reap.service e2scrub_all.timer apt-daily.timer
  apt-daily-upgrade.timer dpkg-db-backup.timer man-db.timer fstrim.timer
  systemd-timesyncd.service systemd-pstore.service getty@tty1.service
  systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service
  systemd-resolved.service cron.service console-getty.service)

start_host() {
  local name="$1" k dir root pid
  k="$(host_index "$name")"
  dir="$(host_dir "$name")"
  if pid="$(nspawn_pid "$name")" && [ -f "$dir/up" ] && ssh_host "$k" true 2>/dev/null; then
    say "$name already up (nspawn pid $pid)"
    return 0
  fi
  if ! owned "$name" && netns_exists "$name"; then
    die "$name is in use by another rig (its network namespace exists but $(host_dir "$name") does not); pick another name"
  fi
  teardown_host "$name"
  say "starting $name at 10.201.$k.2"
  # Recorded before anything is created, so that a failed start is still cleaned up.
  mkdir -p "$(host_dir "$name")"
  [ -z "${OCC_RIG_STARTED:-}" ] || printf '%s %s\n' "$OCC_RIG" "$name" >>"$OCC_RIG_STARTED"
  mkdir -p "$dir/fs" "$dir/root"
  mount -t tmpfs -o "size=${OCC_RIG_TMPFS_SIZE:-4g},mode=0755" "occ-rig-$name" "$dir/fs"
  mkdir "$dir/fs/upper" "$dir/fs/work"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$dir/fs/upper,workdir=$dir/fs/work" "$dir/root"
  root="$dir/root"

  printf '%s\n' "$name" >"$root/etc/hostname"
  # A copied machine-id would make every host the same machine; without one the
  # first boot would enable every unit it finds.
  # systemd-machine-id-setup would derive it from the VM's DMI UUID, which is the
  # machine's own id again; a random one is what a fresh install gets.
  rm -f "$root/etc/machine-id"
  od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$root/etc/machine-id"
  printf '\n' >>"$root/etc/machine-id"
  chmod 0444 "$root/etc/machine-id"
  install -d -m 0700 "$root/root/.ssh"
  install -m 0600 "$RIG_KEY.pub" "$root/root/.ssh/authorized_keys"
  # root's rc files on this machine cost 0.3 s per login and may print.
  : >"$root/root/.bashrc"
  : >"$root/root/.profile"
  rm -f "$root"/etc/ssh/ssh_host_*
  ssh-keygen -q -t ed25519 -N '' -C "root@$name" -f "$root/etc/ssh/ssh_host_ed25519_key"
  cp "$root/etc/ssh/ssh_host_ed25519_key.pub" "$dir/host_ed25519.pub"
  printf '10.201.%s.2 %s\n' "$k" "$(awk '{print $1" "$2}' "$dir/host_ed25519.pub")" >"$dir/known_hosts"
  mkdir -p "$root/etc/ssh/sshd_config.d"
  cat >"$root/etc/ssh/sshd_config.d/occ-rig.conf" <<CONF
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
CONF
  # MaxSessions (10) and MaxStartups (10:30:100) stay as Debian ships them:
  # what a real target runs, and what the host's session budget is for.
  for unit in "${MASK[@]}"; do ln -sfn /dev/null "$root/etc/systemd/system/$unit"; done
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -sfn /lib/systemd/system/ssh.service "$root/etc/systemd/system/multi-user.target.wants/ssh.service"

  ip netns add "$name"
  ip link add "veth-$name" type veth peer name eth0 netns "$name"
  ip addr add "10.201.$k.1/30" dev "veth-$name"
  ip link set "veth-$name" up
  ip -n "$name" addr add "10.201.$k.2/30" dev eth0
  ip -n "$name" link set eth0 up
  ip -n "$name" link set lo up

  # setsid: the container must outlive the shell or test runner that started it and
  # must not receive that process group's signals.
  setsid systemd-nspawn -D "$root" -b --register=no --keep-unit \
    --network-namespace-path="/run/netns/$name" -M "$name" --console=passive \
    "${extra_binds[@]}" </dev/null >"$dir/console.log" 2>&1 &
  echo "$!" >"$dir/nspawn.pid"
}

wait_host() {
  local name="$1" k dir start out
  k="$(host_index "$name")"
  dir="$(host_dir "$name")"
  [ -f "$dir/up" ] && return 0
  start=$SECONDS
  until ssh_host "$k" true 2>/dev/null; do
    if ! nspawn_pid "$name" >/dev/null; then
      say "$name: systemd-nspawn exited during boot; console log:"
      tail -n 40 "$dir/console.log" >&2 || true
      die "$name did not boot"
    fi
    if [ $((SECONDS - start)) -ge "$BOOT_TIMEOUT" ]; then
      say "$name: sshd did not answer within ${BOOT_TIMEOUT}s; console log:"
      tail -n 40 "$dir/console.log" >&2 || true
      die "$name did not become reachable"
    fi
    sleep 0.5
  done
  # Bounded wait for boot to settle so that tests meet a quiet systemd.
  out="$(ssh_host "$k" timeout 60 systemctl is-system-running --wait 2>/dev/null || true)"
  case "$out" in
    running) ;;
    *) say "$name: systemd reports '${out:-unknown}'; failed units:"
       ssh_host "$k" systemctl --failed --no-legend --plain >&2 || true ;;
  esac
  # Until systemd-user-sessions has run, /run/nologin refuses every account but
  # root ("System is booting up"), and a test that logs in as one meets that
  # instead of its command. Seen once: the unit failed at boot on a loaded
  # machine. It is run again, and a host that still refuses is not handed out.
  if ssh_host "$k" test -e /run/nologin; then
    say "$name: /run/nologin is still there; systemd-user-sessions:"
    ssh_host "$k" "journalctl -b -u systemd-user-sessions.service --no-pager -n 5 -o cat" >&2 || true
    ssh_host "$k" "systemctl restart systemd-user-sessions.service" >&2 || true
    ssh_host "$k" test ! -e /run/nologin || die "$name: /run/nologin stays after systemd-user-sessions ran again: accounts cannot log in"
    say "$name: systemd-user-sessions ran again; accounts may log in"
  fi
  if ! ssh_host "$k" test -x "$RIG_NODE" -a -r "$RIG_OPENCLAW"; then
    die "$name: Node 24 or OpenClaw is not visible inside the host at $RIG_NODE / $RIG_OPENCLAW"
  fi
  touch "$dir/up"
  say "$name up in $((SECONDS - start))s ($(ssh_host "$k" "$RIG_NODE" --version))"
}

for name in "${names[@]}"; do start_host "$name"; done
for name in "${names[@]}"; do wait_host "$name"; done
write_inventory
say "inventory: $OCC_RIG/hosts.json, known hosts: $OCC_RIG/known_hosts, env: $OCC_RIG/env"
cat "$OCC_RIG/hosts.json"
