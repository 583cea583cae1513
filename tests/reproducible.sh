#!/usr/bin/env bash
# The components of one commit are the same bytes wherever they are built:
# this clones the commit twice, at two paths of different lengths, builds the
# shipped components in each under its own HOME (so its own CARGO_HOME, where
# cargo unpacks the dependencies' sources) and its own target directory, and
# compares every .wasm. It prints both sets of SHA-256 and fails on any
# difference.
#
#   bash tests/reproducible.sh [COMMIT]       # default: HEAD of this clone
#
# Only the components are built (no host, no wasmtime). Each clone path keeps
# its target directory under $OCC_REPRO_DIR (default: $CARGO_TARGET_DIR/repro,
# or /var/cache/occ/repro), so later runs rebuild only what the commit
# changed. Dependencies come from this machine's cargo registry, offline: the
# test needs no network once the workspace has been built here.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
base=${OCC_REPRO_DIR:-${CARGO_TARGET_DIR:-/var/cache/occ/target}/repro}
real_cargo_home=${CARGO_HOME:-$HOME/.cargo}
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
# The toolchain's proxies, wherever this HOME keeps them.
export PATH="$real_cargo_home/bin:$PATH"
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR
components=(guest_ssh_driver guest_ssh_sandbox inventory_driver)

build() { # <name> <clone path>
	local name=$1 clone=$2 home="$base/home-$1"
	mkdir -p "$home/.cargo/registry" "$(dirname "$clone")"
	# The registry's index and downloaded crates, not its unpacked sources:
	# each HOME unpacks its own, at its own path.
	for part in index cache; do
		if [[ ! -d $home/.cargo/registry/$part && -d $real_cargo_home/registry/$part ]]; then
			cp -a "$real_cargo_home/registry/$part" "$home/.cargo/registry/$part"
		fi
	done
	if [[ ! -d $clone/.git ]]; then
		git clone --quiet --no-checkout "$repo" "$clone"
	fi
	git -C "$clone" fetch --quiet "$repo" "$commit"
	git -C "$clone" checkout --quiet --force --detach "$commit"
	git -C "$clone" clean --quiet -fdx
	(
		cd "$clone"
		HOME=$home CARGO_HOME=$home/.cargo CARGO_TARGET_DIR=$base/target-$name \
			cargo components --offline --locked --quiet
	)
	for c in "${components[@]}"; do
		sha256sum "$base/target-$name/wasm32-wasip2/release/$c.wasm" | cut -d' ' -f1
	done
}

echo "reproducible: commit $commit"
first=$(build a "$base/a/src")
second=$(build second "$base/second-clone/elsewhere/occ-driver-host")
i=0
status=0
for c in "${components[@]}"; do
	a=$(sed -n "$((i + 1))p" <<<"$first")
	b=$(sed -n "$((i + 1))p" <<<"$second")
	echo "  $c.wasm"
	echo "    $a  $base/a/src (HOME $base/home-a)"
	echo "    $b  $base/second-clone/elsewhere/occ-driver-host (HOME $base/home-second)"
	if [[ $a != "$b" ]]; then
		echo "    DIFFERENT" >&2
		status=1
	fi
	i=$((i + 1))
done
if ((status)); then
	echo "reproducible: FAILED, the same commit built different bytes" >&2
	exit 1
fi
echo "reproducible: ok, ${#components[@]} components byte-identical across paths and HOMEs"
