"""The executor's plan: one walk over a placed graph that precomputes the Schedule `run` executes.

As in dask's local scheduler (`dask/local.py`), planning is separate from running, so the run
loop does no graph work. Schedule (static, built once; every value of the run has an int slot):
    slots:    each op output on its op's device, and each copy of a tensor to another device. A copy
              is made once per (tensor, destination device) and shared by every consumer there, as
              TF's Send/Recv pairs are. A `print` op forwards its input slots (TF's Print forwards
              the buffer), so it allocates nothing.
    Step:     one op: kernel, input and output slots, the copies to make first, the bytes its outputs
              and copies take (all on its device), and `frees`: the slots whose last consumer it is.
    segments: runs of consecutive steps on one device; each runs under one `backend.device()`.
    keep:     slots never freed early: fetched tensors and outputs of resident ops (variables).
    fetch:    (fetch string, slot, device index) per fetched tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, TensorRef
from .backends import Backend, NumpyBackend
from .cupy_backend import CupyBackend
from .ledger import allocation_size

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


_new_tuple = tuple.__new__  # `_new_tuple(Step, fields)`: Step(*fields), without its Python __new__


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
    """Builds a Schedule in one pass over the ops (state: see the module docstring).

    Per op: a few list appends and one Step, made from a plain tuple of its fields with
    `tuple.__new__` (Step's generated constructor is Python code, twice as slow); `finish`
    fills in each step's frees.
    """

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
        self.slot_size: list[int] = []  # nbytes as the allocator rounds them
        self.last_use: list[int] = []  # step that reads the slot last (or creates it)
        self.keep: set[int] = set()
        self.steps: list[Step] = []
        self.step_device: list[int] = []

    def add_all(self, ops: Sequence[Op]) -> None:
        """Plan the ops in order: each one's device, input slots (copied to its device when they
        live elsewhere), output slots, and the bytes its step allocates.

        Planning costs about as much per op as running small ops does, so this is one loop with
        what it uses held in locals; copies, print ops and errors go to helpers.
        """
        placement, index, home, types, xps = (
            self.placement, self.index, self.home, self.types, self.xps
        )  # fmt: skip
        slot_device, slot_size, last_use = self.slot_device, self.slot_size, self.last_use
        steps, step_device = self.steps, self.step_device
        for op in ops:
            step, device = len(steps), index.get(placement.get(op.name, ""))  # "": no device
            if device is None:
                device = self._device(op)  # raises, saying what is missing
            slots: list[int] = []
            copies: tuple[CopyStep, ...] = ()
            for ref in op.inputs:
                try:
                    slot = home[ref.op][ref.index]
                except (KeyError, IndexError):
                    raise BadInput(
                        f"op '{op.name}' reads '{ref}', which no earlier op produces"
                    ) from None
                if slot_device[slot] != device:
                    last_use[slot] = step
                    slot, copies = self._copy_in(op.name, ref, slot, device, step, copies)
                last_use[slot] = step
                slots.append(slot)
            inputs = tuple(slots)
            outputs: tuple[int, ...] = ()
            alloc = sum(slot_size[c.dst] for c in copies) if copies else 0
            compute: Compute
            if op.type == PRINT_OP:  # forwards its inputs' buffers, as TF's Print does
                kind, compute, home[op.name] = PRINT, _text, inputs
            else:
                kinds, compute, resident = types.get(op.type) or self._kernel(op.type)
                kind = kinds[device]
                for spec in op.outputs:
                    outputs += (self._slot(device, spec.nbytes, step),)
                    alloc += slot_size[-1]
                home[op.name] = outputs
                if resident:
                    self.keep.update(outputs)
            fields: tuple[Any, ...] = (op.name, kind, compute, xps[device], op.attrs, inputs,
                                       outputs, alloc, copies, [])  # fmt: skip
            steps.append(_new_tuple(Step, fields))
            step_device.append(device)

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
        index = self.index.get(name) if name is not None else None
        if index is None:
            if name is None:
                raise BadInput(f"op '{op.name}' has no device: place the graph before running it")
            known = ", ".join(self.names) or "none"
            raise BadInput(f"op '{op.name}' is placed on {name}, which has no backend ({known})")
        return index

    def _slot(self, device: int, nbytes: int, step: int) -> int:
        self.slot_device.append(device)
        self.slot_nbytes.append(nbytes)
        self.slot_size.append(allocation_size(nbytes))
        self.last_use.append(step)
        return len(self.last_use) - 1

    def _copy_in(
        self, consumer: str, ref: TensorRef, src: int, device: int, step: int,
        copies: tuple[CopyStep, ...],
    ) -> tuple[int, tuple[CopyStep, ...]]:  # fmt: skip
        """The slot of `ref`'s copy on `device`, and the step's copies with it if it is new."""
        copy = self.copied.get((ref.op, ref.index, device))
        if copy is not None:
            return copy, copies
        made = self._copy(consumer, ref, src, device, step)
        return made.dst, (*copies, made)

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
        slots = zip(self.last_use, self.slot_device, self.slot_size, strict=True)
        for slot, (step, device, size) in enumerate(slots):
            if slot not in keep:
                steps[step].frees.append((slot, device, size))
        device_oom = {b.out_of_memory for b in self.backends if isinstance(b, CupyBackend)}
        return Schedule(
            self.names,
            self.backends,
            _segments(self.step_device, steps),
            len(self.last_use),
            frozenset(keep),
            tuple(fetched),
            tuple(device_oom),
        )


def _segments(step_device: list[int], steps: list[Step]) -> tuple[Segment, ...]:
    """Runs of consecutive steps on one device."""
    n = len(steps)
    starts = [i for i in range(n) if i == 0 or step_device[i] != step_device[i - 1]]
    ends = [*starts[1:], n]  # one more than starts when there are no steps
    return tuple(
        Segment(step_device[a], tuple(steps[a:b])) for a, b in zip(starts, ends, strict=False)
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
        planner.add_all(graph.ops)
        return planner.finish(graph.fetch)
