"""Link timelines (`placement/links.py`): `transfer` walks the busy blocks by jumping and skips
time known busy, and gives exactly what the sweep it replaced gave (kept below as the oracle:
it visited every busy block of every list in order of start, once per copy)."""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.placement.links import Link, Piece, _search, transfer


def sweep(
    out: Link, into: Link, ready: float, length: float, held: Link | None = None
) -> tuple[float, list[Piece]]:
    """The transfer of gpuplace before the jumping walk, verbatim (the oracle)."""
    t, need = ready, length
    pieces: list[Piece] = []
    lists = [(out.starts, out.ends), (into.starts, into.ends)]
    if held is not None and held.starts:
        lists.append((held.starts, held.ends))
    at = [bisect_right(ends, ready) for _, ends in lists]
    while True:
        start, which = float("inf"), -1
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


def link(points: Sequence[float]) -> Link:
    """A link busy over (p0, p1), (p2, p3), ... of the distinct sorted `points`."""
    marks = sorted(set(points))
    made = Link()
    made.book(list(zip(marks[0::2], marks[1::2], strict=False)))
    return made


def busy(made: Link, t: float) -> bool:
    return any(s <= t < e for s, e in zip(made.starts, made.ends, strict=True))


def well_formed(made: Link) -> bool:
    """Sorted, disjoint blocks that never touch (what `transfer`'s cursors rely on)."""
    s, e = made.starts, made.ends
    return all(a < b for a, b in zip(s, e, strict=True)) and all(
        e[i] < s[i + 1] for i in range(len(s) - 1)
    )


times = st.lists(st.integers(0, 60).map(lambda x: x / 4), max_size=24)
durations = st.integers(1, 40).map(lambda x: x / 8)


@settings(max_examples=300, deadline=None)
@given(times, times, times, st.integers(0, 60).map(lambda x: x / 4), durations)
def test_transfer_gives_what_the_sweep_gave(
    out: list[float], into: list[float], held: list[float], ready: float, length: float
) -> None:
    a, b, h = link(out), link(into), link(held)
    assert transfer(a, b, ready, length, h) == sweep(a, b, ready, length, h)
    assert transfer(a, b, ready, length) == sweep(a, b, ready, length)


@settings(max_examples=200, deadline=None)
@given(times, times, st.lists(st.tuples(times, durations), min_size=1, max_size=12))
def test_a_run_of_copies_with_known_busy_time_books_what_the_sweep_booked(
    out: list[float], into: list[float], copies: list[tuple[list[float], float]]
) -> None:
    """Copies booked one after another, as `Timeline` books them, each marking the time it
    leaves busy on both links as known (`cover`): every copy lands where the sweep put it."""
    mine = (link(out), link(into), Link())
    theirs = (link(out), link(into))
    for readies, length in copies:
        ready = readies[0] if readies else 0.0
        end, pieces = transfer(mine[0], mine[1], ready, length, None, mine[2])
        assert (end, pieces) == sweep(*theirs, ready, length)
        for made in (*mine[:2], *theirs):
            made.book(pieces)
        mine[2].cover(ready, end)
        assert well_formed(mine[2])
        checks = [x / 8 for x in range(0, 8 * 20)]
        known_but_idle = [
            t for t in checks if busy(mine[2], t) and not busy(mine[0], t) | busy(mine[1], t)
        ]
        assert not known_but_idle  # known busy time is busy on one link or the other


def merged(pieces: list[Piece]) -> list[Piece]:
    """The union of `pieces` as sorted blocks, touching ones joined (what a Link keeps)."""
    out: list[Piece] = []
    for start, end in sorted(pieces):
        if out and out[-1][1] >= start:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40), unique=True, max_size=30), st.randoms(use_true_random=False),
       st.integers(1, 4))  # fmt: skip
def test_book_keeps_the_union_of_its_pieces_merged_whatever_their_order(
    points: list[int], rng: random.Random, chunk: int
) -> None:
    """Disjoint pieces (many touching, as a copy's pieces touch the blocks around them) booked
    in any order, a few at a time: the blocks are their union, sorted, apart."""
    marks = sorted(points)
    pieces = [(a / 4, b / 4) for a, b in pairwise(marks) if rng.random() < 0.7]
    rng.shuffle(pieces)
    made = Link()
    for n in range(0, len(pieces), chunk):
        made.book(pieces[n : n + chunk])
        assert well_formed(made)
        assert list(zip(made.starts, made.ends, strict=True)) == merged(pieces[: n + chunk])


@settings(max_examples=200, deadline=None)
@given(times, st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12))
def test_cover_keeps_blocks_sorted_and_apart_and_marks_exactly_the_union(
    points: list[float], spans: list[tuple[int, int]]
) -> None:
    made = link(points)
    marked = list(zip(made.starts, made.ends, strict=True))
    for lo, width in spans:
        made.cover(lo / 4, (lo + width) / 4)
        marked.append((lo / 4, (lo + width) / 4))
        assert well_formed(made)
    for t in (x / 8 for x in range(0, 8 * 25)):
        assert busy(made, t) == any(s <= t < e for s, e in marked)


class Counted(list[float]):
    """A list that counts how often an element is read (by `bisect` or by index)."""

    reads = 0

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        Counted.reads += 1
        return super().__getitem__(i)


def counted(made: Link) -> Link:
    made.starts, made.ends = Counted(made.starts), Counted(made.ends)
    return made


def reads_of(call: Callable[[], object]) -> int:
    before = Counted.reads
    call()
    return Counted.reads - before


@pytest.mark.pure_python  # counts the reads of lists the compiled walk reads in C
def test_a_known_busy_stretch_is_crossed_in_one_jump() -> None:
    """Two links whose blocks alternate (the fan-in that made placement quadratic): with the
    stretch known busy, the walk reads a handful of blocks; without, one per block."""
    out = counted(link([x for k in range(0, 2000, 2) for x in (k, k + 1.5)]))
    into = counted(link([x for k in range(1, 2000, 2) for x in (k, k + 1.5)]))
    known = counted(Link())
    known.cover(0.0, 2000.5)
    expected = sweep(out, into, 0.0, 1.0)
    assert expected == (2001.5, [(2000.5, 2001.5)])
    assert transfer(out, into, 0.0, 1.0, None, known) == expected
    with_known = reads_of(lambda: transfer(out, into, 0.0, 1.0, None, known))
    without = reads_of(lambda: transfer(out, into, 0.0, 1.0))
    assert with_known <= 100 and without >= 2000  # a few bisections vs a read per block


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]), max_size=40),
       st.sampled_from([-1.0, 0.0, 0.25, 1.0, 1.5, 2.75, 3.0, 4.0]), st.integers(0, 45))  # fmt: skip
def test_the_searches_from_the_end_find_what_bisect_finds(
    values: list[float], x: float, lo: int
) -> None:
    """`_search` (from a list's end back) finds what bisect finds, repeats included."""
    values.sort()
    lo = min(lo, len(values))
    assert _search(values, x, lo, True) == bisect_right(values, x, lo)
    assert _search(values, x, lo, False) == bisect_left(values, x, lo)
