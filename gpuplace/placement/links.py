"""Link timelines: when a copy between two devices runs, and when it ends.

Each device has an outbound and an inbound link (PCIe is full duplex); each direction moves one
transfer at a time at the link's bandwidth, as in Baechi's channel model. A copy may start once
its tensor is ready and uses the time both of its links are idle, in as many pieces as needed
(DMA engines interleave transfers in small packets), so a large copy asked for late still
uses a link that sat idle, and short copies cannot starve it. Busy time is kept as sorted,
disjoint, merged blocks per link.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

Piece = tuple[float, float]
_INF = float("inf")


class Link:
    """Busy blocks of one link direction: sorted, disjoint (start, end) pairs."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def book(self, pieces: Sequence[Piece]) -> None:
        """Mark `pieces` busy (they lie in idle time), merging blocks that touch."""
        starts, ends = self.starts, self.ends
        for start, end in pieces:
            i = bisect_right(starts, start)
            if i and ends[i - 1] >= start:
                i -= 1
                ends[i] = max(ends[i], end)
            else:
                starts.insert(i, start)
                ends.insert(i, end)
            if i + 1 < len(starts) and starts[i + 1] <= ends[i]:
                ends[i] = max(ends[i], ends[i + 1])
                del starts[i + 1], ends[i + 1]


def transfer(
    out: Link, into: Link, ready: float, length: float, held: Link | None = None,
    *known: Link,
) -> tuple[float, list[Piece]]:  # fmt: skip
    """(end, pieces) of a copy of `length` seconds that may start at `ready`, using the time
    both links are idle and avoiding `held` (pieces planned into `into`, not yet booked: kept
    as a Link, so an op reading 20,000 copies does not sort them again for each one).

    `known`: time already known busy on `out`, `into` or `held` (see `Solid`); it changes
    nothing but the work: the union of busy time is walked by jumping, in each list, from a
    time inside a block to that block's end, so a stretch where the lists' blocks alternate
    costs a jump per block, and a known-busy stretch one jump whatever lies under it."""
    lists = (*known, out, into) if held is None or not held.starts else (*known, out, into, held)
    count = len(lists)
    t, need = ready, length
    pieces: list[Piece] = []
    while True:
        clean = k = 0
        while clean < count:  # until t lies in no block of any list
            link = lists[k]
            i = bisect_right(link.ends, t)
            if i < len(link.starts) and link.starts[i] <= t:
                t = link.ends[i]
                clean = 1
            else:
                clean += 1
            k = k + 1 if k + 1 < count else 0
        idle = _INF  # t is idle everywhere: until the next block of any list starts
        for link in lists:
            i = bisect_right(link.ends, t)
            if i < len(link.starts) and link.starts[i] < idle:
                idle = link.starts[i]
        if idle - t >= need:
            break
        pieces.append((t, idle))
        need -= idle - t
        t = idle
    pieces.append((t, t + need))
    return t + need, pieces
