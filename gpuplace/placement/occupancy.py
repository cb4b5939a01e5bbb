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
GPUs keeps 20,000 sums and interval lists, not a 20,000 x steps matrix. Once it has a row,
tensors still wait in the list, `high` growing by their sizes from the row's peak, until a
check needs the row again (or 4,096 wait): then they are added at once (`Steps.merge`), over
the blocks they cover (the steps being placed: a merge costs what it adds, not the row's length,
so the work stays linear in the steps), or one by one where they are too few for that to pay.
Long-lived tensors (variables live to the end) are merged by their whole blocks and their two
end pieces, many at a time. A device far under its limit thus pays a list append per tensor,
not the row's upkeep.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

BLOCK = 512  # steps per block of a device's row (`Steps`)
_BULK = 1024  # n steps are rebuilt rather than added to span by span above n / _BULK spans
_FAR = 4 * BLOCK  # a pending tensor living more steps is merged by blocks (`Steps._add_far`)
_FEW = 8  # at most this many such tensors are added one by one (`Steps.add`), not at once
_HELD = 3 * 4096  # at most this many numbers wait for a device's row once it has one


class Steps:
    """One device's bytes per step, in blocks of BLOCK steps, each with an add pending over the
    whole block and its maximum: adding over (or asking the peak of) a range touches the steps
    of the two blocks at its ends and one number per block between, not every step, so a tensor
    that lives to the end (a variable) costs steps / BLOCK, not steps."""

    __slots__ = ("base", "lazy", "top")

    def __init__(self, row: np.ndarray) -> None:
        self.base = row  # bytes per step, less its block's pending add
        blocks = -(-len(row) // BLOCK)
        self.lazy = np.zeros(blocks, dtype=np.int64)  # added over each whole block
        self.top = np.maximum.reduceat(row, np.arange(0, len(row), BLOCK))  # each block's max

    def _part(self, b: int, lo: int, hi: int, size: int) -> None:
        """Add `size` over steps lo..hi, all in block b."""
        self.base[lo : hi + 1] += size
        start = b * BLOCK
        self.top[b] = int(self.base[start : start + BLOCK].max()) + int(self.lazy[b])

    def add(self, lo: int, hi: int, size: int) -> int:
        """Add `size` over steps lo..hi; the most bytes now in use in the blocks it touches."""
        b0, b1 = lo // BLOCK, hi // BLOCK
        if b0 == b1:
            self._part(b0, lo, hi, size)
        else:
            self._part(b0, lo, (b0 + 1) * BLOCK - 1, size)
            self._part(b1, b1 * BLOCK, hi, size)
            self.lazy[b0 + 1 : b1] += size
            self.top[b0 + 1 : b1] += size
        return int(self.top[b0 : b1 + 1].max())

    def merge(self, spans: np.ndarray) -> None:
        """Add every (lo, hi, size) row of `spans`: those living over `_FAR` steps by their
        blocks (`_add_far`), the others at once, the blocks they cover rebuilt (O(steps
        covered)), or one by one when they are at most 1 / `_BULK` of those steps. Tensors
        pending together come from the ops being placed, so the blocks they cover are a few,
        not the row: rebuilding the whole row at every merge made a row of 1,000,000 steps
        cost quadratic time."""
        far = spans[:, 1] - spans[:, 0] > _FAR
        if far.any():
            self._add_far(spans[far])
            spans = spans[~far]
        if not len(spans):
            return
        b0, b1 = int(spans[:, 0].min()) // BLOCK, int(spans[:, 1].max()) // BLOCK + 1
        first, end = b0 * BLOCK, min(b1 * BLOCK, len(self.base))
        if len(spans) <= (end - first) // _BULK:
            for lo, hi, size in spans.tolist():
                self.add(lo, hi, size)
            return
        row, lazy = self.base[first:end], self.lazy  # a view: changed in place
        whole = (end - first) // BLOCK * BLOCK
        row[:whole].reshape(-1, BLOCK)[:] += lazy[b0 : b0 + whole // BLOCK, None]
        row[whole:] += lazy[b1 - 1]  # the row's last block, when it is short
        row += _sums(spans - np.array([first, first, 0]), end - first)
        lazy[b0:b1] = 0
        self.top[b0:b1] = np.maximum.reduceat(row, np.arange(0, end - first, BLOCK))

    def _add_far(self, spans: np.ndarray) -> None:
        """Add the (lo, hi, size) rows of `spans`, long-lived tensors: one by one (`add`) when
        at most `_FEW`, else at once: over the whole blocks between their ends as pending adds
        (a difference array over the blocks), and their end pieces, each within a block, block
        by block (`_add_pieces`). One by one, each costs a few array operations: a million-op
        chain's variables, which live to the end, cost more than their placement did."""
        if len(spans) <= _FEW:
            for lo, hi, size in spans.tolist():
                self.add(lo, hi, size)
            return
        lo, hi, size = spans[:, 0], spans[:, 1], spans[:, 2]
        b0, b1 = lo // BLOCK, hi // BLOCK
        split = b0 < b1  # the others lie within a block: a piece already
        change = np.zeros(len(self.lazy) + 1, dtype=np.int64)  # what starts or ends at a block
        np.add.at(change, b0[split] + 1, size[split])
        np.add.at(change, b1[split], -size[split])  # nothing when b1 = b0 + 1: no whole block
        whole = np.cumsum(change[:-1])
        self.lazy += whole
        self.top += whole
        heads = np.column_stack((lo[split], (b0[split] + 1) * BLOCK - 1, size[split]))
        tails = np.column_stack((b1[split] * BLOCK, hi[split], size[split]))
        self._add_pieces(np.concatenate((spans[~split], heads, tails)))

    def _add_pieces(self, spans: np.ndarray) -> None:
        """Add the (lo, hi, size) rows of `spans`, each within one block: the blocks they touch
        gathered into a table of steps, each block's sum of them worked out in one pass, its
        steps and maximum updated; O(blocks touched x BLOCK), whatever their number."""
        steps = len(self.base)
        blocks, k = np.unique(spans[:, 0] // BLOCK, return_inverse=True)
        first = blocks * BLOCK
        change = np.zeros((len(blocks), BLOCK + 1), dtype=np.int64)
        np.add.at(change, (k, spans[:, 0] - first[k]), spans[:, 2])
        np.add.at(change, (k, spans[:, 1] + 1 - first[k]), -spans[:, 2])
        where = first[:, None] + np.arange(BLOCK)  # the steps of each block touched
        inside = where < steps  # the row's last block may be short
        where = np.minimum(where, steps - 1)  # read: the short block's last step again
        self.base[where[inside]] += np.cumsum(change[:, :BLOCK], axis=1)[inside]
        self.top[blocks] = self.base[where].max(axis=1) + self.lazy[blocks]

    def peak(self, lo: int, hi: int) -> int:
        """The most bytes in use at any step of lo..hi."""
        b0, b1 = lo // BLOCK, hi // BLOCK
        if b0 == b1:
            return int(self.base[lo : hi + 1].max()) + int(self.lazy[b0])
        most = max(
            int(self.base[lo : (b0 + 1) * BLOCK].max()) + int(self.lazy[b0]),
            int(self.base[b1 * BLOCK : hi + 1].max()) + int(self.lazy[b1]),
        )
        if b1 > b0 + 1:
            most = max(most, int(self.top[b0 + 1 : b1].max()))
        return most


class Occupancy:
    """Per device and step: bytes in use; devices with no limit are not tracked."""

    def __init__(self, limits: Sequence[int | None], steps: int) -> None:
        self.limits = list(limits)
        self.tracked = [limit is not None for limit in limits]
        self.steps = max(steps, 1)
        self.rows: list[Steps | None] = [None] * len(limits)
        # not in the row yet: (lo, hi, size) after (lo, hi, size), 24 bytes each, no objects
        self.pending = [array("q") for _ in limits]
        # at least the peak of each device: the row's last peak (0) plus every size pending
        self.high = [0] * len(limits)

    def _row(self, d: int) -> Steps:
        """Device d's bytes per step with every interval added so far: made on first use, and
        brought up to date with the intervals added since."""
        row, pending = self.rows[d], self.pending[d]
        if row is not None and not pending:
            return row
        spans = np.frombuffer(pending, dtype=np.int64).reshape(-1, 3)
        if row is None:
            row = self.rows[d] = Steps(_sums(spans, self.steps))
        else:
            row.merge(spans)
        self.pending[d] = array("q")
        self.high[d] = int(row.top.max())
        return row

    def peak(self, d: int, lo: int, hi: int) -> int:
        """The most bytes in use on device d at any step of lo..hi."""
        if lo > hi:
            return 0
        return self._row(d).peak(lo, hi)

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
        pending = self.pending[d]
        pending.extend((lo, hi, size))  # into the row when a check needs it (`_row`)
        self.high[d] += size
        if len(pending) > _HELD and self.rows[d] is not None:  # bounded: 96 KiB a device
            self._row(d)


def _sums(spans: np.ndarray, steps: int) -> np.ndarray:
    """Bytes per step (int64, `steps` long) of the (lo, hi, size) rows of `spans`."""
    change = np.zeros(steps + 1, dtype=np.int64)  # what starts or ends at a step
    np.add.at(change, spans[:, 0], spans[:, 2])
    np.add.at(change, spans[:, 1] + 1, -spans[:, 2])
    return np.cumsum(change[:-1], out=change[:-1])
