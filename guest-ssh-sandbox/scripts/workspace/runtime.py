# The scope's runtime operations: describe, the bootstrap stage and its
# publication, removal of a runtime, the skills OpenClaw materializes, and the
# staged inputs of a command.

import errno
import os
import re
import stat
import sys
from .base import LAYOUT_FILE, LAYOUT_FORMAT, NOFOLLOW_DIR, WRITTEN_BY, Refusal, token
from .walk import (
    check_name, check_stage, lstat_at, open_dir, open_mount, open_root,
    open_runtime
)
from .files import (
    MissingRename, kind_of, remove_tree, rename_exchange, rename_no_replace
)
from .archive import extract


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
