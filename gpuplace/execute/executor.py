"""The executor: run a placed graph on its devices, recording every copy and each device's memory.

Two stages, as in dask's local scheduler (`dask/local.py`): `plan` walks the graph once and
precomputes a Schedule; `run` executes it in a tight loop; `execute` is the two together.

Schedule (static, built once; every value of the run has an integer slot):
    slots:    each op output on its op's device, and each copy of a tensor to another device. A copy
              is made once per (tensor, destination device) and shared by every consumer there, as
              TF's Send/Recv pairs are. A `print` op forwards its input slots (TF's Print forwards
              the buffer), so it allocates nothing.
    Step:     one op: kernel, input and output slots, the copies to make first, the bytes its outputs
              and copies take (all on its device), and `frees`: the slots whose last consumer it is.
    segments: runs of consecutive steps on one device; each runs under one `backend.device()`.
    keep:     slots never freed early: fetched tensors and outputs of resident ops (variables).
    fetch:    (fetch string, slot, device index) per fetched tensor.

Run state (`_Run`, one per call):
    values:   list indexed by slot: the device array, or None before it exists and once freed.
    ledgers:  one Ledger per device, in the schedule's device order: bytes in use and peak.
    copies, printed: CopyRecords and print lines, in execution order.

A failed run drops every value (and the traceback frames that hold them), releases every ledger,
and raises a GpuplaceError naming the op and the device.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import numpy as np

from ..errors import BadInput, GpuplaceError, RuntimeFailure
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, TensorRef
from .backends import Backend, NumpyBackend
from .cupy_backend import CupyBackend
from .ledger import Ledger, OutOfMemory, allocation_size, new_ledgers

Compute = Callable[[ModuleType, list[Any], Mapping[str, Any]], list[Any]]
KERNEL, HOST, PRINT = 0, 1, 2  # Step.kind
PRINT_OP = "print"


@dataclass(frozen=True)
class CopyRecord:
    """One cross-device transfer (TF's Send/Recv pair): who needed which tensor, where, how long."""

    op: str
    tensor: str
    src: str
    dst: str
    nbytes: int
    seconds: float


@dataclass
class RunResult:
    values: dict[str, np.ndarray]  # fetch string (str(TensorRef)) -> host array
    copies: list[CopyRecord]
    peak_bytes: dict[str, int]  # device full name -> peak bytes in use
    printed: list[str]  # lines of `print` ops, in execution order


class Kernel(Protocol):
    """What the op registry provides per op type.

    A `host_value` kernel (constant, random, variable init, load, placeholder) gets numpy as `xp`
    and returns host arrays; the executor creates them on the op's device, which is not a copy.
    """

    @property
    def host_value(self) -> bool: ...

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]: ...


class CopyStep(NamedTuple):
    src: int  # slot of the tensor on its own device
    dst: int  # slot of the copy on the consumer's device
    transfer: Callable[[Any], Any]
    src_sync: Callable[[], None]
    dst_sync: Callable[[], None]
    record: CopyRecord  # seconds filled in when it runs


class Step(NamedTuple):
    name: str
    kind: int
    compute: Compute
    xp: ModuleType
    attrs: Mapping[str, Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    alloc: int  # rounded bytes of outputs and copies, all on the step's device
    copies: tuple[CopyStep, ...]
    frees: list[tuple[int, int, int]]  # (slot, device index, rounded bytes), set by finish


class Segment(NamedTuple):
    device: int
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Schedule:
    devices: tuple[str, ...]
    backends: tuple[Backend, ...]
    segments: tuple[Segment, ...]
    slots: int
    keep: frozenset[int]
    fetch: tuple[tuple[str, int, int], ...]
    device_oom: tuple[type[BaseException], ...]  # cupy's OutOfMemoryError, when a GPU is real


def _text(xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
    """A print step's compute: numpy's text of each host input (its outputs forward its inputs)."""
    return [str(value) for value in inputs]


def _transfer(src: Backend, dst: Backend) -> Callable[[Any], Any]:
    """How a value moves between devices: GPU to GPU directly, anything else through the host."""
    if isinstance(src, CupyBackend) and isinstance(dst, CupyBackend):
        return dst.copy_from
    if isinstance(dst, NumpyBackend) and not isinstance(src, NumpyBackend):
        return src.get  # the host copy is already the destination's array
    return lambda value: dst.put(src.get(value))


class _Planner:
    """Builds a Schedule in one pass over the ops (state: see the module docstring)."""

    def __init__(
        self,
        placement: Mapping[str, str],
        backends: Mapping[str, Backend],
        kernels: Callable[[str], Kernel],
        resident: Callable[[str], bool],
    ) -> None:
        self.placement, self.kernels, self.resident = placement, kernels, resident
        self.names = tuple(backends)
        self.backends = tuple(backends.values())
        self.xps = tuple(backend.xp for backend in self.backends)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.types: dict[str, tuple[tuple[int, ...], Compute, bool]] = {}  # see _kernel
        self.home: dict[str, tuple[int, ...]] = {}  # op -> slots of its outputs, on its device
        self.copied: dict[tuple[str, int, int], int] = {}  # (op, output, device) -> copy slot
        self.slot_device: list[int] = []
        self.slot_nbytes: list[int] = []
        self.last_use: list[int] = []  # step that reads the slot last (or creates it)
        self.keep: set[int] = set()
        self.steps: list[Step] = []
        self.step_device: list[int] = []

    def add(self, op: Op) -> None:
        step, device = len(self.steps), self._device(op)
        inputs, copies = self._inputs(op, device, step) if op.inputs else ((), ())
        alloc = sum(allocation_size(self.slot_nbytes[c.dst]) for c in copies) if copies else 0
        outputs: tuple[int, ...] = ()
        compute: Compute
        if op.type == PRINT_OP:
            self.home[op.name] = inputs
            kind, compute = PRINT, _text
        else:
            kinds, compute, resident = self.types.get(op.type) or self._kernel(op.type)
            kind = kinds[device]
            for spec in op.outputs:
                nbytes = spec.nbytes
                outputs += (self._slot(device, nbytes, step),)
                alloc += allocation_size(nbytes)
            self.home[op.name] = outputs
            if resident:
                self.keep.update(outputs)
        xp, attrs = self.xps[device], op.attrs
        step_ = Step(op.name, kind, compute, xp, attrs, inputs, outputs, alloc, copies, [])
        self.steps.append(step_)
        self.step_device.append(device)

    def _kernel(self, op_type: str) -> tuple[tuple[int, ...], Compute, bool]:
        """Kind per device, compute and residency of an op type, asked of the registry once.

        A host-value kernel on a host-memory (numpy) device is a plain kernel: its result is
        already on the device, so creating it there costs nothing.
        """
        kernel = self.kernels(op_type)
        kinds = tuple(
            HOST if kernel.host_value and not isinstance(b, NumpyBackend) else KERNEL
            for b in self.backends
        )
        entry = self.types[op_type] = (kinds, kernel.compute, self.resident(op_type))
        return entry

    def _device(self, op: Op) -> int:
        name = self.placement.get(op.name)
        if name is None:
            raise BadInput(f"op '{op.name}' has no device: place the graph before running it")
        index = self.index.get(name)
        if index is None:
            known = ", ".join(self.names) or "none"
            raise BadInput(f"op '{op.name}' is placed on {name}, which has no backend ({known})")
        return index

    def _slot(self, device: int, nbytes: int, step: int) -> int:
        self.slot_device.append(device)
        self.slot_nbytes.append(nbytes)
        self.last_use.append(step)
        return len(self.last_use) - 1

    def _inputs(
        self, op: Op, device: int, step: int
    ) -> tuple[tuple[int, ...], tuple[CopyStep, ...]]:
        slots: list[int] = []
        copies: list[CopyStep] = []
        home, slot_device, last_use = self.home, self.slot_device, self.last_use
        for ref in op.inputs:
            try:
                slot = home[ref.op][ref.index]
            except (KeyError, IndexError):
                msg = f"op '{op.name}' reads '{ref}', which no earlier op produces"
                raise BadInput(msg) from None
            if slot_device[slot] != device:
                last_use[slot] = step
                copy = self.copied.get((ref.op, ref.index, device))
                if copy is None:
                    copies.append(self._copy(op.name, ref, slot, device, step))
                    copy = copies[-1].dst
                slot = copy
            last_use[slot] = step
            slots.append(slot)
        return tuple(slots), tuple(copies)

    def _copy(self, consumer: str, ref: TensorRef, src: int, device: int, step: int) -> CopyStep:
        nbytes, src_device = self.slot_nbytes[src], self.slot_device[src]
        dst = self.copied[(ref.op, ref.index, device)] = self._slot(device, nbytes, step)
        source, target = self.backends[src_device], self.backends[device]
        names = self.names
        record = CopyRecord(consumer, str(ref), names[src_device], names[device], nbytes, 0.0)
        transfer = _transfer(source, target)
        return CopyStep(src, dst, transfer, source.synchronize, target.synchronize, record)

    def finish(self, fetch: Sequence[TensorRef]) -> Schedule:
        fetched = []
        for ref in fetch:
            try:
                slot = self.home[ref.op][ref.index]
            except (KeyError, IndexError):
                raise BadInput(f"fetch '{ref}' names no output of the graph's ops") from None
            self.keep.add(slot)
            fetched.append((str(ref), slot, self.slot_device[slot]))
        steps, keep = self.steps, self.keep
        slots = zip(self.last_use, self.slot_device, self.slot_nbytes, strict=True)
        for slot, (step, device, nbytes) in enumerate(slots):
            if slot not in keep:
                steps[step].frees.append((slot, device, allocation_size(nbytes)))
        grouped = groupby(zip(self.step_device, steps, strict=True), key=itemgetter(0))
        segments = tuple(Segment(d, tuple(s for _, s in group)) for d, group in grouped)
        device_oom = {b.out_of_memory for b in self.backends if isinstance(b, CupyBackend)}
        return Schedule(
            self.names,
            self.backends,
            segments,
            len(self.last_use),
            frozenset(keep),
            tuple(fetched),
            tuple(device_oom),
        )


def is_variable(op_type: str) -> bool:
    """The default `resident` test: variables stay on their device for the whole run."""
    return op_type == "variable"


def plan(
    graph: Graph,
    devices: Mapping[str, str],
    backends: Mapping[str, Backend],
    kernels: Callable[[str], Kernel],
    resident: Callable[[str], bool] = is_variable,
) -> Schedule:
    """Precompute the schedule of a placed graph: slots, copies, and when each tensor is freed."""
    planner = _Planner(devices, backends, kernels, resident)
    with gc_paused():  # the schedule is acyclic; pausing the GC halves planning time
        for op in graph.ops:
            planner.add(op)
        return planner.finish(graph.fetch)


class _Run:
    """The state of one run over a schedule (see the module docstring)."""

    def __init__(self, schedule: Schedule, ledgers: Sequence[Ledger]) -> None:
        self.schedule = schedule
        self.ledgers = ledgers
        self.values: list[Any] = [None] * schedule.slots
        self.copies: list[CopyRecord] = []
        self.printed: list[str] = []

    def segment(self, segment: Segment) -> None:
        """Run consecutive steps on one device; any failure becomes a GpuplaceError for its op."""
        backend = self.schedule.backends[segment.device]
        values, ledgers, put = self.values, self.ledgers, backend.put
        allocate = ledgers[segment.device].allocate
        step: Step | None = None
        try:
            with backend.device():
                for step in segment.steps:
                    name, kind, compute, xp, attrs, inputs, outputs, alloc, copies, frees = step
                    allocate(alloc, name)
                    if copies:
                        self.copy_in(copies)
                    args = [values[i] for i in inputs]
                    if kind == KERNEL:
                        results = compute(xp, args, attrs)
                    elif kind == HOST:
                        results = [put(value) for value in compute(np, args, attrs)]
                    else:
                        results = self.print(step, args, backend)
                    if len(results) != len(outputs):
                        raise RuntimeFailure(
                            f"the kernel of op '{name}' returned {len(results)} values "
                            f"for {len(outputs)} outputs"
                        )
                    for slot, value in zip(outputs, results, strict=True):
                        values[slot] = value
                    for slot, device, nbytes in frees:
                        values[slot] = None
                        ledgers[device].free(nbytes)
        except GpuplaceError:
            raise
        except self.schedule.device_oom as exc:
            raise self.device_oom(step, segment.device, exc) from exc
        except Exception as exc:
            where = self.schedule.devices[segment.device]
            what = f"op '{step.name}' failed on {where}" if step else f"cannot use {where}"
            raise RuntimeFailure(f"{what}: {type(exc).__name__}: {exc}") from exc

    def copy_in(self, copies: tuple[CopyStep, ...]) -> None:
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

    def print(self, step: Step, args: list[Any], backend: Backend) -> list[Any]:
        """A print op: one line per input, `name: value` in numpy's text of the host value."""
        hosts = [backend.get(value) for value in args]
        self.printed.extend(f"{step.name}: {text}" for text in step.compute(np, hosts, step.attrs))
        return []

    def device_oom(self, step: Step | None, device: int, exc: BaseException) -> OutOfMemory:
        """cupy ran out of memory during `step`, which the ledger had already charged."""
        ledger = self.ledgers[device]
        requested = step.alloc if step else 0
        name = step.name if step else "<device setup>"
        before = ledger.in_use - requested
        return OutOfMemory(name, ledger.device, requested, before, ledger.limit, f" (cupy: {exc})")

    def fetch(self) -> dict[str, np.ndarray]:
        backends, values = self.schedule.backends, self.values
        return {key: backends[d].get(values[slot]) for key, slot, d in self.schedule.fetch}


def _drop_frames(exc: BaseException | None) -> None:
    """Clear the locals of every frame a failure passed through, so its arrays can be freed."""
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
) -> RunResult:
    """Run a placed graph: `devices` maps op -> device full name, `backends` device -> Backend.

    `limits` caps a device's bytes in use (TF's memory_limit); past it the run raises OutOfMemory.
    """
    schedule = plan(graph, devices, backends, kernels, resident)
    return run(schedule, new_ledgers(schedule.devices, limits or {}))
