"""Byte sizes: parse what users type (`16GiB`, `500MB`) and format what nvidia-smi prints (MiB)."""

from __future__ import annotations

import re

from .echo import TEXT_CHARS, show
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
# ASCII digits only; compiled on first use (`re`'s cache): most commands give no size
_SIZE = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]+)\s*$"
MAX_SIZE = 2**63 - 1  # bytes: int64, as TensorFlow's and numpy's byte counts (8 EiB)

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

    Raises BadInput naming `what` (a field, or the caller's Setting), the value (cut short) and
    the accepted forms; a size beyond MAX_SIZE (8 EiB) is refused, not overflowed.
    """
    if isinstance(text, bool):
        raise BadInput(Message(what, f": expected a size, got {text!r}; accepted: {ACCEPTED}"))
    if isinstance(text, int):
        if text < 0:
            raise BadInput(Message(what, f": size must not be negative, got {show(text)}"))
        size = text
    else:
        match = re.match(_SIZE, str(text))
        if match is None or match.group(2).upper() not in UNITS:
            raise BadInput(
                Message(
                    what, f": cannot read {show(text, TEXT_CHARS)} as a size; accepted: {ACCEPTED}"
                )
            )
        number = float(match.group(1)) * UNITS[match.group(2).upper()]  # inf past 1.8e308
        size = int(number) if number <= MAX_SIZE else MAX_SIZE + 1
    if size > MAX_SIZE:
        raise BadInput(
            Message(
                what, f": {show(text, TEXT_CHARS)} is larger than any memory "
                f"(gpuplace takes sizes up to 8 EiB, {MAX_SIZE} B); give a size such as 16GiB",
            )
        )  # fmt: skip
    return size


def parse_count(text: str) -> int | None:
    """`text` as a whole number >= 0 if it is one of at most 18 ASCII digits, else None: '３' and
    '²' are not (though str.isdigit says they are), nor 5,000 digits (int() refuses 4,300), and
    nothing gpuplace counts comes near 10**18."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > 18:
        return None
    return int(text)


def mib(n: int) -> str:
    """Whole MiB the way nvidia-smi prints memory: `41515MiB` (rounded down)."""
    return f"{n // MiB}MiB"


def device_memory(n: int) -> str:
    """A device's memory (total, free, reserved, peak, limit) as every table shows it, as
    nvidia-smi does: whole MiB (`3596MiB`, `0MiB`), but what is under 1 MiB and not nothing in
    bytes (`768B`), which nvidia-smi would round to 0MiB. Tensor and copy sizes use `human`."""
    return mib(n) if n >= MiB or n == 0 else f"{n}B"


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
