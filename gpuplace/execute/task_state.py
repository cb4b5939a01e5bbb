"""What a TensorFlow task's process does for a run across hosts: its inventory, and per-run state.

These functions run inside a task's Dask worker (`execute/dask_session.py`, `dask_run.py` and
`dask_runtime.py` send them by reference, so gpuplace must be installed there in the same
version). No Dask here.

- `inventory()`: gpuplace's own `discover()` + `view()` in that process (its NVML, its
  `GPUPLACE_MACHINE` and `CUDA_VISIBLE_DEVICES`), its version, host and pid.
- `open_run` (TensorFlow's CreateWorkerSession): the memory policy's logical GPUs, one backend
  and one ledger per device, the reservations in the pools; held in `_RUNS` by (run, task).
- `run_chunk`: one (task, stage) chunk through gpuplace's executor on that state. Tensors from
  other chunks arrive as host arrays, one placeholder per (tensor, local device); exports leave
  as host arrays (one export: the array itself). A chunk that finds no state (a restarted
  worker) fails: it never runs on half a ledger.
- `close_run`: each device's memory (reserved, peak, limit), the copies and printed lines of
  every chunk; the pools are given back.

Errors raised here name task-qualified devices (`/job:worker/replica:0/task:1/device:GPU:0`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..devices import discover, view
from ..devices.cluster import TaskName
from ..devices.model import LogicalGpu, View
from ..devices.names import LOCAL
from ..errors import GpuplaceError, Message
from ..graph import get_op
from ..graph.model import Config, Graph, Op, TensorRef, TensorSpec
from ..memory.fit import check_host_memory
from ..memory.ledger import Ledger
from ..memory.policy import Policy, logical_gpus
from ..memory.pools import (
    DeviceMemory,
    check_reservations,
    ledgers,
    prepare_pools,
    release_after_failure,
    release_pools,
    summary,
)
from .backends import Backend, device_backends
from .device_check import CheckResult, RateSizes, check_all
from .executor import CopyRecord, bind, run
from .predict import device_names, host_peak
from .schedule import layout

MACHINE_ENV = "GPUPLACE_MACHINE"
NETWORK = "network"  # the kind of a copy between two tasks


@dataclass(frozen=True)
class Inventory:
    """One task's process as it sees itself."""

    version: str
    host: str
    pid: int
    view: View


def inventory() -> Inventory:
    """gpuplace's discovery inside this process (a Dask worker's `client.run` calls it)."""
    spec = os.environ.get(MACHINE_ENV) or None
    machine = discover(spec, source=MACHINE_ENV)
    seen = view(machine, os.environ)
    return Inventory(gpuplace_version(), socket.gethostname(), os.getpid(), seen)


def check_here(sizes: RateSizes) -> list[CheckResult]:
    """`devices --check` inside this process: its CPU:0 and every GPU it sees, rates measured
    with `sizes` (a Dask worker's `client.run` calls it; names are local, `/device:GPU:0`)."""
    return check_all(inventory().view, None, sizes)


def filled(nbytes: int) -> np.ndarray:
    """A host array of `nbytes` bytes (the network measurement's payload, made on a worker)."""
    return np.ones(max(1, nbytes), np.uint8)


def size_of(array: np.ndarray) -> int:
    """What the receiving worker does with the payload: nothing but look at it."""
    return int(array.nbytes)


def gpuplace_version() -> str:
    """This process's gpuplace version, as installed (checked against the client's at connect)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuplace")
    except PackageNotFoundError:  # run from a source tree (PYTHONPATH=.)
        return "unknown"


@dataclass(frozen=True)
class ChunkSpec:
    """What a worker needs to run one chunk: its ops (inputs as in the graph), each op's local
    device (`/job:localhost/replica:0/task:0/device:GPU:0`: the executor's own names), the
    imports in the order their arrays arrive, the exports, which ops are targets."""

    task: TaskName
    stage: int
    ops: tuple[Op, ...]
    devices: Mapping[str, str]
    imports: tuple[tuple[TensorRef, str, str], ...]  # (tensor, local device, full source device)
    exports: tuple[TensorRef, ...]
    targets: tuple[str, ...]
    config: Config
    source: str
    effects: bool = True

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its ops as plain tuples: pickling slotted dataclasses one by one costs
        about 100 us per op, more than running one."""
        fields = (self.task, self.stage, _packed(self.ops), dict(self.devices), self.imports,
                  tuple((r.op, r.index) for r in self.exports), self.targets, self.config,
                  self.source, self.effects)  # fmt: skip
        return (_spec, fields)


PackedOp = tuple[Any, ...]


def _packed(ops: Sequence[Op]) -> tuple[PackedOp, ...]:
    return tuple(
        (op.name, op.type, tuple((r.op, r.index) for r in op.inputs), op.device, op.attrs,
         tuple((o.shape, o.dtype) for o in op.outputs), op.colocate_with, op.line)
        for op in ops
    )  # fmt: skip


def _spec(
    task: TaskName, stage: int, ops: tuple[PackedOp, ...], devices: dict[str, str],
    imports: tuple[tuple[TensorRef, str, str], ...], exports: tuple[tuple[str, int], ...],
    targets: tuple[str, ...], config: Config, source: str, effects: bool,
) -> ChunkSpec:  # fmt: skip
    """A ChunkSpec from its pickled form (`ChunkSpec.__reduce__`)."""
    unpacked = tuple(
        Op(name, kind, tuple(TensorRef(o, i) for o, i in inputs), device, attrs,
           tuple(TensorSpec(shape, dtype) for shape, dtype in outputs), colocate, line)
        for name, kind, inputs, device, attrs, outputs, colocate, line in ops
    )  # fmt: skip
    refs = tuple(TensorRef(o, i) for o, i in exports)
    return ChunkSpec(
        task, stage, unpacked, devices, imports, refs, targets, config, source, effects
    )


@dataclass
class _TaskRun:
    task: TaskName
    view: View
    logical: tuple[LogicalGpu, ...]
    backends: dict[str, Backend]
    books: dict[str, Ledger]
    copies: list[CopyRecord] = field(default_factory=list)
    printed: list[tuple[int, str]] = field(default_factory=list)  # (stage, line)
    used: float = field(default_factory=time.monotonic)  # when a chunk last ran on it


_RUNS: dict[tuple[str, TaskName], _TaskRun] = {}
IDLE_EXPIRY = 600.0  # seconds a run's state may sit unused before the next open_run drops it


def expire_idle(now: float | None = None) -> list[tuple[str, TaskName]]:
    """Drop the state of runs no chunk has used for IDLE_EXPIRY seconds (their client died
    before closing them), giving their pools back; the (run, task) pairs dropped."""
    now = time.monotonic() if now is None else now
    stale = [key for key, state in _RUNS.items() if now - state.used > IDLE_EXPIRY]
    for key in stale:
        state = _RUNS.pop(key)
        release_after_failure(state.logical, state.backends)
    return stale


@dataclass(frozen=True)
class Closed:
    """What `close_run` hands back for one task (device names task-qualified)."""

    memory: list[DeviceMemory]
    copies: list[CopyRecord]
    printed: list[tuple[int, str]]


def qualify_text(text: str, task: TaskName) -> str:
    """`text` with this process's local device names (`/job:localhost/replica:0/task:0/...`)
    said as the task's (`/job:worker/replica:0/task:1/...`)."""
    return text.replace(LOCAL, str(task))


def qualify(error: GpuplaceError, task: TaskName) -> GpuplaceError:
    """The same error (same class, same fields) naming the task's devices."""

    def said(text: Any) -> Any:
        if isinstance(text, str):
            return qualify_text(text, task)
        if isinstance(text, Message):
            return Message(*(said(p) for p in text.parts))
        return text

    out = error.__class__.__new__(error.__class__)
    out.__dict__.update({k: said(v) for k, v in error.__dict__.items()})
    out.args = tuple(said(a) for a in error.args)
    return out


def open_run(run_id: str, task: TaskName, policy: Policy) -> None:
    """Create this task's state for run `run_id`: devices, ledgers, reservations. First the
    state of runs idle for IDLE_EXPIRY seconds is dropped: a client that died mid-run never
    closes its run, and a long-lived worker must not hold its pools forever (a live run's
    chunks keep its state fresh, and a run that comes back after that finds none and fails)."""
    expire_idle()
    seen = inventory().view
    logical = tuple(logical_gpus(seen.gpus, policy))
    backs = device_backends(seen.machine, logical)
    check_reservations(logical)
    names = device_names(logical)
    books = {lg.device: lg for lg in ledgers(names, logical)}
    try:
        prepare_pools(logical, backs)
    except GpuplaceError as exc:
        raise qualify(exc, task) from None
    _RUNS[run_id, task] = _TaskRun(task, seen, logical, backs, books)


def _state(run_id: str, task: TaskName) -> _TaskRun:
    found = _RUNS.get((run_id, task))
    if found is None:
        raise _lost(task)
    found.used = time.monotonic()
    return found


def _lost(task: TaskName) -> GpuplaceError:
    from ..errors import RuntimeFailure

    return RuntimeFailure(
        f"{task} has no state for this run: its worker restarted during the run and lost the "
        "tensors and memory it held (or the run sat unused for longer than "
        f"{IDLE_EXPIRY:g} s and was dropped); nothing was retried. Run again."
    )


def chunk_graph(
    spec: ChunkSpec, arrays: Sequence[np.ndarray]
) -> tuple[Graph, dict[str, str], dict[tuple[TensorRef, str], str]]:
    """The chunk as a graph of its own: each import a placeholder holding its array on the
    device that reads it, the chunk's ops reading those; the exports fetched. Also each op's
    device and, per import, the first op that reads it (the copy's op, as TF names a Recv's)."""
    recv: dict[tuple[TensorRef, str], str] = {}
    ops: list[Op] = []
    devices = dict(spec.devices)
    for (ref, device, _), array in zip(spec.imports, arrays, strict=True):
        name = f"_recv/{ref}/{device.rsplit('/device:', 1)[-1]}"
        recv[ref, device] = name
        devices[name] = device
        out = TensorSpec(tuple(array.shape), str(array.dtype))
        ops.append(Op(name, "placeholder", attrs={"value": array}, outputs=(out,)))
    readers: dict[tuple[TensorRef, str], str] = {}
    for op in spec.ops:
        device = devices[op.name]
        inputs, changed = list(op.inputs), False
        for i, ref in enumerate(inputs):
            placeholder = recv.get((ref, device))
            if placeholder is not None:
                inputs[i], changed = TensorRef(placeholder), True
                readers.setdefault((ref, device), op.name)
        ops.append(replace(op, inputs=tuple(inputs)) if changed else op)
    graph = Graph(tuple(ops), spec.exports, spec.config, spec.source, spec.targets)
    return graph, devices, readers


def run_chunk(
    run_id: str, spec: ChunkSpec, arrays: Sequence[np.ndarray], transfer: Sequence[float]
) -> Any:
    """Run one chunk on this task's state; returns its one export, a dict of its exports by
    tensor name, or None. `transfer[i]`: seconds Dask spent bringing import i here."""
    state = _state(run_id, spec.task)
    try:
        graph, devices, readers = chunk_graph(spec, arrays)
        laid = layout(graph, devices, device_names(state.logical), get_op, effects=spec.effects)
        schedule = bind(laid, state.backends)
        peak = host_peak(schedule)
        check_host_memory(peak.nbytes, peak.op, state.view.host_available)
        result = run(schedule, [state.books[d] for d in schedule.devices])
    except GpuplaceError as exc:
        release_after_failure(state.logical, state.backends)
        raise qualify(exc, spec.task) from None
    task = str(spec.task)
    for (ref, device, src), array, seconds in zip(spec.imports, arrays, transfer, strict=True):
        dst = qualify_text(device, spec.task)
        if src != dst:  # from another task, or another device of this one
            kind = "" if src.startswith(f"{task}/") else NETWORK
            record = CopyRecord(
                readers[ref, device], str(ref), src, dst, int(array.nbytes), seconds, kind
            )
            state.copies.append(record)
    for copy in result.copies:
        state.copies.append(
            copy._replace(
                src=qualify_text(copy.src, spec.task), dst=qualify_text(copy.dst, spec.task)
            )
        )
    state.printed.extend((spec.stage, line) for line in result.printed)
    values = result.values
    if len(spec.exports) == 1:
        return values[str(spec.exports[0])]
    return values or None


def close_run(run_id: str, task: TaskName) -> Closed | None:
    """Give back this task's pools and state for `run_id`; None when it has none (restarted)."""
    state = _RUNS.pop((run_id, task), None)
    if state is None:
        return None
    pools = release_pools(state.logical, state.backends)
    memory = [
        m._replace(device=qualify_text(m.device, task))
        for m in summary(list(state.books.values()), pools)
    ]
    return Closed(memory, state.copies, state.printed)
