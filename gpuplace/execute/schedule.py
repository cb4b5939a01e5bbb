"""The executor's plan: one walk over a placed graph that precomputes the Schedule `run` executes.

As in dask's local scheduler (`dask/local.py`), planning is separate from running, so the run
loop does no graph work. Schedule (static, built once; every value of the run has an int slot):
    slots:    each op output on its op's device, and each copy of a tensor to another device. A copy
              is made once per (tensor, destination device) and shared by every consumer there, as
              TF's Send/Recv pairs are. A `print` op forwards its input slots (TF's Print forwards
              the buffer), so it allocates nothing. An op's outputs take consecutive slots.
    steps:    one plain tuple per op (see `Step`): kernel, input slots, first output slot and count,
              the bytes its outputs and copies take (all on its device), and the copies to make first.
    frees:    per step, (slot, device index, rounded bytes) of each slot whose last consumer it is.
    segments: runs of consecutive steps on one device; each runs under one `backend.device()`.
    keep:     slots never freed early: fetched tensors and outputs of resident ops (variables).
    fetch:    (fetch string, slot, device index) per fetched tensor.

Planning a small op costs about as much as running it, so the layout is flat: steps and frees are
plain tuples (a NamedTuple's constructor is Python code), each op type's (kind, compute) is one
shared tuple per device, and a step holds its Op rather than copies of its name and attrs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, TensorRef, TensorSpec
from ..memory.ledger import allocation_size
from .backends import Backend, NumpyBackend
from .cupy_backend import CupyBackend

Compute = Callable[[ModuleType, list[Any], Mapping[str, Any]], list[Any]]
KERNEL, HOST, PRINT = 0, 1, 2  # a step's kind
PRINT_OP = "print"
SAVE_OP = "save"  # writes a file: skipped by a run without side effects (`effects=False`)


@dataclass(frozen=True)
class CopyRecord:
    """One cross-device transfer (TF's Send/Recv pair): who needed which tensor, where, how long."""

    op: str
    tensor: str
    src: str
    dst: str
    nbytes: int
    seconds: float


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


Copies = tuple[CopyStep, ...]
KernelEntry = tuple[int, Compute]  # (kind, compute) of an op type on one device: shared
Step = tuple[Op, KernelEntry, tuple[int, ...], int, int, int, Copies]
"""(op, (kind, compute), inputs, first, count, alloc, copies): `run` unpacks it in one go.

The outputs are the slots first .. first + count - 1; alloc is the rounded bytes of the outputs and
the copies, all on the step's device.
"""
Free = tuple[int, int, int]  # (slot, device index, rounded bytes)
SlotInfo = tuple[int, int, int]  # (device index, nbytes, rounded bytes): shared by equal slots


class Segment(NamedTuple):
    device: int
    steps: Sequence[Step]
    frees: Sequence[tuple[Free, ...]]  # frees[i]: what steps[i] frees once it has run


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


def _forward(xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
    """A silent print step (a run without side effects): its outputs forward its inputs."""
    return []


PRINT_ENTRY: KernelEntry = (PRINT, _text)
SILENT_PRINT_ENTRY: KernelEntry = (KERNEL, _forward)


def _transfer(src: Backend, dst: Backend) -> Callable[[Any], Any]:
    """How a value moves between devices: GPU to GPU directly, anything else through the host."""
    if isinstance(src, CupyBackend) and isinstance(dst, CupyBackend):
        return dst.copy_from
    if isinstance(dst, NumpyBackend) and not isinstance(src, NumpyBackend):
        return src.get  # the host copy is already the destination's array
    return lambda value: dst.put(src.get(value))


class _Planner:
    """Builds a Schedule in one pass over the ops (state: see the module docstring).

    Per op: one step tuple, an inputs tuple, a `home` entry, and per output slot two list entries
    (its shared SlotInfo and its last use); `finish` groups the slots by last use into frees.
    """

    def __init__(
        self,
        placement: Mapping[str, str],
        backends: Mapping[str, Backend],
        kernels: Callable[[str], Kernel],
        resident: Callable[[str], bool],
        effects: bool = True,
    ) -> None:
        self.placement, self.kernels, self.resident = placement, kernels, resident
        self.print_entry = PRINT_ENTRY if effects else SILENT_PRINT_ENTRY
        self.names = tuple(backends)
        self.backends = tuple(backends.values())
        self.index = {name: i for i, name in enumerate(self.names)}
        self.types: dict[str, tuple[tuple[KernelEntry, ...], bool]] = {}  # see _kernel
        self.infos: list[dict[tuple[tuple[int, ...], str], SlotInfo]] = [{} for _ in self.names]
        self.home: dict[str, Sequence[int]] = {}  # op -> slots of its outputs, on its device
        self.copied: dict[tuple[str, int, int], int] = {}  # (op, output, device) -> copy slot
        self.slot_info: list[SlotInfo] = []
        self.last_use: list[int] = []  # step that reads the slot last (or creates it)
        self.keep: set[int] = set()
        self.steps: list[Step] = []
        self.starts: list[tuple[int, int]] = []  # (first step, device) of each segment

    def add_all(self, ops: Sequence[Op]) -> None:
        """Plan the ops in order: each one's device, input slots (copied to its device when they
        live elsewhere), output slots, and the bytes its step allocates.

        Planning costs about as much per op as running small ops does, so this is one loop with
        what it uses held in locals; copies, print ops and errors go to helpers.
        """
        home, types, infos, keep = self.home, self.types, self.infos, self.keep
        slot_info, last_use, steps = self.slot_info, self.last_use, self.steps
        print_entry = self.print_entry
        device = -1
        for step, (op, placed) in enumerate(zip(ops, self._devices(ops), strict=True)):
            if placed != device:
                device = self._segment(op, placed, step)  # raises for None
            slots: list[int] = []  # a list, not a growing tuple: add_n may read 100,000
            made: list[CopyStep] = []
            for ref in op.inputs:
                try:
                    slot = home[ref.op][ref.index]
                except (KeyError, IndexError):
                    raise BadInput(
                        f"op '{op.name}' reads '{ref}', which no earlier op produces"
                    ) from None
                if slot_info[slot][0] != device:
                    last_use[slot] = step
                    slot = self._copy_in(op.name, ref, slot, device, step, made)
                last_use[slot] = step
                slots.append(slot)
            inputs = tuple(slots)
            copies: Copies = tuple(made)
            alloc = sum(slot_info[c.dst][2] for c in copies) if copies else 0
            first = len(slot_info)
            if op.type == PRINT_OP:  # forwards its inputs' buffers, as TF's Print does
                home[op.name] = inputs
                steps.append((op, print_entry, inputs, first, 0, alloc, copies))
                continue
            kernels, resident = types.get(op.type) or self._kernel(op.type)
            sizes = infos[device]
            for spec in op.outputs:
                info = sizes.get((spec.shape, spec.dtype)) or self._info(spec, device)
                slot_info.append(info)
                last_use.append(step)
                alloc += info[2]
            count = len(slot_info) - first  # most ops have one output: build its tuple inline
            home[op.name] = outputs = (first,) if count == 1 else tuple(range(first, first + count))
            if resident:
                keep.update(outputs)
            steps.append((op, kernels[device], inputs, first, count, alloc, copies))

    def _devices(self, ops: Sequence[Op]) -> Iterable[int | None]:
        """Each op's device index (None: none, or one without a backend).

        A placement made for this graph lists its ops in graph order: read in step, its entries
        cost a tenth of looking each op up in it (a large dict is slow to probe at random).
        """
        names = [op.name for op in ops]
        placement, index = self.placement, self.index
        if list(placement) == names:
            return map(index.get, placement.values())
        return (index.get(placement.get(name, "")) for name in names)

    def _segment(self, op: Op, device: int | None, step: int) -> int:
        """`op` runs on another device than the step before it: it starts a new segment."""
        if device is None:
            device = self._device(op)  # raises, saying what is missing
        self.starts.append((step, device))
        return device

    def _kernel(self, op_type: str) -> tuple[tuple[KernelEntry, ...], bool]:
        """(kind, compute) per device and residency of an op type, asked of the registry once.

        A host-value kernel on a host-memory (numpy) device is a plain kernel: its result is
        already on the device, so creating it there costs nothing.
        """
        kernel = self.kernels(op_type)
        kinds = (
            HOST if kernel.host_value and not isinstance(b, NumpyBackend) else KERNEL
            for b in self.backends
        )
        entry = self.types[op_type] = (
            tuple((kind, kernel.compute) for kind in kinds),
            self.resident(op_type),
        )
        return entry

    def _info(self, spec: TensorSpec, device: int) -> SlotInfo:
        """A slot's device and sizes, worked out once per (shape, dtype, device)."""
        nbytes = spec.nbytes
        info = (device, nbytes, allocation_size(nbytes))
        self.infos[device][spec.shape, spec.dtype] = info
        return info

    def _device(self, op: Op) -> int:
        name = self.placement.get(op.name)
        index = self.index.get(name) if name is not None else None
        if index is None:
            if name is None:
                raise BadInput(f"op '{op.name}' has no device: place the graph before running it")
            known = ", ".join(self.names) or "none"
            raise BadInput(f"op '{op.name}' is placed on {name}, which has no backend ({known})")
        return index

    def _copy_in(
        self, consumer: str, ref: TensorRef, src: int, device: int, step: int, made: list[CopyStep]
    ) -> int:
        """The slot of `ref`'s copy on `device`; a new copy joins the step's copies (`made`)."""
        copy = self.copied.get((ref.op, ref.index, device))
        if copy is not None:
            return copy
        new = self._copy(consumer, ref, src, device, step)
        made.append(new)
        return new.dst

    def _copy(self, consumer: str, ref: TensorRef, src: int, device: int, step: int) -> CopyStep:
        src_device, nbytes, size = self.slot_info[src]
        dst = self.copied[(ref.op, ref.index, device)] = len(self.slot_info)
        self.slot_info.append((device, nbytes, size))
        self.last_use.append(step)
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
            fetched.append((str(ref), slot, self.slot_info[slot][0]))
        device_oom = {b.out_of_memory for b in self.backends if isinstance(b, CupyBackend)}
        return Schedule(
            self.names,
            self.backends,
            self._segments(self._frees()),
            len(self.last_use),
            frozenset(self.keep),
            tuple(fetched),
            tuple(device_oom),
        )

    def _frees(self) -> list[tuple[Free, ...]]:
        """Each step's frees: the slots it reads last (or makes and nobody reads), none kept."""
        n, last_use = len(self.steps), self.last_use
        for slot in self.keep:
            last_use[slot] = n  # the step after the last: never freed
        frees: list[list[Free]] = [[] for _ in range(n + 1)]  # lists: one step may free 100,000
        slots = zip(last_use, self.slot_info, strict=True)
        for slot, (step, (device, _, size)) in enumerate(slots):
            frees[step].append((slot, device, size))
        return [tuple(f) for f in frees]

    def _segments(self, frees: list[tuple[Free, ...]]) -> tuple[Segment, ...]:
        """Runs of consecutive steps on one device, each with its steps' frees."""
        steps, starts = self.steps, self.starts
        ends = [step for step, _ in starts[1:]] + [len(steps)]
        return tuple(
            Segment(device, steps[a:b], frees[a:b])
            for (a, device), b in zip(starts, ends, strict=True)
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
    *,
    effects: bool = True,
) -> Schedule:
    """Precompute the schedule of a placed graph: slots, copies, and when each tensor is freed.

    `effects=False` plans a run without side effects (--verify's reference run): `save` ops are
    left out and `print` ops forward their inputs without making text."""
    planner = _Planner(devices, backends, kernels, resident, effects)
    ops = graph.ops if effects else [op for op in graph.ops if op.type != SAVE_OP]
    with gc_paused():  # the schedule is acyclic; pausing the GC halves planning time
        planner.add_all(ops)
        return planner.finish(graph.fetch)
