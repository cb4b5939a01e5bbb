"""Fit checks before anything is allocated: each device's memory, and no tensor larger than it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..devices.model import LogicalGpu, View
from ..devices.names import full_name
from ..errors import RuntimeFailure
from ..graph.model import Graph
from ..placement.model import Placement
from ..units import human


def device_limits(view: View, logical: Sequence[LogicalGpu]) -> dict[str, int | None]:
    """The memory each device may use: the host's for CPU:0, the policy's limit for GPU:i."""
    sizes: dict[str, int | None] = {full_name("CPU", 0): view.machine.host.memory_total}
    for g in logical:
        sizes[full_name("GPU", g.index)] = g.limit
    return sizes


def check_fits(graph: Graph, placement: Placement, limits: Mapping[str, int | None]) -> None:
    """Refuse, before anything is allocated, a tensor larger than its device's memory."""
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
