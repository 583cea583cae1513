#!/bin/sh
# occ sandbox: the remote utility contract, checked from the non-interactive
# SSH command itself (not a login shell), as the spec requires.
#
# Sent by the sandbox component and run by the host as
#   /bin/sh -c <this text> preflight <envelope>
# where the envelope is the JSON object the host writes for the call (see
# workspace.py): it runs only when that envelope grants the preflight method
# its one operation, and takes no argument of its own; it acts on nothing
# else. POSIX sh only, so that it answers on a target that lacks everything
# else.
# Prints one `key=value` line per finding:
#   missing=<what>    a utility of the contract is absent or not GNU-compatible
#   warning=<text>    something that limits the backend without stopping it
#   python=<version>  python3's version
# and exits 0; the component decides what the findings mean.

missing() { printf 'missing=%s\n' "$1"; }

refuse() {
  printf '{"error": "invalid-operation", "message": "%s", "path": null}\n' "$1" >&2
  exit 1
}
[ "$#" -eq 1 ] || refuse "preflight takes the envelope and no argument"
case "$1" in
  '{"version":1,"method":"preflight","ops":["preflight"],'*) ;;
  *) refuse "envelope.ops: this call may not run preflight" ;;
esac

[ -x /bin/sh ] || missing "/bin/sh"

if command -v python3 >/dev/null 2>&1; then
  version=$(python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
  printf 'python=%s\n' "${version:-unknown}"
  if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 6) else 1)' 2>/dev/null; then
    missing "python3 3.6 or later (found ${version:-an unknown version})"
  elif ! python3 -c 'import ctypes, json, tarfile' 2>/dev/null; then
    missing "python3 modules ctypes, json and tarfile"
  elif ! python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None)
name = "renameatx_np" if sys.platform == "darwin" else "renameat2"
sys.exit(0 if hasattr(libc, name) else 1)' 2>/dev/null; then
    printf 'warning=%s\n' "the C library has no atomic no-replace rename (renameat2 or renameatx_np): existing workspaces are adopted, new ones cannot be published"
  fi
else
  missing "python3"
fi

size=$(LC_ALL=C stat -c '%s' -- / 2>/dev/null)
case "$size" in
  '' | *[!0-9]*) missing "GNU-compatible stat (stat -c)" ;;
esac

resolved=$(readlink -f -- / 2>/dev/null)
[ "$resolved" = "/" ] || missing "GNU-compatible readlink (readlink -f)"

exit 0
