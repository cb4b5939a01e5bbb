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
    occupied = Occupancy([100], steps=1_000_000)
    occupied.add(0, 0, 999_999, 60)
    occupied.add(0, 0, 999_999, 60)  # over the limit together: the row of steps is made
    assert occupied.peak(0, 0, 999_999) == 120
    row = occupied.rows[0]
    assert row is not None
    before = row.base.copy()
    occupied.add(0, 10, 999_999, 1)
    changed = int(np.count_nonzero(row.base != before))
    assert changed <= 2 * occupancy.BLOCK  # the steps of the two end blocks only
    assert occupied.peak(0, 0, 9) == 120 and occupied.peak(0, 10, 999_999) == 121
    assert occupied.high[0] == 121 and occupied.room(0, 0, 9) == 100 - 120
