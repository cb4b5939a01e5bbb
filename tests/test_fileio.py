"""`fileio.write_atomic`: the file at the path is the old one or the complete new one, never a
mix, whatever fails (a full disk, a read-only folder, Ctrl-C, a kill), and no temporary file
is left behind except by a kill; a link at the path is replaced, never written through."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from gpuplace.fileio import write_atomic
from tests.faults import TEMP, disk_full, killed_mid_write, read_only

OLD, NEW = b"old contents\n", b"new " * 1000


def put(data: bytes) -> object:
    return lambda f: f.write(data)


def test_it_writes_a_new_file_and_replaces_an_old_one_keeping_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    write_atomic(path, put(OLD))
    assert path.read_bytes() == OLD
    path.chmod(0o640)
    write_atomic(str(path), put(NEW))
    assert path.read_bytes() == NEW and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_a_link_at_the_path_is_replaced_and_its_target_untouched(tmp_path: Path) -> None:
    victim, link = tmp_path / "victim.txt", tmp_path / "out" / "a.npy"
    victim.write_bytes(OLD)
    link.parent.mkdir()
    link.symlink_to("../victim.txt")
    write_atomic(link, put(NEW))
    assert victim.read_bytes() == OLD
    assert not link.is_symlink() and link.read_bytes() == NEW


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_a_fifo_is_refused_not_replaced(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x"
    path.mkdir() if kind == "folder" else os.mkfifo(path)
    with pytest.raises(OSError) as err:
        write_atomic(path, put(NEW))
    assert err.value.errno == (errno.EISDIR if kind == "folder" else errno.EEXIST)
    assert path.is_dir() if kind == "folder" else stat.S_ISFIFO(path.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["x"]


@pytest.mark.parametrize("fault", [KeyboardInterrupt, ValueError])
def test_a_failure_while_writing_keeps_the_old_file_and_removes_the_temp(
    tmp_path: Path, fault: type[BaseException]
) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(OLD)

    def half_then_fail(f: object) -> None:
        f.write(NEW[:100])  # type: ignore[attr-defined]
        raise fault

    with pytest.raises(fault):
        write_atomic(path, half_then_fail)
    assert path.read_bytes() == OLD and [p.name for p in tmp_path.iterdir()] == ["a.bin"]


@pytest.mark.parametrize("fault", [errno.ENOSPC, errno.EROFS])
def test_a_full_disk_or_a_read_only_folder_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: int
) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(OLD)
    disk_full(monkeypatch) if fault == errno.ENOSPC else read_only(monkeypatch, tmp_path)
    with pytest.raises(OSError) as err:
        write_atomic(path, put(NEW))
    assert err.value.errno == fault
    assert path.read_bytes() == OLD and [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_a_kill_mid_write_leaves_the_old_file_and_at_most_a_partial_temp(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(OLD)
    body = f"from gpuplace.fileio import write_atomic\nwrite_atomic({str(path)!r}, lambda f: f.write(b'x' * 10**6))"
    with killed_mid_write(body, tmp_path / "flag"):
        assert path.read_bytes() == OLD
        (temp,) = tmp_path.glob(TEMP)  # the kill left it: never renamed over the old file
        assert temp.name.startswith(".a.bin.") and temp.stat().st_size == 100
