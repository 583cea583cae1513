# The refusal every module raises, the codes errno values map to, and the
# constants the walking and the operations share.

import errno
import os

NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
MOUNTS = ("workspace", "agent")
CHUNK = 1 << 16

# The format of a scope's runtime as this script lays it out, recorded in
# LAYOUT_FILE at its top when a stage is made. 1: the runtimes of the first
# releases, which recorded none; 2: the same layout, with the record. A
# runtime of a newer format than this script's is refused, changing nothing:
# a later release made it (docs/operators.md, "Upgrading and rolling back").
LAYOUT_FORMAT = 2
LAYOUT_FILE = "layout.json"
# Who lays runtimes out: the release this script ships in.
WRITTEN_BY = "occ-driver-host 0.3.0"


class Refusal(Exception):
    def __init__(self, code, message, path=None):
        Exception.__init__(self, message)
        self.code = code
        self.message = message
        self.path = path


ERRNO_CODES = {
    errno.ENOENT: "not-found",
    errno.EEXIST: "exists",
    errno.ENOTDIR: "not-a-directory",
    errno.EISDIR: "is-a-directory",
    errno.ENOTEMPTY: "not-empty",
    errno.ELOOP: "symlink",
    errno.EFBIG: "too-large",
}


def token():
    return os.urandom(8).hex()
