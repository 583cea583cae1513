#!/usr/bin/env python3
# occ sandbox: run one command in a sandbox, and make sure it ends.
#
# Sent by the sandbox component and run by the host as
#   python3 -c <this text> exec
# with its arguments, <envelope> <mode> <mount> <workdir> <timeout-ms>
# <header-bytes>, in the first frame on stdin (4 bytes of big-endian length,
# then {"args": [...]}), then a JSON header of <header-bytes> bytes,
# {"command", "env", "args", "nonce"}, then the command's own stdin.
# The arguments, the command, its environment and the nonce travel on stdin,
# not in the argument vector, so that no process on the target can read them
# in the process list or in /proc/<pid>/cmdline. The host runs this script only when
# its SHA-256 is approved in the installation, and only in a call that asked
# for exactly this command, environment, arguments and stdin (it reads the
# header), in the directory the caller named.
#
# Trusted values come from the envelope alone, which the host writes for the
# call (see workspace.py): the workspace root, the runtime id and the mounts.
# The mode must be one of envelope.ops and the mount one of envelope.mounts.
#
# <mode> is `exec` (`/bin/sh -c <command>`) or `shell` (`/bin/sh -c <command>
# occ-sandbox-shell <args...>`). The command runs in <workdir> below the mount,
# reached without following any symbolic link, in a session of its own, with
# this process's stdin; its stdout and stderr pass through this script to the
# caller as they are written, and end when the command ends (a process it left
# in the background keeps running, but no longer holds the caller's streams).
#
# With envelope.tty (the caller asked for a terminal, mode exec only), the
# command runs on a pseudo-terminal of its own with TERM=xterm-256color unless
# the caller set TERM, as OpenClaw's own backend runs it with `ssh -tt`: one
# output stream, the terminal's; stdin passed to the terminal as it arrives,
# its end sent as the terminal's end-of-file character.
#
# It ends when the command ends (exit status passed on; 128+n for signal n), or:
# - the time limit passes (<timeout-ms> 0: the command has none of its own):
#   the command's process group, and any process that
#   carries this run's marker in its environment, get SIGTERM, then SIGKILL;
#   the report line below says so and the exit status is 124;
# - the SSH channel closes (the caller cancelled, the host timed out): stdout
#   or stderr reports an error or hang-up, and the processes are killed the
#   same way.
# Reports of this script itself are one stderr line
# `occ-sandbox-exec <nonce> <json>`, always the last, with exit 124 (time
# limit) or 125 (it could not start the command). A command that itself exits
# 124 or 125 gets a report too, `{"exitCode": <n>}`, written after its output
# has ended: whatever the command printed, the last line is this script's.
# Before it reads the nonce, this script makes itself non-dumpable, so that a
# command running as the same user can neither read the nonce from its memory
# nor trace it.
# Python 3.6 or later; standard library only.

import errno
import json
import os
import re
import select
import signal
import stat
import struct
import sys
import time

NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# The newest runtime layout this script knows (the workspace script's
# LAYOUT_FORMAT): a runtime a later release laid out is refused, not run in.
LAYOUT_FORMAT = 2
GRACE_SECONDS = 2.0
MARKER = "OCC_SANDBOX_EXEC_ID"


class SetupError(Exception):
    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


def report(nonce, payload, status):
    try:
        sys.stderr.write("occ-sandbox-exec %s %s\n" % (nonce, json.dumps(payload)))
        sys.stderr.flush()
    except OSError:
        # Nobody reads it any more: the status is all there is.
        pass
    os._exit(status)


# The same descriptor walk as workspace.py: each script is sent alone, so each
# carries the few lines it needs.
def open_workdir(root, runtime, mount, rel):
    parts = [] if rel == "" else rel.split("/")
    for part in [runtime, mount] + parts:
        if part in ("", ".", "..") or "/" in part or "\0" in part:
            raise SetupError("invalid-path", "invalid path component %r" % part)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise SetupError("no-runtime", "no workspace root %s" % root)
        raise
    walked = []
    for index, part in enumerate([runtime, mount] + parts):
        walked.append(part)
        try:
            nxt = os.open(part, NOFOLLOW_DIR, dir_fd=fd)
        except OSError as e:
            where = "/".join(walked)
            if e.errno == errno.ENOENT:
                code = "no-runtime" if index == 0 else "not-found"
                raise SetupError(code, "%s: no such directory" % where)
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                except OSError:
                    link = False
                if link:
                    raise SetupError("symlink", "%s: is a symbolic link; the sandbox never follows one" % where)
                raise SetupError("not-a-directory", "%s: not a directory" % where)
            raise
        finally:
            os.close(fd)
        fd = nxt
        if index == 0:
            layout_format(fd, "%s/%s" % (root, runtime))
    return fd


def layout_format(runfd, where):
    """Refuse a runtime whose layout record names a newer format than this
    script knows; none is format 1."""
    try:
        lfd = os.open("layout.json", os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=runfd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return
        os.close(runfd)
        raise SetupError("invalid-layout", "%s/layout.json: %s" % (where, e.strerror))
    try:
        record = json.loads(os.read(lfd, 4097).decode("utf-8", "replace"))
    except ValueError:
        record = None
    finally:
        os.close(lfd)
    fmt = record.get("format") if isinstance(record, dict) else None
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        os.close(runfd)
        raise SetupError("invalid-layout", "%s/layout.json is not a layout record" % where)
    if fmt > LAYOUT_FORMAT:
        os.close(runfd)
        by = record.get("writtenBy")
        by = by if isinstance(by, str) and by.isprintable() and len(by) <= 100 else "a later release"
        raise SetupError("newer-format", "%s is runtime layout format %d, made by %s; this exec script reads "
                         "formats 1 to %d: roll forward to at least %s" % (where, fmt, by, LAYOUT_FORMAT, by))


def read_envelope(text, mode, mount):
    """The workspace root and runtime id the host wrote for this call, once
    the mode and the mount are found to be the envelope's."""
    try:
        v = json.loads(text)
    except ValueError:
        raise SetupError("invalid-operation", "the envelope is not JSON: the host writes it before the mode")
    if not isinstance(v, dict) or v.get("version") != 1 or isinstance(v.get("version"), bool):
        raise SetupError("invalid-operation", "envelope.version: this script reads version 1")
    ops = v.get("ops")
    if not isinstance(ops, list) or mode not in ("exec", "shell") or mode not in ops:
        raise SetupError("invalid-operation", "envelope.ops: %s may not run mode %r" % (v.get("method"), mode[:64]))
    root, runtime, mounts = v.get("workspaceRoot"), v.get("runtimeId"), v.get("mounts")
    if not isinstance(root, str) or not root.startswith("/") or not isinstance(runtime, str):
        raise SetupError("invalid-operation", "envelope.workspaceRoot and envelope.runtimeId: this call names no sandbox")
    if not isinstance(mounts, list) or not any(isinstance(m, dict) and m.get("name") == mount for m in mounts):
        raise SetupError("invalid-operation", "%r is not a mount of this sandbox (envelope.mounts)" % mount[:64])
    tty = v.get("tty", False)
    if not isinstance(tty, bool) or (tty and mode != "exec"):
        raise SetupError("invalid-operation", "envelope.tty: a terminal is for mode exec only, and true or false")
    return root, runtime, tty


def env_for(extra, marker):
    env = dict(os.environ)
    for name, value in extra.items():
        if not re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", name):
            raise SetupError("invalid-command", "invalid environment variable name %r" % name)
        if "\0" in value:
            raise SetupError("invalid-command", "environment variable %s holds NUL" % name)
        env[name] = value
    env[MARKER] = marker
    return env


def marked_pids(marker):
    """Processes (of this user) whose environment carries the run's marker: they
    left the process group, but not the run."""
    needle = ("%s=%s" % (MARKER, marker)).encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def kill_run(child, marker):
    """SIGTERM to the group and the marked processes, SIGKILL to what is left
    after the grace period; wait for the command itself."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        targets = set(marked_pids(marker))
        try:
            os.killpg(child, sig)
        except OSError:
            pass
        for pid in targets:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if sig == signal.SIGKILL:
            break
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            if reap(child) is not None and not marked_pids(marker) and not group_alive(child):
                return
            time.sleep(0.05)
    # After SIGKILL the command goes at once; reap it.
    try:
        os.waitpid(child, 0)
    except OSError:
        pass


def group_alive(pgid):
    """Whether a process of the group still runs (zombies waiting for their
    reaper do not count)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        names = None
    if names is None:
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command name: state, ppid, pgrp.
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


REAPED = {}


def reap(pid):
    """The command's wait status once it has ended, else None."""
    if pid in REAPED:
        return REAPED[pid]
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return REAPED.get(pid)
    if done == 0:
        return None
    REAPED[pid] = status
    return status


def exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def read_exact(size, what):
    """Exactly `size` bytes of stdin, unbuffered: the rest is the command's."""
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            raise SetupError("invalid-command", "stdin ended inside %s" % what)
        data += chunk
    return data


ARGS_MAX = 1 << 20


def read_args():
    """The arguments the host sent in the first frame on stdin."""
    (size,) = struct.unpack(">I", read_exact(4, "the arguments' frame"))
    if size > ARGS_MAX:
        raise SetupError("invalid-operation", "an arguments' frame of %d bytes" % size)
    try:
        request = json.loads(read_exact(size, "the arguments' frame").decode("utf-8"))
    except ValueError:
        raise SetupError("invalid-operation", "the arguments' frame is not JSON")
    args = request.get("args") if isinstance(request, dict) else None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or len(request) != 1:
        raise SetupError("invalid-operation", "the arguments' frame is {\"args\": [strings]}")
    return args


def read_header(size):
    """Exactly `size` bytes of stdin, unbuffered: the rest is the command's."""
    data = read_exact(size, "the %d-byte header" % size)
    header = json.loads(data.decode("utf-8"))
    if not isinstance(header, dict) or not isinstance(header.get("command"), str):
        raise SetupError("invalid-command", "the header names no command")
    return header


def not_dumpable():
    """PR_SET_DUMPABLE 0: no process of the same user may read this one's
    memory (/proc/<pid>/mem), its environment or descriptors, or trace it, so
    the nonce stays this script's. Linux only; elsewhere, or if the call
    fails, the script runs on without it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


def main():
    not_dumpable()
    try:
        argv = read_args()
    except (SetupError, OSError, ValueError) as e:
        report("-", {"error": getattr(e, "code", "invalid-operation"), "message": str(e)}, 125)
    if len(argv) != 6 or not re.match(r"[0-9]{1,7}\Z", argv[5]):
        report("-", {"error": "invalid-operation", "message": "exec takes 6 arguments: <envelope> <mode> <mount> <workdir> <timeout-ms> <header-bytes>"}, 125)
    envelope, mode, mount, rel, timeout_ms, header_bytes = argv
    try:
        header = read_header(int(header_bytes))
    except (SetupError, OSError, ValueError) as e:
        report("-", {"error": "invalid-command", "message": "the header: %s" % e}, 125)
    nonce = header.get("nonce")
    if not isinstance(nonce, str) or not re.match(r"[0-9a-f]{32}\Z", nonce):
        report("-", {"error": "invalid-command", "message": "the header carries no nonce of 32 hex digits"}, 125)
    try:
        root, runtime, tty = read_envelope(envelope, mode, mount)
        command, extra, args = header["command"], header.get("env", {}), header.get("args", [])
        if "\0" in command:
            raise SetupError("invalid-command", "the command holds NUL")
        if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
            raise SetupError("invalid-command", "the environment must map names to strings")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise SetupError("invalid-command", "the arguments must be strings")
        if mode == "exec" and args:
            raise SetupError("invalid-command", "mode exec takes no arguments")
        if mode == "shell" and extra:
            raise SetupError("invalid-command", "mode shell takes no environment")
        if not re.match(r"[0-9]{1,10}\Z", timeout_ms):
            raise SetupError("invalid-operation", "the time limit must be a count of milliseconds (0: none)")
        # 0: no limit of this script's own; the caller ends the run by closing
        # the channel (OpenClaw kills the relay), the host at its bound.
        timeout = int(timeout_ms) / 1000.0 if int(timeout_ms) > 0 else None
        fd = open_workdir(root, runtime, mount, rel)
        try:
            os.fchdir(fd)
        finally:
            os.close(fd)
        marker = os.urandom(16).hex()
        env = env_for(extra, marker)
        if tty and "TERM" not in extra:
            # As OpenClaw's own backend sets it for a terminal.
            env["TERM"] = "xterm-256color"
    except SetupError as e:
        report(nonce, {"error": e.code, "message": e.message}, 125)
    except (OSError, ValueError) as e:
        report(nonce, {"error": "remote", "message": str(e)}, 125)

    argv = ["/bin/sh", "-c", command] if mode == "exec" else ["/bin/sh", "-c", command, "occ-sandbox-shell"] + args
    if tty:
        run_in_terminal(argv, env, marker, nonce, timeout, int(timeout_ms))
    # The command writes into pipes of this script, which passes the bytes on:
    # when the command ends, its output ends with it, even if something it
    # left in the background still holds the pipes.
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    def arrange():
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
    child = None
    if hasattr(os, "posix_spawn"):
        # The same arrangement without copying this process first: a command
        # starts in a fraction of a fork's time (the pipes are close-on-exec,
        # their copies on 1 and 2 are not).
        try:
            child = os.posix_spawn(argv[0], argv, env, setsid=True, setsigdef=(signal.SIGPIPE,), file_actions=[
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ])
        except (NotImplementedError, TypeError):
            child = None
        except OSError as e:
            report(nonce, {"error": "remote", "message": "spawn: %s" % e}, 125)
    if child is None:
        child = spawn(argv, env, nonce, arrange)
    os.close(out_w)
    os.close(err_w)
    run(child, marker, nonce, timeout, int(timeout_ms), {out_r: 1, err_r: 2})


def spawn(argv, env, nonce, arrange):
    """Fork the command in a session of its own, `arrange` setting up its
    descriptors in the child; a fork that fails is reported."""
    try:
        child = os.fork()
    except OSError as e:
        report(nonce, {"error": "remote", "message": "fork: %s" % e}, 125)
    if child == 0:
        try:
            os.setsid()
            arrange()
            # The command writes into a closed pipe as any program does: it
            # ends by SIGPIPE (this script ignores it, below).
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    return child


def run_in_terminal(argv, env, marker, nonce, timeout, timeout_ms):
    """The command on a pseudo-terminal of its own (envelope.tty), as `ssh -tt`
    gives one: its stdin, stdout and stderr are the terminal, whose output
    (one stream, with the terminal's line endings) passes to this script's
    stdout; this script's stdin passes to the terminal as it arrives, and its
    end reaches the command as the terminal's end-of-file character."""
    try:
        master, slave = os.openpty()
    except OSError as e:
        report(nonce, {"error": "remote", "message": "openpty: %s" % e}, 125)
    def arrange():
        import fcntl
        import termios
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(slave)
        os.close(master)
    child = spawn(argv, env, nonce, arrange)
    try:
        import termios
        eof = termios.tcgetattr(slave)[6][termios.VEOF]
        eof = eof if isinstance(eof, bytes) else bytes([eof])
    except Exception:
        eof = b"\x04"
    os.close(slave)
    run(child, marker, nonce, timeout, timeout_ms, {master: 1}, terminal=(master, eof))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def run(child, marker, nonce, timeout, timeout_ms, pipes, terminal=None):
    """Pass the command's output on until it ends, its time passes or nobody
    listens any more; with a `terminal` (its master and end-of-file
    character), pass this script's stdin to it too."""
    watch = select.poll()
    for fd in pipes:
        watch.register(fd, select.POLLIN)
    if terminal is not None:
        watch.register(0, select.POLLIN)
    # Registered with no events: poll still reports an error or hang-up on
    # them, which is how a closed SSH channel shows.
    watch.register(1, 0)
    watch.register(2, 0)
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(child)
            watch.register(pidfd, select.POLLIN)
        except OSError:
            pidfd = None

    def gone():
        # Nobody is listening any more: end the run, quietly.
        kill_run(child, marker)
        os._exit(129)

    def drain(fd, block):
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError as e:
            # A terminal's master reads EIO once no process holds the terminal.
            if e.errno != errno.EIO:
                raise
            data = b""
        if not data:
            watch.unregister(fd)
            del pipes[fd]
            return False
        try:
            write_all(pipes[fd], data)
        except BrokenPipeError:
            gone()
        return True

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        status = reap(child)
        if status is not None:
            # What the command wrote before it ended is in the pipes: pass it
            # on, without waiting for anything it left behind.
            for fd in list(pipes):
                os.set_blocking(fd, False)
                while fd in pipes and drain(fd, False):
                    pass
            code = exit_code(status)
            if code in (124, 125):
                # The statuses of this script's own reports: say that this one
                # is the command's, in the last line, after all it wrote.
                report(nonce, {"exitCode": code}, code)
            os._exit(code)
        left = 3600.0 if deadline is None else deadline - time.monotonic()
        if left <= 0:
            kill_run(child, marker)
            report(nonce, {"timedOut": True, "timeoutMs": timeout_ms}, 124)
        wait_ms = int(min(left, 0.5 if pidfd is None else left) * 1000) + 1
        for fd, events in watch.poll(wait_ms):
            if fd in (1, 2) and events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                gone()
            if fd in pipes and events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                drain(fd, True)
            if fd == 0 and terminal is not None:
                data = b""
                if events & select.POLLIN:
                    try:
                        data = os.read(0, 1 << 16)
                    except OSError:
                        data = b""
                if not data:
                    # The caller's end of input: the terminal's end-of-file.
                    watch.unregister(0)
                    try:
                        write_all(terminal[0], terminal[1])
                    except OSError:
                        pass
                else:
                    try:
                        write_all(terminal[0], data)
                    except OSError:
                        pass


if __name__ == "__main__":
    # sys.argv is ["-c", "exec"]: the arguments come on stdin. A write to a
    # caller that went away (its channel closed mid-output) must reach
    # gone() as BrokenPipeError, which ends the command's processes; SIGPIPE
    # would end this script alone and leave them running. The command gets
    # SIGPIPE back as it would anywhere else (spawn).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    main()
