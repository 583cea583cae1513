#!/usr/bin/env python3
# occ sandbox: every change the backend makes to a remote workspace.
#
# Sent by the sandbox component and run by the host as
#   python3 -c <this text> workspace
# with its arguments, <envelope> <op> [args...], in the first frame on stdin (4
# bytes of big-endian length, then {"args": [...]}), and the operation's data
# (a file's bytes, a tar stream) after it. No path, no envelope and no content
# of a scope is ever in the argument vector, where any process on the target
# could read it (/proc/<pid>/cmdline). The host runs it only when its SHA-256
# is approved in the installation.
#
# What it acts on is either trusted or bounded here. Trusted values come from
# the envelope alone, one JSON object the host writes for the call (the
# component never does):
#   {"version": 1, "method": <the controller's method>, "ops": [<the
#    operations that method may run>], "workspaceRoot": <the installation's>,
#    "runtimeId": <the call's scope's>, "mounts": [{"name", "writable"}]}
# Everything after it is the component's, and bounded: the operation must be
# one of envelope.ops; each argument has the kind the OPS table below names:
# a mount of envelope.mounts (writable, for an operation that changes one), a
# path of plain names below it, a stage of envelope.runtimeId, a flag or a
# count. Anything else is refused before anything is touched, with the error
# `invalid-operation` (or `read-only`, `invalid-path`) naming the field.
#
# Layout: <workspace-root>/<runtime-id>/{workspace,agent}. The workspace root is
# the operator's (configured, followed as it is). Below it every directory is
# opened relative to its parent's descriptor with O_NOFOLLOW, and a symbolic
# link met on the way is resolved by this script, component by component, from
# the directory it sits in: one that stays inside the mount is followed (as
# OpenClaw follows it), one that leads outside is refused. A link swapped in
# while an operation runs is met the same way, or not at all: what was opened
# stays open. A regular file with more than one link is refused for reading and
# writing: its other name may be outside. Writes replace the entry (a
# temporary file beside it, then a rename), so a link swapped in at the last
# moment is replaced, not followed.
#
# Output: a JSON object on stdout (raw bytes for `read`), exit 0. A refusal or
# failure: one JSON line {"error", "message", "path"} on stderr, exit 1.
# Python 3.6 or later; standard library only.
#
# This text is assembled from the modules in guest-ssh-sandbox/scripts/workspace/
# (this head is its __init__.py), each under a rule that names it, by
# guest-ssh-sandbox/scripts/build.py; `python3 build.py --check` holds it to them.
