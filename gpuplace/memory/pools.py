"""Per-device memory for a run: ledgers from the policy's logical GPUs, real pools, OOM advice.

Simulated GPUs: a ledger per logical device enforces the limits with TensorFlow's arithmetic.
Real GPUs: each card's cupy pool also carries the limit (`set_limit`) and holds the reserved
block (preallocation), so nvidia-smi shows what TensorFlow would have taken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..devices.model import LogicalGpu, View
from ..devices.names import full_name
from ..echo import sample
from ..errors import GpuplaceError, Message, Part, RuntimeFailure, Setting
from ..units import human
from .ledger import Ledger, OutOfMemory
from .policy import Policy

POOL_UNIT = 512  # cupy's allocation unit (`cupy/cuda/memory.pyx`, _round_size)


class DeviceMemory(NamedTuple):
    """What one device held during a run (bytes): reserved, peak in use, the policy's limit."""

    device: str
    reserved: int
    peak: int
    limit: int | None


def ledgers(
    devices: Sequence[str],
    logical: Sequence[LogicalGpu],
    by_name: Mapping[str, LogicalGpu] | None = None,
    cpu_limit: int | None = None,
) -> list[Ledger]:
    """One ledger per device in `devices` order; GPUs carry their limit and reservation
    (`by_name`: each GPU's full name, for a cluster's tasks; default: this process's), CPU:0
    `cpu_limit` (max_memory's CPU cap; None: unlimited)."""
    if by_name is None:
        by_name = {full_name("GPU", g.index): g for g in logical}
    out = []
    for device in devices:
        g = by_name.get(device)
        out.append(
            Ledger(device, cpu_limit if device == full_name("CPU", 0) else None)
            if g is None
            else Ledger(device, g.limit, reserve=g.reserve, growth=g.growth)
        )
    return out


def _by_card(logical: Sequence[LogicalGpu], real_only: bool = False) -> list[list[LogicalGpu]]:
    """The logical GPUs grouped by the physical card they run on (real cards only, if asked)."""
    per_card: dict[int, list[LogicalGpu]] = {}
    for g in logical:
        if not (real_only and g.gpu.gpu.simulated):
            per_card.setdefault(g.gpu.cuda_index, []).append(g)
    return list(per_card.values())


# The fix for a reservation the card cannot hold
SMALLER = Message(
    "a smaller ", Setting("memory_fraction"), " / ", Setting("memory_limit"), ", or ",
    Setting("allow_growth"),
)  # fmt: skip


def check_reservations(logical: Sequence[LogicalGpu]) -> None:
    """Refuse a preallocation larger than a card's free memory, before anything runs."""
    for group in _by_card(logical):
        gpu = group[0].gpu
        free = gpu.memory_free if gpu.memory_free is not None else gpu.memory_total
        want = sum(g.reserve for g in group)
        if free is not None and want > free:
            names = sample([g.name for g in group])
            raise RuntimeFailure(
                f"cannot reserve {human(want)} for {names} on {gpu.product} (CUDA GPU {gpu.cuda_index}): "
                f"only {human(free)} is free (other processes use {human(gpu.memory_used or 0)}).",
                SMALLER,
            )


def prepare_pools(logical: Sequence[LogicalGpu], backends: Mapping[str, Any]) -> None:
    """Real GPUs: set each card's cupy pool limit and hold the preallocated block in the pool.

    A card that cannot give the block (the CUDA context took part of the free memory NVML
    reported) is a RuntimeFailure, after every pool touched so far is released.
    """
    groups = _by_card(logical, real_only=True)
    for done, group in enumerate(groups, start=1):
        backend = backends[full_name("GPU", group[0].index)]
        # cupy hands out multiples of 512 B: a block rounded up would pass the pool's limit
        # (TF's BFC likewise takes its region as the limit rounded down to 256 B)
        reserve = sum(g.reserve for g in group) // POOL_UNIT * POOL_UNIT
        try:
            backend.set_memory_limit(sum(g.limit for g in group))
            if reserve:
                backend.preallocate(reserve)
        except GpuplaceError:  # CUDA failed on this card: give back what the others hold
            _release(groups[:done], backends)
            raise
        except backend.out_of_memory as exc:
            _release(groups[:done], backends)
            gpu = group[0].gpu
            raise RuntimeFailure(
                f"cannot reserve {human(reserve)} for {sample([g.name for g in group])} on "
                f"{gpu.product} (CUDA GPU {gpu.cuda_index}): cupy: {exc} Nothing is left "
                "allocated.",
                SMALLER,
            ) from None


def release_after_failure(logical: Sequence[LogicalGpu], backends: Mapping[str, Any]) -> None:
    """Give back every real card's pool after a failed run, each card on its own."""
    _release(_by_card(logical, real_only=True), backends)


def _release(groups: Sequence[Sequence[LogicalGpu]], backends: Mapping[str, Any]) -> None:
    """Give back the pools of cards prepared before a failure; a card that fails again
    (its CUDA context is lost) has nothing more to say than the first failure did."""
    for group in groups:
        with contextlib.suppress(GpuplaceError):
            backends[full_name("GPU", group[0].index)].release_pool()


def release_pools(logical: Sequence[LogicalGpu], backends: Mapping[str, Any]) -> dict[str, int]:
    """Read each real card's pool size (what it reserved), then give everything back.

    The size is reported for a card that carries one logical GPU; one pool serves all the
    logical GPUs of a split card, so those keep their own ledgers' reservations (no double count).
    """
    reserved: dict[str, int] = {}
    for group in _by_card(logical, real_only=True):
        name = full_name("GPU", group[0].index)
        backend = backends[name]
        if len(group) == 1:
            reserved[name] = backend.pool_bytes()
        backend.release_pool()
    return reserved


def summary(ledger_list: Sequence[Ledger], pools: Mapping[str, int]) -> list[DeviceMemory]:
    return [
        DeviceMemory(lg.device, pools.get(lg.device, lg.reserved), lg.peak, lg.limit)
        for lg in ledger_list
    ]


def oom_hint(
    exc: OutOfMemory, policy: Policy, logical: Sequence[LogicalGpu], view: View
) -> Message:
    """What would help, for this machine and policy: the OOM message's Fix: sentence."""
    parts: list[Part] = []

    def hint(*words: Part) -> None:
        parts.extend(("; ", *words) if parts else words)

    need = exc.in_use + exc.requested
    others = [g for g in logical if full_name("GPU", g.index) != exc.device and g.limit >= need]
    if others:
        hint(f"{others[0].name} could hold it (limit {human(others[0].limit)}): place ops there")
    if len(logical) > 1:
        balanced = Setting("strategy", "balanced")
        hint("spread the graph over the GPUs (", balanced, ", towers, or explicit devices)")
    if policy.fraction is not None:
        hint("raise ", Setting("memory_fraction"), f" (now {policy.fraction:g}, at most 1)")
    elif policy.memory_limit is not None or policy.virtual:
        more = (Setting("memory_limit"), " / ", Setting("virtual_gpus"))
        hint("give the device more memory (", *more, ")")
    else:
        hint(
            Setting("allow_growth"),
            " will not help: the limit is the card's memory, not the reservation",
        )
    return Message(*parts, ".")
