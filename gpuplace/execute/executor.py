"""The executor: run a placed graph on its devices, recording every copy and each device's memory.

Two stages, as in dask's local scheduler (`dask/local.py`): `plan` (`schedule.py`) walks the graph
once and precomputes a Schedule; `run` executes it in a tight loop; `execute` is the two together.

Run state (`_Run`, one per call):
    values:   list indexed by slot: the device array, or None before it exists and once freed.
    ledgers:  one Ledger per device, in the schedule's device order: bytes in use and peak.
    copies, printed: CopyRecords and print lines, in execution order.

Float errors (log(0), overflow, 0/0) give inf and nan without numpy's RuntimeWarnings, as
TensorFlow's kernels do; `div` of integers is true division (float64), so it cannot fail.

A failed run drops every value (and the traceback frames that hold them), releases every ledger,
and raises a GpuplaceError naming the op and the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GpuplaceError, RuntimeFailure
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op
from ..memory.ledger import Ledger, OutOfMemory, new_ledgers
from .backends import Backend
from .cupy_backend import CupyBackend, cuda_failure
from .schedule import (
    HOST,
    KERNEL,
    Compute,
    Copies,
    CopyRecord,
    Kernel,
    Schedule,
    Segment,
    Step,
    is_variable,
    plan,
)

__all__ = ["CopyRecord", "Kernel", "RunResult", "Schedule", "execute", "plan", "run"]


@dataclass
class RunResult:
    values: dict[str, np.ndarray]  # fetch string (str(TensorRef)) -> host array
    copies: list[CopyRecord]
    peak_bytes: dict[str, int]  # device full name -> peak bytes in use
    printed: list[str]  # lines of `print` ops, in execution order


class _Run:
    """The state of one run over a schedule (see the module docstring)."""

    def __init__(self, schedule: Schedule, ledgers: Sequence[Ledger]) -> None:
        self.schedule = schedule
        self.ledgers = ledgers
        self.free = [ledger.free for ledger in ledgers]  # by device index, bound once
        self.values: list[Any] = [None] * schedule.slots
        self.copies: list[CopyRecord] = []
        self.printed: list[str] = []

    def segment(self, segment: Segment) -> None:
        """Run consecutive steps on one device; any failure becomes a GpuplaceError for its op."""
        backend = self.schedule.backends[segment.device]
        values, xp, put = self.values, backend.xp, backend.put
        allocate, free = self.ledgers[segment.device].allocate, self.free
        step: Step | None = None
        try:
            with backend.device():
                for step, frees in zip(segment.steps, segment.frees, strict=True):
                    op, (kind, compute), inputs, first, count, alloc, copies = step
                    allocate(alloc, op.name)
                    if copies:
                        self.copy_in(copies)
                    args = [values[i] for i in inputs]
                    if kind == KERNEL:
                        results = compute(xp, args, op.attrs)
                    elif kind == HOST:
                        results = [put(value) for value in compute(np, args, op.attrs)]
                    else:
                        results = self.print(op, compute, args, backend)
                    if len(results) != count:  # before the slice assignment, which would resize
                        raise RuntimeFailure(
                            f"the kernel of op '{op.name}' returned {len(results)} values "
                            f"for {count} outputs"
                        )
                    values[first : first + count] = results
                    for slot, device, nbytes in frees:
                        values[slot] = None
                        free[device](nbytes)
        except GpuplaceError:
            raise
        except self.schedule.device_oom as exc:
            raise self.device_oom(step, segment.device, exc) from exc
        except Exception as exc:
            where = self.schedule.devices[segment.device]
            what = f"op '{step[0].name}' failed on {where}" if step else f"cannot use {where}"
            backend = self.schedule.backends[segment.device]
            cupy = backend.xp if isinstance(backend, CupyBackend) else None
            raise cuda_failure(exc, what, cupy) from exc

    def copy_in(self, copies: Copies) -> None:
        """Bring a step's inputs from other devices, timing each transfer alone."""
        values = self.values
        for src, dst, transfer, src_sync, dst_sync, record in copies:
            src_sync()  # pending work on the source is not part of the copy
            start = time.perf_counter()
            values[dst] = transfer(values[src])
            dst_sync()
            seconds = time.perf_counter() - start
            self.copies.append(
                CopyRecord(record.op, record.tensor, record.src, record.dst, record.nbytes, seconds)
            )

    def print(self, op: Op, text: Compute, args: list[Any], backend: Backend) -> list[Any]:
        """A print op: per input, its `message` then numpy's text of the host value, as
        TensorFlow's tf.Print writes `message` then the data (`loss: [0.25]`); without a message,
        the op's name says whose value it is (`p: [1. 2.]`)."""
        hosts = [backend.get(value) for value in args]
        lead = op.attrs.get("message") or f"{op.name}: "
        self.printed.extend(f"{lead}{line}" for line in text(np, hosts, op.attrs))
        return []

    def device_oom(self, step: Step | None, device: int, exc: BaseException) -> OutOfMemory:
        """cupy ran out of memory during `step`, which the ledger had already charged."""
        ledger = self.ledgers[device]
        name, requested = "<device setup>", 0
        if step is not None:
            op, _, _, _, _, requested, _ = step
            name = op.name
        before = ledger.in_use - requested
        return OutOfMemory(name, ledger.device, requested, before, ledger.limit, f" (cupy: {exc})")

    def fetch(self) -> dict[str, np.ndarray]:
        backends, values = self.schedule.backends, self.values
        return {key: backends[d].get(values[slot]) for key, slot, d in self.schedule.fetch}


def _drop_frames(exc: BaseException | None) -> None:
    """Clear the locals of every frame a failure passed through, so its arrays can be freed."""
    import traceback  # only on a failure: it costs every command's start-up ~5 ms

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def run(schedule: Schedule, ledgers: Sequence[Ledger]) -> RunResult:
    """Execute `schedule`, charging `ledgers` (one per schedule device, in the same order).

    Every ledger is released at the end, failed or not; each keeps its peak.
    """
    state = _Run(schedule, ledgers)
    try:
        # values are freed by reference counting as their last reader runs; float errors give
        # inf and nan silently, as in TensorFlow (numpy would warn, naming our source lines)
        with gc_paused(), np.errstate(all="ignore"):
            for segment in schedule.segments:
                state.segment(segment)
        values = state.fetch()
    except BaseException as exc:
        state.values.clear()
        _drop_frames(exc)
        raise
    finally:
        for ledger in ledgers:
            ledger.release()
    peaks = {ledger.device: ledger.peak for ledger in ledgers}
    return RunResult(values, state.copies, peaks, state.printed)


def execute(
    graph: Graph,
    devices: Mapping[str, str],
    backends: Mapping[str, Backend],
    kernels: Callable[[str], Kernel],
    *,
    limits: Mapping[str, int | None] | None = None,
    resident: Callable[[str], bool] = is_variable,
    effects: bool = True,
) -> RunResult:
    """Run a placed graph: `devices` maps op -> device full name, `backends` device -> Backend.

    `limits` caps a device's bytes in use (TF's memory_limit); past it the run raises OutOfMemory.
    `effects=False`: no side effects (no `save` runs, `print` ops print nothing), for a reference
    run that recomputes values another run already wrote and printed.
    """
    schedule = plan(graph, devices, backends, kernels, resident, effects=effects)
    return run(schedule, new_ledgers(schedule.devices, limits or {}))
