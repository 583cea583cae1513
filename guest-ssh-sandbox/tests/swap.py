#!/usr/bin/env python3
"""A symbolic link swapped in while an operation runs, against the real
workspace script.

Each case loads scripts/workspace.py as it ships, then swaps a directory the
operation is walking for a link to a directory outside the workspace at the
worst moment: after the script checked or opened it, before it acts. The
operation must act where it looked (inside) or refuse, and the outside
directory must stay exactly as it was. Run by tests/scripts.rs.
"""

import os
import shutil
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "workspace.py")


def load():
    ns = {"__name__": "occ_swap_test"}
    with open(SCRIPT) as f:
        exec(compile(f.read(), SCRIPT, "exec"), ns)
    return ns


class Case:
    def __init__(self, name):
        self.name = name
        self.base = tempfile.mkdtemp(prefix="occ-swap-")
        self.root = os.path.join(self.base, "root")
        self.ws = os.path.join(self.root, "rt", "workspace")
        self.outside = os.path.join(self.base, "outside")
        os.makedirs(os.path.join(self.ws, "d", "sub"))
        os.makedirs(self.outside)
        with open(os.path.join(self.outside, "keep"), "w") as f:
            f.write("outside")
        with open(os.path.join(self.ws, "d", "file"), "w") as f:
            f.write("inside")
        self.before = self.snapshot()
        self.ns = load()

    def snapshot(self):
        out = []
        for dirpath, dirnames, filenames in os.walk(self.outside):
            for name in sorted(dirnames + filenames):
                path = os.path.join(dirpath, name)
                data = open(path).read() if os.path.isfile(path) else None
                out.append((os.path.relpath(path, self.outside), data))
        return sorted(out)

    def swap(self, rel):
        """Replace <ws>/<rel> by a link to the outside directory."""
        path = os.path.join(self.ws, rel)
        os.rename(path, path + ".real")
        os.symlink(self.outside, path)

    def swap_after_parent_of(self, rel, nth=1, then=None):
        """Swap <ws>/<rel> for the link once the script's parent_of has
        answered for the nth time, then run `then` (if any)."""
        original = self.ns["parent_of"]
        calls = []

        def parent_then_swap(*args, **kwargs):
            got = original(*args, **kwargs)
            calls.append(args)
            if len(calls) == nth:
                self.swap(rel)
                if then:
                    then()
            return got

        self.ns["parent_of"] = parent_then_swap

    def run(self, fn):
        try:
            return fn(self.ns), None
        except self.ns["Refusal"] as r:
            return None, r.code

    def check_outside(self):
        after = self.snapshot()
        assert after == self.before, "%s changed outside: %r -> %r" % (self.name, self.before, after)
        shutil.rmtree(self.base)


def case_write():
    c = Case("write")
    c.swap_after_parent_of("d")
    c.ns["copy_into"] = lambda fd, src: os.write(fd, b"written")
    result, refused = c.run(lambda ns: ns["op_write"](c.root, "rt", "workspace", "d/file", "0"))
    assert refused is None, refused
    # Written where the script looked: the directory now called d.real.
    assert open(os.path.join(c.ws, "d.real", "file")).read() == "written"
    c.check_outside()


def case_create():
    c = Case("create")
    c.swap_after_parent_of("d")
    c.ns["copy_into"] = lambda fd, src: os.write(fd, b"created")
    result, refused = c.run(lambda ns: ns["op_create"](c.root, "rt", "workspace", "d/new", "0"))
    assert refused is None and result == {"result": "created"}, (result, refused)
    assert open(os.path.join(c.ws, "d.real", "new")).read() == "created"
    c.check_outside()


def case_read():
    c = Case("read")

    def outside_file():
        with open(os.path.join(c.outside, "file"), "w") as f:
            f.write("outside")
        c.before = c.snapshot()

    c.swap_after_parent_of("d", then=outside_file)
    import io

    class Capture:
        buffer = io.BytesIO()

    c.ns["sys"] = type("S", (), {"stdout": Capture, "stdin": sys.stdin, "stderr": sys.stderr})
    result, refused = c.run(lambda ns: ns["op_read"](c.root, "rt", "workspace", "d/file", "100"))
    assert refused is None, refused
    assert Capture.buffer.getvalue() == b"inside", Capture.buffer.getvalue()
    c.check_outside()


def case_resolve():
    """A directory swapped for a link to outside after it was looked at, before
    it is opened: looked at again, refused."""
    c = Case("resolve")
    original = c.ns["lstat_at"]
    swapped = []

    def lstat_then_swap(dirfd, name):
        st = original(dirfd, name)
        if name == "d" and not swapped:
            swapped.append(True)
            c.swap("d")
        return st

    c.ns["lstat_at"] = lstat_then_swap
    c.ns["copy_into"] = lambda fd, src: os.write(fd, b"pwned")
    result, refused = c.run(lambda ns: ns["op_write"](c.root, "rt", "workspace", "d/file", "0"))
    assert refused == "symlink", (result, refused)
    c.check_outside()


def case_inside_link():
    """A link that stays inside is followed, as OpenClaw follows it; one that
    leaves by `..` or by an absolute target is refused."""
    c = Case("inside-link")
    os.symlink("d", os.path.join(c.ws, "alias"))
    os.symlink("../../../outside", os.path.join(c.ws, "d", "up"))
    os.symlink(os.path.join(c.ws, "d", "file"), os.path.join(c.ws, "absolute-inside"))
    c.ns["copy_into"] = lambda fd, src: os.write(fd, b"through alias")
    result, refused = c.run(lambda ns: ns["op_write"](c.root, "rt", "workspace", "alias/file", "0"))
    assert refused is None, refused
    assert open(os.path.join(c.ws, "d", "file")).read() == "through alias"
    result, refused = c.run(lambda ns: ns["op_stat"](c.root, "rt", "workspace", "absolute-inside"))
    assert refused is None and result["kind"] == "file", (result, refused)
    result, refused = c.run(lambda ns: ns["op_write"](c.root, "rt", "workspace", "d/up/keep", "0"))
    assert refused == "escapes-workspace", (result, refused)
    # A `..` in the path itself is never sent (the component resolves it) and
    # is refused if it is.
    result, refused = c.run(lambda ns: ns["op_mkdirp"](c.root, "rt", "workspace", "d/../../x"))
    assert refused == "invalid-path", (result, refused)
    c.check_outside()


def case_walk():
    """mkdirp: the next directory of the walk swapped just before it is opened."""
    c = Case("walk")
    original = c.ns["open_dir"]

    def swap_then_open(dirfd, name, path, create=False):
        if name == "sub":
            c.swap("d/sub")
        return original(dirfd, name, path, create)

    c.ns["open_dir"] = swap_then_open
    result, refused = c.run(lambda ns: ns["op_mkdirp"](c.root, "rt", "workspace", "d/sub/new"))
    assert refused == "symlink", (result, refused)
    c.check_outside()


def case_remove():
    """remove -r: a directory of the tree swapped while the tree is listed."""
    c = Case("remove")
    original = c.ns["os"].listdir
    swapped = []

    class Os:
        def __getattr__(self, name):
            return getattr(os, name)

        def listdir(self, fd):
            names = original(fd)
            if not swapped:
                swapped.append(True)
                c.swap("d/sub")
                names = original(fd)
            return names

    c.ns["os"] = Os()
    result, refused = c.run(lambda ns: ns["op_remove"](c.root, "rt", "workspace", "d", "1", "0"))
    assert refused is None and result == {"removed": True}, (result, refused)
    assert not os.path.lexists(os.path.join(c.ws, "d"))
    c.check_outside()


def case_rename():
    c = Case("rename")
    c.swap_after_parent_of("d", nth=2)
    result, refused = c.run(lambda ns: ns["op_rename"](c.root, "rt", "workspace", "d/file", "workspace", "d/moved"))
    assert refused is None, refused
    assert open(os.path.join(c.ws, "d.real", "moved")).read() == "inside"
    c.check_outside()


if __name__ == "__main__":
    cases = [case_write, case_create, case_read, case_resolve, case_inside_link, case_walk, case_remove, case_rename]
    for case in cases:
        case()
        print("ok", case.__name__)
