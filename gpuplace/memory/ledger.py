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

from ..errors import BadInput, Message, Part, RuntimeFailure, Term, Text
from ..units import ALIGNMENT, allocation_size, human

__all__ = ["ALIGNMENT", "Ledger", "OutOfMemory", "allocation_size", "new_ledgers"]


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
