#!/usr/bin/env bash
# One commit is the same bytes wherever it is built: this clones the commit at
# a path of another length, builds the release there (`cargo xtask dist`: the
# components, the stripped host binary and the npm tarballs) under its own
# HOME (so its own CARGO_HOME, where cargo unpacks the dependencies' sources)
# and its own target directory, and compares every tarball and the manifest
# (every component's, helper's and script's SHA-256) with a first build. It
# prints both manifests' hashes and fails on any difference.
#
#   bash tests/reproducible.sh [COMMIT]                  # two fresh clones
#   bash tests/reproducible.sh --against DIST [COMMIT]   # DIST, built from this
#                                                        # clone, against one
#
# tests/run.sh passes --against with the release it built for its install
# tests, when the tree is the commit: the second build is then the only one.
# Each clone path keeps its target directory under $OCC_REPRO_DIR (default:
# $CARGO_TARGET_DIR/repro, or /var/cache/occ/repro), so later runs rebuild only
# what the commit changed; the first build of the host takes minutes
# (tests/release-build.sh). Dependencies come from this machine's cargo
# registry, offline: the test needs no network once the workspace has been
# built here.
set -euo pipefail
# shellcheck source=tests/release-build.sh
. "$(dirname "$0")/release-build.sh"

against=
if [[ ${1:-} == --against ]]; then
	against=$(cd "$2" && pwd)
	shift 2
fi
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
started=$SECONDS

build() { # <name> <clone path>: prints the release directory
	release_build "$1" "$2" "$commit" "$base/dist-$1"
	echo "$base/dist-$1"
}

hashes() { # <release dir>: "<sha256>  <file>" of every file in it
	(cd "$1" && sha256sum -- *.tgz manifest.json)
	python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))
for c in m["components"]:
    print(c["sha256"], " ", c["file"], "(in the manifest)")
print(m["binary"]["sha256"], " ", m["binary"]["path"], "(in the manifest)")' "$1/manifest.json"
}

echo "reproducible: commit $commit"
if [[ -n $against ]]; then
	said=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["commit"])' "$against/manifest.json")
	if [[ $said != "$commit" ]]; then
		echo "reproducible: $against is a release of $said, not of $commit" >&2
		exit 2
	fi
	first=$against
	first_where="$against (this clone, $repo)"
else
	first=$(build a "$base/a/src")
	first_where="$base/a/src (HOME $base/home-a)"
fi
second=$(build second "$base/second-clone/elsewhere/occ-driver-host")
second_where="$base/second-clone/elsewhere/occ-driver-host (HOME $base/home-second)"

echo "  first:  $first_where"
hashes "$first" | sed 's/^/    /'
echo "  second: $second_where"
hashes "$second" | sed 's/^/    /'
status=0
count=0
for f in "$first"/*.tgz "$first/manifest.json"; do
	name=$(basename "$f")
	count=$((count + 1))
	if ! cmp -s "$f" "$second/$name"; then
		echo "  DIFFERENT: $name" >&2
		status=1
	fi
done
if [[ $(ls "$second" | wc -l) != $(ls "$first" | wc -l) ]]; then
	echo "  DIFFERENT: the two releases hold other files" >&2
	status=1
fi
if ((status)); then
	echo "reproducible: FAILED, the same commit built different bytes" >&2
	exit 1
fi
echo "reproducible: ok, $count files byte-identical across clones, paths and HOMEs (tarballs: binary, components, packages), checked in $((SECONDS - started)) s"
