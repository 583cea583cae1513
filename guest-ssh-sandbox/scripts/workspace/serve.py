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
from .base import CHUNK, Refusal
from .frames import HEADER_MAX, frame_bytes, write_all_fd, write_pending
from .scopes import Scopes, closed_all_but

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
