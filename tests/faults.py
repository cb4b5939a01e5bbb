"""Faults for the write paths' tests: a disk that fills up part-way through a file, a folder
that cannot take a new file, and a child process stopped part-way through a write, to kill.

Each wraps what `gpuplace.fileio.write_atomic` calls (`os.fdopen`, `os.open`), so the real
code paths run; only the operating system's answer changes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMP = ".*.tmp"  # glob of write_atomic's temporary files


class Stopping:
    """A file that takes `room` bytes, writes them, then calls `stop()`: raise (a full disk)
    or wait to be killed. Every other call goes to the real file."""

    def __init__(self, f: Any, room: int, stop: Callable[[], None]) -> None:
        self._f, self._room, self._stop = f, room, stop

    def write(self, data: Any) -> int:
        data = bytes(data)
        if len(data) > self._room:
            self._f.write(data[: self._room])
            self._f.flush()
            self._room = 0
            self._stop()
        self._room -= len(data)
        return int(self._f.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> Stopping:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def disk_full(monkeypatch: pytest.MonkeyPatch, room: int = 100) -> None:
    """Every file opened by fdopen from now on holds `room` bytes, then ENOSPC."""
    real = os.fdopen

    def stop() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: Stopping(real(fd, *a, **k), room, stop))


def read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """No new file can be made in `folder` (EROFS), as on a read-only mount; works as root too,
    where permission bits would not stop a write."""
    real = os.open

    def guarded(path: Any, flags: int, *a: Any, **k: Any) -> int:
        if flags & os.O_CREAT and Path(os.fspath(path)).parent == folder:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", guarded)


# Run in a child: its files stop after ROOM bytes, touch FLAG and wait to be killed.
_CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
from tests.faults import Stopping
real = os.fdopen

def stop():
    open({flag!r}, "w").close()
    time.sleep(600)

os.fdopen = lambda fd, *a, **k: Stopping(real(fd, *a, **k), {room}, stop)
{body}
"""


@contextmanager
def killed_mid_write(body: str, flag: Path, room: int = 100) -> Iterator[None]:
    """Run `body` (Python) in a child whose first file write stops after `room` bytes, kill it
    there with SIGKILL, then yield (the caller checks what is on disk). A child that ends or
    hangs before the write fails the test (generous timeout: only a hang trips it)."""
    code = _CHILD.format(root=str(ROOT), flag=str(flag), room=room, body=body)
    child = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while not flag.exists():
            if child.poll() is not None:
                pytest.fail(f"the child ended before its write: {child.stderr.read()}")
            if time.monotonic() > deadline:
                pytest.fail("the child never reached its write")
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stderr.close()
    yield
