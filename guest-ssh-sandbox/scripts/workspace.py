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


# --- workspace/base.py --------------------------------------------------------
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


# --- workspace/walk.py --------------------------------------------------------
# Names and walking: a scope's path checked name by name, each directory
# opened relative to its parent without following a link, links met on the
# way resolved here (inside the mount, or refused), and the protected skills
# directories a changing operation may not touch.

import errno
import json
import os
import stat


def check_name(name, path):
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise Refusal("invalid-path", "invalid path component %r" % name, path)


def split(rel):
    """A relative path as components; the empty string is the mount root."""
    if rel == "":
        return []
    parts = rel.split("/")
    for part in parts:
        check_name(part, rel)
    return parts


def refuse_link(dirfd, name, path):
    """After ELOOP or ENOTDIR opening `name`: say what is in the way."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        raise Refusal("not-found", "%s: no such directory" % path, path)
    if stat.S_ISLNK(st.st_mode):
        raise Refusal("symlink", "%s: is a symbolic link; the sandbox never follows one" % path, path)
    raise Refusal("not-a-directory", "%s: not a directory" % path, path)


def open_dir(dirfd, name, path, create=False):
    try:
        return os.open(name, NOFOLLOW_DIR, dir_fd=dirfd)
    except OSError as e:
        if e.errno == errno.ENOENT and create:
            try:
                os.mkdir(name, 0o777, dir_fd=dirfd)
            except OSError as m:
                if m.errno != errno.EEXIST:
                    raise
            return open_dir(dirfd, name, path, False)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            refuse_link(dirfd, name, path)
        if e.errno == errno.ENOENT:
            raise Refusal("not-found", "%s: no such directory" % path, path)
        raise


def open_root(root, create=False):
    """The operator's workspace root, followed as configured."""
    if create:
        os.makedirs(root, exist_ok=True)
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        raise


def open_runtime(root, runtime):
    check_name(runtime, runtime)
    rootfd = open_root(root)
    if rootfd is None:
        raise Refusal("no-runtime", "no runtime root %s/%s" % (root, runtime))
    try:
        runfd = os.open(runtime, NOFOLLOW_DIR, dir_fd=rootfd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise Refusal("no-runtime", "no runtime root %s/%s" % (root, runtime))
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            refuse_link(rootfd, runtime, runtime)
        raise
    finally:
        os.close(rootfd)
    try:
        check_layout(runfd, "%s/%s" % (root, runtime))
    except BaseException:
        os.close(runfd)
        raise
    return runfd


def check_layout(runfd, where):
    """A runtime without a layout record is format 1, a first release's,
    adopted as it is; one of a newer format than this script's is refused
    before anything in it is touched."""
    try:
        fd = os.open(LAYOUT_FILE, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=runfd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return
        raise Refusal("invalid-layout", "%s/%s: %s" % (where, LAYOUT_FILE, e.strerror))
    try:
        text = os.read(fd, 4097)
    finally:
        os.close(fd)
    try:
        record = json.loads(text.decode("utf-8")) if len(text) <= 4096 else None
    except ValueError:
        record = None
    fmt = record.get("format") if isinstance(record, dict) else None
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise Refusal("invalid-layout", "%s/%s is not a layout record" % (where, LAYOUT_FILE))
    if fmt > LAYOUT_FORMAT:
        by = record.get("writtenBy")
        by = by if isinstance(by, str) and by.isprintable() and len(by) <= 100 else "a later release"
        raise Refusal("newer-format", "%s is runtime layout format %d, made by %s; this workspace script reads "
                      "formats 1 to %d: roll forward to at least %s" % (where, fmt, by, LAYOUT_FORMAT, by))


def open_mount(root, runtime, mount):
    if mount not in MOUNTS:
        raise Refusal("invalid-path", "unknown mount %r" % mount)
    runfd = open_runtime(root, runtime)
    try:
        return open_dir(runfd, mount, mount)
    finally:
        os.close(runfd)


def walk(fd, parts, path, create=False):
    """Open `parts` below `fd` (which is consumed) one component at a time."""
    for part in parts:
        try:
            nxt = open_dir(fd, part, path, create)
        finally:
            os.close(fd)
        fd = nxt
    return fd


MAX_LINKS = 40

# OpenClaw's read-only skills directories, relative to each mount. While one
# exists, a change whose path lies in it once its links are resolved is
# refused, as is a recursive remove or a rename of a directory that holds one.
# The component refuses the path as written before this script runs; links
# are seen only here.
PROTECTED_SKILLS = (("skills",), (".agents", "skills"), (".openclaw", "sandbox-skills", "skills"))


class Guard(object):
    """The protected-skills check of one changing operation: `descendants`
    for an operation that moves or removes what lies below its path."""

    def __init__(self, descendants):
        self.descendants = descendants


# Set by main() for an operation that changes a mount, None otherwise: set
# only through set_guard(), so that this module's global is the one changed.
GUARD = None


def set_guard(guard):
    global GUARD
    GUARD = guard


def refuse_protected(rel, names):
    raise Refusal("read-only", "%s: lies in %s, a read-only skills directory" % (rel, "/".join(names)), rel)


def unguarded(fn, *args, **kwargs):
    """`fn` with the protected-skills check off: a look that changes nothing."""
    global GUARD
    saved, GUARD = GUARD, None
    try:
        return fn(*args, **kwargs)
    finally:
        GUARD = saved


def protected_exists(root, runtime, mount, names):
    """Whether a protected skills directory exists (as OpenClaw asks: an entry
    of any kind, a link too). One that cannot be looked at counts as there."""
    try:
        fd, leaf = unguarded(resolve, root, runtime, mount, "/".join(names), follow_last=False)
    except Refusal as r:
        return r.code != "not-found"
    try:
        return leaf is None or lstat_at(fd, leaf) is not None
    finally:
        os.close(fd)


def guard_leaf(root, runtime, mount, rel, dirfd, names):
    """The check at the resolved path `names` of an operation's target (its
    leaf in `dirfd`, or the directory itself when `dirfd` is None)."""
    if GUARD is None:
        return
    target = tuple(names)
    if target in PROTECTED_SKILLS and (dirfd is None or lstat_at(dirfd, target[-1]) is not None):
        refuse_protected(rel, target)
    if GUARD.descendants:
        for skills in PROTECTED_SKILLS:
            if len(target) < len(skills) and skills[:len(target)] == target and protected_exists(root, runtime, mount, skills):
                refuse_protected(rel, skills)


def beneath(mount_abs, target):
    """The components of an absolute link target below the mount, or None."""
    prefix = mount_abs.rstrip("/") + "/"
    if target.rstrip("/") == mount_abs.rstrip("/"):
        return []
    if not target.startswith(prefix):
        return None
    return [p for p in target[len(prefix):].split("/") if p]


def resolve(root, runtime, mount, rel, create=False, follow_last=True):
    """The directory that holds `rel` and the name of its leaf (None for the
    mount root), following links that stay inside the mount: each component
    is looked at where it is (lstat, then open with O_NOFOLLOW), a link's
    target is resolved from the directory it sits in, `..` never climbs above
    the mount, and a link that leads outside is refused. With `follow_last`
    false the leaf is the entry itself, link or not. `create` makes missing
    directories on the way. For a changing operation (GUARD) the path as
    resolved is checked against the protected skills directories before any
    directory is made or entered."""
    mount_abs = "/".join([root.rstrip("/"), runtime, mount])
    stack = [open_mount(root, runtime, mount)]
    # The names of the directories in stack[1:], from the mount down.
    names = []
    todo = split(rel)
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) == 1:
                    raise Refusal("escapes-workspace", "%s: leads outside the workspace" % rel, rel)
                os.close(stack.pop())
                names.pop()
                continue
            check_name(name, rel)
            if not todo and not follow_last:
                guard_leaf(root, runtime, mount, rel, stack[-1], names + [name])
                return stack.pop(), name
            st = lstat_at(stack[-1], name)
            if st is not None and stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Refusal("symlink", "%s: more than %d symbolic links" % (rel, MAX_LINKS), rel)
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    inside = beneath(mount_abs, target)
                    if inside is None:
                        raise Refusal("symlink", "%s: a symbolic link leads outside the workspace; the sandbox never follows one there" % rel, rel)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    del names[:]
                    todo = inside + todo
                else:
                    todo = [p for p in target.split("/")] + todo
                continue
            if not todo:
                guard_leaf(root, runtime, mount, rel, stack[-1], names + [name])
                return stack.pop(), name
            if GUARD is not None and st is not None and tuple(names + [name]) in PROTECTED_SKILLS:
                refuse_protected(rel, names + [name])
            try:
                stack.append(open_dir(stack[-1], name, rel, create))
                names.append(name)
            except Refusal as r:
                if r.code != "symlink":
                    raise
                # Swapped for a link after it was looked at: look again.
                todo.insert(0, name)
        guard_leaf(root, runtime, mount, rel, None, names)
        return stack.pop(), None
    finally:
        for fd in stack:
            os.close(fd)


def parent_of(root, runtime, mount, rel, create=False, follow_last=True):
    """The parent directory of `rel` and its leaf name: `rel` may not be the
    mount root."""
    fd, leaf = resolve(root, runtime, mount, rel, create, follow_last)
    if leaf is None:
        os.close(fd)
        raise Refusal("invalid-path", "the mount root itself cannot be the target", rel)
    return fd, leaf


def dir_of(root, runtime, mount, rel, create=False):
    """The directory `rel`, following links that stay inside."""
    fd, leaf = resolve(root, runtime, mount, rel, create)
    if leaf is None:
        return fd
    try:
        return open_dir(fd, leaf, rel, create)
    finally:
        os.close(fd)


def lstat_at(dirfd, name):
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        raise


def stage_name_ok(runtime, stage):
    prefix = runtime + ".bootstrap-"
    tail = stage[len(prefix):]
    return stage.startswith(prefix) and len(tail) == 32 and all(c in "0123456789abcdef" for c in tail)


def check_stage(runtime, stage):
    check_name(runtime, runtime)
    if not stage_name_ok(runtime, stage):
        raise Refusal("invalid-path", "%r is not a stage of %s" % (stage, runtime))


# --- workspace/files.py -------------------------------------------------------
# Entries below an open directory: their kind, a regular file's single link,
# copies, temporary files beside their final name, the removal of a tree, and
# the atomic renames (no-replace, exchange) Linux and macOS each spell their
# own way.

import errno
import os
import stat
import sys


def kind_of(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "other"


def refuse_hardlink(st, path):
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise Refusal("hardlink", "%s: a regular file with %d links is refused; one of them may be outside the sandbox" % (path, st.st_nlink), path)


def copy_into(fd, src):
    """Write everything `src` yields to the descriptor `fd`."""
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]


def temp_file(dirfd, prefix, mode=0o600):
    while True:
        name = "%s%s" % (prefix, token())
        try:
            return name, os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=dirfd)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise


def unlink_quietly(dirfd, name):
    try:
        os.unlink(name, dir_fd=dirfd)
    except OSError:
        pass


# How many directory descriptors a removal keeps open at once (up to twice
# this many between trims): a tree deeper
# than that (a sandboxed command can make a chain of any depth) is still
# removed whole, reopening a level by name from the nearest open one and
# checking it is the same directory.
OPEN_LEVELS = 32
# How deep a removal goes: far past what a workspace holds, short of what would
# let one directory chain hold the script's memory.
MAX_DEPTH = 100000


def open_dir_for_removal(dirfd, name, st):
    """Open the directory `name` (lstat'ed as `st`) below `dirfd` without
    following a link, making it searchable first if a tar restored it without
    permission; the permission change goes through a descriptor of the entry
    itself (O_PATH, no-follow), so a link swapped in is never followed."""
    try:
        return os.open(name, NOFOLLOW_DIR, dir_fd=dirfd)
    except PermissionError:
        if os.chmod in os.supports_follow_symlinks:
            # (macOS and the BSDs: fchmodat with AT_SYMLINK_NOFOLLOW.)
            os.chmod(name, stat.S_IMODE(st.st_mode) | 0o700, dir_fd=dirfd, follow_symlinks=False)
            return os.open(name, NOFOLLOW_DIR, dir_fd=dirfd)
        pfd = os.open(name, getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0), dir_fd=dirfd)
        try:
            now = os.fstat(pfd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise Refusal("changed", "%s: replaced while it was removed" % name, name)
            os.chmod("/proc/self/fd/%d" % pfd, stat.S_IMODE(now.st_mode) | 0o700)
        finally:
            os.close(pfd)
        return os.open(name, NOFOLLOW_DIR, dir_fd=dirfd)


def remove_tree(dirfd, name):
    """Remove `name` below `dirfd` and everything in it, never following a link,
    without recursion: a chain of any depth the sandbox made is removed whole.
    Directories without write or search permission (a tar may restore them so)
    are opened up first."""
    st = lstat_at(dirfd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    # Each level: [name, (dev, ino), fd or None, subdirectories still to
    # remove]; levels[0] is `name` itself. A level is listed once: its files
    # go at once, its subdirectories one after another.
    levels = []
    opened = [0]  # how many levels hold a descriptor

    def trim():
        """Keep the OPEN_LEVELS deepest descriptors and close the rest. The
        open levels are always one run at the bottom of the stack, so this
        walks up from the deepest until the first closed one above the run."""
        kept = 0
        k = len(levels) - 1
        while k >= 0:
            if levels[k][2] is not None:
                kept += 1
                if kept > OPEN_LEVELS:
                    os.close(levels[k][2])
                    levels[k][2] = None
                    opened[0] -= 1
            elif kept >= OPEN_LEVELS:
                break
            k -= 1

    def reopen(index):
        """The descriptor of levels[index], reopened from the nearest open
        level above it, each step checked to be the directory it was."""
        start = index
        while start >= 0 and levels[start][2] is None:
            start -= 1
        parent = dirfd if start < 0 else levels[start][2]
        for k in range(start + 1, index + 1):
            fd = os.open(levels[k][0], NOFOLLOW_DIR, dir_fd=parent)
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != levels[k][1]:
                os.close(fd)
                raise Refusal("changed", "%s: replaced while it was removed" % levels[k][0], levels[k][0])
            levels[k][2] = fd
            opened[0] += 1
            parent = fd
            if opened[0] > 2 * OPEN_LEVELS:
                trim()
        return levels[index][2]

    def descend(parent, entry, est):
        if len(levels) >= MAX_DEPTH:
            raise Refusal("too-deep", "%s: more than %d directories deep" % (name, MAX_DEPTH), name)
        fd = open_dir_for_removal(parent, entry, est)
        levels.append([entry, None, fd, []])
        opened[0] += 1
        if est.st_mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(est.st_mode) | 0o700)
        now = os.fstat(fd)
        levels[-1][1] = (now.st_dev, now.st_ino)
        for child in os.listdir(fd):
            cst = lstat_at(fd, child)
            if cst is None:
                continue
            if stat.S_ISDIR(cst.st_mode):
                levels[-1][3].append(child)
            else:
                os.unlink(child, dir_fd=fd)
        if opened[0] > 2 * OPEN_LEVELS:
            trim()

    try:
        descend(dirfd, name, st)
        while levels:
            top = levels[-1]
            fd = top[2] if top[2] is not None else reopen(len(levels) - 1)
            if top[3]:
                child = top[3].pop()
                cst = lstat_at(fd, child)
                if cst is None:
                    continue
                if stat.S_ISDIR(cst.st_mode):
                    descend(fd, child, cst)
                else:
                    os.unlink(child, dir_fd=fd)
                continue
            # Whatever appeared meanwhile goes too; then the level itself.
            late = [c for c in os.listdir(fd)]
            if late:
                top[3].extend(late)
                continue
            levels.pop()
            os.close(fd)
            opened[0] -= 1
            if levels:
                parent = levels[-1][2] if levels[-1][2] is not None else reopen(len(levels) - 1)
            else:
                parent = dirfd
            os.rmdir(top[0], dir_fd=parent)
    finally:
        for lv in levels:
            if lv[2] is not None:
                os.close(lv[2])


class MissingRename(Exception):
    pass


def rename_no_replace(src_dir, src, dst_dir, dst):
    """Rename `src` to `dst`, failing with EEXIST (or ENOTEMPTY) if `dst` exists,
    atomically: renameat2(RENAME_NOREPLACE) on Linux, renameatx_np(RENAME_EXCL)
    on macOS, through the C library. There is no fallback: without the
    primitive, MissingRename says so and nothing is renamed."""
    rename_with(src_dir, src, dst_dir, dst, 1, 0x4, "NOREPLACE", "EXCL")


def rename_exchange(a_dir, a, b_dir, b):
    """Swap the entries `a` (in `a_dir`) and `b` (in `b_dir`) in one step:
    renameat2(RENAME_EXCHANGE) on Linux, renameatx_np(RENAME_SWAP) on macOS.
    A reader of either name sees the one entry or the other, never neither.
    MissingRename when the target lacks the primitive."""
    rename_with(a_dir, a, b_dir, b, 2, 0x2, "EXCHANGE", "SWAP")


def rename_with(src_dir, src, dst_dir, dst, linux_flag, darwin_flag, linux_name, darwin_name):
    try:
        import ctypes
    except ImportError as e:
        raise MissingRename("python3 has no ctypes (%s)" % e)
    libc = ctypes.CDLL(None, use_errno=True)
    if sys.platform.startswith("linux"):
        call, flag, what = getattr(libc, "renameat2", None), linux_flag, "renameat2(RENAME_%s)" % linux_name
    elif sys.platform == "darwin":
        call, flag, what = getattr(libc, "renameatx_np", None), darwin_flag, "renameatx_np(RENAME_%s)" % darwin_name
    else:
        raise MissingRename("%s has no atomic rename this backend knows" % sys.platform)
    if call is None:
        raise MissingRename("the C library has no %s" % what)
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    if call(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), flag) == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EPERM, getattr(errno, "ENOTSUP", -1), getattr(errno, "EOPNOTSUPP", -1)):
        raise MissingRename("%s failed: [Errno %d] %s" % (what, err, os.strerror(err)))
    raise OSError(err, os.strerror(err), dst)


# --- workspace/archive.py -----------------------------------------------------
# The seed: a tar stream from the host unpacked into a stage, member by
# member (ustar and pax; regular files, directories and links that stay
# inside), each file written through a descriptor below the stage.

import os
import stat
import sys


def member_parts(name):
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    if name in ("", "."):
        return []
    if name.startswith("/"):
        raise Refusal("invalid-path", "archive member %r is absolute" % name, name)
    return split(name)


def link_stays_inside(parts, target):
    if target.startswith("/") or "\0" in target:
        return False
    depth = len(parts) - 1
    for part in target.split("/"):
        if part in ("", "."):
            continue
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            return False
    return True


def op_unpack(root, runtime, stage, mount):
    """Extract a tar stream from stdin into <stage>/<mount>: directories, regular
    files (permission bits only) and symbolic links that stay inside. Anything
    else, an absolute or `..` name, a link leaving the tree or a name that exists
    already is refused."""
    check_stage(runtime, stage)
    if mount not in MOUNTS:
        raise Refusal("invalid-path", "unknown mount %r" % mount)
    rootfd = open_root(root)
    if rootfd is None:
        raise Refusal("not-found", "workspace root %s is gone" % root)
    try:
        stagefd = open_dir(rootfd, stage, stage)
    finally:
        os.close(rootfd)
    try:
        os.mkdir(mount, 0o700, dir_fd=stagefd)
        top = os.open(mount, NOFOLLOW_DIR, dir_fd=stagefd)
    finally:
        os.close(stagefd)
    try:
        return extract(top)
    finally:
        os.close(top)


class Member(object):
    __slots__ = ("name", "kind", "mode", "mtime", "size", "linkname")


# Typeflags: regular files (a NUL is an old regular file, 7 a contiguous one),
# directories and symbolic links; anything else is refused by extract().
KINDS = {b"0": "file", b"\0": "file", b"7": "file", b"5": "dir", b"2": "symlink"}
ZERO_BLOCK = bytes(512)


def archive_error(what):
    return Refusal("invalid-operation", "the archive is not one the host writes: %s" % what)


class Archive(object):
    """A tar stream as the host sends it (ustar with PAX records; GNU long
    names read too), read from `stream` in large chunks. Iterating yields
    each member's header; its data is the caller's to copy while it is the
    current member, and whatever it leaves is skipped."""

    def __init__(self, stream):
        self.stream = stream
        self.buf = memoryview(b"")
        self.left = 0

    def read(self, n):
        """Up to n bytes; fewer only at the end of the stream."""
        if not self.buf:
            self.buf = memoryview(self.stream.read(1 << 20))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def exact(self, n, eof_ok=False):
        parts = []
        while n:
            chunk = self.read(n)
            if not chunk:
                if eof_ok and not parts:
                    return None
                raise archive_error("it ends inside a record")
            parts.append(bytes(chunk))
            n -= len(chunk)
        return b"".join(parts)

    def skip(self, n):
        while n:
            chunk = self.read(n)
            if not chunk:
                raise archive_error("it ends inside a record")
            n -= len(chunk)

    def copy_to(self, fd):
        """The current member's data, into the descriptor `fd`."""
        while self.left:
            chunk = self.read(self.left)
            if not chunk:
                raise archive_error("it ends inside a file")
            self.left -= len(chunk)
            while chunk:
                chunk = chunk[os.write(fd, chunk):]

    def __iter__(self):
        pax, long_name, long_link = {}, None, None
        first = True
        while True:
            block = self.exact(512, eof_ok=True)
            if block is None and first:
                raise archive_error("it is empty")
            first = False
            if block is None or block == ZERO_BLOCK:
                return
            stored = block[148:156]
            if number(stored) != sum(block) - sum(stored) + 256:
                raise archive_error("a header's checksum does not match")
            flag = block[156:157]
            size = number(block[124:136])
            padded = size + (-size % 512)
            if flag in (b"x", b"L", b"K"):
                if size > (1 << 20):
                    raise archive_error("a %d-byte extended header" % size)
                data = self.exact(size)
                self.skip(padded - size)
                if flag == b"x":
                    pax.update(pax_records(data))
                elif flag == b"L":
                    long_name = os.fsdecode(data.split(b"\0", 1)[0])
                else:
                    long_link = os.fsdecode(data.split(b"\0", 1)[0])
                continue
            m = Member()
            name = block[0:100].split(b"\0", 1)[0]
            prefix = block[345:500].split(b"\0", 1)[0] if block[257:263] == b"ustar\0" else b""
            m.name = pax.get("path") or long_name or os.fsdecode(prefix + b"/" + name if prefix else name)
            m.kind = KINDS.get(flag, "other")
            m.linkname = None
            if m.kind == "symlink":
                m.linkname = pax.get("linkpath") or long_link or os.fsdecode(block[157:257].split(b"\0", 1)[0])
            m.mode = number(block[100:108])
            if "size" in pax:
                size = int(pax["size"])
                padded = size + (-size % 512)
            m.size = size
            m.mtime = float(pax["mtime"]) if "mtime" in pax else number(block[136:148])
            # Only a file's data is the caller's to copy; the rest is skipped.
            self.left = size
            yield m
            self.skip(self.left + padded - size)
            self.left = 0
            pax, long_name, long_link = {}, None, None


def number(field):
    """A numeric header field: octal digits, or GNU's base-256."""
    if field[:1] and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[0] & 0x40 else value
    digits = field.split(b"\0", 1)[0]
    try:
        # int() allows the spaces some writers pad with.
        return int(digits, 8) if digits.strip() else 0
    except ValueError:
        raise archive_error("a numeric field holds %r" % bytes(field))


def pax_records(data):
    """The `<length> <key>=<value>\\n` records of a PAX header."""
    records, at = {}, 0
    while at < len(data):
        space = data.find(b" ", at)
        if space < 0:
            raise archive_error("a PAX record without a length")
        try:
            length = int(data[at:space])
        except ValueError:
            raise archive_error("a PAX record's length is no number")
        record = data[space + 1:at + length]
        if length <= 0 or at + length > len(data) or not record.endswith(b"\n") or b"=" not in record:
            raise archive_error("a PAX record out of shape")
        key, value = record[:-1].split(b"=", 1)
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += length
    return records


def extract(top):
    """Extract the tar stream on stdin into the empty directory `top`, as
    op_unpack describes; the counts of what it made."""
    counts = {"files": 0, "directories": 1, "symlinks": 0, "bytes": 0}
    modes = []
    archive = Archive(sys.stdin.buffer)
    parents = Parents(top)
    try:
        extract_members(archive, parents, counts, modes)
    finally:
        parents.close()
    # Modes last, deepest first, so that a read-only directory does not stop
    # its own extraction.
    for parts, mode, mtime in sorted(modes, key=lambda m: -len(m[0])):
        fd = walk(os.dup(top), parts, "/".join(parts))
        try:
            os.fchmod(fd, mode)
            os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)
    return counts


class Parents(object):
    """The directories members are made in, each opened once (without
    following a link, from `top` down) and kept while members arrive: the
    host's archive lists a directory's entries together, so a member's parent
    is almost always one already open. A descriptor names the directory this
    extraction made, whatever is later renamed or put at its path. At most
    KEEP are open at once."""
    KEEP = 64

    def __init__(self, top):
        self.top = top
        self.open = {}

    def get(self, parts, name):
        key = tuple(parts)
        fd = self.open.get(key)
        if fd is None:
            if len(self.open) >= self.KEEP:
                self.close()
            fd = walk(os.dup(self.top), parts, name)
            self.open[key] = fd
        return fd

    def close(self):
        for fd in self.open.values():
            os.close(fd)
        self.open = {}


def extract_members(archive, parents, counts, modes):
    """Each member of `archive`, made below `parents`' top."""
    umask = os.umask(0o077)
    os.umask(umask)
    for member in archive:
        parts = member_parts(member.name)
        mode = stat.S_IMODE(member.mode) & 0o777
        if not parts:
            if member.kind != "dir":
                raise Refusal("invalid-path", "the archive root is not a directory")
            modes.append(([], mode, member.mtime))
            continue
        parent = parents.get(parts[:-1], member.name)
        leaf = parts[-1]
        if member.kind == "dir":
            os.mkdir(leaf, 0o700, dir_fd=parent)
            modes.append((parts, mode, member.mtime))
            counts["directories"] += 1
        elif member.kind == "file":
            # Made with its mode (the stage is private until published);
            # set again only where the umask took bits from it.
            fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=parent)
            try:
                archive.copy_to(fd)
                if mode & umask:
                    os.fchmod(fd, mode)
                os.utime(fd, (member.mtime, member.mtime))
            finally:
                os.close(fd)
            counts["files"] += 1
            counts["bytes"] += member.size
        elif member.kind == "symlink":
            if not link_stays_inside(parts, member.linkname):
                raise Refusal("symlink", "archive link %s -> %s leaves the workspace" % (member.name, member.linkname), member.name)
            os.symlink(member.linkname, leaf, dir_fd=parent)
            counts["symlinks"] += 1
        else:
            raise Refusal("invalid-path", "archive member %s is not a directory, a regular file or a symbolic link" % member.name, member.name)


# --- workspace/runtime.py -----------------------------------------------------
# The scope's runtime operations: describe, the bootstrap stage and its
# publication, removal of a runtime, the skills OpenClaw materializes, and the
# staged inputs of a command.

import errno
import os
import re
import stat
import sys


def op_describe(root, runtime):
    check_name(runtime, runtime)
    rootfd = open_root(root)
    if rootfd is None:
        return {"exists": False}
    try:
        st = lstat_at(rootfd, runtime)
    finally:
        os.close(rootfd)
    if st is None:
        return {"exists": False}
    return {"exists": True, "kind": "symlink" if stat.S_ISLNK(st.st_mode) else kind_of(st.st_mode)}


def op_stage(root, runtime, stage):
    check_stage(runtime, stage)
    rootfd = open_root(root, create=True)
    try:
        os.mkdir(stage, 0o700, dir_fd=rootfd)
        # The runtime this stage becomes says its layout's format.
        stagefd = os.open(stage, NOFOLLOW_DIR, dir_fd=rootfd)
        try:
            fd = os.open(LAYOUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=stagefd)
            try:
                record = '{"format": %d, "writtenBy": "%s"}\n' % (LAYOUT_FORMAT, WRITTEN_BY)
                os.write(fd, record.encode("utf-8"))
            finally:
                os.close(fd)
        finally:
            os.close(stagefd)
    finally:
        os.close(rootfd)
    return {"stage": stage}


def op_publish(root, runtime, stage):
    """Publish a stage as the runtime root, never replacing what is there: when
    another first use published first, adopt its workspace and drop ours."""
    check_stage(runtime, stage)
    rootfd = open_root(root)
    if rootfd is None:
        raise Refusal("not-found", "workspace root %s is gone" % root)
    try:
        try:
            rename_no_replace(rootfd, stage, rootfd, runtime)
            return {"result": "published"}
        except MissingRename as e:
            remove_tree(rootfd, stage)
            raise Refusal("missing-capability",
                          "cannot publish a new workspace at %s/%s: the target lacks an atomic no-replace directory rename "
                          "(renameat2 with RENAME_NOREPLACE on Linux, renameatx_np with RENAME_EXCL on macOS) on this "
                          "libc and filesystem: %s; nothing was replaced, and existing workspaces are still adopted"
                          % (root, runtime, e))
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                remove_tree(rootfd, stage)
                raise
            st = lstat_at(rootfd, runtime)
            if st is None or not stat.S_ISDIR(st.st_mode):
                remove_tree(rootfd, stage)
                raise Refusal("exists", "%s/%s exists and is not a directory; it was left as it is" % (root, runtime))
            remove_tree(rootfd, stage)
            return {"result": "adopted"}
    finally:
        os.close(rootfd)


def remove_entry(root, name):
    """Remove the entry `name` (checked by the caller) of the workspace root,
    whole; whether it was there."""
    rootfd = open_root(root)
    if rootfd is None:
        return {"removed": False}
    try:
        found = lstat_at(rootfd, name) is not None
        remove_tree(rootfd, name)
        return {"removed": found}
    finally:
        os.close(rootfd)


def op_discard(root, runtime, stage):
    check_stage(runtime, stage)
    return remove_entry(root, stage)


def op_remove_runtime(root, runtime):
    check_name(runtime, runtime)
    return remove_entry(root, runtime)


def op_skills(root, runtime):
    """OpenClaw's refresh of the skills it materialized for the scope (with
    workspaceAccess "rw"): <workspace>/.openclaw/sandbox-skills becomes the
    archive on stdin, which the host streams from the scope's local skills
    workspace; an empty stdin (the scope has none) leaves it empty.

    The new tree is extracted in the runtime root, outside every mount, and
    swapped into place in one step (rename_exchange): a reader of the skills
    sees the old tree or the new one, never neither, and a fault midway
    leaves the old skills. The old tree goes aside in the runtime root
    (RETIRED_SKILLS) until the next refresh removes it, so that a reader that
    opened it before the swap finishes on a whole tree; nothing of this shows
    in the workspace. Whatever a sandboxed command put at that name (a link
    too) is replaced, never followed; `.openclaw` itself must be a
    directory, not a link. A target without the exchange (an old libc) gets
    two renames, with a moment between them when the name is absent."""
    runfd = open_runtime(root, runtime)
    try:
        wsfd = open_dir(runfd, "workspace", "workspace")
        try:
            dotfd = open_dir(wsfd, ".openclaw", ".openclaw", create=True)
        finally:
            os.close(wsfd)
        try:
            counts = replace_skills(runfd, dotfd, "sandbox-skills")
            os.fsync(dotfd)
            os.fsync(runfd)
        finally:
            os.close(dotfd)
    finally:
        os.close(runfd)
    return counts


# The prefix of an old skills tree a refresh set aside in the runtime root.
RETIRED_SKILLS = ".occ-skills-old-"


def replace_skills(runfd, dotfd, name):
    fresh = ".occ-skills-" + token()
    os.mkdir(fresh, 0o755, dir_fd=runfd)
    try:
        top = os.open(fresh, NOFOLLOW_DIR, dir_fd=runfd)
        try:
            counts = extract(top) if sys.stdin.buffer.peek(1) else {"files": 0, "directories": 1, "symlinks": 0, "bytes": 0}
        finally:
            os.close(top)
        # After this, `fresh` names whatever was there before: the old tree,
        # or nothing.
        if lstat_at(dotfd, name) is None:
            os.rename(fresh, name, src_dir_fd=runfd, dst_dir_fd=dotfd)
        else:
            try:
                rename_exchange(runfd, fresh, dotfd, name)
            except MissingRename:
                stale = RETIRED_SKILLS + token()
                os.rename(name, stale, src_dir_fd=dotfd, dst_dir_fd=runfd)
                os.rename(fresh, name, src_dir_fd=runfd, dst_dir_fd=dotfd)
                os.rename(stale, fresh, src_dir_fd=runfd, dst_dir_fd=runfd)
    except BaseException:
        remove_tree(runfd, fresh)
        raise
    # The trees earlier refreshes set aside (a refresh has passed since
    # each); then this one's, which a failed refresh never reaches.
    for entry in os.listdir(runfd):
        if entry.startswith(RETIRED_SKILLS):
            remove_tree(runfd, entry)
    if lstat_at(runfd, fresh) is not None:
        os.rename(fresh, RETIRED_SKILLS + token(), src_dir_fd=runfd, dst_dir_fd=runfd)
    return counts


STAGED_INPUT = re.compile(r"openclaw-staged-(?:[a-f0-9]{64}|[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12})\Z")
MAX_STAGED_NAMES = 256


def staged_names(value):
    names = value.split(",")
    if len(names) > MAX_STAGED_NAMES or not all(STAGED_INPUT.match(n) for n in names):
        raise Refusal("invalid-operation", "%r is not a list of at most %d staged-input directory names" % (value[:128], MAX_STAGED_NAMES))
    return names


def open_inputs(root, runtime, create):
    """<workspace>/media/inbound, where OpenClaw stages a turn's inbound
    files, each level a directory, never a link; None while it does not
    exist and `create` is false."""
    fd = open_mount(root, runtime, "workspace")
    for name in ("media", "inbound"):
        try:
            next_fd = open_dir(fd, name, "media/inbound", create=create)
        except Refusal as r:
            if r.code == "not-found" and not create:
                os.close(fd)
                return None
            os.close(fd)
            raise
        os.close(fd)
        fd = next_fd
    return fd


def op_inputs_absent(root, runtime, names):
    """Which of the staged-input directories `names` (OpenClaw's
    media/inbound/openclaw-staged-<id>, one per staged turn) the remote
    workspace lacks."""
    names = staged_names(names)
    fd = open_inputs(root, runtime, create=False)
    if fd is None:
        return {"absent": names}
    try:
        return {"absent": [n for n in names if lstat_at(fd, n) is None]}
    finally:
        os.close(fd)


def op_inputs(root, runtime):
    """Put the staged-input directories of the archive on stdin (the host
    streams them from the scope's local media/inbound) in place below the
    remote <workspace>/media/inbound. Each is extracted beside, then renamed
    in without replacing anything: a directory the remote has already is
    kept as it is, and a fault midway leaves none half there. Anything in the
    archive but staged-input directories is refused before one is placed."""
    fd = open_inputs(root, runtime, create=True)
    fresh = ".occ-inputs-" + token()
    placed, kept = [], []
    try:
        os.mkdir(fresh, 0o700, dir_fd=fd)
        try:
            top = os.open(fresh, NOFOLLOW_DIR, dir_fd=fd)
            try:
                extract(top)
                names = sorted(os.listdir(top))
                for name in names:
                    st = lstat_at(top, name)
                    if not STAGED_INPUT.match(name) or not stat.S_ISDIR(st.st_mode):
                        raise Refusal("invalid-path", "media/inbound/%s: the inputs refresh places staged-input directories only" % name, name)
                for name in names:
                    try:
                        rename_no_replace(top, name, fd, name)
                        placed.append(name)
                    except OSError as e:
                        if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                            raise
                        kept.append(name)
            finally:
                os.close(top)
        finally:
            if lstat_at(fd, fresh) is not None:
                remove_tree(fd, fresh)
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"placed": placed, "kept": kept}


# --- workspace/bridge.py ------------------------------------------------------
# The bridge's operations, one per OpenClaw filesystem call: read, write,
# create, mkdir -p, remove, rename, stat, readdir and the command's working
# directory, each on a path the walk resolved inside its mount.

import errno
import os
import stat
import sys


def op_read(root, runtime, mount, rel, limit):
    limit = int(limit)
    # Links on the way are followed inside; the file itself must not be one
    # (as OpenClaw opens it).
    fd, leaf = parent_of(root, runtime, mount, rel, follow_last=False)
    try:
        # Look before opening: a FIFO or device the sandbox planted is refused
        # without being opened (opening one can block or act), and what is
        # opened must be the regular file that was looked at.
        before = lstat_at(fd, leaf)
        if before is None:
            raise Refusal("not-found", "%s: no such file" % rel, rel)
        if stat.S_ISLNK(before.st_mode):
            raise Refusal("symlink", "%s: is a symbolic link; the sandbox never follows one" % rel, rel)
        if stat.S_ISDIR(before.st_mode):
            raise Refusal("is-a-directory", "%s: is a directory" % rel, rel)
        if not stat.S_ISREG(before.st_mode):
            raise Refusal("invalid-path", "%s: not a regular file" % rel, rel)
        try:
            ffd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EMLINK):
                raise Refusal("symlink", "%s: is a symbolic link; the sandbox never follows one" % rel, rel)
            raise
    finally:
        os.close(fd)
    try:
        st = os.fstat(ffd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise Refusal("invalid-path", "%s: replaced while it was read" % rel, rel)
        refuse_hardlink(st, rel)
        if st.st_size > limit:
            raise Refusal("too-large", "%s: %d bytes exceed the read limit of %d" % (rel, st.st_size, limit), rel)
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(ffd, min(CHUNK, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise Refusal("too-large", "%s: grew past the read limit of %d bytes while read" % (rel, limit), rel)
    finally:
        os.close(ffd)
    sys.stdout.buffer.write(bytes(data))
    sys.stdout.buffer.flush()
    return None


def op_write(root, runtime, mount, rel, mkdir):
    fd, leaf = parent_of(root, runtime, mount, rel, create=(mkdir == "1"), follow_last=False)
    try:
        st = lstat_at(fd, leaf)
        mode = 0o600
        if st is not None and stat.S_ISLNK(st.st_mode):
            # The file replaces the link (as OpenClaw's write does), which never
            # changes what it points to; a link to outside is refused all the same.
            target, _ = unguarded(resolve, root, runtime, mount, rel)
            os.close(target)
        elif st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise Refusal("is-a-directory", "%s: is a directory" % rel, rel)
            if not stat.S_ISREG(st.st_mode):
                raise Refusal("invalid-path", "%s: not a regular file" % rel, rel)
            refuse_hardlink(st, rel)
            mode = stat.S_IMODE(st.st_mode)
        name, tfd = temp_file(fd, ".occ-write-")
        try:
            try:
                copy_into(tfd, sys.stdin.buffer)
                os.fchmod(tfd, mode)
                os.fsync(tfd)
            finally:
                os.close(tfd)
            os.replace(name, leaf, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            unlink_quietly(fd, name)
            raise
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"written": True}


def op_create(root, runtime, mount, rel, mkdir):
    # An entry of any kind at the path, a link too, means it exists.
    fd, leaf = parent_of(root, runtime, mount, rel, create=(mkdir == "1"), follow_last=False)
    try:
        if lstat_at(fd, leaf) is not None:
            return {"result": "exists"}
        name, tfd = temp_file(fd, ".occ-create-")
        try:
            try:
                copy_into(tfd, sys.stdin.buffer)
                os.fsync(tfd)
            finally:
                os.close(tfd)
            try:
                rename_no_replace(fd, name, fd, leaf)
            except MissingRename:
                # For a file, a hard link is an atomic no-replace publish too.
                os.link(name, leaf, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                unlink_quietly(fd, name)
        except OSError as e:
            unlink_quietly(fd, name)
            if e.errno == errno.EEXIST:
                return {"result": "exists"}
            raise
        except BaseException:
            unlink_quietly(fd, name)
            raise
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"result": "created"}


def op_mkdirp(root, runtime, mount, rel):
    fd = dir_of(root, runtime, mount, rel, create=True)
    os.close(fd)
    return {"created": True}


def op_remove(root, runtime, mount, rel, recursive, force):
    try:
        # A link is removed itself, never what it points to.
        fd, leaf = parent_of(root, runtime, mount, rel, follow_last=False)
    except Refusal as r:
        if r.code == "not-found" and force == "1":
            return {"removed": False}
        raise
    try:
        st = lstat_at(fd, leaf)
        if st is None:
            if force == "1":
                return {"removed": False}
            raise Refusal("not-found", "Sandbox path not found; cannot remove files: %s" % rel, rel)
        if stat.S_ISDIR(st.st_mode):
            if recursive == "1":
                remove_tree(fd, leaf)
            else:
                os.rmdir(leaf, dir_fd=fd)
        else:
            # A link is removed, never followed; a hard link loses one name.
            os.unlink(leaf, dir_fd=fd)
    finally:
        os.close(fd)
    return {"removed": True}


def op_rename(root, runtime, mount, rel, to_mount, to_rel):
    # Entries move and are replaced as they are, links included.
    sfd, sleaf = parent_of(root, runtime, mount, rel, follow_last=False)
    try:
        if lstat_at(sfd, sleaf) is None:
            raise Refusal("not-found", "%s: no such file or directory" % rel, rel)
        dfd, dleaf = parent_of(root, runtime, to_mount, to_rel, create=True, follow_last=False)
        try:
            os.rename(sleaf, dleaf, src_dir_fd=sfd, dst_dir_fd=dfd)
            os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return {"renamed": True}


def op_stat(root, runtime, mount, rel):
    try:
        fd, leaf = resolve(root, runtime, mount, rel)
        try:
            st = os.fstat(fd) if leaf is None else lstat_at(fd, leaf)
        finally:
            os.close(fd)
    except Refusal as r:
        if r.code == "not-found":
            return {"exists": False}
        raise
    if st is None:
        return {"exists": False}
    refuse_hardlink(st, rel)
    return {
        "exists": True,
        "kind": kind_of(st.st_mode),
        "size": st.st_size,
        "mtimeMs": int(st.st_mtime * 1000),
        "mode": stat.S_IMODE(st.st_mode),
    }


def op_readdir(root, runtime, mount, rel):
    fd = dir_of(root, runtime, mount, rel)
    entries = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                name = os.fsencode(entry.name).decode("utf-8", "replace")
                if entry.is_symlink():
                    kind = "other"
                elif entry.is_dir(follow_symlinks=False):
                    kind = "directory"
                elif entry.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                entries.append({"name": name, "kind": kind})
    finally:
        os.close(fd)
    entries.sort(key=lambda e: e["name"])
    return {"entries": entries}


def op_workdir(root, runtime, mount, rel):
    # A command's working directory is reached without any link at all, as
    # OpenClaw validates it.
    fd = walk(open_mount(root, runtime, mount), split(rel), rel)
    os.close(fd)
    return {"directory": True}


# The operations, each with the kinds of its arguments (M a mount of the
# envelope, P a path below the mount before it, S a stage of the envelope's
# runtime, F 0 or 1, N decimal digits) and whether it changes a mount (then
# each of its mounts must be writable). The host checks the same table
# (ssh-target/src/envelope.rs) before anything runs; a test reads both.


# --- workspace/operations.py --------------------------------------------------
# The operation table (each operation's argument kinds and whether it changes
# a mount), the envelope the host writes, the checks of every argument
# against both, and main(): one operation, its answer on stdout, a refusal on
# stderr.

import errno
import json
import os
import re
import sys


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


# --- workspace/frames.py ------------------------------------------------------
# Frames on a descriptor: a 4-byte big-endian length, that many bytes of
# JSON, then the bytes the JSON announces; read unbuffered, bounded by
# HEADER_MAX.

import json
import os


HEADER_MAX = 1 << 20


def read_exact(fd, n):
    """n bytes from fd, or None at end of file before the first one."""
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise EOFError("a frame ended early")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def frame_bytes(header, *data):
    import struct
    body = json.dumps(header).encode("utf-8")
    return b"".join((struct.pack(">I", len(body)), body) + data)


def write_all_fd(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            import select
            select.select([], [fd], [])


def write_pending(fd, pending):
    """Write the chunks of `pending` to the non-blocking `fd` as far as it
    takes them: True once all are written, False when it is full (what is
    left stays at the head, as a view: a large chunk is not copied again at
    every partial write). Any other OSError is the caller's."""
    while pending:
        try:
            n = os.write(fd, pending[0])
        except BlockingIOError:
            return False
        if n < len(pending[0]):
            pending[0] = memoryview(pending[0])[n:]
            return False
        pending.pop(0)
    return True


def read_json_frame(fd, what):
    """One frame of JSON from `fd`, read unbuffered (what follows is the
    operation's data, or the requests); `what` names it in a refusal."""
    import struct
    size = read_exact(fd, 4)
    if size is None:
        raise Refusal("invalid-operation", "stdin ended before %s" % what)
    (n,) = struct.unpack(">I", size)
    if n > HEADER_MAX:
        raise Refusal("invalid-operation", "%s of %d bytes" % (what, n))
    try:
        return json.loads((read_exact(fd, n) or b"").decode("utf-8"))
    except ValueError:
        raise Refusal("invalid-operation", "%s is not JSON" % what)


def read_start(fd):
    """The serving start's second frame: {"exec": <text or null>}, and
    optionally "scopeIdleSeconds": how long a scope's process outlives its
    last request (default SCOPE_IDLE_SECONDS). Returns (text, idle)."""
    start = read_json_frame(fd, "the start frame")
    text = start.get("exec") if isinstance(start, dict) else None
    idle = start.get("scopeIdleSeconds") if isinstance(start, dict) else None
    if not isinstance(start, dict) or "exec" not in start or not set(start) <= {"exec", "scopeIdleSeconds"} \
            or not (text is None or isinstance(text, str)) \
            or not (idle is None or (isinstance(idle, (int, float)) and not isinstance(idle, bool)
                                     and 0 < idle <= 86400)):
        raise Refusal("invalid-operation", "--serve: the start frame is {\"exec\": <text or null>}, "
                      "and optionally \"scopeIdleSeconds\": 0 < seconds <= 86400")
    return text, idle


def read_args(fd):
    """The arguments the host sent in the first frame on stdin."""
    request = read_json_frame(fd, "the arguments' frame")
    args = request.get("args") if isinstance(request, dict) else None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or len(request) != 1:
        raise Refusal("invalid-operation", "the arguments' frame is {\"args\": [strings]}")
    return args


# --- workspace/scopes.py ------------------------------------------------------
# Scopes: one process per active scope, forked once from the serving process
# and answering that scope's workspace requests in order.
#
# The serving process hands each workspace request to the process of the
# scope its envelope names (the runtime id), forking one when there is none:
# a new scope pays one fork, its later requests none. A scope's process runs
# each request as a one-shot run would (answer(): the envelope checked, then
# the operation, its answer or its refusal), one at a time, keeping nothing
# from one request to the next but the modules loaded; it serves its own
# scope and root alone, and refuses an envelope naming another. It never
# sees the host's channel: requests come on a pipe, answers go back on one.
#
# It ends when the serving process closes its pipe: SCOPE_IDLE_SECONDS after
# its last request (the start frame may set another bound), when more than
# SCOPES_MAX scopes have a process (the longest idle one goes), and when the
# serving process ends. A request cancelled in hand kills it. One that ends
# with a request in hand (killed, out of memory) gets that request answered
# {"id", "lost": <why>}, and the scope's next request gets a new process.
# One that finds a descriptor left open after a request exits once it has
# answered, so that nothing of one request outlives it, and so does one whose
# request moved more than LARGE bytes; its answer says so ("last": true,
# which the serving process takes out), and no request is sent to it after.
#
# Its pipes carry the serving frames: a request {"id", "args", "stdin": k}
# and k bytes in, the answer {"id", "status", "stdout": a, "stderr": b} and
# a + b bytes out.

import json
import os
import sys
import time

SCOPE_IDLE_SECONDS = 120
SCOPES_MAX = 128
# A request that moved more than this ends its process once answered: what
# the interpreter keeps of its buffers goes with it, so that many scopes'
# processes stay small; the next request pays one fork.
LARGE = 1 << 20
PIPE_SIZE = 256 << 10


class Captured(object):
    """sys.stdin or sys.stdout of one request: bytes in memory."""

    def __init__(self, data=b""):
        import io
        self.buffer = io.BufferedReader(io.BytesIO(data)) if data else io.BytesIO()

    def write(self, text):
        self.buffer.write(text.encode("utf-8"))

    def flush(self):
        pass


def answer(root, scope, args, data):
    """One workspace request, as a one-shot run would answer it: status,
    stdout, stderr. `scope` is the runtime id this process serves."""
    set_guard(None)
    sys.stdin, sys.stdout = Captured(data), Captured()
    status, err = 0, ""
    try:
        envelope = Envelope(args[0]) if args else None
        if envelope is not None and envelope.root != root:
            raise Refusal("invalid-operation", "envelope: this process serves %s, not %s"
                          % (root, envelope.root))
        if envelope is not None and (envelope.runtime or "") != scope:
            raise Refusal("invalid-operation", "envelope: this process serves scope %r, not %r"
                          % (scope, envelope.runtime))
        main(args, envelope)
    except (Refusal, OSError) as e:
        status, err = 1, failure_line(e)
    except Exception:
        import traceback
        status, err = 1, traceback.format_exc()
    return status, sys.stdout.buffer.getvalue(), err.encode("utf-8", "replace")


def runtime_of(args):
    """The runtime a workspace request names (one per OpenClaw scope): its
    envelope's runtime id, "" for none. Read only to route the request; its scope's process checks the
    envelope whole."""
    try:
        v = json.loads(args[0])
    except (ValueError, IndexError):
        return ""
    key = v.get("runtimeId") if isinstance(v, dict) else None
    return key if isinstance(key, str) else ""


def open_count():
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def scope_main(root, scope, rfd, wfd):
    """A scope's process: requests from rfd, each answered on wfd, until rfd
    ends."""
    import struct
    opened = open_count()
    while True:
        size = read_exact(rfd, 4)
        if size is None:
            return
        (n,) = struct.unpack(">I", size)
        if n > HEADER_MAX:
            return
        header = json.loads(read_exact(rfd, n).decode("utf-8"))
        data = read_exact(rfd, header["stdin"]) or b""
        status, out, err = answer(root, scope, header["args"], data)
        # Said in the answer, so that no request is sent to it meanwhile.
        last = open_count() > opened or len(data) + len(out) > LARGE
        reply = {"id": header["id"], "status": status, "stdout": len(out), "stderr": len(err)}
        if last:
            reply["last"] = True
        write_all_fd(wfd, frame_bytes(reply, out, err))
        if last:
            return


def closed_all_but(keep):
    """Close every descriptor above 2 but those in `keep` (a forked child's
    start: nothing of the other requests stays open in it)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = [str(n) for n in range(3, 1024)]
    for name in names:
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def take_answer(buf):
    """(header, length) of the whole answer frame at the start of buf, or
    None while it is not all there."""
    import struct
    if len(buf) < 4:
        return None
    (n,) = struct.unpack(">I", bytes(buf[:4]))
    if len(buf) < 4 + n:
        return None
    header = json.loads(bytes(buf[4:4 + n]).decode("utf-8"))
    total = 4 + n + header["stdout"] + header["stderr"]
    return (header, total) if len(buf) >= total else None


class Scope(object):
    """The serving process's view of one scope's process."""

    def __init__(self, key, pid, to, frm):
        self.key = key
        self.pid = pid
        self.to = to              # its requests (None once closed)
        self.frm = frm            # its answers
        self.queue = []           # [(request id, frame)] behind the one in hand
        self.current = None       # the request id in hand
        self.pending = []         # bytes not yet written to it
        self.watched = False      # whether the loop waits to write them
        self.answer = bytearray()
        self.last = time.time()

    def idle(self):
        return self.current is None and not self.queue and self.to is not None


class Scopes(object):
    """The scopes half of the serving process (Server): each workspace
    request routed to its scope's process. Needs self.root, self.runs,
    self.own, self.watch, self.close_fd and self.send."""

    def init_scopes(self, idle):
        self.scopes = {}
        self.scope_idle = idle or SCOPE_IDLE_SECONDS

    def start_request(self, rid, args, data):
        key = runtime_of(args)
        scope = self.scopes.get(key) or self.fork_scope(key)
        scope.queue.append((rid, frame_bytes({"id": rid, "args": args, "stdin": len(data)}, data)))
        self.runs[rid] = {"kind": "request", "scope": key}
        self.next_request(scope)

    def fork_scope(self, key):
        if len(self.scopes) >= SCOPES_MAX:
            idle = [s for s in self.scopes.values() if s.idle()]
            if idle:
                self.close_scope(min(idle, key=lambda s: s.last))
        to_r, to_w = os.pipe()
        frm_r, frm_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                closed_all_but((to_r, frm_w))
                # Nothing of the host's channel: answers go through the pipe.
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                scope_main(self.root, key, to_r, frm_w)
            finally:
                os._exit(0)
        os.close(to_r)
        os.close(frm_w)
        os.set_blocking(to_w, False)
        # A larger pipe in: a seed's archive passes in fewer turns of the
        # loop. Bounded, since every pipe of the account counts against its
        # pipe-user-pages-soft, past which the account's new pipes (its
        # commands' too) get one page.
        try:
            import fcntl
            fcntl.fcntl(to_w, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
        except (ImportError, OSError):
            pass
        scope = Scope(key, pid, to_w, frm_r)
        self.scopes[key] = scope
        self.own(to_w, key, "to-scope")
        self.own(frm_r, key, "from-scope")
        self.watch(frm_r, "from-scope")
        return scope

    def next_request(self, scope):
        """The next queued request to the scope's process, once it is free."""
        if scope.current is not None or not scope.queue or scope.to is None:
            return
        scope.current, data = scope.queue.pop(0)
        scope.pending.append(data)
        # Written now, as far as the pipe takes it; the loop writes the rest.
        self.scope_writable(scope, scope.to)

    def close_scope(self, scope):
        """Its pipe closed: it exits once it has answered what it holds."""
        if scope.to is not None:
            self.close_fd(scope.to)
            scope.to = None
            scope.pending = []
            scope.watched = False

    def cancel_request(self, rid, run):
        del self.runs[rid]
        scope = self.scopes.get(run["scope"])
        if scope is None:
            return
        if scope.current == rid:
            # Its answer is not wanted: the process goes with the request.
            import signal
            os.kill(scope.pid, signal.SIGKILL)
        else:
            scope.queue = [q for q in scope.queue if q[0] != rid]

    def scope_writable(self, scope, fd):
        try:
            done = write_pending(fd, scope.pending)
        except OSError:
            # It is gone: its answer pipe's end says so.
            self.close_scope(scope)
            return
        if not done:
            if not scope.watched:
                self.watch(fd, "to-scope")
                scope.watched = True
            return
        if scope.watched:
            self.poller.unregister(fd)
            scope.watched = False

    def scope_readable(self, scope, fd):
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.scope_ended(scope)
            return
        scope.answer += data
        while True:
            try:
                taken = take_answer(scope.answer)
            except (ValueError, KeyError, TypeError):
                taken = ({"id": None}, len(scope.answer))
            if taken is None:
                return
            header, total = taken
            frame = bytes(scope.answer[:total])
            del scope.answer[:total]
            if header.get("id") != scope.current:
                # Out of frame: the process goes, the request in hand is lost.
                import signal
                os.kill(scope.pid, signal.SIGKILL)
                return
            scope.current = None
            scope.last = time.time()
            if header.pop("last", None):
                # It exits now: the scope's next request waits for a new one.
                self.close_scope(scope)
                frame = frame_bytes(header, frame[total - header["stdout"] - header["stderr"]:])
            if self.runs.pop(header["id"], None) is not None:
                write_all_fd(1, frame)
            self.next_request(scope)

    def scope_ended(self, scope):
        self.close_scope(scope)
        self.close_fd(scope.frm)
        _, status = os.waitpid(scope.pid, 0)
        if self.scopes.get(scope.key) is scope:
            del self.scopes[scope.key]
        if scope.current is not None and self.runs.pop(scope.current, None) is not None:
            how = ("signal %d" % os.WTERMSIG(status)) if os.WIFSIGNALED(status) \
                else ("exit %d" % os.WEXITSTATUS(status))
            self.send({"id": scope.current, "lost": "the process serving scope %s on the target ended "
                       "(%s) with the request in hand" % (scope.key or "(none)", how)})
        if scope.queue:
            again = self.fork_scope(scope.key)
            again.queue = scope.queue
            self.next_request(again)

    def expire_scopes(self):
        now = time.time()
        for scope in list(self.scopes.values()):
            if scope.idle() and now - scope.last > self.scope_idle:
                self.close_scope(scope)


# --- workspace/serve.py -------------------------------------------------------
# Serving: one process per target, every scope's requests.
#
# The host may keep this script running for a target and workspace root instead
# of starting it for every operation:
#   python3 -c <this text> workspace
# with ["--serve", <workspace root>] as its arguments' frame, and then one
# frame {"exec": <the approved exec script's text>} (or {"exec": null}): the
# program the host runs for a command, which it would otherwise send as
# `python3 -c <text> exec`. No operation is named "--serve", so the component
# cannot ask for it: the host builds this start itself.
#
# Every request carries its own id and is checked exactly as a one-shot run
# is: a workspace request is the argument vector a one-shot run gets, its
# envelope first (the call's scope, written by the host), and main() checks it
# in the process of its scope (scopes.py: forked once per active scope, it
# answers that scope's requests in order), so requests of different scopes
# run side by side and no scope shares a process with another; an envelope for
# another workspace root is refused. A command runs as a one-shot exec run
# would, in a forked process that runs the exec script with its stdin, stdout
# and stderr piped through this one. The host keeps one scope's workspace
# requests in order; commands run beside them.
#
# Frames, both ways: a 4-byte big-endian length, that many bytes of JSON, then
# the bytes the JSON announces. The table of docs/architecture.md ("The
# worker's frames") is the protocol: hello, request and answer (or lost),
# command, input, close, cancel, output and exit, ping and pong, each with its
# keys; guest-ssh-sandbox/tests/scripts.rs holds every frame this process
# speaks to it.
# A frame over its bound, or not of these shapes, ends the process: the host
# replaces it. The process ends when its stdin closes (the host closed the
# session or died; every command it runs then sees its channel close) and
# after IDLE_SECONDS with nothing to do. A watcher (the parent) kills it when
# the host's end of its stdout goes away, even while it is stopped.

import json
import os
import time

DATA_MAX = 64 << 20
IDLE_SECONDS = 900
# A cancelled command's own process gets this long to end its run (the exec
# script kills the command's process group when its channel closes).
CANCEL_GRACE = 5.0


class Server(Scopes):
    """The serving loop: frames from the host on fd 0, answers on fd 1, a
    process per active scope for workspace requests (Scopes) and one per
    command, whose pipes it watches."""

    def __init__(self, root, exec_text, scope_idle=None):
        import select
        self.root = root
        self.init_scopes(scope_idle)
        self.exec_code = compile(exec_text, "exec", "exec") if exec_text else None
        if self.exec_code is not None:
            # What every command's process would import on its own (the
            # exec script's prctl, a terminal's ioctls): loaded once here,
            # each forked command finds it loaded.
            for name in ("ctypes", "fcntl", "termios"):
                try:
                    __import__(name)
                except ImportError:
                    pass
        self.inbuf = bytearray()
        self.poller = select.poll()
        # fd -> (request id or scope, role, serial): role "out", "err" or
        # "in" of a command, "to-scope" or "from-scope" of a scope; the
        # serial tells a descriptor from a later one of the same number
        # (see run).
        self.fds = {}
        self.serial = 0
        # request id -> state
        self.runs = {}
        self.last_active = time.time()
        # A command's process forked ahead (fork_command), or None.
        self.spare = None

    # -- the host's frames ------------------------------------------------------

    def take_frame(self):
        """The next whole frame in the input buffer, or None."""
        import struct
        if len(self.inbuf) < 4:
            return None
        (n,) = struct.unpack(">I", bytes(self.inbuf[:4]))
        if n > HEADER_MAX:
            raise ValueError("a request header of %d bytes" % n)
        if len(self.inbuf) < 4 + n:
            return None
        header = json.loads(bytes(self.inbuf[4:4 + n]).decode("utf-8"))
        if not isinstance(header, dict) or not isinstance(header.get("id"), int) \
                or isinstance(header.get("id"), bool):
            raise ValueError("a request is an object with an integer id")
        length = 0
        for key in ("stdin", "input"):
            if key in header:
                length = header[key]
                if not isinstance(length, int) or isinstance(length, bool) or not 0 <= length <= DATA_MAX:
                    raise ValueError("%s: a length from 0 to %d" % (key, DATA_MAX))
        if len(self.inbuf) < 4 + n + length:
            return None
        data = bytes(self.inbuf[4 + n:4 + n + length])
        del self.inbuf[:4 + n + length]
        return header, data

    def dispatch(self, header, data):
        rid = header["id"]
        args = header.get("args", header.get("exec"))
        if "args" in header or "exec" in header:
            if rid in self.runs:
                raise ValueError("request %d is already running" % rid)
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError("a request's arguments are strings")
            if "args" in header:
                self.start_request(rid, args, data)
            else:
                self.start_command(rid, args, data)
            return
        if header.get("ping") is True:
            # The host asks whether this process still serves.
            self.send({"id": rid, "pong": True})
            return
        run = self.runs.get(rid)
        if run is None:
            # A request that ended, or one the host gave up on: nothing to do.
            return
        if run["kind"] == "request":
            if header.get("cancel") is True:
                # Past its bound or its caller gone: its answer is not wanted.
                self.cancel_request(rid, run)
            return
        if "input" in header:
            if run["in"] is not None:
                run["pending"].append(data)
                self.watch(run["in"], "in")
        elif header.get("close") is True:
            run["closing"] = True
            if run["in"] is not None and not run["pending"]:
                self.close_fd(run["in"])
                run["in"] = None
        elif header.get("cancel") is True:
            self.cancel(rid, run)
        else:
            raise ValueError("a frame of no known shape")

    # -- requests and commands ----------------------------------------------------

    def own(self, fd, rid, role):
        # Read ends are non-blocking: a read finds what is there or nothing,
        # never waits for a process to write.
        if role != "in":
            os.set_blocking(fd, False)
        self.serial += 1
        self.fds[fd] = (rid, role, self.serial)

    def watch(self, fd, role):
        import select
        self.poller.register(fd, select.POLLOUT if role in ("in", "to-scope") else select.POLLIN)

    def close_fd(self, fd):
        try:
            self.poller.unregister(fd)
        except (KeyError, ValueError):
            pass
        self.fds.pop(fd, None)
        try:
            os.close(fd)
        except OSError:
            pass

    def start_command(self, rid, args, data):
        if self.exec_code is None:
            # The host was told (hello) and routes commands elsewhere.
            message = b"this worker runs no commands: it was started without the exec script\n"
            self.send({"id": rid, "err": len(message)}, message)
            self.send({"id": rid, "exit": 125, "signal": None})
            return
        spare, self.spare = self.spare, None
        if spare is not None and os.waitpid(spare[0], os.WNOHANG)[0] != 0:
            # Ended before it was given a command (killed): reaped, not used.
            for fd in spare[1:]:
                os.close(fd)
            spare = None
        pid, in_w, out_r, err_r = spare or self.fork_command()
        run = {"kind": "exec", "pid": pid, "in": in_w, "out": out_r, "err": err_r,
               "pending": [frame_bytes({"args": args}) + data],
               "closing": False, "cancelled": None}
        self.runs[rid] = run
        self.own(in_w, rid, "in")
        self.own(out_r, rid, "out")
        self.own(err_r, rid, "err")
        self.watch(in_w, "in")
        self.watch(out_r, "out")
        self.watch(err_r, "err")
        # Its arguments now, not a turn of the loop later: the pipe is empty.
        self.readable(in_w, 0)

    def fork_command(self):
        """A process for a command: the exec script, run as a one-shot run
        would be, which first reads its arguments' frame on stdin. Forked
        ahead of the command when nothing else runs (the spare), so that a
        command does not wait for the fork: until then it has only made
        itself undumpable and waits on a pipe of its own."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(in_r, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                closed_all_but(())
                import signal
                for sig in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                # The exec script, as a one-shot run: its arguments' frame
                # first on stdin, then its header and the command's input.
                exec(self.exec_code, {"__name__": "__main__"})
            finally:
                os._exit(125)
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        os.set_blocking(in_w, False)
        return pid, in_w, out_r, err_r

    def cancel(self, rid, run):
        # As a closed SSH channel: the exec script sees its streams go and
        # ends its command's process group.
        for key in ("in", "out", "err"):
            if run[key] is not None:
                self.close_fd(run[key])
                run[key] = None
        run["cancelled"] = time.time()

    def send(self, header, *data):
        write_all_fd(1, frame_bytes(header, *data))

    # -- the loop -------------------------------------------------------------------

    def readable(self, fd, events):
        import select
        rid, role, _ = self.fds[fd]
        if role == "to-scope":
            self.scope_writable(self.scopes[rid], fd)
            return
        if role == "from-scope":
            self.scope_readable(self.scopes[rid], fd)
            return
        run = self.runs[rid]
        if role == "in":
            if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                self.close_fd(fd)
                run["in"] = None
                run["pending"] = []
                return
            try:
                if not write_pending(fd, run["pending"]):
                    return
            except OSError:
                self.close_fd(fd)
                run["in"] = None
                run["pending"] = []
                return
            # Nothing to write now: watched again when more input comes.
            self.poller.unregister(fd)
            if run["closing"]:
                self.close_fd(fd)
                run["in"] = None
            return
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.send({"id": rid, role: len(data)}, data)
            return
        self.close_fd(fd)
        run[role] = None
        self.finish_command(rid, run)

    def finish_command(self, rid, run):
        if run["out"] is not None or run["err"] is not None:
            return
        if run["in"] is not None:
            self.close_fd(run["in"])
            run["in"] = None
        _, status = os.waitpid(run["pid"], 0)
        del self.runs[rid]
        if run["cancelled"] is None:
            if os.WIFSIGNALED(status):
                self.send({"id": rid, "exit": None, "signal": os.WTERMSIG(status)})
            else:
                self.send({"id": rid, "exit": os.WEXITSTATUS(status), "signal": None})

    def reap_cancelled(self):
        import signal
        for rid, run in list(self.runs.items()):
            if run["kind"] != "exec" or run["cancelled"] is None:
                continue
            done, _ = os.waitpid(run["pid"], os.WNOHANG)
            if done:
                del self.runs[rid]
            elif time.time() - run["cancelled"] > CANCEL_GRACE:
                os.kill(run["pid"], signal.SIGKILL)

    def run(self):
        import select
        os.set_blocking(0, False)
        self.poller.register(0, select.POLLIN)
        while True:
            busy = bool(self.runs) or bool(self.scopes)
            events = self.poller.poll(1000 if busy else 5000)
            if events:
                self.last_active = time.time()
            # Whose each descriptor was when poll looked: a frame handled
            # before a later event of the same batch may close a request's
            # descriptors and start another whose pipes get the same
            # numbers. That event is the old one's, and not acted on.
            owners = dict((fd, self.fds.get(fd)) for fd, _ in events)
            for fd, ev in events:
                if fd == 0:
                    try:
                        chunk = os.read(0, 1 << 20)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        # The host is gone: every command sees its channel
                        # close; a request in progress finishes on its own.
                        for rid, run in list(self.runs.items()):
                            if run.get("kind") == "exec":
                                self.cancel(rid, run)
                        return
                    self.inbuf += chunk
                    while True:
                        taken = self.take_frame()
                        if taken is None:
                            break
                        self.dispatch(*taken)
                elif owners[fd] is not None and self.fds.get(fd) == owners[fd]:
                    self.readable(fd, ev)
            self.reap_cancelled()
            self.expire_scopes()
            if self.spare is None and self.exec_code is not None \
                    and not any(r["kind"] == "exec" for r in self.runs.values()):
                self.spare = self.fork_command()
            if not self.runs and time.time() - self.last_active > IDLE_SECONDS:
                return


def serve(root, exec_text, scope_idle=None):
    if not root.startswith("/") or "\0" in root:
        raise Refusal("invalid-operation", "--serve: the workspace root must be an absolute path")
    import signal
    down, up = os.pipe()
    pid = os.fork()
    if pid:
        # The watcher: the server's end (the pipe) and the host's (stdout).
        import select
        os.close(up)
        os.close(0)
        poller = select.poll()
        poller.register(down, select.POLLIN)
        poller.register(1, select.POLLERR)
        while True:
            events = dict(poller.poll())
            if down in events:
                break
            if 1 in events:
                os.kill(pid, signal.SIGKILL)
                break
        _, status = os.waitpid(pid, 0)
        os._exit(0)
    os.close(down)
    write_all_fd(1, frame_bytes({"serving": 2, "pid": os.getpid(), "exec": bool(exec_text)}))
    Server(root, exec_text, scope_idle).run()


# --- workspace/__main__.py ----------------------------------------------------
# The entry: the arguments' frame on stdin, then one operation, or (for
# ["--serve", <root>]) the serving process.

import sys


if __name__ == "__main__":
    # sys.argv is ["-c", "workspace"]: the arguments come on stdin.
    try:
        args = read_args(0)
        if args[:1] == ["--serve"] and len(args) == 2:
            serve(args[1], *read_start(0))
        else:
            main(args)
    except (Refusal, OSError) as e:
        sys.stderr.write(failure_line(e))
        sys.exit(1)
