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
              output slot and count, the slots it frees, the copies to make first. Its frees
              are filled in when the layout is first bound (`bind`): `plan` never needs them.
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
list (its frees are filled in once the last reads are known, by `bind`), the input slots of a
direct call sit in it as ints, and a step holds its Op rather than copies of its name and attrs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, TensorRef, TensorSpec, columns, name_wiring, wiring
from ..graph.opdef import OpDef
from ..memory.ledger import HUGE, Charges, allocation_size
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
    """Made as `tuple.__new__(CopyStep, ...)` (`_copy_in`): a NamedTuple's own
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
Found = tuple[Outputs, int, tuple[int, ...]]  # see `_Planner._outputs`
_new_tuple = tuple.__new__
PRINT_KERNEL = 0  # the kernel index of `print` ops; see `Layout.kernels` for the others
# An int argument of a function schedule.pxd declares (with a C type, or none): compiled, a
# plain `int` annotation is Cython's own exact int type, which such a declaration contradicts.
Int = int


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
    # the run's steps and each slot's last reader, until `bind` fills in the steps' frees from
    # them (`_frees`, emptying it): `predict` counts the charges alone, so `plan` never needs them
    unfreed: list[tuple[list[Step], list[int]]]

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
    while layout.unfreed:  # once per layout, for its first run
        _frees(*layout.unfreed.pop())
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
    (its shared SlotInfo and its last use); `finish` turns the last uses into charges, and
    `bind` into each step's frees.
    Ops are numbered by their place in the run: an input names its producer by that number
    (`_producers`), so the loop looks no name up.
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
        self.types: dict[str, tuple[int, bool, bool, bool]] = {}  # see _kernel
        self.kernel_list: list[Kernel] = []
        self.infos: list[dict[tuple[tuple[int, ...], str], SlotInfo]] = [{} for _ in self.names]
        self.outs: list[dict[int, Found]] = [{} for _ in self.names]  # _outputs
        self.held: list[tuple[TensorSpec, ...]] = []
        # per op, in run order: its output's slot (one output), else the slots of its outputs
        # (a print op: its inputs' slots, which it forwards)
        self.home: list[int | tuple[int, ...]] = []
        self.by_name: Mapping[str, int] = {}  # op name -> its number (the last, if names repeat)
        self.copied: dict[tuple[str, int, int], int] = {}  # (op, output, device) -> copy slot
        self.slot_info: list[SlotInfo] = []
        self.slot_code: list[int] = []  # per slot, its SlotInfo's place in `distinct`
        self.distinct: list[SlotInfo] = []  # each SlotInfo once (`_code`)
        self.codes: dict[SlotInfo, int] = {}  # SlotInfo -> its place in `distinct`
        self.last_use: list[int] = []  # step that reads the slot last (or creates it)
        self.keep: set[int] = set()
        self.steps: list[Step] = []
        self.allocs: list[int] = []  # per step: rounded bytes of its outputs and copies
        self.starts: list[tuple[int, int]] = []  # (first step, device) of each segment

    def add_all(self, ops: Sequence[Op], graph: Graph) -> None:
        """Plan the ops in order (`graph`'s, or some of them): each one's device, input slots
        (copied to its device when they live elsewhere), output slots, and the bytes its step
        allocates (`_add_all`)."""
        producers, arity, outputs = self._producers(ops, graph)
        if ops is graph.ops:  # the graph's columns (`graph.model.columns`): no field read per op
            names, types, _, specs = columns(graph)
        else:
            names = [op.name for op in ops]
            types = [op.type for op in ops]
            specs = [op.outputs for op in ops]
        _add_all(self, ops, self._devices(ops, names), producers, arity, outputs, types, specs)

    def _producers(
        self, ops: Sequence[Op], graph: Graph
    ) -> tuple[list[int], list[int], list[int] | None]:
        """Each input's producer, as the number of an earlier op (-1, or a later op's: none
        produces it), op by op (`arity`: how many each reads), and which of its outputs
        (None: output 0 for all): the graph's wiring (`graph.model.wiring`, which the loader
        made) when `ops` are all its ops, named once each; else worked out as they come."""
        if ops is graph.ops:
            wired = wiring(graph)
            if len(wired.index) == len(ops):  # each name once: its op is the one it names
                self.by_name = wired.index
                return wired.producers, wired.arity, wired.outputs
        wired = name_wiring(tuple(ops), running=True)  # a name: the last op of it so far
        self.by_name = wired.index
        return wired.producers, wired.arity, wired.outputs

    def _devices(self, ops: Sequence[Op], names: list[str]) -> list[int | None]:
        """Each op's device index (None: none, or one without a backend); `names`: the ops'.

        A placement made for this graph lists its ops in graph order: read in step, its entries
        cost a tenth of looking each op up in it (a large dict is slow to probe at random).
        """
        placement, index = self.placement, self.index
        if isinstance(placement, PlacedDevices):
            found = _in_order(index, names, placement.decisions)
            if found is not None:
                return found
        return _indices(index, [placement.get(name, "") for name in names])

    def _unplaced(self, op: Op) -> BadInput:
        """`op` has no device, or one without a backend."""
        name = self.placement.get(op.name)
        if name is None:
            return BadInput(f"op '{op.name}' has no device: place the graph before running it")
        known = ", ".join(self.names) or "none"
        return BadInput(f"op '{op.name}' is placed on {name}, which has no backend ({known})")

    def _kernel(self, op_type: str) -> tuple[int, bool, bool, bool]:
        """An op type's first kernel index, residency, whether it names an `xp_function`, and
        whether it is `print` (which has no kernel: it forwards its inputs), asked of the
        registry once."""
        if op_type == PRINT_OP:
            entry = (PRINT_KERNEL, False, False, True)
        else:
            kernel = self.kernels(op_type)
            self.kernel_list.append(kernel)
            direct = isinstance(getattr(kernel, "xp_function", None), str)
            entry = (3 * len(self.kernel_list) - 2, self.resident(op_type), direct, False)
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

    def _code(self, info: SlotInfo) -> int:
        """`info`'s place in `distinct`, where it is added the first time (`finish` reads each
        slot's device and bytes from the few distinct ones: `_slot_columns`)."""
        code = self.codes.get(info)
        if code is None:
            code = self.codes[info] = len(self.distinct)
            self.distinct.append(info)
        return code

    def _outputs(self, outputs: tuple[TensorSpec, ...], device: int) -> Found:
        """An op's outputs' SlotInfos on `device`, their rounded bytes in all and their codes
        (`_code`), worked out once per outputs tuple (the loader shares one among the ops whose
        outputs are equal: keyed by its identity, which the graph keeps alive while the layout
        is planned)."""
        infos = tuple(self._info(spec, device) for spec in outputs)
        found = (infos, sum(info[2] for info in infos), tuple(map(self._code, infos)))
        self.outs[device][id(outputs)] = found
        self.held.append(outputs)  # its id stays its own while the layout is planned
        return found

    def _unproduced(self, op: Op, k: int) -> BadInput:
        """Input `k` of `op` names no output of an op before it."""
        return BadInput(f"op '{op.name}' reads '{op.inputs[k]}', which no earlier op produces")

    def finish(self, fetch: Sequence[TensorRef]) -> Layout:
        fetched = []
        for ref in fetch:
            op, index = ref.op, ref.index
            at = self.by_name.get(op)
            slot = None if at is None else _output_slot(self.home[at], index)
            if slot is None:
                raise BadInput(f"fetch '{ref}' names no output of the graph's ops")
            self.keep.add(slot)
            name = op if index == 0 else f"{op}:{index}"  # str(ref), which runs as Python
            fetched.append((name, slot, self.slot_info[slot][0]))
        steps, starts, last_use = self.steps, self.starts, self.last_use
        n = len(steps)
        for slot in self.keep:
            last_use[slot] = n  # the step after the last: never freed
        ends = [step for step, _ in starts[1:]] + [n]
        lengths = [b - a for (a, _), b in zip(starts, ends, strict=True)]
        step_device = _repeated([d for _, d in starts], lengths)
        devices, sizes = _slot_columns(self.distinct, self.slot_code)
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
            [(steps, last_use)],
        )


def _add_all(planner: _Planner, ops: Sequence[Op], where: Sequence[int | None],
             producers: Sequence[int], arity: Sequence[int], outputs: Sequence[int] | None,
             types_of: Sequence[str], specs_of: Sequence[tuple[TensorSpec, ...]]) -> None:  # fmt: skip
    """`_Planner.add_all`: one loop with what it uses held in locals (planning costs about as
    much per op as running small ops does); copies and errors go to helpers. Each op's type
    and outputs come from lists (`types_of`, `specs_of`: `graph.model.Columns`), which cost
    less to read than the op's fields.

    A function of the module, not a method, so that the compiled core types its locals
    (schedule.pxd): counts, op numbers and the slot indexed with are C integers there. Inputs
    are read by producer number (`where`: each op's device index; `producers`, `arity`,
    `outputs`: see `_Planner._producers`), an op's outputs looked up where its outputs tuple
    is not the op before's (`_Planner._outputs`), and the input slots of an op of one or two
    inputs are held in locals, not a list."""
    home, types, keep = planner.home, planner.types, planner.keep
    slot_info, slot_code, last_use = planner.slot_info, planner.slot_code, planner.last_use
    steps, allocs, starts = planner.steps, planner.allocs, planner.starts
    device = -1
    outs: dict[int, Found] = {}
    specs: tuple[TensorSpec, ...] | None = None  # the outputs tuple of `found`
    found: Found = ((), 0, ())
    edge = 0  # the next input's place in `producers`
    for at in range(len(ops)):
        step = at  # compiled: `at` a C integer, `step` its Python int, made once
        op = ops[at]
        placed = where[at]
        if placed != device:  # a new segment
            if placed is None:
                raise planner._unplaced(op)
            device = placed
            starts.append((step, device))
            outs, specs = planner.outs[device], None
        slots: list[int] | None = None  # past two inputs
        x = y = -1
        n = arity[at]
        made: list[CopyStep] | None = None  # most ops copy nothing
        for k in range(n):
            producer = producers[edge]
            index = 0 if outputs is None else outputs[edge]
            edge += 1
            read = _output_slot(home[producer], index) if 0 <= producer < at else None
            if read is None:
                raise planner._unproduced(op, k)
            slot = read  # compiled: a C integer to index with, `read` the Python int
            if slot_info[slot][0] != device:
                last_use[slot] = step
                if made is None:
                    made = []
                read = _copy_in(planner, op.name, op.inputs[k], read, device, step, made)
                slot = read
            last_use[slot] = step
            if k == 0:
                x = read
            elif k == 1:
                y = read
            else:
                if slots is None:
                    slots = [x, y]
                slots.append(read)
        copies: Copies = ()
        alloc = 0
        if made:
            copies = tuple(made)
            for c in copies:
                alloc += slot_info[c.dst][2]
        first = len(slot_info)
        op_type = types_of[at]
        kernel, resident, direct, printing = types.get(op_type) or planner._kernel(op_type)
        if printing:  # forwards its inputs' buffers, as TF's Print does
            inputs = _inputs(n, x, y, slots)
            home.append(inputs)
            steps.append([PRINT_KERNEL, inputs, -1, first, 0, (), copies, op])
            allocs.append(alloc)
            continue
        op_specs = specs_of[at]
        if op_specs is not specs:
            specs = op_specs
            found = outs.get(id(specs)) or planner._outputs(specs, device)
        infos, size, codes = found
        count = len(infos)
        alloc += size
        if count == 1:  # most ops: their slot, no tuple
            slot_info.append(infos[0])
            slot_code.append(codes[0])
            last_use.append(step)
            home.append(first)
            if resident:
                keep.add(first)
        else:
            slot_info.extend(infos)
            slot_code.extend(codes)
            last_use.extend([step] * count)
            home.append(tuple(range(first, first + count)))
            if resident:
                keep.update(range(first, first + count))
        if direct and count == 1 and n == 2:
            steps.append([kernel + 1, x, y, first, 1, (), copies, op])
        elif direct and count == 1 and n == 1:
            steps.append([kernel, x, -1, first, 1, (), copies, op])
        else:
            steps.append([kernel + 2, _inputs(n, x, y, slots), -1, first, count, (), copies, op])
        allocs.append(alloc)


def _inputs(n: Int, x: Int, y: Int, slots: list[Int] | None) -> tuple[int, ...]:
    """An op's input slots as a tuple: `_add_all` holds the first two in `x` and `y`, and
    all of them in `slots` past two (only a step that is not a direct call needs the tuple)."""
    if slots is not None:
        return tuple(slots)
    if n == 2:
        return (x, y)
    return (x,) if n == 1 else ()


def _copy_in(planner: _Planner, consumer: str, ref: TensorRef, src: Int, device: Int,
             step: Int, made: list[CopyStep]) -> Int:  # fmt: skip
    """The slot of `ref`'s copy (from slot `src`) on `device`, made once per tensor and device
    (TF's Send/Recv pair); a new copy joins the step's copies (`made`). A function of the
    module, which `_add_all` calls in C where compiled."""
    key = (ref.op, ref.index, device)
    copy = planner.copied.get(key)
    if copy is not None:
        return copy
    src_device, nbytes, size = planner.slot_info[src]
    dst = planner.copied[key] = len(planner.slot_info)
    info = (device, nbytes, size)
    planner.slot_info.append(info)
    planner.slot_code.append(planner._code(info))
    planner.last_use.append(step)
    names, op, index = planner.names, ref.op, ref.index
    tensor = op if index == 0 else f"{op}:{index}"  # str(ref)
    draft = (consumer, tensor, names[src_device], names[device], nbytes)
    made.append(_new_tuple(CopyStep, (src, dst, src_device, device, draft)))
    return dst


def _output_slot(held: int | tuple[int, ...], index: Int) -> int | None:
    """The slot of output `index` of an op whose `home` entry is `held`, indexed as a tuple
    of its slots would be (None: it has no such output)."""
    if type(held) is int:
        return held if index == 0 or index == -1 else None
    if -len(held) <= index < len(held):  # type: ignore[arg-type]
        return held[index]  # type: ignore[index]
    return None


def _indices(index: Mapping[str, int], names: Sequence[str]) -> list[int | None]:
    """Each device name's index in `index` (None: none)."""
    return [index.get(name) for name in names]


def _in_order(
    index: Mapping[str, int], names: Sequence[str], decisions: Mapping[str, Placed]
) -> list[int | None] | None:
    """Each op's device index in `index` (None: none), from `decisions` where they list the
    ops (`names`) in order (None where they do not), looked up once per run of one device
    name (the decisions of a placement share their devices' names), its device read once per
    run of one decision (the placers share those too)."""
    if len(decisions) != len(names) or list(decisions) != list(names):
        return None
    found: list[int | None] = []
    last: object = None
    seen: object = None  # the decision `last` was read from
    at = None
    for decision in decisions.values():
        if decision is not seen:
            seen = decision
            device = decision.device
            if device is not last:
                at, last = index.get(device), device
        found.append(at)
    return found


def _repeated(values: Sequence[int], counts: Sequence[int]) -> Any:
    """Each value as many times as its count, in order (an int array): each step's device,
    from the segments'."""
    import numpy as np

    return np.repeat(np.asarray(values, np.int64), np.asarray(counts, np.int64))


def _slot_columns(distinct: Sequence[SlotInfo], codes: Sequence[int]) -> tuple[Any, Any]:
    """Each slot's device and rounded bytes, as int arrays (the bytes as Python ints past
    int64), from its code (`_Planner._code`: its SlotInfo's place in `distinct`): slots share
    a few SlotInfos (one per shape, dtype and device), so one number per slot is read."""
    import numpy as np

    from ..placement.arrays import int_array  # numpy's: not at start-up

    at = int_array(codes)  # each slot's code, in one C loop where compiled
    sizes = [size for _, _, size in distinct]
    wide = max(sizes, default=0) >= HUGE
    devices = np.asarray([device for device, _, _ in distinct], np.int64)[at]
    return devices, np.asarray(sizes, object if wide else np.int64)[at]


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
        planner.add_all(ops, graph)
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
