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
from .base import Refusal
from .walk import set_guard
from .operations import Envelope, failure_line, main
from .frames import HEADER_MAX, frame_bytes, read_exact, write_all_fd, write_pending

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
