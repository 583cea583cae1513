# The operation table (each operation's argument kinds and whether it changes
# a mount), the envelope the host writes, the checks of every argument
# against both, and main(): one operation, its answer on stdout, a refusal on
# stderr.

import errno
import json
import os
import re
import sys
from .base import ERRNO_CODES, MOUNTS, Refusal
from .walk import Guard, check_name, check_stage, set_guard, split
from .archive import op_unpack
from .runtime import (
    op_describe, op_discard, op_inputs, op_inputs_absent, op_publish,
    op_remove_runtime, op_skills, op_stage, staged_names
)
from .bridge import (
    op_create, op_mkdirp, op_read, op_readdir, op_remove, op_rename, op_stat,
    op_workdir, op_write
)


OPS = {
    "describe": (op_describe, "", False),
    "stage": (op_stage, "S", False),
    "unpack": (op_unpack, "SM", False),
    "publish": (op_publish, "S", False),
    "discard": (op_discard, "S", False),
    "remove-runtime": (op_remove_runtime, "", False),
    "skills": (op_skills, "", False),
    "inputs-absent": (op_inputs_absent, "L", False),
    "inputs": (op_inputs, "", False),
    "read": (op_read, "MPN", False),
    "write": (op_write, "MPF", True),
    "create": (op_create, "MPF", True),
    "mkdirp": (op_mkdirp, "MP", True),
    "remove": (op_remove, "MPFF", True),
    "rename": (op_rename, "MPMP", True),
    "stat": (op_stat, "MP", False),
    "readdir": (op_readdir, "MP", False),
    "workdir": (op_workdir, "MP", False),
}


class Envelope(object):
    """What the host wrote for this call: the only source of the workspace
    root, the runtime id, the mounts and the operations allowed."""

    def __init__(self, text):
        try:
            v = json.loads(text)
        except ValueError:
            raise Refusal("invalid-operation", "the envelope is not JSON: the host writes it before the operation")
        if not isinstance(v, dict) or v.get("version") != 1 or isinstance(v.get("version"), bool):
            raise Refusal("invalid-operation", "envelope.version: this script reads version 1")
        ops = v.get("ops")
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise Refusal("invalid-operation", "envelope.ops: must be a list of operation names")
        root = v.get("workspaceRoot")
        if not isinstance(root, str) or not root.startswith("/") or "\0" in root:
            raise Refusal("invalid-operation", "envelope.workspaceRoot: must be an absolute path")
        runtime = v.get("runtimeId")
        if runtime is not None:
            if not isinstance(runtime, str):
                raise Refusal("invalid-operation", "envelope.runtimeId: must be a string")
            check_name(runtime, runtime)
        listed = v.get("mounts")
        if not isinstance(listed, list):
            raise Refusal("invalid-operation", "envelope.mounts: must be a list")
        mounts = {}
        for m in listed:
            if not isinstance(m, dict) or m.get("name") not in MOUNTS or not isinstance(m.get("writable"), bool):
                raise Refusal("invalid-operation", "envelope.mounts: must list {name: workspace or agent, writable: true or false}")
            mounts[m["name"]] = m["writable"]
        self.method = v.get("method")
        self.ops = ops
        self.root = root
        self.runtime = runtime
        self.mounts = mounts


def check_args(envelope, op, kinds, mutating, args):
    """Each argument of `op` as its kind allows, against the envelope."""
    if len(args) != len(kinds):
        raise Refusal("invalid-operation", "%s takes %d arguments after the envelope and the operation, not %d"
                      % (op, len(kinds), len(args)))
    for index, (kind, value) in enumerate(zip(kinds, args)):
        field = "argument %d of %s" % (index + 1, op)
        if kind == "M":
            if value not in envelope.mounts:
                raise Refusal("invalid-operation", "%s: %r is not a mount of this sandbox (envelope.mounts: %s)"
                              % (field, value, ", ".join(sorted(envelope.mounts)) or "none"))
            if mutating and not envelope.mounts[value]:
                raise Refusal("read-only", "%s: the %s mount is read-only in this sandbox" % (op, value), value)
        elif kind == "P":
            split(value)
        elif kind == "S":
            check_stage(envelope.runtime, value)
        elif kind == "F":
            if value not in ("0", "1"):
                raise Refusal("invalid-operation", "%s: must be 0 or 1, not %r" % (field, value))
        elif kind == "L":
            staged_names(value)
        elif kind == "N":
            if not re.match(r"[0-9]{1,18}\Z", value):
                raise Refusal("invalid-operation", "%s: must be a count in decimal digits, not %r" % (field, value))


def main(argv, envelope=None):
    """One operation: argv is [<envelope>, <op>, <args...>]. A caller that has
    already read argv[0] (the serving process, to check its root) hands its
    Envelope in, and the text is not parsed again."""
    if len(argv) < 2:
        raise Refusal("invalid-operation", "usage: workspace <envelope> <op> [args...]")
    if envelope is None:
        envelope = Envelope(argv[0])
    op, args = argv[1], argv[2:]
    if op not in OPS:
        raise Refusal("invalid-operation", "unknown operation %r" % op[:64])
    if op not in envelope.ops:
        raise Refusal("invalid-operation", "envelope.ops: %s may not run %s (it may run: %s)"
                      % (envelope.method, op, ", ".join(envelope.ops) or "nothing"))
    if envelope.runtime is None:
        raise Refusal("invalid-operation", "envelope.runtimeId: this call names no sandbox scope")
    fn, kinds, mutating = OPS[op]
    check_args(envelope, op, kinds, mutating, args)
    if op == "skills" and not envelope.mounts.get("workspace"):
        raise Refusal("read-only", "skills: the workspace mount is not writable in this sandbox", "workspace")
    if mutating:
        set_guard(Guard(descendants=(op == "rename" or (op == "remove" and args[2] == "1"))))
    try:
        result = fn(envelope.root, envelope.runtime, *args)
    except OSError as e:
        if e.errno in DISK_FULL:
            raise disk_full(e, envelope.root, kinds, args)
        raise
    if result is not None:
        sys.stdout.write(json.dumps(result) + "\n")


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(e, root, kinds, args):
    """A write that found no space (or quota) left on the target: the refusal
    names the sandbox path the operation was for (its stage, for a seed), the
    workspace root and what is left there; the operation's temp entries are
    already gone, so nothing half-written has a final name."""
    where = next((a for k, a in zip(kinds, args) if k == "P"), None) or \
        next((a for k, a in zip(kinds, args) if k in "SM"), None) or "operation"
    try:
        st = os.statvfs(root)
        free = "%d KiB free" % (st.f_bavail * st.f_frsize // 1024)
    except OSError:
        free = "free space unknown"
    what = "quota is exhausted" if e.errno == errno.EDQUOT else "disk is full"
    return Refusal("disk-full", "%s: the target's %s (%s) under %s, %s: free space there, then retry"
                   % (where, what, errno.errorcode.get(e.errno, e.errno), root, free), where)


def failure_line(e):
    """The one JSON line a refusal or an OSError leaves on stderr."""
    if isinstance(e, Refusal):
        return json.dumps({"error": e.code, "message": e.message, "path": e.path}) + "\n"
    code = ERRNO_CODES.get(e.errno, "remote")
    where = e.filename if isinstance(e.filename, str) else None
    return json.dumps({"error": code, "message": "%s: %s" % (where or "operation", e.strerror), "path": where}) + "\n"
