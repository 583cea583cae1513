# Sourced by tests/reproducible.sh and tests/previous-release.sh, never run: a
# release built by a commit's own `cargo xtask dist`, in a clone of its own
# under a HOME of its own (its own CARGO_HOME, where cargo unpacks the
# dependencies' sources) and a target directory that later builds reuse.
#
# The builds named alike share their clone, HOME and target directory: the
# reproducibility check's second clone and the previous release are built
# there one after the other, so that the dependencies compiled for one serve
# the other (their paths, hence their flags, are the same); a lock keeps two
# such builds from running at once. Dependencies come from this machine's cargo
# registry, offline.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${OCC_REPRO_DIR:-${CARGO_TARGET_DIR:-/var/cache/occ/target}/repro}
real_cargo_home=${CARGO_HOME:-$HOME/.cargo}
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
# The toolchain's proxies, wherever this HOME keeps them.
export PATH="$real_cargo_home/bin:$PATH"
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR

# release_build NAME CLONE COMMIT OUT: builds COMMIT's release into OUT in the
# clone at CLONE, with HOME $base/home-NAME and target $base/target-NAME;
# prints how long it took on stderr.
release_build() {
	local name=$1 clone=$2 commit=$3 out=$4 home="$base/home-$1" started=$SECONDS
	mkdir -p "$home/.cargo/registry" "$(dirname "$clone")" "$base"
	exec {lock}>"$base/$name.lock"
	flock "$lock"
	if [[ ! -d $clone/.git ]]; then
		git clone --quiet --no-checkout "$repo" "$clone"
	fi
	git -C "$clone" fetch --quiet "$repo" "$commit"
	git -C "$clone" checkout --quiet --force --detach "$commit"
	git -C "$clone" clean --quiet -fdx
	# Every crate the commit's lock file names, into this machine's registry
	# (an older commit may name one the checkout no longer does): the build
	# itself then runs offline.
	(cd "$clone" && cargo fetch --locked --quiet)
	# The registry's index and downloaded crates, not its unpacked sources:
	# each HOME unpacks its own, at its own path.
	for part in index cache; do
		if [[ -d $real_cargo_home/registry/$part ]]; then
			mkdir -p "$home/.cargo/registry/$part"
			cp -an "$real_cargo_home/registry/$part/." "$home/.cargo/registry/$part/"
		fi
	done
	rm -rf "$out"
	(
		cd "$clone"
		# Offline for xtask's own build too, not only the builds it starts.
		HOME=$home CARGO_HOME=$home/.cargo CARGO_TARGET_DIR=$base/target-$name CARGO_NET_OFFLINE=true \
			cargo xtask dist --out "$out" --offline --locked >&2
	)
	flock -u "$lock"
	exec {lock}>&-
	echo "release of ${commit:0:12} built in $clone in $((SECONDS - started)) s" >&2
}
