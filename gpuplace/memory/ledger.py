"""Per-device memory ledgers: bytes in use and peak, counted the way TensorFlow's BFC allocator does.

Every tensor is charged to its device when it is created or copied there, rounded up to 256 B
(`bfc_allocator.cc`, kMinAllocationSize), and released after its last consumer on that device.
`peak` is what `tf.config.experimental.get_memory_info(...)["peak"]` reports: memory in use, not
memory reserved by a pool. A limit plays TF's `memory_limit`: exceeding it is an OOM.
`reserved` is what the allocator holds from the device (what nvidia-smi shows for the process):
the preallocated block, or with allow_growth the regions grown so far (`BFCAllocator::Extend`:
2 MiB first, each region double the last, never released, capped at the limit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BadInput, Message, Part, RuntimeFailure, Term, Text
from ..units import ALIGNMENT, allocation_size, human

__all__ = [
    "ALIGNMENT",
    "Charges",
    "Ledger",
    "OutOfMemory",
    "Replay",
    "allocation_size",
    "new_ledgers",
]


def _bytes(n: int) -> str:
    """`4.0 KiB (4096 B)`: readable and exact; `256 B` alone when that is both."""
    return human(n) if n < 1024 else f"{human(n)} ({n} B)"


class OutOfMemory(RuntimeFailure):
    """A device ran out of memory (TF's ResourceExhaustedError: "OOM when allocating ...").

    Raised only after the run freed every tensor it had allocated, which the message says.
    """

    def __init__(
        self,
        op: str,
        device: str,
        requested: int,
        in_use: int,
        limit: int | None,
        detail: str = "",
        reserved: int | None = None,
        hint: Text = "",
        predicted: bool = False,
        anyway: Part = Term.RUN_ANYWAY,
    ) -> None:
        self.op, self.device = op, device
        self.requested, self.in_use, self.limit = requested, in_use, limit
        self.reserved, self.detail = reserved, detail
        cap = "no memory limit set" if limit is None else f"limit {_bytes(limit)}"
        held = "" if reserved is None else f", {_bytes(reserved)} reserved"
        fix = hint or "raise that device's memory limit, or place some ops on another device."
        what: tuple[Part, ...] = (
            ("Predicted before running (plan): nothing was run or allocated; ", anyway, ".")
            if predicted
            else (
                "The run stopped and freed everything it had allocated; nothing is left allocated.",
            )
        )
        super().__init__(
            Message(
                f"OOM when allocating {_bytes(requested)} for op '{op}' on {device}: "
                f"{_bytes(in_use)} in use{held}, {cap}{detail}. ", *what,
            ),
            fix,
        )  # fmt: skip

    def with_hint(
        self, hint: Text, predicted: bool = False, anyway: str | None = None
    ) -> OutOfMemory:
        """The same error with gpuplace's advice for this machine and policy; a predicted one
        says how to run anyway (`anyway`: the caller's words, `Term.RUN_ANYWAY`, unless given)."""
        return OutOfMemory(
            self.op, self.device, self.requested, self.in_use, self.limit, self.detail,
            self.reserved, hint, predicted, *([anyway] if anyway else []),
        )  # fmt: skip


GROWTH_START = 2 * 1024 * 1024  # BFC's first region with allow_growth


class Ledger:
    """Bytes in use, peak and reserved on one device; `limit` None: only the hardware limits it.

    `reserve` is preallocated at start (TF's default); `growth` grows the reservation by
    doubling regions as allocations need it (allow_growth).
    """

    __slots__ = ("device", "growth", "in_use", "limit", "next_region", "peak", "reserved")

    def __init__(
        self, device: str, limit: int | None = None, *, reserve: int = 0, growth: bool = False
    ) -> None:
        self.device = device
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.reserved = reserve
        self.growth = growth
        self.next_region = GROWTH_START

    def allocate(self, nbytes: int, op: str) -> None:
        """Charge `nbytes` (already rounded) for `op`, or raise OutOfMemory past the limit."""
        in_use = self.in_use + nbytes
        if self.limit is not None and in_use > self.limit:
            reserved = self.reserved if self.growth or self.reserved else None
            raise OutOfMemory(op, self.device, nbytes, self.in_use, self.limit, reserved=reserved)
        self.in_use = in_use
        if in_use > self.peak:
            self.peak = in_use
        if self.growth and in_use > self.reserved:
            # The free space left cannot hold the request: BFC extends by a region that can
            # (a chunk never spans two regions), so the request, not the shortfall, sizes it.
            self._extend(nbytes)

    def _extend(self, rounded_bytes: int) -> None:
        """`BFCAllocator::Extend`: one new region for a request of `rounded_bytes`: the current
        region size, doubled until the request fits, capped at what the limit leaves (rounded
        down to 256 B); the next region doubles unless this one had to grow."""
        increased = False
        while rounded_bytes > self.next_region:
            self.next_region *= 2
            increased = True
        region = self.next_region
        if self.limit is not None:
            available = (self.limit - self.reserved) // ALIGNMENT * ALIGNMENT
            region = min(region, available)
        self.reserved += region
        if not increased:
            self.next_region *= 2

    def free(self, nbytes: int) -> None:
        self.in_use -= nbytes

    def release(self) -> None:
        """Forget every allocation (end of a run, or a failed one); the peak stays."""
        self.in_use = 0


def new_ledgers(devices: Sequence[str], limits: Mapping[str, int | None]) -> list[Ledger]:
    """One ledger per device, in order; a limit naming a device outside `devices` is an error."""
    unknown = sorted(set(limits) - set(devices))
    if unknown:
        raise BadInput(
            f"memory limit given for {', '.join(unknown)}, which this run has no backend for "
            f"(devices: {', '.join(devices) or 'none'})"
        )
    return [Ledger(device, limits.get(device)) for device in devices]


HUGE = 2**62  # past this many bytes in all, charges are exact Python ints (numpy object arrays)


class Charges:
    """Every charge a run makes, fixed once its schedule is planned: before step s runs, its
    device is charged `step_bytes[s]` (its outputs and copies, rounded); after it, each tensor
    whose last reader it is goes back to its own device.

    Kept as events (`time` 2s: the charge of step s, 2s + 1: the frees after it; `device`;
    `delta`: + bytes charged, - bytes freed), sorted by device then time, so `Replay` counts a
    whole run, every device at once, with a few array passes instead of two calls per step.
    Built from plain lists or int arrays in one vectorised pass (numpy is imported here only).
    """

    __slots__ = ("delta", "device", "devices", "exact", "step_bytes", "step_device", "time")

    def __init__(
        self,
        devices: int,
        step_device: Sequence[int] | Any,
        step_bytes: Sequence[int],
        frees: tuple[Sequence[int], Sequence[int] | Any, Sequence[int] | Any],
    ) -> None:
        """`frees`: (step, device, bytes) columns, one row per tensor, freed after that step; a
        step past the last (`len(step_device)`) means never (kept to the end of the run).
        `step_device` and the frees' devices and bytes may be int arrays (numpy's) already."""
        import numpy as np

        self.devices = devices
        # each tensor was charged once: the sum bounds every running total
        self.exact = sum(step_bytes) >= HUGE
        self.step_device = _int64(step_device)
        steps = len(self.step_device)
        self.step_bytes: Any = np.array(step_bytes, object) if self.exact else _int64(step_bytes)
        free_step = _int64(frees[0])
        freed = free_step < steps
        free_device = _int64(frees[1])[freed]
        free_bytes = (  # exact: Python ints, not numpy's (whose sums would wrap)
            np.asarray(frees[2]).astype(object) if self.exact else _int64(frees[2])
        )
        time = np.concatenate([np.arange(steps, dtype=np.int64) * 2, free_step[freed] * 2 + 1])
        device = np.concatenate([self.step_device, free_device])
        delta = np.concatenate([self.step_bytes, -free_bytes[freed]])
        order = np.lexsort((time, device))  # by device, then in run order
        self.time, self.device, self.delta = time[order], device[order], delta[order]

    @property
    def steps(self) -> int:
        return len(self.step_device)


def _int64(values: Sequence[int] | Any) -> Any:
    """`values` as an int64 array: an array as it is, a list or tuple read in one C loop
    where compiled (`placement.arrays.int_array`: a sixth of numpy's `fromiter`, which
    takes each item through its generic scalar conversion)."""
    import numpy as np

    from ..placement.arrays import int_array  # numpy's: not at start-up

    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if not isinstance(values, (list, tuple)):
        values = list(values)
    return int_array(values).astype(np.int64, copy=False)


class Replay:
    """The ledgers' state at any step of a run of `charges`, worked out up front.

    The same arithmetic as `Ledger.allocate` and `Ledger.free` called step by step (and
    `Ledger._extend` itself for allow_growth), done for every ledger at once with cumulative
    sums: `stop` is the step whose charge would pass a limit (None: none does), and
    `settle(step)` leaves each ledger exactly as the step-by-step calls would have just before
    (or, `charged`, just after the charge of) that step. The run executes its steps without
    touching a ledger. One ledger may serve several devices (it then counts their charges
    together, in run order).
    """

    def __init__(self, charges: Charges, ledgers: Sequence[Ledger]) -> None:
        import numpy as np

        if len(ledgers) != charges.devices:
            raise ValueError(f"{len(ledgers)} ledgers for {charges.devices} devices")
        self.charges, self.ledgers = charges, ledgers
        index: dict[int, int] = {}  # id(ledger) -> its book
        of = [index.setdefault(id(lg), len(index)) for lg in ledgers]
        self.books = list({id(lg): lg for lg in ledgers}.values())
        self.start = [(lg.in_use, lg.peak, lg.reserved, lg.next_region) for lg in self.books]
        time, delta = charges.time, charges.delta
        book = np.asarray(of, dtype=np.int64)[charges.device] if len(of) else charges.device
        if len(self.books) < len(ledgers):  # shared ledgers: their devices' events merge
            order = np.lexsort((time, book))
            time, delta, book = time[order], delta[order], book[order]
        n = len(self.books)
        self.time, self.book = time, book
        self.first = np.searchsorted(book, np.arange(n + 1))  # each book's events
        dtype: Any = object if charges.exact else np.int64
        held = np.asarray([lg.in_use for lg in self.books], dtype=dtype)
        total = np.cumsum(delta)
        before = np.concatenate([np.zeros(1, dtype=total.dtype), total])[self.first[:-1]]
        self.in_use = total - before[book] + held[book]  # per event: its book's bytes in use
        charge = np.flatnonzero(time % 2 == 0)
        self.steps = time[charge] // 2  # per charge, by book then step
        self.after = self.in_use[charge]
        self.charged = delta[charge]
        self.charge_book = book[charge]
        self.charge_first = np.searchsorted(self.charge_book, np.arange(n + 1))
        stop = charges.steps
        limited = [b for b, lg in enumerate(self.books) if lg.limit is not None]
        if limited:
            top: Any = float("inf") if charges.exact else 2**63 - 1  # past every total
            cap = [top] * n  # no limit
            for b in limited:
                cap[b] = min(self.books[b].limit or 0, top)
            over = np.flatnonzero(self.after > np.asarray(cap, dtype=dtype)[self.charge_book])
            if len(over):
                stop = int(self.steps[over].min())
        self.stop: int | None = stop if stop < charges.steps else None

    def settle(self, step: int, charged: bool = False) -> None:
        """Each ledger as after every charge and free of the steps before `step` (and the
        charge of `step` itself when `charged`): in use, peak, and allow_growth's regions."""
        import numpy as np

        end = 2 * step + int(charged)  # events before this time have happened
        done = np.concatenate([[0], np.cumsum(self.time < end)])
        events = done[self.first[1:]] - done[self.first[:-1]]
        made_all = np.concatenate([[0], np.cumsum(self.steps < step + int(charged))])
        made = made_all[self.charge_first[1:]] - made_all[self.charge_first[:-1]]
        for b, lg in enumerate(self.books):
            lg.in_use, lg.peak, lg.reserved, lg.next_region = self.start[b]
            if events[b]:
                lg.in_use = int(self.in_use[self.first[b] + events[b] - 1])
            if made[b]:
                at = int(self.charge_first[b])
                after = self.after[at : at + made[b]]
                lg.peak = max(lg.peak, int(after.max()))
                if lg.growth:
                    _grow(lg, after, self.charged[at : at + made[b]])

    def raise_stop(self, op: str) -> None:
        """Raise the OutOfMemory of step `stop` (the op named `op`), from its ledger, as
        `Ledger.allocate` raises it; every ledger is left as just before that step."""
        assert self.stop is not None
        self.settle(self.stop)
        device = int(self.charges.step_device[self.stop])
        self.ledgers[device].allocate(int(self.charges.step_bytes[self.stop]), op)
        raise AssertionError(f"step {self.stop} fits {self.ledgers[device].device}")


GROWTH_PASSES = 64  # array passes before `_grow` walks the rest of the charges one by one


def _grow(ledger: Ledger, after: Any, charged: Any) -> None:
    """allow_growth: `Ledger._extend` for each charge that leaves more in use than reserved,
    in order: a few regions, each double the last, so a few array passes; once the limit caps
    them (and charges keep landing between it and what is reserved), one plain pass."""
    import numpy as np

    at = 0
    for _ in range(GROWTH_PASSES):
        over = np.flatnonzero(after[at:] > ledger.reserved)
        if not len(over):
            return
        at += int(over[0])
        ledger._extend(int(charged[at]))
        at += 1
    for in_use, nbytes in zip(after[at:].tolist(), charged[at:].tolist(), strict=True):
        if in_use > ledger.reserved:
            ledger._extend(nbytes)
