"""`occupancy.Steps` (a device's bytes per step in blocks with a pending add each) answers every
add and peak exactly as the plain row of steps it replaced, whatever the block size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.placement import occupancy
from gpuplace.placement.occupancy import Occupancy, Steps

spans = st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 2**40))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 3, 4, 7, 512]), st.integers(1, 100), st.lists(spans, max_size=30),
       st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=20))  # fmt: skip
def test_steps_add_and_peak_as_a_plain_row(
    block: int, steps: int, adds: list[tuple[int, int, int]], asks: list[tuple[int, int]]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(occupancy, "BLOCK", block)
        start = np.arange(steps, dtype=np.int64) * 1000
        row, plain = Steps(start.copy()), start.copy()
        for a, b, size in adds:
            lo, hi = sorted((a % steps, b % steps))
            plain[lo : hi + 1] += size
            touched = row.add(lo, hi, size)
            first, last = lo // block * block, min((hi // block + 1) * block, steps)
            assert touched == int(plain[first:last].max())  # the blocks it touched
            for x, y in asks:
                lo, hi = sorted((x % steps, y % steps))
                assert row.peak(lo, hi) == int(plain[lo : hi + 1].max())


def test_a_tensor_to_the_end_touches_a_number_per_block_not_every_step() -> None:
    occupied, row = _over_its_limit()
    assert occupied.peak(0, 0, 999_999) == 120
    before = row.base.copy()
    occupied.add(0, 10, 999_999, 1)
    changed = int(np.count_nonzero(row.base != before))
    assert changed <= 2 * occupancy.BLOCK  # the steps of the two end blocks only
    assert occupied.peak(0, 0, 9) == 120 and occupied.peak(0, 10, 999_999) == 121
    assert occupied.high[0] == 121 and occupied.room(0, 0, 9) == 100 - 120


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 4, 512]), st.sampled_from([1, 8, 10**6]), st.sampled_from([3, 12, 10**9]),
       st.sampled_from([0, 5, 10**6]), st.sampled_from([0, 2, 10**6]), st.integers(1, 100),
       st.integers(0, 2**42),
       st.lists(st.one_of(spans, st.tuples(st.integers(0, 99), st.integers(0, 99))),
                max_size=60))  # fmt: skip
def test_occupancy_answers_as_a_plain_row_whenever_its_pending_tensors_are_merged(
    block: int,
    bulk: int,
    held: int,
    far: int,
    few: int,
    steps: int,
    limit: int,
    calls: list[tuple[int, ...]],
) -> None:
    """Adds and checks interleaved: tensors pending while the device is under its limit (at
    most `_HELD` numbers), then merged one by one or all at once over the blocks they cover
    (`_BULK`), long-lived ones (`_FAR`) one by one or by their blocks (`_FEW`): every peak,
    room and fit is the plain row's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(occupancy, "BLOCK", block)
        patch.setattr(occupancy, "_BULK", bulk)
        patch.setattr(occupancy, "_HELD", held)
        patch.setattr(occupancy, "_FAR", far)
        patch.setattr(occupancy, "_FEW", few)
        occupied, plain = Occupancy([limit, None], steps), np.zeros(steps, dtype=np.int64)
        for call in calls:
            lo, hi = sorted((call[0] % steps, call[1] % steps))
            if len(call) == 3:
                occupied.add(0, lo, hi, call[2])
                occupied.add(1, lo, hi, call[2])  # no limit: not tracked
                plain[lo : hi + 1] += call[2]
                assert occupied.rows[0] is None or len(occupied.pending[0]) <= held
                continue
            assert occupied.high[0] >= int(plain.max())
            assert occupied.peak(0, lo, hi) == int(plain[lo : hi + 1].max())
            assert occupied.room(0, lo, hi) == limit - int(plain[lo : hi + 1].max())
            size, j = call[0] * 2**30, (lo + hi) // 2
            plain_fits = (  # nothing taken before j (size 0) cannot go over there
                not (lo < j and size // 2 and int(plain[lo:j].max()) + size // 2 > limit)
                and int(plain[j : hi + 1].max()) + size <= limit
            )
            assert occupied.fits(0, lo, j, hi, size // 2, size) == plain_fits
            assert occupied.fits(1, lo, j, hi, size // 2, size) and occupied.room(1, lo, hi) is None
        assert occupied.rows[1] is None and not occupied.pending[1]


def test_a_device_with_a_row_far_under_its_limit_adds_to_the_list_until_a_check_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fan's case at 100,000 ops: once a device has its row, its tensors wait in the list
    while they cannot reach the limit, and the row takes them all at once (one rebuild, not a
    block update per tensor) when a check must look."""
    calls = {"add": 0, "merge": 0}
    for name in calls:
        real = getattr(Steps, name)

        def counted(self: Steps, *args: object, name: str = name, real: object = real) -> object:
            calls[name] += 1
            return real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(Steps, name, counted)
    occupied = Occupancy([10_000], steps=100_000)
    occupied.add(0, 0, 9, 6_000)
    occupied.add(0, 10, 19, 6_000)  # 12,000 in all: the limit could be reached, a check looks
    assert occupied.fits(0, 0, 0, 99_999, 0, 1)  # the row is made: its peak is 6,000
    for step in range(1_000):
        occupied.add(0, step * 100, step * 100 + 50, 1)
    assert occupied.high[0] == 6_000 + 1_000  # at least the peak: the row's, plus the list
    assert occupied.fits(0, 0, 0, 99_999, 0, 3_000)  # 7,000 + 3,000: no need to look
    assert calls == {"add": 0, "merge": 0}  # the row is untouched while the list grows
    assert occupied.fits(0, 0, 0, 99_999, 0, 3_500)  # 10,500 might not fit: it looks
    assert calls == {"add": 0, "merge": 1} and not occupied.pending[0]  # 1,000 spans: one rebuild
    assert occupied.peak(0, 0, 99_999) == occupied.high[0] == 6_001
    occupied.add(0, 7, 9, 5)
    occupied.add(0, 99_000, 99_010, 5)  # two over the whole row: added one by one
    assert occupied.peak(0, 8, 8) == 6_006 and calls == {"add": 2, "merge": 2}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([1, 3, 4, 7, 512]), st.sampled_from([1, 8, 10**6]), st.sampled_from([0, 5, 10**6]),
       st.sampled_from([0, 2, 10**6]), st.integers(1, 100), st.lists(spans, max_size=10),
       st.lists(spans, min_size=1, max_size=30))  # fmt: skip
def test_steps_merge_adds_as_a_plain_row_and_keeps_each_blocks_peak(
    block: int,
    bulk: int,
    far: int,
    few: int,
    steps: int,
    before: list[tuple[int, int, int]],
    merged: list[tuple[int, int, int]],
) -> None:
    """`Steps.merge` after adds (pending adds over whole blocks): every step and every block's
    peak (`top`, what `high` and `peak` read) as the plain row, whichever way it merges
    (long-lived tensors one by one or by their blocks and end pieces: `_FAR`, `_FEW`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(occupancy, "BLOCK", block)
        patch.setattr(occupancy, "_BULK", bulk)
        patch.setattr(occupancy, "_FAR", far)
        patch.setattr(occupancy, "_FEW", few)
        start = np.arange(steps, dtype=np.int64) * 1000
        row, plain = Steps(start.copy()), start.copy()
        for a, b, size in before:
            lo, hi = sorted((a % steps, b % steps))
            row.add(lo, hi, size)
            plain[lo : hi + 1] += size
        rows = [(*sorted((a % steps, b % steps)), size) for a, b, size in merged]
        for lo, hi, size in rows:
            plain[lo : hi + 1] += size
        row.merge(np.array(rows, dtype=np.int64).reshape(-1, 3))
        blocks = np.arange(steps) // block
        assert (row.base + row.lazy[blocks] == plain).all()
        assert row.top.tolist() == [int(plain[b * block : (b + 1) * block].max())
                                    for b in range(len(row.top))]  # fmt: skip


def test_a_merge_rebuilds_the_blocks_its_tensors_cover_not_the_row() -> None:
    """4,096 short-lived tensors pending at steps 500,000-504,095 of 1,000,000 (what placing
    those ops leaves): the merge leaves every other block as it was (its pending add too), so
    merging costs what it adds, and a pass over n ops stays linear, not n / 4,096 rebuilds of
    n steps."""
    occupied, row = _over_its_limit()
    assert occupied.peak(0, 0, 0) == 120
    row.add(0, 999_999, 1)  # a pending add over the whole blocks
    base, lazy = row.base.copy(), row.lazy.copy()
    for step in range(500_000, 504_096):
        occupied.add(0, step, step + 3, 1)
    occupied.add(0, 10, 999_990, 1)  # long-lived: added on its own
    assert occupied.peak(0, 500_003, 500_003) == 121 + 4 + 1
    first, end = 500_000 // occupancy.BLOCK, 504_099 // occupancy.BLOCK + 1
    outside = np.ones(len(lazy), dtype=bool)
    outside[first:end] = False
    outside[[0, -1]] = False  # the long-lived tensor's end blocks
    steps = np.repeat(outside, occupancy.BLOCK)[:1_000_000]
    assert (row.base[steps] == base[steps]).all() and (row.lazy[outside] == lazy[outside] + 1).all()
    assert occupied.peak(0, 0, 999_999) == occupied.high[0] == 126


def _over_its_limit() -> tuple[Occupancy, occupancy.Steps]:
    """One device of 100 bytes over 1,000,000 steps, two tensors of 60 living through every
    step: over the limit together, so the first check makes the device's row of steps."""
    occupied = Occupancy([100], steps=1_000_000)
    occupied.add(0, 0, 999_999, 60)
    occupied.add(0, 0, 999_999, 60)
    occupied.peak(0, 0, 0)  # a check: the row is made
    row = occupied.rows[0]
    assert row is not None
    return occupied, row
