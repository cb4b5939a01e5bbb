"""A graph flattened for the strategies: int-indexed lists, costs and tensor lifetimes, built once.

`Flat` holds, per op in graph order: the (producer, output) pairs it reads, its FLOPs and bytes
moved (`cost.py`), its outputs' sizes as the allocator rounds them (256 B), and each output's
static last step. That is the step of its last reader anywhere (a reader on another device reads
it to copy it, so the source lives as long), through `print` ops, which forward their input
buffers as the executor does; fetched tensors and outputs of resident ops (variables) live to
the end. `free_groups` says which ops a strategy may move: TensorFlow's placer is run first, and
a colocation group is free over the GPUs every member's request matches when every member has a
GPU kernel and they match more than one; every other op keeps TensorFlow's decision (explicit
devices, CPU-only kernels, soft placement). `generator` marks what a strategy may decide with
its first consumer: the ops TF's placer defers (Const, Placeholder, a small tf.zeros; not Fill
or the random ops, which read a shape tensor in TF) and variables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from ..devices.cluster import TaskName
from ..devices.names import DeviceSpec, placer_spec
from ..errors import BadInput
from ..graph.model import DTYPES, Graph, Op, OpMeta
from ..units import allocation_size
from .cost import op_flops, output_rate
from .model import Placement
from .tf import generator_flags, kernels_of, tf_type_of

PRINT = "print"
VARIABLE = "variable"  # moves no bytes (`cost.op_bytes`)


def default_meta(op_meta: Callable[[str], OpMeta] | None) -> Callable[[str], OpMeta]:
    """`op_meta`, or the op registry's `get_op`."""
    if op_meta is not None:
        return op_meta
    from ..graph.ops import get_op

    return get_op


@dataclass(frozen=True)
class Flat:
    """Per-op lists in graph order (see the module docstring); `last` is the final step."""

    graph: Graph
    names: tuple[str, ...]
    inputs: tuple[tuple[tuple[int, int], ...], ...]  # (producer index, output index)
    flops: tuple[float, ...]
    nbytes: tuple[int, ...]
    sizes: tuple[tuple[int, ...], ...]  # rounded output sizes; () for print (it allocates none)
    out_bytes: tuple[tuple[int, ...], ...]  # exact output sizes (what a copy moves)
    ends: tuple[tuple[int, ...], ...]  # static last step of each output
    first_reader: tuple[int, ...]  # first op reading any output, -1 if none
    generator: tuple[bool, ...]  # TF's placer defers it (`IsGeneratorNode`), or a variable
    resident: tuple[bool, ...]  # outputs stay on the device for the whole run (variables)
    kernels: tuple[frozenset[str], ...]  # per op: its type's, narrowed by its dtype
    is_print: tuple[bool, ...]

    fetch: tuple[tuple[int, int], ...]  # (op, output) of every fetched tensor

    @property
    def last(self) -> int:
        return len(self.names) - 1

    def fetched(self) -> list[tuple[int, int]]:
        """(op, output) of every fetched tensor."""
        return list(self.fetch)


def _ends(graph: Graph, inputs: Sequence[tuple[tuple[int, int], ...]], index: dict[str, int],
          resident: Sequence[bool], steps: Sequence[int]) -> list[list[int]]:  # fmt: skip
    """Static last step of every output (see the module docstring); `steps`: each step's int."""
    ops, last = graph.ops, len(graph.ops) - 1
    ends = [
        [last if resident[i] else i] * len(op.outputs) for i, op in zip(steps, ops, strict=True)
    ]
    for j, reads in zip(steps, inputs, strict=True):
        for p, k in reads:
            if j > ends[p][k]:
                ends[p][k] = j
    for ref in graph.fetch:
        i = index.get(ref.op)
        if i is None or ref.index >= len(ends[i]):
            raise BadInput(f"fetch '{ref}' names no output of the graph's ops")
        ends[i][ref.index] = last
    for j in range(len(ops) - 1, -1, -1):  # print forwards its inputs: their life includes its
        if ops[j].type == PRINT:
            for (p, k), end in zip(inputs[j], ends[j], strict=False):
                ends[p][k] = max(ends[p][k], end)
    return ends


def flatten(graph: Graph, op_meta: Callable[[str], OpMeta] | None = None) -> Flat:
    """Flatten `graph` (in execution order, as the loader guarantees) in one linear pass."""
    meta_of = default_meta(op_meta)
    ops = graph.ops
    index = {op.name: i for i, op in enumerate(ops)}
    # each step's int once (the reads' pairs, first readers and ends share it): index's own
    # ints when every name is distinct, as the loader makes them
    steps: Sequence[int] = list(index.values()) if len(index) == len(ops) else range(len(ops))
    metas = {t: meta_of(t) for t in {op.type for op in ops}}
    rates = {t: output_rate(t, meta) for t, meta in metas.items()}  # None: `op_flops` itself
    inputs = []
    flops, nbytes = [], []
    kernels: list[frozenset[str]] = []
    first = [-1] * len(ops)
    shared: dict[Any, Any] = {}  # equal tuples and sets are kept once (most ops repeat them)
    keep = shared.setdefault
    # equal costs kept once: FLOPs are floats, bytes ints (apart: 2 == 2.0)
    same_flops: dict[float, float] = {}
    same_bytes: dict[int, int] = {}
    known: dict[tuple[Any, ...], frozenset[str]] = {}  # kernels by what decides them
    out_bytes: list[tuple[int, ...]] = []  # exact output sizes, worked out once per op
    elements: list[int] = []  # the outputs' elements (`cost._elements`)
    for op in ops:
        outs = op.outputs
        if len(outs) == 1:  # `TensorSpec.nbytes`, its element count kept
            spec = outs[0]
            count = prod(spec.shape)
            made: tuple[int, ...] = (count * DTYPES[spec.dtype],)
        else:
            counts = [prod(spec.shape) for spec in outs]
            count = sum(counts)
            made = tuple([c * DTYPES[spec.dtype] for c, spec in zip(counts, outs, strict=True)])
        out_bytes.append(keep(made, made))
        elements.append(count)
    for j, op in zip(steps, ops, strict=True):
        try:
            reads = tuple(
                [keep(pair, pair) for pair in [(index[r.op], r.index) for r in op.inputs]]
            )
            read = [out_bytes[p][k] for p, k in reads]  # an output no op makes: IndexError
        except (KeyError, IndexError):
            raise BadInput(f"op '{op.name}' reads an output no earlier op produces") from None
        for p, _ in reads:
            if p >= j:
                raise BadInput(f"op '{op.name}' reads an op that comes after it: order the graph")
            if first[p] < 0:
                first[p] = j
        inputs.append(keep(reads, reads))
        meta = metas[op.type]
        source = ops[reads[0][0]].outputs[reads[0][1]].dtype if reads else None
        kernels.append(_kernels(meta, op, source, known))
        rate = rates[op.type]
        if rate is None:
            cost = op_flops(op, tuple([ops[p].outputs[k] for p, k in reads]), meta)
        else:  # `op_flops`, from the counts above
            cost = 0.0 if rate == 0.0 else rate * elements[j]
        moved = 0  # `cost.op_bytes` (inputs read plus outputs written), from the sizes above
        if op.type != VARIABLE:
            moved = sum(read) + sum(out_bytes[j])
        flops.append(same_flops.setdefault(cost, cost))
        nbytes.append(same_bytes.setdefault(moved, moved))
    resident = [metas[op.type].resident for op in ops]
    sizes: list[tuple[int, ...]] = []
    rounded: dict[tuple[int, ...], tuple[int, ...]] = {}  # allocation sizes per output sizes
    for op, made in zip(ops, out_bytes, strict=True):
        if op.type == PRINT:
            sizes.append(())
        else:
            found = rounded.get(made)
            if found is None:
                found = rounded[made] = tuple(allocation_size(n) for n in made)
            sizes.append(found)
    ends = [tuple(e) for e in _ends(graph, inputs, index, resident, steps)]
    return Flat(
        graph=graph,
        names=tuple(op.name for op in ops),
        inputs=tuple(inputs),
        flops=tuple(flops),
        nbytes=tuple(nbytes),
        sizes=tuple(sizes),
        out_bytes=tuple(out_bytes),
        ends=tuple(keep(e, e) for e in ends),
        first_reader=tuple(first),
        generator=tuple(generator_flags(ops, metas, residents=True)),
        resident=tuple(resident),
        kernels=tuple(kernels),
        is_print=tuple(op.type == PRINT for op in ops),
        fetch=tuple((index[r.op], r.index) for r in graph.fetch),  # _ends checked them
    )


def _kernels(
    meta: OpMeta,
    op: Op,
    source: str | None,
    known: dict[tuple[Any, ...], frozenset[str]],
) -> frozenset[str]:
    """`kernels_of`, looked up once per (type, TF type where attrs choose it, output 0's dtype,
    input 0's dtype `source`): what decides an op's kernels (`OpDef.kernel_match`)."""
    varying = getattr(meta, "tf_type_of", None) is not None  # zeros: Const or Fill, ...
    key = (op.type, op.outputs[0].dtype if op.outputs else None, source,
           tf_type_of(meta, op) if varying else None)  # fmt: skip
    found = known.get(key)
    if found is None:
        found = known[key] = kernels_of(meta, op, source)
    return found


def _groups(graph: Graph) -> list[int]:
    """Colocation groups as TensorFlow forms them (`colocate_with` NAME joins group NAME, and
    every op founds or joins its own name's group): the root op index per op."""
    parent = list(range(len(graph.ops)))
    alone = not any([op.colocate_with is not None for op in graph.ops])
    if alone and len({op.name for op in graph.ops}) == len(parent):  # each op its own group
        return parent

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    founder: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for group in (op.colocate_with, op.name):
            if group is not None:
                j = founder.setdefault(group, i)
                if j != i:
                    parent[root(i)] = root(j)
    return [root(i) for i in range(len(parent))]


def free_groups(
    flat: Flat, tf: Placement, num_gpus: int, gpu_tasks: Sequence[TaskName] = ()
) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """(group root per op, GPU indices each free group may use, keyed by root).

    A group missing from the mapping is pinned: its ops keep TensorFlow's decisions in `tf`
    (a group with one candidate GPU is pinned there: TF chose it too). A request matches no
    GPU, one (it names an index) or every GPU, and the groups that may use every GPU share one
    tuple of them, so this is linear in ops plus GPUs (a replica per GPU is 20,000 of each).
    Across hosts, `gpu_tasks` gives each GPU's task (GPU k of the models is `GPU:i` of its
    task, i counting that task's GPUs): a request matches the GPUs of the tasks it names.
    """
    groups = _groups(flat.graph)
    every = tuple(range(num_gpus))
    match = _matching_gpus if not gpu_tasks else _cluster_matcher(gpu_tasks, every)
    matches: dict[str, tuple[int, ...]] = {}
    allowed: dict[int, tuple[int, ...]] = {}
    gpu_kernel = {id(k): "GPU" in k for k in flat.kernels}  # ops share their sets
    for i, op in enumerate(flat.graph.ops):
        found = matches.get(op.device)
        if found is None:
            found = matches[op.device] = match(placer_spec(op.device), every)
        gpus = found if gpu_kernel[id(flat.kernels[i])] else ()
        root = groups[i]
        before = allowed.get(root)
        if before is None or before is every:
            allowed[root] = gpus
        elif gpus is not every:
            allowed[root] = tuple(k for k in before if k in gpus)  # both hold one GPU at most
    free = {root: g for root, g in allowed.items() if len(g) > 1}
    soft = {name for name, d in tf.decisions.items() if d.kind == "soft-fallback"}
    if soft:  # soft placement split the group: keep TF's choice
        for i, name in enumerate(flat.names):
            if name in soft:
                free.pop(groups[i], None)
    return groups, free


def _matching_gpus(spec: DeviceSpec, every: tuple[int, ...]) -> tuple[int, ...]:
    """The GPU indices a device request matches: none, the one it names, or `every` one."""
    if spec.device_index is None:
        return every if every and spec.matches("GPU", 0) else ()
    k = spec.device_index
    return (k,) if 0 <= k < len(every) and spec.matches("GPU", k) else ()


def _cluster_matcher(
    gpu_tasks: Sequence[TaskName], every: tuple[int, ...]
) -> Callable[[DeviceSpec, tuple[int, ...]], tuple[int, ...]]:
    """`_matching_gpus` across hosts: the GPUs (of every task, in model order) a request
    matches, `every` itself when it matches them all."""
    local: list[int] = []
    seen: dict[TaskName, int] = {}
    for task in gpu_tasks:
        local.append(seen.get(task, 0))
        seen[task] = local[-1] + 1

    def match(spec: DeviceSpec, every: tuple[int, ...] = every) -> tuple[int, ...]:
        found = tuple(
            k for k, (t, i) in enumerate(zip(gpu_tasks, local, strict=True))
            if spec.matches_at(t.job, t.replica, t.task, "GPU", i)
        )  # fmt: skip
        return every if found == every else found

    return match
