"""Byte sizes: parse what users type (`16GiB`, `500MB`) and format what nvidia-smi prints (MiB)."""

from __future__ import annotations

import re

from .errors import BadInput, Message, Part

UNITS: dict[str, int] = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
ACCEPTED = "a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]+)\s*$")

MiB = 1024**2
GiB = 1024**3
ALIGNMENT = 256  # TensorFlow's BFC allocator hands out multiples of kMinAllocationSize


def allocation_size(nbytes: int) -> int:
    """Bytes the BFC allocator hands out for a request of `nbytes`: a multiple of 256 (0 stays 0).

    Shared by the executor's ledgers and the placement strategies' memory model, so both count
    the same bytes."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def parse_size(text: str | int, what: Part = "size") -> int:
    """Return `text` as integer bytes; an int is taken as bytes already.

    Raises BadInput naming `what` (a field, or the caller's Setting), the value and the
    accepted forms.
    """
    if isinstance(text, bool):
        raise BadInput(Message(what, f": expected a size, got {text!r}; accepted: {ACCEPTED}"))
    if isinstance(text, int):
        if text < 0:
            raise BadInput(Message(what, f": size must not be negative, got {text}"))
        return text
    match = _SIZE.match(str(text))
    if match is None or match.group(2).upper() not in UNITS:
        raise BadInput(Message(what, f": cannot read {text!r} as a size; accepted: {ACCEPTED}"))
    return int(float(match.group(1)) * UNITS[match.group(2).upper()])


def mib(n: int) -> str:
    """Whole MiB the way nvidia-smi prints memory: `41515MiB` (rounded down)."""
    return f"{n // MiB}MiB"


def human(n: int) -> str:
    """Binary units with one decimal, for messages: `1.5 GiB`, `512.0 MiB`, `100 B`."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
