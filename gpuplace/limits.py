"""Limits on what gpuplace reads, and the bounded file read that applies the size limits.

A spec is data people pass around, so every input is bounded before the work it causes is done:
the bytes of a file before they are read, the ops a spec expands to before its towers and
replicate blocks are walked, the nodes YAML aliases repeat while a document is built. Each limit
has a default that leaves room for large real graphs (the benchmarks build 1,000,000 ops) and,
where a real graph may need more, an environment variable that raises it (the "Limits on
input" table of docs/graph-spec.md). `read_limits(env)` reads them from an environment mapping, never `os.environ`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import NamedTuple

from .echo import clip_middle
from .errors import BadInput
from .units import GiB, MiB, human, parse_size

SPEC_SIZE_ENV = "GPUPLACE_MAX_SPEC_SIZE"
OPS_ENV = "GPUPLACE_MAX_OPS"
MACHINE_FILE_BYTES = 4 * MiB  # a machine file describes at most 255 GPUs: 16 KiB for each
MAX_DEPTH = 200  # nesting of YAML/JSON collections: a spec needs about 70 (64 dims of a value)
MAX_RANK = 64  # numpy's NPY_MAXDIMS (TensorFlow allows 254, but every array here is numpy's)
ALIAS_FACTOR = 10  # YAML aliases may repeat up to this many nodes per op the limit allows
LONG_INT = "an integer has over 4,300 digits (Python's limit for reading one); write a float"
_READ_CHUNK = 16 * MiB


class Limits(NamedTuple):
    """How much a spec may hold: `spec_bytes` of file, `ops` after expansion (towers,
    replicate blocks, YAML aliases; each output of a split past its first counts as one).
    `gpuplace.load(path, limits=Limits(ops=5_000_000))`; `prepare` reads them from its env."""

    spec_bytes: int = GiB
    ops: int = 2_000_000

    @property
    def aliases(self) -> AliasLimit:
        """The YAML nodes that aliases may repeat (a billion laughs is refused past them)."""
        fix = f"raise {OPS_ENV} (aliases may repeat {ALIAS_FACTOR} nodes per op it allows)"
        return AliasLimit(ALIAS_FACTOR * self.ops, fix)


class AliasLimit(NamedTuple):
    """At most `nodes` YAML nodes repeated by aliases in one document; `fix`: how to allow more."""

    nodes: int
    fix: str


MACHINE_ALIASES = AliasLimit(100_000, "a machine file needs far fewer")


def read_limits(env: Mapping[str, str]) -> Limits:
    """The limits `env` sets (GPUPLACE_MAX_SPEC_SIZE, GPUPLACE_MAX_OPS); defaults otherwise."""
    limits = Limits()
    size, ops = env.get(SPEC_SIZE_ENV, "").strip(), env.get(OPS_ENV, "").strip()
    spec_bytes = limits.spec_bytes
    if size:  # bytes, or a size with a unit
        spec_bytes = (
            int(size) if re.fullmatch(r"[0-9]{1,30}", size) else parse_size(size, SPEC_SIZE_ENV)
        )
    if spec_bytes < 1:
        raise BadInput(f"{SPEC_SIZE_ENV}={size!r}: expected a size of at least 1B, e.g. 2GiB")
    if not ops:
        return Limits(spec_bytes, limits.ops)
    if not re.fullmatch(r"[0-9][0-9_]{0,30}", ops) or int(ops) < 1:
        raise BadInput(
            f"{OPS_ENV}={clip_middle(ops)!r}: expected a whole number of ops >= 1, e.g. 5000000"
        )
    return Limits(spec_bytes, int(ops))


def read_text(path: str | os.PathLike[str], limit: int, cannot: str, hint: str) -> str:
    """The UTF-8 text (a BOM dropped) of the file at `path`, refused (BadInput) unless it is
    a file or a pipe of at most `limit` bytes: a device (/dev/zero) is never read, and a
    regular file's size is checked before reading. Messages start with `cannot` and the path
    (`cannot read spec 'g.yaml': ...`); `hint` says how to raise the limit."""
    name = clip_middle(os.fspath(path))
    return utf8_text(_read_bytes(path, limit, f"{cannot} {name!r}", hint), name)


def utf8_text(data: bytes, name: str) -> str:
    """`data` as UTF-8 text (a BOM dropped), or BadInput naming `name`, the byte and the line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BadInput(
            f"{name}: not UTF-8 text ({err.reason} at byte {err.start}, line {line}); "
            "save it as UTF-8"
        ) from None


def read_bytes(path: str | os.PathLike[str], limit: int, cannot: str, hint: str) -> bytes:
    """The bytes of the file at `path`, bounded and refused as `read_text` does (an ONNX model)."""
    return _read_bytes(path, limit, cannot, hint)


def _read_bytes(path: str | os.PathLike[str], limit: int, cannot: str, hint: str) -> bytes:
    if "\0" in os.fspath(path):
        raise BadInput(f"{cannot}: the path holds a NUL character (\\0)")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise BadInput(f"{cannot}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise BadInput(f"{cannot}: it is a folder, not a file")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise BadInput(f"{cannot}: it is a device, not a file")
        if stat.S_ISREG(mode) and info.st_size > limit:
            raise BadInput(
                f"{cannot}: it holds {_size(info.st_size)}, more than {_size(limit)}; {hint}"
            )
        data = _read_at_most(fd, limit + 1, info.st_size + 1 if stat.S_ISREG(mode) else 0)
    except OSError as err:  # EIO
        raise BadInput(f"{cannot}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise BadInput(f"{cannot}: it holds more than {_size(limit)}; {hint}")
    return data


def _read_at_most(fd: int, most: int, first: int) -> bytes:
    """Up to `most` bytes of `fd`: `first` in one read (a regular file's size), then chunks."""
    chunks: list[bytes] = []
    total, want = 0, first or _READ_CHUNK
    while total < most:
        chunk = os.read(fd, min(want, most - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = _READ_CHUNK
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 1024 else f"{human(n)} ({n:,} bytes)"
