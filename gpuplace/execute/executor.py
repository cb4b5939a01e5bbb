"""The executor: run a placed graph on its devices, recording every copy and each device's memory.

Two stages, as in dask's local scheduler (`dask/local.py`): `plan` (`schedule.py`) walks the graph
once and precomputes a Schedule; `run` executes it in a tight loop; `execute` is the two together.

Run state (`_Run`, one per call):
    values:   list indexed by slot: the device array, or None before it exists and once freed.
    replay:   the ledgers (one per device, in the schedule's device order: bytes in use and peak),
              counted for the whole run before it starts (`memory.ledger.Replay`) and settled at
              the step where it ends, finished or failed, so the loop itself charges nothing.
    copies, printed: CopyRecords and print lines, in execution order.

Float errors (log(0), overflow, 0/0) give inf and nan without numpy's RuntimeWarnings, as
TensorFlow's kernels do; `div` of integers is true division (float64), so it cannot fail.

A failed run drops every value (and the traceback frames that hold them), releases every ledger,
and raises a GpuplaceError naming the op and the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import GpuplaceError, RuntimeFailure
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op
from ..memory.ledger import Ledger, OutOfMemory, Replay, new_ledgers
from .backends import Backend, NumpyBackend
from .cupy_backend import CupyBackend, cuda_failure
from .schedule import (
    BINARY,
    HOST,
    KERNEL,
    UNARY,
    Compute,
    Copies,
    CopyRecord,
    Kernel,
    KernelEntry,
    Layout,
    Schedule,
    Segment,
    Step,
    bind,
    is_variable,
    layout,
    plan,
    step_inputs,
    transfer,
)

__all__ = [
    "CopyRecord", "Kernel", "Layout", "RunResult", "Schedule", "bind", "execute", "layout", "plan",
    "run",
]  # fmt: skip


class RunResult(NamedTuple):
    """What a run hands back: the fetched values, its copies, each device's peak and the
    `print` ops' lines."""

    values: dict[str, np.ndarray]  # fetch string (str(TensorRef)) -> host array
    copies: list[CopyRecord]
    peak_bytes: dict[str, int]  # device full name -> peak bytes in use
    printed: list[str]  # lines of `print` ops, in execution order


class _Run:
    """The state of one run over a schedule (see the module docstring)."""

    def __init__(self, schedule: Schedule, replay: Replay) -> None:
        self.schedule = schedule
        self.replay = replay
        self.values: list[Any] = [None] * schedule.slots
        self.copies: list[CopyRecord] = []
        self.printed: list[str] = []
        self.transfers: dict[tuple[int, int], tuple[Callable[[Any], Any], Any, Any]] = {}

    def segment(self, segment: Segment, steps: Sequence[Step]) -> None:
        """Run `steps` (of `segment`) on its device (`_run_steps`); a failure becomes a
        GpuplaceError for its op."""
        device = segment.device
        backend = self.schedule.backends[device]
        table, values = self.schedule.tables[device], self.values
        failed: list[Step] = []  # the step that raised, if one did
        step: Step | None = None
        ran = False  # every step ran (a failure then comes from leaving the device)
        try:
            if type(backend) is NumpyBackend:  # its device() is a nullcontext: nothing to enter
                _run_steps(self, steps, table, values, backend, failed)
                ran = True
            else:
                with backend.device():
                    _run_steps(self, steps, table, values, backend, failed)
                    ran = True
        except BaseException as exc:
            if failed:
                step = failed[0]
            elif ran and steps:
                step = steps[-1]  # as the loop left it: a failure leaving the device names it
            at, inside = segment.start, False  # failed entering the device
            if ran:
                at += len(steps)  # or leaving it
            elif step is not None:
                at, inside = at + _position(steps, step), True  # in a step, once charged
            self.replay.settle(at, charged=inside)
            self.fail(exc, step, at, device)

    def call(self, kind: int, compute: Compute, step: Step, backend: Backend) -> None:
        """A step that is not one direct call: a kernel's list of outputs, a host value put on
        its device, or a print."""
        first, count, op = step[3], step[4], step[7]
        values = self.values
        args = [values[i] for i in step_inputs(step)]
        if kind == KERNEL:
            results = compute(backend.xp, args, op.attrs)
        elif kind == HOST:
            results = [backend.put(value) for value in compute(np, args, op.attrs)]
        else:
            results = self.print(op, compute, args, backend)
        if len(results) != count:  # before the slice assignment, which would resize
            raise _miscounted(op, results, count)
        self.values[first : first + count] = results

    def fail(self, exc: BaseException, step: Step | None, at: int, device: int) -> None:
        """Raise what a failure in `step`, the run's step `at` (None: entering the device), means
        to the caller; the ledgers are already settled at that step."""
        if isinstance(exc, GpuplaceError) or not isinstance(exc, Exception):
            raise exc  # already in gpuplace's words, or not a failure (Ctrl-C)
        if isinstance(exc, self.schedule.device_oom):
            raise self.device_oom(step, at, device, exc) from exc
        where = self.schedule.devices[device]
        what = f"op '{step[7].name}' failed on {where}" if step else f"cannot use {where}"
        backend = self.schedule.backends[device]
        cupy = backend.xp if isinstance(backend, CupyBackend) else None
        raise cuda_failure(exc, what, cupy) from exc

    def copy_in(self, copies: Copies) -> None:
        """Bring a step's inputs from other devices, timing each transfer alone."""
        values = self.values
        for src, dst, src_device, dst_device, (op, tensor, source, target, nbytes) in copies:
            move, src_sync, dst_sync = self.transfer(src_device, dst_device)
            src_sync()  # pending work on the source is not part of the copy
            start = time.perf_counter()
            values[dst] = move(values[src])
            dst_sync()
            seconds = time.perf_counter() - start
            self.copies.append(CopyRecord(op, tensor, source, target, nbytes, seconds))

    def transfer(self, src: int, dst: int) -> tuple[Callable[[Any], Any], Any, Any]:
        """How values move from device `src` to `dst`, and how to wait for each: made once."""
        found = self.transfers.get((src, dst))
        if found is None:
            source, target = self.schedule.backends[src], self.schedule.backends[dst]
            found = (transfer(source, target), source.synchronize, target.synchronize)
            self.transfers[src, dst] = found
        return found

    def print(self, op: Op, text: Compute, args: list[Any], backend: Backend) -> list[Any]:
        """A print op: per input, its `message` then numpy's text of the host value, as
        TensorFlow's tf.Print writes `message` then the data (`loss: [0.25]`); without a message,
        the op's name says whose value it is (`p: [1. 2.]`)."""
        hosts = [backend.get(value) for value in args]
        lead = op.attrs.get("message") or f"{op.name}: "
        self.printed.extend(f"{lead}{line}" for line in text(np, hosts, op.attrs))
        return []

    def device_oom(
        self, step: Step | None, at: int, device: int, exc: BaseException
    ) -> OutOfMemory:
        """cupy ran out of memory during `step` (the run's step `at`), which the ledger had
        already charged."""
        ledger = self.replay.ledgers[device]
        name, requested = "<device setup>", 0
        if step is not None:
            name, requested = step[7].name, int(self.schedule.layout.charges.step_bytes[at])
        before = ledger.in_use - requested
        return OutOfMemory(name, ledger.device, requested, before, ledger.limit, f" (cupy: {exc})")

    def fetch(self) -> dict[str, np.ndarray]:
        backends, values = self.schedule.backends, self.values
        return {key: backends[d].get(values[slot]) for key, slot, d in self.schedule.fetch}


def _run_steps(state: _Run, steps: Sequence[Step], table: tuple[KernelEntry, ...],
               values: list[Any], backend: Backend, failed: list[Step]) -> None:  # fmt: skip
    """`_Run.segment`'s loop: the whole per-op cost of a run (one list unpack, one table lookup
    and, for an elementwise op, the library call itself). The step that raises goes into
    `failed`. A function of the module, not a method, so that the compiled core types its
    locals (executor.pxd)."""
    xp = backend.xp
    step: Step = []
    try:
        for step in steps:
            kernel, x, y, first, count, frees, copies, op = step
            if copies:
                state.copy_in(copies)
            kind, compute = table[kernel]
            if kind == BINARY:
                values[first] = compute(values[x], values[y])
            elif kind == UNARY:
                values[first] = compute(values[x])
            elif kind == KERNEL and count == 1 and type(x) is tuple:  # most others
                out = compute(xp, [values[i] for i in x], op.attrs)
                if len(out) != 1:
                    raise _miscounted(op, out, 1)
                values[first] = out[0]
            else:
                state.call(kind, compute, step, backend)
            for slot in frees:
                values[slot] = None
    except BaseException:
        failed.append(step)
        raise


def _miscounted(op: Op, results: Sequence[Any], count: int) -> RuntimeFailure:
    return RuntimeFailure(
        f"the kernel of op '{op.name}' returned {len(results)} values for {count} outputs"
    )


def _position(steps: Sequence[Step], step: Step) -> int:
    """Where `step` is in `steps` (by identity): only a failure asks."""
    return next(i for i, s in enumerate(steps) if s is step)


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

    The ledgers are counted for the whole run first (`memory.ledger.Replay`): a step that would
    pass a limit raises OutOfMemory before it runs, after the steps before it ran, as charging
    step by step would. Every ledger is released at the end, failed or not; each keeps its peak.
    """
    replay = Replay(schedule.layout.charges, ledgers)
    state = _Run(schedule, replay)
    stop = replay.stop
    try:
        # values are freed by reference counting as their last reader runs; float errors give
        # inf and nan silently, as in TensorFlow (numpy would warn, naming our source lines)
        with gc_paused(), np.errstate(all="ignore"):
            for segment in schedule.segments:
                steps = segment.steps
                if stop is not None and segment.start + len(steps) > stop:
                    state.segment(segment, steps[: stop - segment.start])
                    replay.raise_stop(steps[stop - segment.start][7].name)
                state.segment(segment, steps)
        replay.settle(schedule.layout.steps)
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
