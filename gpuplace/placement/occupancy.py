"""Bytes alive on each device at each step, for a placer that must stay within memory limits.

The executor walks the graph in order; at step j a device holds every tensor whose life
(creation step to last-reader step, both included) contains j. So a device's usage is a sum of
intervals over steps, and a tensor fits where the usage over its interval, plus its size, stays
within the limit. Checking an interval before adding it keeps the invariant `usage <= limit`
at every step whatever order the intervals arrive in. One numpy row per device; `high` is an
upper bound of each row's maximum, so most checks never look at the row (Baechi m-ETF checks
a device's free memory the same way before it places an op there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Occupancy:
    """Per device and step: bytes in use; devices with no limit are not tracked."""

    def __init__(self, limits: Sequence[int | None], steps: int) -> None:
        self.limits = list(limits)
        tracked = [limit is not None for limit in limits]
        self.usage = np.zeros((len(limits), max(steps, 1)), dtype=np.int64)
        self.tracked = tracked
        self.high = [0] * len(limits)

    def peak(self, d: int, lo: int, hi: int) -> int:
        """The most bytes in use on device d at any step of lo..hi."""
        if lo > hi:
            return 0
        return int(self.usage[d, lo : hi + 1].max())

    def fits(self, d: int, lo: int, j: int, hi: int, before: int, total: int) -> bool:
        """Whether device d can take `before` more bytes over steps lo..j-1 and `total` more
        over j..hi (conservative: as if all of them were alive at the fullest step)."""
        limit = self.limits[d]
        if limit is None or self.high[d] + total <= limit:
            return True
        if before and lo < j and self.peak(d, lo, j - 1) + before > limit:
            return False
        return self.peak(d, j, hi) + total <= limit

    def room(self, d: int, lo: int, hi: int) -> int | None:
        """Bytes still free on d at the fullest step of lo..hi (None: no limit)."""
        limit = self.limits[d]
        return None if limit is None else limit - self.peak(d, lo, hi)

    def add(self, d: int, lo: int, hi: int, size: int) -> None:
        """A tensor of `size` bytes alive on d over steps lo..hi."""
        if not self.tracked[d] or size == 0 or lo > hi:
            return
        row = self.usage[d, lo : hi + 1]
        row += size
        top = int(row.max())
        if top > self.high[d]:
            self.high[d] = top
