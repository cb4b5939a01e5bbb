"""The example specs that ship inside the package (`gpuplace/examples/`, the repo's `examples/`),
and `copy_examples`, which gives a pip user their own copy (`gpuplace examples DIR`).

The copy writes only under the folder it is given: it creates the folder and its sub-folders,
refuses a sub-folder that is a symbolic link (it would lead elsewhere) or a file where a folder
goes, keeps a file that is already identical, refuses to replace one that differs unless told to,
and writes each file atomically (`fileio.write_atomic`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

from .echo import show
from .errors import BadInput, RuntimeFailure
from .fileio import write_atomic

_SUFFIXES = (".yaml", ".py", ".onnx")
_MAX_FILES = 1000  # the bundle holds a handful; a bound in case the package folder is tampered with


@dataclass(frozen=True)
class Copied:
    """What `copy_examples` did: paths relative to the folder, written and already identical."""

    folder: str
    written: tuple[str, ...]
    unchanged: tuple[str, ...]


def bundled_examples() -> dict[str, bytes]:
    """The bundled example files, by path relative to the examples folder ('guide/x.yaml')."""
    found: dict[str, bytes] = {}
    pending: list[tuple[str, Traversable]] = [("", resources.files("gpuplace") / "examples")]
    while pending:
        prefix, folder = pending.pop()
        for entry in folder.iterdir():
            if entry.name.startswith((".", "__")):
                continue
            if entry.is_dir():
                pending.append((f"{prefix}{entry.name}/", entry))
            elif entry.name.endswith(_SUFFIXES) and len(found) < _MAX_FILES:
                found[prefix + entry.name] = entry.read_bytes()
    return dict(sorted(found.items()))


def copy_examples(folder: str, replace: bool = False) -> Copied:
    """Copy the bundled examples into `folder` (see the module's docstring)."""
    files = bundled_examples()
    plans: list[tuple[str, str, bytes]] = []
    unchanged: list[str] = []
    for rel, data in files.items():
        target = os.path.join(folder, *rel.split("/"))
        try:
            _check_folders(folder, rel)
            old = _existing(target, len(data))
        except OSError as exc:  # a name too long, a folder that cannot be searched or read
            raise BadInput(
                f"cannot use {show(target, 120)}: {exc.strerror or exc}; name another folder"
            ) from exc
        if old == data:
            unchanged.append(rel)
        elif old is not None and not replace:
            raise BadInput(
                f"{show(target, 120)} exists and differs from the bundled example; keep it and "
                "copy into another folder, or replace it with --force"
            )
        else:
            plans.append((rel, target, data))
    written: list[str] = []
    for rel, target, data in plans:
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            write_atomic(target, lambda f, data=data: f.write(data))  # type: ignore[misc]
        except OSError as exc:
            raise RuntimeFailure(
                f"cannot write {show(target, 120)}: {exc.strerror or exc}; check the folder's "
                "permissions and free space"
            ) from exc
        written.append(rel)
    return Copied(folder, tuple(written), tuple(unchanged))


def _check_folders(folder: str, rel: str) -> None:
    """BadInput when `folder` (a link to a folder is fine: the user named it) or a sub-folder on
    the way to `rel` (a link is not: it would lead elsewhere) is not a folder."""
    path = folder
    for part in rel.split("/")[:-1]:
        if not os.path.exists(path):
            return
        if not os.path.isdir(path):
            raise BadInput(
                f"{show(path, 120)} is not a folder; name a folder (it may not exist yet)"
            )
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise BadInput(
                f"{show(path, 120)} is a symbolic link; examples are written only inside "
                f"{show(folder, 120)}: remove the link, or copy into another folder"
            )
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadInput(f"{show(path, 120)} is not a folder; name a folder (it may not exist yet)")


def _existing(target: str, size: int) -> bytes | None:
    """Up to `size` + 1 bytes of the regular file at `target` (None: nothing there; b"" for a
    link, which is replaced, never written through); BadInput for a folder, device or FIFO."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return b""
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(
            f"{show(target, 120)} is not a regular file; remove it or copy into another folder"
        )
    with open(target, "rb") as f:
        return f.read(size + 1)
