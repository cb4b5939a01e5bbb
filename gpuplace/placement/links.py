"""Link timelines: when a copy between two devices runs, and when it ends.

Each device has an outbound and an inbound link (PCIe is full duplex); each direction moves one
transfer at a time at the link's bandwidth, as in Baechi's channel model. A copy may start once
its tensor is ready and uses the time both of its links are idle, in as many pieces as needed
(DMA engines interleave transfers in small packets), so a large copy asked for late still
uses a link that sat idle, and short copies cannot starve it. Busy time is kept as sorted,
disjoint, merged blocks per link.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
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
            if not starts or start >= starts[-1]:  # after the last block's start (most pieces)
                if ends and ends[-1] >= start:
                    if end > ends[-1]:
                        ends[-1] = end
                else:
                    starts.append(start)
                    ends.append(end)
                continue
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

    def cover(self, start: float, end: float) -> None:
        """Mark start..end busy whatever it overlaps, merging every block it touches."""
        if end <= start:
            return
        starts, ends = self.starts, self.ends
        i, j = bisect_left(ends, start), bisect_right(starts, end)  # blocks i..j-1 touch it
        if i < j:
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j], ends[i:j] = (start,), (end,)


def transfer(
    out: Link, into: Link, ready: float, length: float, held: Link | None = None,
    *known: Link,
) -> tuple[float, list[Piece]]:  # fmt: skip
    """(end, pieces) of a copy of `length` seconds that may start at `ready`, using the time
    both links are idle and avoiding `held` (pieces planned into `into`, not yet booked: kept
    as a Link, so an op reading 20,000 copies does not sort them again for each one).

    `known`: time already known busy on `out`, `into` or `held` (`Link.cover`); it changes
    nothing but the work: the union of busy time is walked by jumping, in each list, from a
    time inside a block to that block's end, so a stretch where the lists' blocks alternate
    costs a jump per block, and a known-busy stretch one jump whatever lies under it."""
    return walk(out, into, ready, length, held, known)


def walk(
    out: Link, into: Link, ready: float, length: float, held: Link | None,
    known: Sequence[Link],
) -> tuple[float, list[Piece]]:  # fmt: skip
    """`transfer`, with `known` as one argument (what the compiled callers call: links.pxd)."""
    t, need = ready, length
    pieces: list[Piece] = []
    # the lists with a block ending after t (their starts and ends), and the first such block
    # of each
    starts_of: list[list[float]] = []
    ends_of: list[list[float]] = []
    at: list[int] = []
    for link in (*known, out, into, held) if held is not None else (*known, out, into):
        ends = link.ends
        i = bisect_right(ends, t)
        if i < len(ends):
            starts_of.append(link.starts)
            ends_of.append(ends)
            at.append(i)
    count = len(at)
    while count:
        clean, k = 0, 0
        while clean < count:  # until t lies in no block of any list
            ends, i = ends_of[k], at[k]
            end = ends[i]  # (times are read into locals: C doubles where compiled, links.pxd)
            if end <= t:
                i = at[k] = bisect_right(ends, t, i + 1)
            n = len(ends)
            if i < n:
                starts = starts_of[k]
                start = starts[i]
                if start <= t:
                    t = ends[i]  # the next block starts after this one ends (blocks never touch)
                    at[k] = i = i + 1
                    clean = 1
                else:
                    clean += 1
            else:
                clean += 1
            if i == n:  # no block of this list ends after t: done with it
                del starts_of[k], ends_of[k], at[k]
                count, clean = count - 1, clean - 1  # it needs no more checks
                if k == count:
                    k = 0
            else:
                k = k + 1 if k + 1 < count else 0
        idle = _INF  # t is idle everywhere: until the next block of any list starts
        for k in range(count):
            starts = starts_of[k]
            start = starts[at[k]]
            if start < idle:  # at[k] ends after t, and t is idle: starts after
                idle = start
        if idle - t >= need:
            break
        pieces.append((t, idle))
        need -= idle - t
        t = idle
    pieces.append((t, t + need))
    return t + need, pieces
