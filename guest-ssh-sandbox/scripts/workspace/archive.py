# The seed: a tar stream from the host unpacked into a stage, member by
# member (ustar and pax; regular files, directories and links that stay
# inside), each file written through a descriptor below the stage.

import os
import stat
import sys
from .base import MOUNTS, NOFOLLOW_DIR, Refusal
from .walk import check_stage, open_dir, open_root, split, walk


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
