"""Bytes alive on each device at each step, for a placer that must stay within memory limits.

The executor walks the graph in order; at step j a device holds every tensor whose life
(creation step to last-reader step, both included) contains j. So a device's usage is a sum of
intervals over steps, and a tensor fits where the usage over its interval, plus its size, stays
within the limit. Checking an interval before adding it keeps the invariant `usage <= limit`
at every step whatever order the intervals arrive in. `high` is an upper bound of each device's
usage, so most checks never look at its steps (Baechi m-ETF checks a device's free memory the
same way before it places an op there).

A device's row of steps is made only when a check needs it: until its tensors together could
exceed its limit, a sum is enough. So a graph with a small tensor on each of 20,000 logical
GPUs keeps 20,000 sums and interval lists, not a 20,000 x steps matrix.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np


class Occupancy:
    """Per device and step: bytes in use; devices with no limit are not tracked."""

    def __init__(self, limits: Sequence[int | None], steps: int) -> None:
        self.limits = list(limits)
        self.tracked = [limit is not None for limit in limits]
        self.steps = max(steps, 1)
        self.rows: list[np.ndarray | None] = [None] * len(limits)
        # not in a row yet: (lo, hi, size) after (lo, hi, size), 24 bytes each, no objects
        self.pending = [array("q") for _ in limits]
        self.high = [0] * len(limits)  # the sum of a device's sizes until it has a row

    def _row(self, d: int) -> np.ndarray:
        """Device d's bytes per step, made from the intervals added so far on first use."""
        row = self.rows[d]
        if row is None:
            spans = np.frombuffer(self.pending[d], dtype=np.int64).reshape(-1, 3)
            change = np.zeros(self.steps + 1, dtype=np.int64)  # what starts or ends at a step
            np.add.at(change, spans[:, 0], spans[:, 2])
            np.add.at(change, spans[:, 1] + 1, -spans[:, 2])
            row = self.rows[d] = np.cumsum(change[:-1])
            self.pending[d] = array("q")
            self.high[d] = int(row.max())
        return row

    def peak(self, d: int, lo: int, hi: int) -> int:
        """The most bytes in use on device d at any step of lo..hi."""
        if lo > hi:
            return 0
        return int(self._row(d)[lo : hi + 1].max())

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
        row = self.rows[d]
        if row is None:
            self.pending[d].extend((lo, hi, size))
            self.high[d] += size
            return
        part = row[lo : hi + 1]
        part += size
        top = int(part.max())
        if top > self.high[d]:
            self.high[d] = top
