# The bridge's operations, one per OpenClaw filesystem call: read, write,
# create, mkdir -p, remove, rename, stat, readdir and the command's working
# directory, each on a path the walk resolved inside its mount.

import errno
import os
import stat
import sys
from .base import CHUNK, Refusal
from .walk import (
    dir_of, lstat_at, open_mount, parent_of, resolve, split, unguarded, walk
)
from .files import (
    MissingRename, copy_into, kind_of, refuse_hardlink, remove_tree,
    rename_no_replace, temp_file, unlink_quietly
)


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
