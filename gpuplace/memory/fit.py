"""Fit checks before anything is allocated: each device's memory, no tensor larger than it, and
no run holding more in host memory than the host has."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..devices.model import Host, LogicalGpu
from ..devices.names import full_name
from ..errors import Message, RuntimeFailure, Term
from ..graph.model import Graph, Op
from ..placement.model import Placement
from ..units import human


def device_limits(host: Host, logical: Sequence[LogicalGpu]) -> dict[str, int | None]:
    """The memory each device may use: the host's for CPU:0, the policy's limit for GPU:i."""
    sizes: dict[str, int | None] = {full_name("CPU", 0): host.memory_total}
    for g in logical:
        sizes[full_name("GPU", g.index)] = g.limit
    return sizes


def check_fits(graph: Graph, placement: Placement, limits: Mapping[str, int | None]) -> None:
    """Refuse, before anything is allocated, a tensor larger than its device's memory.

    Each op's device is looked up only for a tensor larger than the smallest limit: most
    graphs have none, and then one pass over the outputs' sizes is all it costs."""
    smallest = min((limit for limit in limits.values() if limit is not None), default=None)
    if smallest is None:
        return
    if _all_within(graph.ops, smallest):
        return
    for op in graph.ops:
        device = placement.decisions[op.name].device
        limit = limits.get(device)
        for spec in op.outputs:
            if limit is not None and spec.nbytes > limit:
                raise RuntimeFailure(
                    f"op {op.name!r} ({op.type}) outputs a {list(spec.shape)} {spec.dtype} tensor of "
                    f"{human(spec.nbytes)}, larger than all {human(limit)} {device} may use; nothing "
                    "was allocated. Place it on a device with more memory or make the tensor smaller"
                )


def _all_within(ops: Sequence[Op], smallest: int) -> bool:
    """Whether no output of `ops` is larger than `smallest` bytes. A spec that is the very
    object checked before it is not sized again: the loader gives equal specs one object, so
    most ops of a large graph cost an identity test, not `nbytes` (a Python property)."""
    last = None
    for op in ops:
        for spec in op.outputs:
            if spec is not last:
                if spec.nbytes > smallest:
                    return False
                last = spec
    return True


def check_host_memory(nbytes: int, op: str, available: int | None) -> None:
    """Refuse, before anything runs, a run whose tensors in host memory (those of CPU:0 and of
    the simulated GPUs, all numpy arrays) would at `op` come to `nbytes`, more than the host has
    `available` (None: unknown, not checked). Past it the kernel kills the process (SIGKILL)
    rather than fail an allocation, so no option runs it anyway."""
    if available is None or nbytes <= available:
        return
    raise RuntimeFailure(
        f"at op '{op}' this run would hold {human(nbytes)} ({nbytes:,} B) in host memory (the "
        "tensors of CPU:0 and of the simulated GPUs live there), more than the "
        f"{human(available)} this host has available; nothing was run, and nothing overrides "
        "this check: past it the kernel kills the process",
        Message(
            "see each device's peak with ", Term.PLAN, ", then run it on a host with more memory "
            "or make its tensors smaller",
        ),
    )  # fmt: skip
