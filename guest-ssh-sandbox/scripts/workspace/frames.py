# Frames on a descriptor: a 4-byte big-endian length, that many bytes of
# JSON, then the bytes the JSON announces; read unbuffered, bounded by
# HEADER_MAX.

import json
import os
from .base import Refusal


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
