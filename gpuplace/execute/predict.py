"""Predict each device's memory for a run without computing anything.

The run's own layout (same copies, same frees after the last consumer, same resident variables,
same 256-byte rounding) charges the same ledgers a run would, through the same replay of its
charges (`memory.ledger.Replay`) that `run` counts with, without any backend or kernel. So
`plan` predicts what `run` will hold, and `run` plans its layout once for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..devices.model import LogicalGpu
from ..devices.names import full_name
from ..graph import get_op
from ..graph.model import Graph
from ..memory.ledger import Ledger, OutOfMemory, Replay
from ..memory.pools import DeviceMemory, ledgers, summary
from ..placement.model import Placement
from .backends import NumpyBackend
from .schedule import Layout, PlacedDevices, Schedule, layout

CPU0 = full_name("CPU", 0)


class Prediction(NamedTuple):
    """Predicted memory per device, and the OOM the run would hit (None: it fits)."""

    memory: list[DeviceMemory]
    oom: OutOfMemory | None


class HostPeak(NamedTuple):
    """The most bytes a run holds at once in host memory, and the op whose step gets there."""

    nbytes: int
    op: str


def device_names(logical: Sequence[LogicalGpu]) -> list[str]:
    """A run's devices in order: CPU:0, then each logical GPU (the backends' order)."""
    return [CPU0, *(full_name("GPU", g.index) for g in logical)]


def placed_layout(graph: Graph, placement: Placement, logical: Sequence[LogicalGpu]) -> Layout:
    """The layout of a prepared graph over its run's devices: what `predict` counts and what
    the run executes (`pipeline` plans it once for both)."""
    return layout(graph, PlacedDevices(placement.decisions), device_names(logical), get_op)


def host_peak(schedule: Schedule) -> HostPeak:
    """The most a run of `schedule` holds at once in host memory: the tensors (and copies) of
    its numpy devices, CPU:0 and simulated GPUs, counted as the ledgers count them (rounded to
    256 B, charged before each step, freed after their last reader). No kernels run: the
    charges of the host devices, merged in run order and summed."""
    import numpy as np

    charges = schedule.layout.charges
    host = np.asarray([isinstance(b, NumpyBackend) for b in schedule.backends], dtype=bool)
    if not host.any() or not charges.steps:
        return HostPeak(0, "")
    on_host = host[charges.device]
    times = charges.time[on_host]
    order = np.argsort(times, kind="stable")
    held = np.cumsum(charges.delta[on_host][order])
    times = times[order]
    charged = times % 2 == 0
    after = held[charged]
    at = int(np.argmax(after)) if len(after) else 0
    if not len(after) or after[at] <= 0:
        return HostPeak(0, "")
    return HostPeak(int(after[at]), schedule.layout.op(int(times[charged][at]) // 2).name)


def charge(laid: Layout, books: Sequence[Ledger]) -> OutOfMemory | None:
    """Charge `books` (one per device of `laid`, in order) as a run would, running nothing:
    the OutOfMemory the run would raise (None: it fits). The ledgers are released after,
    keeping their peaks, as after a run."""
    replay = Replay(laid.charges, books)
    try:
        if replay.stop is not None:
            replay.raise_stop(laid.op(replay.stop).name)
        replay.settle(laid.steps)
    except OutOfMemory as exc:
        return exc
    finally:
        for book in books:
            book.release()
    return None


def cluster_layout(
    graph: Graph, placement: Placement, named: Mapping[str, LogicalGpu | None]
) -> Layout:
    """The layout of a graph placed across hosts, over every task's devices (`named`: full
    names in order, each GPU with its logical GPU, each CPU:0 with None)."""
    return layout(graph, PlacedDevices(placement.decisions), list(named), get_op)


def predict(
    graph: Graph,
    placement: Placement,
    logical: Sequence[LogicalGpu],
    laid: Layout | None = None,
    named: Mapping[str, LogicalGpu | None] | None = None,
    cpu_limit: int | None = None,
) -> Prediction:
    """Peaks without limits (what each device would need), then the first OOM with them.
    `laid`: the layout of this graph and placement (`placed_layout`), when already planned;
    `named`: across hosts, every task's devices (see `cluster_layout`) instead of `logical`;
    `cpu_limit`: what CPU:0 may hold (None: unlimited)."""
    if laid is None:
        laid = placed_layout(graph, placement, logical)
    names = device_names(logical) if named is None else list(named)
    by_name = None if named is None else {n: g for n, g in named.items() if g is not None}
    unlimited = ledgers(names, logical, by_name, cpu_limit)
    limits = {lg.device: lg.limit for lg in unlimited}
    for lg in unlimited:
        lg.limit = None
    charge(laid, unlimited)
    for lg in unlimited:
        lg.limit = limits[lg.device]
    memory = summary(unlimited, {})
    if all(m.limit is None or m.peak <= m.limit for m in memory):
        return Prediction(memory, None)
    return Prediction(memory, charge(laid, ledgers(names, logical, by_name, cpu_limit)))
