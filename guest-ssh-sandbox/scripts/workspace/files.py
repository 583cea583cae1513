# Entries below an open directory: their kind, a regular file's single link,
# copies, temporary files beside their final name, the removal of a tree, and
# the atomic renames (no-replace, exchange) Linux and macOS each spell their
# own way.

import errno
import os
import stat
import sys
from .base import CHUNK, NOFOLLOW_DIR, Refusal, token
from .walk import lstat_at


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
