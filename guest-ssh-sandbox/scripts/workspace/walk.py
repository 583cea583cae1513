# Names and walking: a scope's path checked name by name, each directory
# opened relative to its parent without following a link, links met on the
# way resolved here (inside the mount, or refused), and the protected skills
# directories a changing operation may not touch.

import errno
import json
import os
import stat
from .base import LAYOUT_FILE, LAYOUT_FORMAT, MOUNTS, NOFOLLOW_DIR, Refusal


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
