#!/usr/bin/env bash
# The release before this one, built from its own commit by its own
# `cargo xtask dist`, for the tests that deploy with it and manage the result
# with this checkout's build, and back (docs/operators.md, "Upgrading and
# rolling back"). Built once per machine: the release of a commit never
# changes, so $OCC_CACHE/previous-release/<commit>/ is reused as it is.
#
#   bash tests/previous-release.sh          # prints the release directory
#
# It is built in the reproducibility check's second clone (tests/release-build.sh),
# so that the two share their compiled dependencies.
set -euo pipefail
# shellcheck source=tests/release-build.sh
. "$(dirname "$0")/release-build.sh"

# The release before this one: when a release is made, this names it.
PREVIOUS_VERSION=0.2.0
PREVIOUS_COMMIT=396abb6693595b168704a7447978ead51412cb61

cache=${OCC_CACHE:-/var/cache/occ}/previous-release
out=$cache/$PREVIOUS_COMMIT
said() { python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["version"], m["commit"])' "$1/manifest.json" 2>/dev/null; }
if [[ $(said "$out" || true) != "$PREVIOUS_VERSION $PREVIOUS_COMMIT" ]]; then
	echo "previous release: building $PREVIOUS_VERSION (commit ${PREVIOUS_COMMIT:0:12}) with its own cargo xtask dist" >&2
	mkdir -p "$cache"
	release_build second "$base/second-clone/elsewhere/occ-driver-host" "$PREVIOUS_COMMIT" "$out.partial"
	rm -rf "$out"
	mv "$out.partial" "$out"
	if [[ $(said "$out" || true) != "$PREVIOUS_VERSION $PREVIOUS_COMMIT" ]]; then
		echo "previous release: $out/manifest.json does not name $PREVIOUS_VERSION of $PREVIOUS_COMMIT" >&2
		exit 1
	fi
fi
echo "$out"
