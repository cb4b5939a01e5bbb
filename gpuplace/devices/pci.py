"""PCI bus ids for simulated GPUs, in NVML order.

NVML (and nvidia-smi) number GPUs in PCI bus order, so the GPUs of a simulated machine get bus ids
that increase down its list. A seed card (K40c, K20m, K520) keeps the bus id the seed documents
show whenever that fits the order; a `pci_bus_id` from a machine file is kept as given (written in
NVML's form, `00000000:C1:00.0`) and must fit it. The other GPUs get domain-0 buses spread over
01-FF (bus 00 holds the host bridge), so a machine has at most 255 GPUs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import BadInput

MAX_GPUS = 255
_BUS_ID = re.compile(
    r"^(?:([0-9A-Fa-f]{4}|[0-9A-Fa-f]{8}):)?([0-9A-Fa-f]{2}):([01][0-9A-Fa-f])\.([0-7])$"
)
_END = 0x100 << 8  # the key just past domain 0's last bus
FORMS = "domain:bus:device.function in hex, e.g. 00000000:C1:00.0 (device 00-1F, function 0-7)"


class BusRequest(NamedTuple):
    """What one GPU asks for: an explicit bus id (`text`, from a machine file) or a seed bus."""

    label: str  # names the GPU in errors: "node.yaml: gpus[2]"

    @property
    def name(self) -> str:
        """The GPU without the file: "gpus[2]"."""
        return self.label.rsplit(": ", 1)[-1]

    text: str | None = None
    seed: str | None = None  # a seed card's bus ("05")


def bus_key(text: str) -> int | None:
    """`text` as a sortable number (domain, bus, device, function), or None if it is no bus id."""
    match = _BUS_ID.match(text.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return (
        (int(domain or "0", 16) << 16)
        | (int(bus, 16) << 8)
        | (int(device, 16) << 3)
        | int(function)
    )


def bus_text(key: int) -> str:
    """NVML's form of a bus id: `00000000:05:00.0`."""
    return f"{key >> 16:08X}:{(key >> 8) & 0xFF:02X}:{(key >> 3) & 0x1F:02X}.{key & 7}"


def _free(lo: int, hi: int) -> range:
    """Default buses (domain 0, device 0, function 0) strictly between keys `lo` and `hi`."""
    return range(max(1, (lo >> 8) + 1), min(0x100, ((hi - 1) >> 8) + 1))


def _spread(lo: int, hi: int, count: int) -> list[int]:
    """`count` default bus keys between `lo` and `hi`, 0x10 apart where there is room."""
    free = _free(lo, hi)
    step = min(0x10, len(free) // count) if count else 0
    return [(free.start - 1 + step * (j + 1)) << 8 for j in range(count)]


def _explicit(requests: Sequence[BusRequest]) -> dict[int, int]:
    """Position -> key of every explicit bus id, checked for form, duplicates and order."""
    out: dict[int, int] = {}
    last: int | None = None
    for i, r in enumerate(requests):
        if r.text is None:
            continue
        key = bus_key(r.text)
        if key is None:
            raise BadInput(
                f"{r.label}.pci_bus_id: {r.text!r} is not a PCI bus id; expected {FORMS}"
            )
        if last is not None and key <= out[last]:
            other = requests[last]
            if key == out[last]:
                raise BadInput(
                    f"{r.label}.pci_bus_id: {r.text!r} is also the bus id of {other.name}; "
                    "every GPU has its own PCI bus id"
                )
            raise BadInput(
                f"{r.label}.pci_bus_id: {r.text!r} is below {other.name}'s {other.text!r}, but "
                "GPUs are listed in NVML order, which is PCI bus order: list this GPU first, or "
                "change a bus id"
            )
        out[i] = key
        last = i
    return out


def _no_room(r: BusRequest, count: int, where: str) -> BadInput:
    which = "below" if where == "before" else "above"
    fix = "raise this one" if where == "before" else "lower this one"
    gpus = f"{count} GPU{'s' if count > 1 else ''}"
    return BadInput(
        f"{r.label}.pci_bus_id: {r.text!r} leaves no free bus id {which} it for the {gpus} listed "
        f"{where} it (GPUs are listed in NVML order, which is PCI bus order): give them "
        f"pci_bus_ids, or {fix}"
    )


def _anchors(requests: Sequence[BusRequest]) -> list[tuple[int, int]]:
    """(position, key) of the GPUs whose bus is fixed: explicit ones, and seeds that fit."""
    explicit = _explicit(requests)
    bounds = [*sorted(explicit.items()), (len(requests), _END)]
    anchors: list[tuple[int, int]] = [(-1, -1)]
    for i, r in enumerate(requests):
        nxt = next(b for b in bounds if b[0] > i)
        prev = anchors[-1]
        if i in explicit:
            if len(_free(prev[1], explicit[i])) < i - prev[0] - 1:
                raise _no_room(r, i - prev[0] - 1, "before")
            anchors.append((i, explicit[i]))
        elif r.seed is not None:
            key = int(r.seed, 16) << 8
            fits = key > prev[1] and len(_free(prev[1], key)) >= i - prev[0] - 1
            if fits and len(_free(key, nxt[1])) >= nxt[0] - i - 1:
                anchors.append((i, key))
    last = anchors[-1]
    if len(_free(last[1], _END)) < len(requests) - last[0] - 1:
        raise _no_room(requests[last[0]], len(requests) - last[0] - 1, "after")
    return [*anchors, (len(requests), _END)]


def assign_bus_ids(requests: Sequence[BusRequest]) -> list[str]:
    """One bus id per request, increasing down the list (see the module docstring)."""
    keys: list[int] = []
    anchors = _anchors(requests)
    for (pos, key), (nxt, nxt_key) in itertools.pairwise(anchors):
        if pos >= 0:
            keys.append(key)
        keys += _spread(key, nxt_key, nxt - pos - 1)
    return [bus_text(k) for k in keys]
