"""The executor's plan: one walk over a placed graph that precomputes everything `run` needs.

As in dask's local scheduler (`dask/local.py`), planning is separate from running, so the run
loop does no graph work. The plan comes in two parts:

Layout (`layout`: the graph and its placement alone; `predict` needs nothing more). Every value
of the run has an int slot:
    slots:    each op output on its op's device, and each copy of a tensor to another device. A copy
              is made once per (tensor, destination device) and shared by every consumer there, as
              TF's Send/Recv pairs are. A `print` op forwards its input slots (TF's Print forwards
              the buffer), so it allocates nothing. An op's outputs take consecutive slots.
    steps:    one list per op (see `Step`): its kernel's index, how to read its inputs, its first
              output slot and count, the slots it frees, the copies to make first.
    segments: runs of consecutive steps on one device; each runs under one `backend.device()`.
    keep:     slots never freed early: fetched tensors and outputs of resident ops (variables).
    fetch:    (fetch string, slot, device index) per fetched tensor.
    charges:  what each step charges its device and frees (`memory.ledger.Charges`): the ledgers
              are counted for the whole run up front (`memory.ledger.Replay`), not per step.

Schedule (`bind`: the layout on backends): per device, each kernel index's (kind, callable).
An elementwise kernel (`xp_function`: add, exp, ...) on a device whose library has that
function is called directly, with no list in or out: a small op then costs little more than
the numpy call itself.

Planning a small op costs about as much as running it, so the layout is flat: a step is a plain
list (its frees are filled in once the last reads are known), the input slots of a direct call
sit in it as ints, and a step holds its Op rather than copies of its name and attrs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, ValuesView
from operator import attrgetter
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, TensorRef, TensorSpec
from ..graph.opdef import OpDef
from ..memory.ledger import Charges, allocation_size
from .backends import Backend, NumpyBackend
from .cupy_backend import CupyBackend

Compute = Callable[[ModuleType, list[Any], Mapping[str, Any]], list[Any]]
KERNEL, HOST, PRINT, UNARY, BINARY = 0, 1, 2, 3, 4  # a step's kind; the last two call
# `xp.<function>(a)` or `xp.<function>(a, b)` directly, for one output
PRINT_OP = "print"
SAVE_OP = "save"  # writes a file: skipped by a run without side effects (`effects=False`)


class CopyRecord(NamedTuple):
    """One cross-device transfer (TF's Send/Recv pair): who needed which tensor, where, how long."""

    op: str
    tensor: str
    src: str
    dst: str
    nbytes: int
    seconds: float
    kind: str = ""  # "network": between two tasks of a cluster; "" within one process


class Kernel(Protocol):
    """What the op registry provides per op type.

    A `host_value` kernel (constant, random, variable init, load, placeholder) gets numpy as `xp`
    and returns host arrays; the executor creates them on the op's device, which is not a copy.
    A kernel may also name an `xp_function` (`"add"`): its compute is exactly
    `[getattr(xp, xp_function)(*inputs)]`, which the executor then calls directly.
    """

    @property
    def host_value(self) -> bool: ...

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]: ...


CopyDraft = tuple[str, str, str, str, int]
"""A CopyRecord but its seconds (op, tensor, src, dst, nbytes): the run makes the record."""


class CopyStep(NamedTuple):
    """Made as `tuple.__new__(CopyStep, ...)` (`_Planner._copy`): a NamedTuple's own
    constructor, like a frozen dataclass's, runs as Python, for every copy of a layout."""

    src: int  # slot of the tensor on its own device
    dst: int  # slot of the copy on the consumer's device
    src_device: int
    dst_device: int
    record: CopyDraft  # the CopyRecord the run makes, with the seconds it took


Copies = tuple[CopyStep, ...]
KernelEntry = tuple[int, Any]  # (kind, callable) of a kernel index on one device
Step = list[Any]
"""[kernel, x, y, first, count, frees, copies, op]: `run` unpacks it in one go.

kernel indexes the device's KernelEntry table. The inputs: x and y, the slots of a direct call's
one or two (y -1 for one), else x is the tuple of input slots (see `step_inputs`). The outputs
are the slots first .. first + count - 1; frees lists the slots whose last reader it is.
"""
SlotInfo = tuple[int, int, int]  # (device index, nbytes, rounded bytes): shared by equal slots
Outputs = tuple[SlotInfo, ...]  # an op's outputs' SlotInfos
_NAME, _DEVICE = attrgetter("name"), attrgetter("device")
_new_tuple = tuple.__new__
PRINT_KERNEL = 0  # the kernel index of `print` ops; see `Layout.kernels` for the others


def step_inputs(step: Step) -> tuple[int, ...]:
    """A step's input slots, however its list holds them."""
    x, y = step[1], step[2]
    if isinstance(x, tuple):
        return x
    return (x,) if y < 0 else (x, y)


class Segment(NamedTuple):
    device: int
    start: int  # index of its first step in the run
    steps: Sequence[Step]


class Layout(NamedTuple):
    """A placed graph's schedule before it meets any backend (see the module docstring)."""

    devices: tuple[str, ...]
    segments: tuple[Segment, ...]
    slots: int
    keep: frozenset[int]
    fetch: tuple[tuple[str, int, int], ...]
    kernels: tuple[Kernel, ...]  # type i: kernel index 3i + 1 (one output, one input),
    # 3i + 2 (one output, two inputs), 3i + 3 (any), on a device whose library has its function
    effects: bool
    charges: Charges

    @property
    def steps(self) -> int:
        return self.charges.steps

    def op(self, step: int) -> Op:
        """The op of the run's step `step`."""
        segment = self.segments[bisect_right([s.start for s in self.segments], step) - 1]
        return segment.steps[step - segment.start][7]  # type: ignore[no-any-return]


class Schedule(NamedTuple):
    """A Layout bound to one backend per device: what `run` executes."""

    layout: Layout
    backends: tuple[Backend, ...]
    tables: tuple[tuple[KernelEntry, ...], ...]  # per device, per kernel index
    device_oom: tuple[type[BaseException], ...]  # cupy's OutOfMemoryError, when a GPU is real

    @property
    def devices(self) -> tuple[str, ...]:
        return self.layout.devices

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self.layout.segments

    @property
    def slots(self) -> int:
        return self.layout.slots

    @property
    def keep(self) -> frozenset[int]:
        return self.layout.keep

    @property
    def fetch(self) -> tuple[tuple[str, int, int], ...]:
        return self.layout.fetch


class Placed(Protocol):
    """A placement's decision for one op, as far as a layout reads it."""

    @property
    def device(self) -> str: ...


class PlacedDevices(Mapping[str, str]):
    """Each op's device (`name -> decisions[name].device`), read from a placement's decisions as
    the layout asks, instead of copied into a dict of every op first."""

    def __init__(self, decisions: Mapping[str, Placed]) -> None:
        self.decisions = decisions

    def __getitem__(self, name: str) -> str:
        return self.decisions[name].device

    def __iter__(self) -> Iterator[str]:
        return iter(self.decisions)

    def __len__(self) -> int:
        return len(self.decisions)

    def values(self) -> ValuesView[str]:
        return _InOrder(self)


class _InOrder(ValuesView[str]):
    """`PlacedDevices.values()`: the devices in the decisions' order, without a lookup per op."""

    def __init__(self, devices: PlacedDevices) -> None:
        super().__init__(devices)
        self._decisions = devices.decisions

    def __iter__(self) -> Iterator[str]:
        return (d.device for d in self._decisions.values())


def _text(xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
    """A print step's compute: numpy's text of each host input (its outputs forward its inputs)."""
    return [str(value) for value in inputs]


def _forward(xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
    """A silent print step (a run without side effects): its outputs forward its inputs."""
    return []


def transfer(src: Backend, dst: Backend) -> Callable[[Any], Any]:
    """How a value moves between devices: GPU to GPU directly, anything else through the host."""
    if isinstance(src, CupyBackend) and isinstance(dst, CupyBackend):
        return dst.copy_from
    if isinstance(dst, NumpyBackend) and not isinstance(src, NumpyBackend):
        return src.get  # the host copy is already the destination's array
    return lambda value: dst.put(src.get(value))


def _entries(kernel: Kernel, backend: Backend) -> tuple[KernelEntry, ...]:
    """A kernel's (kind, callable) on one backend: for ops of one output and one input, of one
    output and two inputs, then for any op.

    A host-value kernel on a host-memory (numpy) device is a plain kernel: its result is
    already on the device, so creating it there costs nothing."""
    # the registry's ops: their compute function itself, not the method that calls it
    compute = kernel.compute_fn if isinstance(kernel, OpDef) else kernel.compute
    if kernel.host_value and not isinstance(backend, NumpyBackend):
        return ((HOST, compute),) * 3
    plain = (KERNEL, compute)
    name = getattr(kernel, "xp_function", None)
    direct = getattr(backend.xp, name, None) if isinstance(name, str) else None
    if not callable(direct):
        return plain, plain, plain
    return (UNARY, direct), (BINARY, direct), plain


def bind(layout: Layout, backends: Mapping[str, Backend]) -> Schedule:
    """The layout on `backends` (device name -> Backend, the layout's devices in its order)."""
    if tuple(backends) != layout.devices:
        raise ValueError(f"backends for {tuple(backends)}, layout for {layout.devices}")
    bound = tuple(backends.values())
    printing = (PRINT, _text) if layout.effects else (KERNEL, _forward)
    tables = []
    made: dict[tuple[bool, int], tuple[KernelEntry, ...]] = {}  # one per kind of backend
    for backend in bound:
        kind = (isinstance(backend, NumpyBackend), id(backend.xp))  # all _entries looks at
        table = made.get(kind)
        if table is None:
            entries: list[KernelEntry] = [printing]
            for kernel in layout.kernels:
                entries.extend(_entries(kernel, backend))
            table = made[kind] = tuple(entries)
        tables.append(table)
    device_oom = {b.out_of_memory for b in bound if isinstance(b, CupyBackend)}
    return Schedule(layout, bound, tuple(tables), tuple(device_oom))


class _Planner:
    """Builds a Layout in one pass over the ops (state: see the module docstring).

    Per op: one step list, a `home` entry, and per output slot two list entries
    (its shared SlotInfo and its last use); `finish` turns the last uses into frees and charges.
    """

    def __init__(
        self,
        placement: Mapping[str, str],
        names: Sequence[str],
        kernels: Callable[[str], Kernel],
        resident: Callable[[str], bool],
        effects: bool = True,
    ) -> None:
        self.placement, self.kernels, self.resident = placement, kernels, resident
        self.effects = effects
        self.names = tuple(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.types: dict[str, tuple[int, bool, bool]] = {}  # see _kernel
        self.kernel_list: list[Kernel] = []
        self.infos: list[dict[tuple[tuple[int, ...], str], SlotInfo]] = [{} for _ in self.names]
        self.outs: list[dict[int, tuple[Outputs, int]]] = [{} for _ in self.names]  # _outputs
        self.held: list[tuple[TensorSpec, ...]] = []
        self.home: dict[str, Sequence[int]] = {}  # op -> slots of its outputs, on its device
        self.copied: dict[tuple[str, int, int], int] = {}  # (op, output, device) -> copy slot
        self.slot_info: list[SlotInfo] = []
        self.last_use: list[int] = []  # step that reads the slot last (or creates it)
        self.keep: set[int] = set()
        self.steps: list[Step] = []
        self.allocs: list[int] = []  # per step: rounded bytes of its outputs and copies
        self.starts: list[tuple[int, int]] = []  # (first step, device) of each segment

    def add_all(self, ops: Sequence[Op]) -> None:
        """Plan the ops in order: each one's device, input slots (copied to its device when they
        live elsewhere), output slots, and the bytes its step allocates (`_add_all`)."""
        _add_all(self, ops)

    def _devices(self, ops: Sequence[Op]) -> Iterable[int | None]:
        """Each op's device index (None: none, or one without a backend).

        A placement made for this graph lists its ops in graph order: read in step, its entries
        cost a tenth of looking each op up in it (a large dict is slow to probe at random).
        """
        names = list(map(_NAME, ops))
        placement, index = self.placement, self.index
        if isinstance(placement, PlacedDevices):  # each decision's device, read in C
            decisions = placement.decisions
            if list(decisions) == names:
                return map(index.get, map(_DEVICE, decisions.values()))
        elif list(placement) == names:
            return map(index.get, placement.values())
        return (index.get(placement.get(name, "")) for name in names)

    def _segment(self, op: Op, device: int | None, step: int) -> int:
        """`op` runs on another device than the step before it: it starts a new segment."""
        if device is None:
            device = self._device(op)  # raises, saying what is missing
        self.starts.append((step, device))
        return device

    def _kernel(self, op_type: str) -> tuple[int, bool, bool]:
        """An op type's first kernel index, residency, and whether it names an `xp_function`,
        asked of the registry once."""
        kernel = self.kernels(op_type)
        self.kernel_list.append(kernel)
        direct = isinstance(getattr(kernel, "xp_function", None), str)
        entry = (3 * len(self.kernel_list) - 2, self.resident(op_type), direct)
        self.types[op_type] = entry
        return entry

    def _info(self, spec: TensorSpec, device: int) -> SlotInfo:
        """A slot's device and sizes, worked out once per (shape, dtype, device)."""
        sizes = self.infos[device]
        info = sizes.get((spec.shape, spec.dtype))
        if info is None:
            nbytes = spec.nbytes
            info = sizes[spec.shape, spec.dtype] = (device, nbytes, allocation_size(nbytes))
        return info

    def _outputs(self, outputs: tuple[TensorSpec, ...], device: int) -> tuple[Outputs, int]:
        """An op's outputs' SlotInfos on `device` and their rounded bytes in all, worked out once
        per outputs tuple (the loader shares one among the ops whose outputs are equal: keyed by
        its identity, which the graph keeps alive while the layout is planned)."""
        infos = tuple(self._info(spec, device) for spec in outputs)
        found = (infos, sum(info[2] for info in infos))
        self.outs[device][id(outputs)] = found
        self.held.append(outputs)  # its id stays its own while the layout is planned
        return found

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
        names, op, index = self.names, ref.op, ref.index
        tensor = op if index == 0 else f"{op}:{index}"  # str(ref)
        draft = (consumer, tensor, names[src_device], names[device], nbytes)
        return _new_tuple(CopyStep, (src, dst, src_device, device, draft))

    def finish(self, fetch: Sequence[TensorRef]) -> Layout:
        fetched = []
        for ref in fetch:
            try:
                slot = self.home[ref.op][ref.index]
            except (KeyError, IndexError):
                raise BadInput(f"fetch '{ref}' names no output of the graph's ops") from None
            self.keep.add(slot)
            fetched.append((str(ref), slot, self.slot_info[slot][0]))
        steps, starts, last_use = self.steps, self.starts, self.last_use
        n = len(steps)
        for slot in self.keep:
            last_use[slot] = n  # the step after the last: never freed
        _frees(steps, last_use)
        ends = [step for step, _ in starts[1:]] + [n]
        step_device: list[int] = []
        for (a, device), b in zip(starts, ends, strict=True):
            step_device += [device] * (b - a)
        info = self.slot_info
        devices, sizes = [i[0] for i in info], [i[2] for i in info]
        charges = Charges(len(self.names), step_device, self.allocs, (last_use, devices, sizes))
        return Layout(
            self.names,
            tuple(
                _new_tuple(Segment, (d, a, steps[a:b]))  # Segment(...) runs as Python
                for (a, d), b in zip(starts, ends, strict=True)
            ),
            len(last_use),
            frozenset(self.keep),
            tuple(fetched),
            tuple(self.kernel_list),
            self.effects,
            charges,
        )


def _add_all(planner: _Planner, ops: Sequence[Op]) -> None:
    """`_Planner.add_all`: one loop with what it uses held in locals (planning costs about as
    much per op as running small ops does); copies, print ops and errors go to helpers.

    A function of the module, not a method, so that the compiled core types its locals
    (schedule.pxd): the device and counts are C integers there. An op's outputs are looked up
    once per outputs tuple (`_Planner._outputs`), and the input slots of an op of one or two
    inputs are held in locals, not a list."""
    home, types, keep = planner.home, planner.types, planner.keep
    slot_info, last_use = planner.slot_info, planner.last_use
    steps, allocs = planner.steps, planner.allocs
    device = -1
    outs: dict[int, tuple[Outputs, int]] = {}
    step = 0
    for op, placed in zip(ops, planner._devices(ops), strict=True):
        if placed != device:
            device = planner._segment(op, placed, step)  # raises for None
            outs = planner.outs[device]
        slots: list[int] | None = None  # past two inputs
        x = y = -1
        n = 0
        made: list[CopyStep] | None = None  # most ops copy nothing
        for ref in op.inputs:
            try:
                slot = home[ref.op][ref.index]
            except (KeyError, IndexError):
                raise BadInput(
                    f"op '{op.name}' reads '{ref}', which no earlier op produces"
                ) from None
            if slot_info[slot][0] != device:
                last_use[slot] = step
                if made is None:
                    made = []
                slot = planner._copy_in(op.name, ref, slot, device, step, made)
            last_use[slot] = step
            if n == 0:
                x = slot
            elif n == 1:
                y = slot
            else:
                if slots is None:
                    slots = [x, y]
                slots.append(slot)
            n += 1
        copies: Copies = ()
        alloc = 0
        if made:
            copies = tuple(made)
            for c in copies:
                alloc += slot_info[c.dst][2]
        first = len(slot_info)
        if slots is not None:
            inputs = tuple(slots)
        elif n == 2:
            inputs = (x, y)
        else:
            inputs = (x,) if n == 1 else ()
        if op.type == PRINT_OP:  # forwards its inputs' buffers, as TF's Print does
            home[op.name] = inputs
            steps.append([PRINT_KERNEL, inputs, -1, first, 0, (), copies, op])
            allocs.append(alloc)
            step += 1
            continue
        kernel, resident, direct = types.get(op.type) or planner._kernel(op.type)
        specs = op.outputs
        found = outs.get(id(specs))
        if found is None:
            found = planner._outputs(specs, device)
        infos, size = found
        count = len(infos)
        alloc += size
        outputs: tuple[int, ...]
        if count == 1:  # most ops: build its tuple inline
            slot_info.append(infos[0])
            last_use.append(step)
            home[op.name] = outputs = (first,)
        else:
            slot_info.extend(infos)
            last_use.extend([step] * count)
            home[op.name] = outputs = tuple(range(first, first + count))
        if resident:
            keep.update(outputs)
        if direct and count == 1 and n == 2:
            steps.append([kernel + 1, x, y, first, 1, (), copies, op])
        elif direct and count == 1 and n == 1:
            steps.append([kernel, x, -1, first, 1, (), copies, op])
        else:
            steps.append([kernel + 2, inputs, -1, first, count, (), copies, op])
        allocs.append(alloc)
        step += 1


def _frees(steps: Sequence[Step], last_use: Sequence[int]) -> None:
    """Each step's frees: the slots it reads last (a step past the last: never freed). A
    function of the module, typed by schedule.pxd (the slot and step as C integers)."""
    n = len(steps)
    slot = 0
    for step in last_use:
        if step < n:
            at = steps[step]
            if at[5]:
                at[5].append(slot)
            else:
                at[5] = [slot]
        slot += 1  # noqa: SIM113 (a typed index: enumerate is slow compiled)


def is_variable(op_type: str) -> bool:
    """The default `resident` test: variables stay on their device for the whole run."""
    return op_type == "variable"


def layout(
    graph: Graph,
    devices: Mapping[str, str],
    names: Sequence[str],
    kernels: Callable[[str], Kernel],
    resident: Callable[[str], bool] = is_variable,
    *,
    effects: bool = True,
) -> Layout:
    """Precompute the layout of a placed graph over the devices `names` (in that order): slots,
    copies, when each tensor is freed and what each step charges its device.

    `effects=False` plans a run without side effects (--verify's reference run): `save` ops are
    left out and `print` ops forward their inputs without making text."""
    planner = _Planner(devices, names, kernels, resident, effects)
    ops = graph.ops if effects else [op for op in graph.ops if op.type != SAVE_OP]
    with gc_paused():  # the layout is acyclic; pausing the GC halves planning time
        planner.add_all(ops)
        return planner.finish(graph.fetch)


def plan(
    graph: Graph,
    devices: Mapping[str, str],
    backends: Mapping[str, Backend],
    kernels: Callable[[str], Kernel],
    resident: Callable[[str], bool] = is_variable,
    *,
    effects: bool = True,
) -> Schedule:
    """The layout of a placed graph (see `layout`), bound to `backends` (device -> Backend)."""
    laid = layout(graph, devices, tuple(backends), kernels, resident, effects=effects)
    return bind(laid, backends)
