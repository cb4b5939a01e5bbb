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
    out: Link, into: Link, ready: float, length: float, held: Link | None = None
) -> tuple[float, list[Piece]]:
    """(end, pieces) of a copy of `length` seconds that may start at `ready`, using the time
    both links are idle and avoiding `held` (pieces planned into `into`, not yet booked: kept
    as a Link, so an op reading 20,000 copies does not sort them again for each one)."""
    t, need = ready, length
    pieces: list[Piece] = []
    lists = [(out.starts, out.ends), (into.starts, into.ends)]
    if held is not None and held.starts:
        lists.append((held.starts, held.ends))
    at = [bisect_right(ends, ready) for _, ends in lists]
    while True:  # sweep the busy blocks of all lists in order of start
        start, which = _INF, -1
        for n, (starts, _) in enumerate(lists):
            if at[n] < len(starts) and starts[at[n]] < start:
                start, which = starts[at[n]], n
        if which < 0:
            break
        end = lists[which][1][at[which]]
        at[which] += 1
        if end <= t:
            continue
        if start > t:
            if start - t >= need:
                break
            pieces.append((t, start))
            need -= start - t
        t = end
    pieces.append((t, t + need))
    return t + need, pieces
