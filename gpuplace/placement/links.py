"""Link timelines: when a copy between two devices runs, and when it ends.

Each device has an outbound and an inbound link (PCIe is full duplex); each direction moves one
transfer at a time at the link's bandwidth, as in Baechi's channel model. A copy may start once
its tensor is ready and uses the time both of its links are idle, in as many pieces as needed
(DMA engines interleave transfers in small packets), so a large copy asked for late still
uses a link that sat idle, and short copies cannot starve it. Busy time is kept as sorted,
disjoint, merged blocks per link, searched from their latest end (`_search`).
"""

from __future__ import annotations

from collections.abc import Sequence

Piece = tuple[float, float]
_INF = float("inf")
# The argument types of functions a .pxd declares (a list, a C integer, an object): compiled, a
# plain `int` or `list[float]` annotation is a Cython type of its own, which they contradict
Int = int
Times = list[float]


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
            i = _search(starts, start, 0, True)
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
        i, j = _search(ends, start, 0, False), _search(starts, end, 0, True)  # i..j-1 touch it
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
        i = _search(ends, t, 0, True)
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
                i = at[k] = _search(ends, t, i + 1, True)
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


def _search(values: Times, x: float, lo: Int, right: bool) -> int:
    """`bisect.bisect_right(values, x, lo)` where `right`, else `bisect_left` (values sorted):
    the first index from `lo` on whose value is above x (at least x, not `right`), or
    len(values). Searched from the end back, in steps that double, then halved: a link is asked
    mostly about its latest time, so this reads a few numbers near its end, where bisect
    halving 100,000 blocks from the middle reads numbers out of the caches."""
    hi, step = len(values), 1
    while hi > lo:  # values[hi] lies past x (or hi is the end)
        k = max(hi - step, lo)
        value = values[k]  # (read into a local: a C double where compiled, links.pxd)
        if value < x or (right and value == x):
            lo = k + 1
            break
        hi, step = k, step * 2
    while lo < hi:
        mid = (lo + hi) // 2
        value = values[mid]
        if value < x or (right and value == x):
            lo = mid + 1
        else:
            hi = mid
    return lo
