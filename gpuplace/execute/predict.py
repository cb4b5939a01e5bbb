"""Predict each device's memory for a run without computing anything.

The real executor walks the real schedule (same copies, same frees after the last consumer,
same resident variables, same 256-byte rounding) over null backends (`backends.NullBackend`)
and kernels that produce nothing, charging the same ledgers a run would. So `plan` predicts what `run` will hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..devices.model import LogicalGpu
from ..devices.names import full_name
from ..graph import get_op
from ..graph.model import Graph
from ..memory.ledger import Ledger, OutOfMemory
from ..memory.pools import DeviceMemory, ledgers, summary
from ..placement.model import Placement
from .backends import NullBackend, NumpyBackend
from .executor import Schedule, plan, run

CPU0 = full_name("CPU", 0)


@dataclass(frozen=True)
class _NullKernel:
    """An op that outputs the right number of Nones."""

    op_type: str
    host_value: bool

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [None] * get_op(self.op_type).num_outputs(attrs)


def _kernel(op_type: str) -> _NullKernel:
    return _NullKernel(op_type, get_op(op_type).host_value)


@dataclass(frozen=True)
class Prediction:
    """Predicted memory per device, and the OOM the run would hit (None: it fits)."""

    memory: list[DeviceMemory]
    oom: OutOfMemory | None


@dataclass(frozen=True)
class HostPeak:
    """The most bytes a run holds at once in host memory, and the op whose step gets there."""

    nbytes: int
    op: str


def host_peak(schedule: Schedule) -> HostPeak:
    """The most a run of `schedule` holds at once in host memory: the tensors (and copies) of
    its numpy devices, CPU:0 and simulated GPUs, counted as the ledgers count them (rounded to
    256 B, charged before each step, freed after their last reader). One pass, no kernels."""
    host = [isinstance(b, NumpyBackend) for b in schedule.backends]
    held = peak = 0
    at = ""
    for segment in schedule.segments:
        on_host = host[segment.device]
        for step, frees in zip(segment.steps, segment.frees, strict=True):
            if on_host:
                held += step[5]  # the bytes of its outputs and copies (see `Step`)
                if held > peak:
                    peak, at = held, step[0].name
            for _, device, size in frees:
                if host[device]:
                    held -= size
    return HostPeak(peak, at)


def _walk(graph: Graph, placement: Placement, books: Sequence[Ledger]) -> None:
    devices = {name: d.device for name, d in placement.decisions.items()}
    backends = {lg.device: NullBackend(lg.device) for lg in books}
    schedule = plan(graph, devices, backends, _kernel)
    by_name = {lg.device: lg for lg in books}
    run(schedule, [by_name[d] for d in schedule.devices])


def predict(graph: Graph, placement: Placement, logical: Sequence[LogicalGpu]) -> Prediction:
    """Peaks without limits (what each device would need), then the first OOM with them."""
    names = [CPU0, *(full_name("GPU", g.index) for g in logical)]
    unlimited = ledgers(names, logical)
    limits = {lg.device: lg.limit for lg in unlimited}
    for lg in unlimited:
        lg.limit = None
    _walk(graph, placement, unlimited)
    for lg in unlimited:
        lg.limit = limits[lg.device]
    memory = summary(unlimited, {})
    if all(m.limit is None or m.peak <= m.limit for m in memory):
        return Prediction(memory, None)
    try:
        _walk(graph, placement, ledgers(names, logical))
    except OutOfMemory as exc:
        return Prediction(memory, exc)
    return Prediction(memory, None)  # pragma: no cover - a limit overflowed only without limits
