"""Atomic file writes: a file gpuplace writes is either its old self or complete, never a mix.

Every file gpuplace writes (a spec's `save`, `run --save`, the rates cache) goes through
`write_atomic`: the bytes go to a new temporary file in the target's folder (so the rename stays
on one filesystem), are flushed and fsynced, then `os.replace` swaps it in (atomic on POSIX) and
the folder is fsynced so the rename survives a power cut. A failure at any step (a full disk, a
read-only folder, Ctrl-C) removes the temporary file and leaves the old file as it was; a
`kill -9` can leave only the temporary file (`.NAME.<random>.tmp`) beside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from typing import BinaryIO

_TEMP_STEM = 64  # characters of the target's name kept in the temporary file's name
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> None:
    """Write the file at `path` with `write(file)`, atomically (see the module's docstring).

    A symbolic link at `path` is replaced by the new file (rename replaces the link itself; its
    target is never written). A folder, a device or a FIFO at `path` is refused (OSError), so
    `/dev/zero` or a folder is never replaced. The new file keeps the old one's permissions;
    a new file gets the umask's. Raises OSError (the caller says what was being written)."""
    target = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(target))
    mode = _replaced_mode(target)
    tmp = os.path.join(folder, f".{name[:_TEMP_STEM]}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, _FLAGS, 0o666 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # the old file's bits, whatever the umask
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def _replaced_mode(path: str) -> int | None:
    """The permission bits of the regular file at `path` (None: nothing there, or a link);
    OSError for what must not be replaced by a file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    raise OSError(errno.EEXIST, "not a regular file (a device, FIFO or socket)", path)


def _sync_folder(folder: str) -> None:
    """fsync the folder so the rename is on disk; where folders cannot be opened, skip it."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a folder; the rename is done anyway
        pass
    finally:
        os.close(fd)
