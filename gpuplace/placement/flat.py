"""A graph flattened for the strategies: int-indexed lists, costs and tensor lifetimes, built once.

`Flat` holds, per op in graph order: the (producer, output) pairs it reads (as int arrays
over every read, `Reads`, for the passes that work over arrays or lists; as tuples per op,
`inputs`, built on first use for the strategies and the training step), its FLOPs and bytes
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, chain, compress, islice, pairwise, repeat
from math import prod
from operator import add, attrgetter, mul
from typing import Any

import numpy as np

from ..devices.cluster import TaskName
from ..devices.names import DeviceSpec, placer_spec
from ..errors import BadInput
from ..graph.model import DTYPES, Graph, Op, OpMeta, TensorSpec, Wiring
from ..units import allocation_size
from .arrays import float_array
from .cost import counted_flops_of, output_rate
from .model import Placement
from .tf import generator_flags, kernels_of, tf_type_of

PRINT = "print"
VARIABLE = "variable"  # moves no bytes (`cost.op_bytes`)
_NAME, _TYPE, _INPUTS, _OUTPUTS = (attrgetter(a) for a in ("name", "type", "inputs", "outputs"))
_SHAPE, _DTYPE, _REF_OP, _REF_INDEX = (attrgetter(a) for a in ("shape", "dtype", "op", "index"))
_DEVICE, _COLOCATE, _KIND = (attrgetter(a) for a in ("device", "colocate_with", "kind"))
SOFT = "soft-fallback"  # the decision of an op soft placement moved


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
    flops: tuple[float, ...]
    nbytes: tuple[int, ...]
    sizes: tuple[tuple[int, ...], ...]  # rounded output sizes; () for print (it allocates none)
    out_bytes: tuple[tuple[int, ...], ...]  # exact output sizes (what a copy moves)
    generator: tuple[bool, ...]  # TF's placer defers it (`IsGeneratorNode`), or a variable
    resident: tuple[bool, ...]  # outputs stay on the device for the whole run (variables)
    kernels: tuple[frozenset[str], ...]  # per op: its type's, narrowed by its dtype
    is_print: tuple[bool, ...]

    fetch: tuple[tuple[int, int], ...]  # (op, output) of every fetched tensor
    reads: Reads = field(compare=False, repr=False)  # every read, as int arrays
    # the last steps `ends` gives where they are not its own (`memory.training` keeps tensors
    # for the backward pass); None: worked out on first use
    given_ends: tuple[tuple[int, ...], ...] | None = field(default=None, repr=False)
    distinct: bool | None = field(default=None, compare=False, repr=False)  # no name twice

    @property
    def last(self) -> int:
        return len(self.names) - 1

    @cached_property
    def inputs(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """The (producer index, output index) pairs each op reads, built on first use: the
        strategies and the training step read them; the estimate reads `reads` (its lists)."""
        return tuple(self.reads.pairs())

    @cached_property
    def ends(self) -> tuple[tuple[int, ...], ...]:
        """Static last step of each output (see the module docstring), worked out on first use
        (balanced and the training step read them; the estimate does not); equal tuples once."""
        if self.given_ends is not None:
            return self.given_ends
        ends = _ends(self.fetch, self.reads, self.resident, self.is_print, self.out_bytes)
        keep: dict[tuple[int, ...], tuple[int, ...]] = {}
        return tuple(map(keep.setdefault, ends, ends))

    @cached_property
    def cost_arrays(self) -> tuple[Any, Any]:
        """`flops` and `nbytes` as float64 arrays (an int converted as `int / float` does),
        built on first use: the estimate's op times and the lower bounds' fastest times both
        work over them (`baselines.times_on`), and the strategies never read them. In C
        loops where compiled (`arrays.float_array`), not numpy's conversion of each item."""
        return float_array(self.flops), float_array(self.nbytes)

    @cached_property
    def first_reader(self) -> tuple[int, ...]:
        """First op reading any output of each op, -1 if none (worked out on first use)."""
        return tuple(self.reads.first_readers())

    def fetched(self) -> list[tuple[int, int]]:
        """(op, output) of every fetched tensor."""
        return list(self.fetch)


def flatten(graph: Graph, op_meta: Callable[[str], OpMeta] | None = None) -> Flat:
    """Flatten `graph` (in execution order, as the loader guarantees) in one linear pass.

    Each list is built over all ops at once (C loops: `map`, `zip`, numpy over the reads as
    int arrays), not op by op: the reads' checks, first readers and last steps over arrays,
    the costs per op type (`cost.output_rate`; the others' `counted_flops`). What depends on
    an op's type or outputs only is worked out once per type or kind of outputs (`Outputs`:
    ops share their tuple of outputs) and gathered per op over arrays of codes, so a graph of
    many ops reads each op's name, type and outputs once."""
    meta_of = default_meta(op_meta)
    ops = graph.ops
    n = len(ops)
    names = tuple(map(_NAME, ops))
    wired = graph.wiring if graph.wiring is not None and graph.wiring.ops is ops else None
    index = dict(zip(names, range(n), strict=True)) if wired is None else wired.index
    types = list(map(_TYPE, ops))
    type_names, type_of = _coded(types)  # each op's type as its index in `metas`
    metas = {t: meta_of(t) for t in type_names}
    outs = Outputs(ops)
    shared: dict[Any, Any] = {}  # equal tuples and sets are kept once (most ops repeat them)
    made = [shared.setdefault(b, b) for b in outs.kind_bytes]  # exact sizes, per kind
    out_bytes = outs.per_op(made)
    if outs.single:  # one output each: slot i is op i's
        first_slot: Sequence[int] = range(n)
        specs = outs.per_op([o[0] for o in outs.kinds])
        dtype_names, kind_dtype = _coded([o[0].dtype for o in outs.kinds])
        slot_dtype = kind_dtype[outs.kind]
    else:
        first_slot = list(accumulate(outs.width.tolist(), initial=0))
        specs = list(chain.from_iterable(map(_OUTPUTS, ops)))  # every output, op by op: a slot each
        dtype_names, slot_dtype = _coded(list(map(_DTYPE, specs)))
    reads = Reads.of(ops, index, outs.width, first_slot, wired)
    resident = _by_type([m.resident for m in metas.values()], type_of).tolist()
    is_print = _by_type([t == PRINT for t in metas], type_of).tolist()
    variable = _by_type([t == VARIABLE for t in metas], type_of)
    fetch = _fetched(graph, index, outs.width)
    dtypes = (dtype_names, slot_dtype)
    kernels = _kernels(ops, types, metas, type_of, dtypes, first_slot, outs.width, reads)
    return Flat(
        graph=graph,
        names=names,
        flops=tuple(_flops(ops, types, metas, type_of, outs, specs, reads)),
        nbytes=tuple(_moved(outs, made, out_bytes, variable, reads)),
        sizes=tuple(_sizes(outs, made, is_print)),
        out_bytes=tuple(out_bytes),
        generator=tuple(generator_flags(ops, metas, residents=True)),
        resident=tuple(resident),
        kernels=tuple(kernels),
        is_print=tuple(is_print),
        fetch=fetch,
        reads=reads,
        distinct=len(index) == n,
    )


class Outputs:
    """The ops' `outputs` by kind: the distinct tuples (by identity: the loader gives the ops
    of one type and shape one tuple), each op's kind (`kind`, an int array), each kind's exact
    output sizes (`kind_bytes`) and elements (`kind_elements`), each op's number of outputs
    (`width`, an int array). Per-op lists are gathered from per-kind ones over arrays
    (`per_op`), not built by a pass over the ops each."""

    def __init__(self, ops: Sequence[Op]) -> None:
        ids = np.fromiter(map(id, map(_OUTPUTS, ops)), np.uint64, len(ops))  # all alive: distinct
        _, first, kind = np.unique(ids, return_index=True, return_inverse=True)
        self.kind = kind.reshape(-1)
        self.kinds: list[tuple[TensorSpec, ...]] = [ops[j].outputs for j in first.tolist()]
        counts = [list(map(prod, map(_SHAPE, o))) for o in self.kinds]
        self.kind_elements: list[int] = list(map(sum, counts))
        self.kind_bytes = [tuple(map(mul, c, map(DTYPES.__getitem__, map(_DTYPE, o))))
                           for c, o in zip(counts, self.kinds, strict=True)]  # fmt: skip
        widths = np.fromiter(map(len, self.kinds), np.intp, len(self.kinds))
        self.width: Any = widths[self.kind]  # an int array: indexed as the lists it replaces
        self.single = bool((widths == 1).all())

    def per_op(self, values: Sequence[Any], at: Any = None) -> list[Any]:
        """Each op's kind's item of `values` (one per kind), the very objects; of the ops at
        the int array `at` only, when given."""
        return _gathered(values, self.kind if at is None else self.kind[at])


def _gathered(values: Sequence[Any], codes: Any) -> list[Any]:
    """`values[c]` for each c of the int array `codes`, the very objects, over numpy."""
    out: list[Any] = _table(values)[codes].tolist()
    return out


def _table(values: Sequence[Any]) -> Any:
    """`values` as an object array of those very objects."""
    table = np.empty(len(values), dtype=object)
    for k, value in enumerate(values):  # one by one: a tuple is an item, not a row
        table[k] = value
    return table


def _coded(values: Sequence[Any]) -> tuple[list[Any], Any]:
    """(the distinct `values` in the order first seen, each value's index there as an int
    array): values as codes, for numpy to work over."""
    distinct = list(dict.fromkeys(values))
    code = dict(zip(distinct, range(len(distinct)), strict=True))
    return distinct, np.fromiter(map(code.__getitem__, values), np.intp, len(values))


def _int_array(values: Sequence[int], n: int) -> Any:
    """The first `n` of `values` as an int array (a range's without a pass over it)."""
    if isinstance(values, range):
        return np.arange(values.start, values.start + n * values.step, values.step, dtype=np.intp)
    return np.fromiter(values, np.intp, n) if n else np.zeros(0, np.intp)


def _by_type(flags: Sequence[bool], type_of: Any) -> Any:
    """Each op's type's flag as a bool array (`flags`, in type code order; `type_of`: each
    op's code)."""
    return np.array(flags, dtype=bool)[type_of]


class Reads:
    """Every read of a flattened graph, in graph order of its readers, as int arrays: the op
    it reads (`producer`), its `output` index there, its `slot` (the op's first output's slot
    plus the output read; slots number every output, op by op), the `reader`; op j's are those
    from `offsets[j]` to `offsets[j + 1]`."""

    def __init__(self, arity: Sequence[int], producers: Sequence[int], output: Any,
                 first_slot: Sequence[int]) -> None:  # fmt: skip
        n, m = len(arity), len(producers)
        counts = np.fromiter(arity, np.intp, n)
        self.reader = np.repeat(np.arange(n, dtype=np.intp), counts)
        self.offsets = np.zeros(n + 1, dtype=np.intp)
        np.cumsum(counts, out=self.offsets[1:])
        self.producer = np.fromiter(producers, np.intp, m)
        self.output = output
        starts = _int_array(first_slot, n)
        self.slot = starts[self.producer] + output
        self.n = n

    @classmethod
    def of(cls, ops: Sequence[Op], index: Mapping[str, int], width: Sequence[int],
           first_slot: Sequence[int], wired: Wiring | None = None,
           ) -> Reads:  # fmt: skip
        """The reads of `ops` (names to indices by `index`, or as the loader `wired` them;
        `width[i]` outputs of op i); BadInput for the first op that reads an output no earlier
        op makes."""
        outputs: Sequence[int] | None
        if wired is not None:  # the loader's: no name looked up again
            arity, producers, outputs = wired.arity, wired.producers, wired.outputs
        else:
            refs_of = list(map(_INPUTS, ops))
            arity = list(map(len, refs_of))
            refs = list(chain.from_iterable(refs_of))
            producers = list(map(index.get, map(_REF_OP, refs), repeat(-1)))
            outputs = list(map(_REF_INDEX, refs))
        if outputs is None:  # every read is an output 0 (the loader's)
            output = np.zeros(len(producers), dtype=np.intp)
        elif producers and not (min(outputs) >= 0 and max(outputs) < 1 << 31):
            _refuse_reads(ops, index, width)  # raises
        else:
            output = np.fromiter(outputs, np.intp, len(producers))  # an array while checked
        reads = cls(arity, producers, output, first_slot)
        p = reads.producer
        if producers and ((p < 0) | (p >= reads.reader)
                     | (output >= np.asarray(width, dtype=np.intp)[p])).any():  # fmt: skip
            _refuse_reads(ops, index, width)  # raises
        return reads

    def pairs(self) -> list[tuple[tuple[int, int], ...]]:
        """Per op, the (producer, output) pairs it reads; equal pairs are one tuple, and so
        are equal tuples of one pair (a fan's readers all read one)."""
        n = self.n
        producers = self.producer.tolist()
        if self.output.any():
            pairs = list(zip(producers, self.output.tolist(), strict=True))
            same: dict[tuple[int, int], tuple[int, int]] = {}
            pairs = list(map(same.setdefault, pairs, pairs))
        else:  # every read is an output 0: one pair per op, shared by its readers
            pairs = list(map(list(zip(range(n), repeat(0))).__getitem__, producers))
        return _grouped(pairs, (self.offsets[1:] - self.offsets[:-1]).tolist())

    def first_readers(self) -> list[int]:
        """Per op, the first op reading any of its outputs, -1 if none."""
        first = np.full(self.n, self.n, dtype=np.intp)
        np.minimum.at(first, self.producer, self.reader)
        first[first == self.n] = -1
        out: list[int] = first.tolist()
        return out


def _refuse_reads(ops: Sequence[Op], index: Mapping[str, int], width: Sequence[int]) -> None:
    """The first op (in graph order) whose reads `Reads` found wrong, in words: an output no
    earlier op produces (an unknown op or output index), or an op that comes after it."""
    for j, op in enumerate(ops):
        reads = [(index.get(r.op, -1), r.index) for r in op.inputs]
        if any(p < 0 or not 0 <= k < width[p] for p, k in reads):
            raise BadInput(f"op '{op.name}' reads an output no earlier op produces")
        if any(p >= j for p, _ in reads):
            raise BadInput(f"op '{op.name}' reads an op that comes after it: order the graph")
    raise AssertionError("Reads found a read wrong that no op makes")


def _grouped(items: Sequence[Any], counts: Sequence[int]) -> list[tuple[Any, ...]]:
    """`items` cut into consecutive tuples of `counts` items each; equal tuples of one item
    are one tuple (a fan's readers all read one)."""
    if counts.count(1) == len(counts):
        ones: dict[Any, tuple[Any, ...]] = {}
        return list(map(ones.setdefault, items, zip(items)))
    it = iter(items)
    return [tuple(islice(it, c)) for c in counts]


def _fetched(
    graph: Graph, index: Mapping[str, int], width: Sequence[int]
) -> tuple[tuple[int, int], ...]:
    """(op, output) of every fetched tensor; BadInput for one no op makes."""
    fetch = []
    for ref in graph.fetch:
        i = index.get(ref.op)
        if i is None or not 0 <= ref.index < width[i]:
            raise BadInput(f"fetch '{ref}' names no output of the graph's ops")
        fetch.append((i, ref.index))
    return tuple(fetch)


def _ends(fetch: Sequence[tuple[int, int]], reads: Reads, resident: Sequence[bool],
          is_print: Sequence[bool], out_bytes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:  # fmt: skip
    """Static last step of every output (see the module docstring), per op."""
    n, last = len(out_bytes), len(out_bytes) - 1
    width = list(map(len, out_bytes))
    owner = np.repeat(np.arange(n, dtype=np.intp), np.fromiter(width, np.intp, n))
    ends = np.where(np.fromiter(resident, bool, n)[owner], last, owner)
    np.maximum.at(ends, reads.slot, reads.reader)
    starts = list(accumulate(width, initial=0))
    for i, k in fetch:
        ends[starts[i] + k] = last
    slot_ends: list[int] = ends.tolist()
    if any(is_print):  # print forwards its inputs: their life includes its
        slot, offsets = reads.slot.tolist(), reads.offsets.tolist()
        for j in range(n - 1, -1, -1):
            if is_print[j]:
                for s, end in zip(slot[offsets[j] : offsets[j + 1]],
                                  slot_ends[starts[j] : starts[j + 1]], strict=False):  # fmt: skip
                    slot_ends[s] = max(slot_ends[s], end)
    if len(slot_ends) == n and width.count(1) == n:
        return list(zip(slot_ends))
    return [tuple(slot_ends[a:b]) for a, b in pairwise(starts)]


def _flops(ops: Sequence[Op], types: Sequence[str], metas: Mapping[str, OpMeta], type_of: Any,
           outs: Outputs, specs: Sequence[TensorSpec], reads: Reads) -> list[float]:  # fmt: skip
    """`op_flops` of each op: its type's rate times its outputs' elements, else counted from
    its inputs (`counted_flops`); equal counts kept once. `type_of`: each op's type as its
    index in `metas`."""
    rates = list(map(output_rate, metas, metas.values()))  # None: counted
    # once per pair of a type and a kind of outputs (`Outputs`), in Python's arithmetic: rate
    # x elements, 0.0 where the rate is 0; counted types after, type by type, over their ops
    kinds = len(outs.kinds)
    pairs, pair_of = np.unique(type_of * kinds + outs.kind, return_inverse=True)
    same: dict[float, float] = {}
    keep = same.setdefault
    per_pair: list[Any] = []
    for c in pairs.tolist():
        rate = rates[c // kinds]
        f = rate * outs.kind_elements[c % kinds] if rate else 0.0
        per_pair.append(keep(f, f))
    counted = [t for t, rate in zip(metas, rates, strict=True) if rate is None]
    if not counted:
        return _gathered(per_pair, pair_of.reshape(-1))
    flops = _table(per_pair)[pair_of.reshape(-1)]  # an object array, the counts set below
    slot, offsets = reads.slot.tolist(), reads.offsets.tolist()
    code = dict(zip(metas, range(len(metas)), strict=True))
    for t in counted:  # type by type, over the ops of each
        at = np.flatnonzero(type_of == code[t])
        these: list[int] = at.tolist()

        def inputs(i: int, these: list[int] = these) -> tuple[TensorSpec, ...]:
            j = these[i]
            return tuple(map(specs.__getitem__, slot[offsets[j] : offsets[j + 1]]))

        def firsts(these: list[int] = these) -> list[TensorSpec]:
            at = reads.offsets[these]
            if (reads.offsets[np.add(these, 1)] == at).any():  # one reads nothing
                return [inputs(i)[0] for i in range(len(these))]  # IndexError, as op_flops
            return list(map(specs.__getitem__, reads.slot[at].tolist()))

        counts = counted_flops_of(t, metas[t], list(map(ops.__getitem__, these)),
                                  outs.per_op(outs.kind_elements, at), inputs, firsts)  # fmt: skip
        flops[at] = np.fromiter(map(keep, counts, counts), object, len(these))
    out: list[float] = flops.tolist()
    return out


def _moved(outs: Outputs, made: Sequence[tuple[int, ...]], out_bytes: Sequence[tuple[int, ...]],
           variable: Any, reads: Reads) -> list[int]:  # fmt: skip
    """`op_bytes` of each op (inputs read plus outputs written; a variable none), from the
    output sizes (`made`: each kind's, `out_bytes`: each op's; `variable`: a bool array): over
    int64 arrays where every total fits one, else Python's integers; equal counts kept once."""
    top = max(chain.from_iterable(made), default=0)
    widest = max(map(len, made), default=0)
    if top * (len(reads.slot) + widest + 1) < 1 << 62:
        if outs.single:
            sizes = np.array([m[0] for m in made], dtype=np.int64)[outs.kind]
        else:
            sizes = np.fromiter(chain.from_iterable(out_bytes), np.int64, int(outs.width.sum()))
        total = np.zeros(len(reads.slot) + 1, dtype=np.int64)  # bytes read up to each read
        np.cumsum(sizes[reads.slot], out=total[1:])
        at = total[reads.offsets]
        moved = at[1:] - at[:-1] + np.array(list(map(sum, made)), dtype=np.int64)[outs.kind]
        moved[variable] = 0
        counts, each = np.unique(moved, return_inverse=True)
        return _gathered(counts.tolist(), each.reshape(-1))
    slot_bytes = list(chain.from_iterable(out_bytes))
    slot, offsets = reads.slot.tolist(), reads.offsets.tolist()
    read = [sum(map(slot_bytes.__getitem__, slot[a:b])) for a, b in pairwise(offsets)]
    total_moved = list(map(add, read, outs.per_op(list(map(sum, made)))))
    for j in np.flatnonzero(variable).tolist():
        total_moved[j] = 0
    same: dict[int, int] = {}
    return list(map(same.setdefault, total_moved, total_moved))


def _sizes(outs: Outputs, made: Sequence[tuple[int, ...]], is_print: Sequence[bool]) -> list[tuple[int, ...]]:  # fmt: skip
    """Each op's output sizes as the allocator rounds them (`made`: each kind's exact sizes; equal
    ones rounded once); () for print (it allocates none)."""
    rounded = {m: tuple(map(allocation_size, m)) for m in made}
    sizes = outs.per_op(list(map(rounded.__getitem__, made)))
    if any(is_print):
        sizes = [() if p else s for s, p in zip(sizes, is_print, strict=True)]
    return sizes


def _kernels(ops: Sequence[Op], types: Sequence[str], metas: Mapping[str, OpMeta], type_of: Any,
             dtypes: tuple[Sequence[str], Any], first_slot: Sequence[int], width: Any,
             reads: Reads) -> list[frozenset[str]]:  # fmt: skip
    """`kernels_of` each op, looked up once per (type, output 0's dtype, input 0's dtype, TF
    type where attrs choose it): what decides an op's kernels (`OpDef.kernel_match`); the
    first op of each such key is the one asked. Without types whose TF type varies, each key
    is one integer of codes and the ops are grouped by a stable sort of them. `type_of`: each
    op's type as its index in `metas`; `dtypes`: (the dtypes, each slot's index there)."""
    n = len(types)
    dtype_names, slot_dtype = dtypes
    named = [*dtype_names, None]  # the last code: none (slot -1)
    codes = np.append(slot_dtype, len(dtype_names))
    own = _int_array(first_slot, n)
    own[np.asarray(width) == 0] = -1
    source = np.full(n, -1, dtype=np.intp)
    has = np.flatnonzero(np.diff(reads.offsets))
    source[has] = reads.slot[reads.offsets[has]]
    own_dtype, source_dtype = codes[own], codes[source]
    varying = {t for t, m in metas.items() if getattr(m, "tf_type_of", None) is not None}
    if n and not varying:  # each key as one integer: its type's and dtypes' codes
        base = len(named)
        key = (type_of * base + own_dtype) * base + source_dtype
        order = np.argsort(key, kind="stable")  # each key's first op leads its run
        ordered = key[order]
        starts = np.r_[True, ordered[1:] != ordered[:-1]]
        group = np.empty(n, dtype=np.intp)
        group[order] = np.cumsum(starts) - 1
        asked = [kernels_of(metas[types[j]], ops[j], named[source_dtype[j]])
                 for j in order[starts].tolist()]  # fmt: skip
        return _gathered(asked, group)
    first_dtypes = map(named.__getitem__, own_dtype.tolist())
    keys: list[tuple[Any, ...]] = list(
        zip(types, first_dtypes, map(named.__getitem__, source_dtype.tolist()), strict=True)
    )
    if varying:  # zeros: Const or Fill, ...
        for j, t in enumerate(types):
            if t in varying:
                keys[j] = (*keys[j], tf_type_of(metas[t], ops[j]))
    firsts = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))  # each key's first op
    known = {key: kernels_of(metas[key[0]], ops[j], key[2]) for key, j in firsts.items()}
    return list(map(known.__getitem__, keys))


def _alone(graph: Graph, distinct: bool | None = None) -> bool:
    """Whether each op of `graph` is a colocation group of its own: none names a
    `colocate_with` and no two share a name (`distinct`, when known; C loops over the ops)."""
    ops = graph.ops
    n = len(ops)
    if list(map(_COLOCATE, ops)).count(None) != n:
        return False
    return distinct if distinct is not None else len(set(map(_NAME, ops))) == n


def _groups(graph: Graph) -> list[int]:
    """Colocation groups as TensorFlow forms them (`colocate_with` NAME joins group NAME, and
    every op founds or joins its own name's group): the root op index per op."""
    parent = list(range(len(graph.ops)))
    if _alone(graph):  # each op its own group
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
    every = tuple(range(num_gpus))
    match = _matching_gpus if not gpu_tasks else _cluster_matcher(gpu_tasks, every)
    matches: dict[str, tuple[int, ...]] = {}
    allowed: dict[int, tuple[int, ...]]
    if _alone(flat.graph, flat.distinct):  # a group per op: GPUs per (request, kernels) kind
        kinds, gpus_of = _kinds(flat, every, match, matches)
        free_kind = [kind for kind, gpus in gpus_of.items() if len(gpus) > 1]
        groups = list(range(len(flat.names)))  # the keys of `free` are these very ints
        if len(gpus_of) == 1:  # all alike (most large graphs)
            free = dict.fromkeys(groups, gpus_of[free_kind[0]]) if free_kind else {}
        else:
            is_free = {kind: len(gpus) > 1 for kind, gpus in gpus_of.items()}
            own = map(gpus_of.__getitem__, kinds)
            free = dict(compress(zip(groups, own, strict=True), map(is_free.__getitem__, kinds)))
        return groups, _unsplit(free, groups, flat, tf)
    groups = _groups(flat.graph)
    allowed = {}
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
    return groups, _unsplit(free, groups, flat, tf)


def free_candidates(flat: Flat, tf: Placement, num_gpus: int) -> list[tuple[int, ...] | None]:
    """Per op, the GPU indices its group may use when it is free, else None (pinned): what
    `free_groups` says of each op, on one host (`baselines._options` works it out in its own
    pass where each op is a group of its own)."""
    groups, free = free_groups(flat, tf, num_gpus)
    return list(map(free.get, groups))


def _kinds(
    flat: Flat,
    every: tuple[int, ...],
    match: Callable[[DeviceSpec, tuple[int, ...]], tuple[int, ...]],
    matches: dict[str, tuple[int, ...]],
) -> tuple[list[tuple[str, frozenset[str]]], dict[tuple[str, frozenset[str]], tuple[int, ...]]]:
    """(each op's kind: its request and kernels, or the first op's alone where every op has
    the same; the GPUs each kind may use, by `match` of its request, () without a GPU kernel).
    `matches`: each request's GPUs, found once."""
    ops, n = flat.graph.ops, len(flat.names)
    requests = dict.fromkeys(map(_DEVICE, ops))
    if n and len(requests) == 1 and len(dict.fromkeys(map(id, flat.kernels))) == 1:
        kinds: list[tuple[str, frozenset[str]]] = [(ops[0].device, flat.kernels[0])]
    else:
        kinds = list(zip(map(_DEVICE, ops), flat.kernels, strict=True))
    gpus_of: dict[tuple[str, frozenset[str]], tuple[int, ...]] = {}
    for device, kernels in dict.fromkeys(kinds):
        found = matches.get(device)
        if found is None:
            found = matches[device] = match(placer_spec(device), every)
        gpus_of[device, kernels] = found if "GPU" in kernels else ()
    return kinds, gpus_of


def _unsplit(free: dict[int, tuple[int, ...]], groups: Sequence[int], flat: Flat,
             tf: Placement) -> dict[int, tuple[int, ...]]:  # fmt: skip
    """`free` less the groups soft placement split (`_soft_split`): those keep TF's choice."""
    for i in _soft_split(flat, tf):
        free.pop(groups[i], None)
    return free


def _soft_split(flat: Flat, tf: Placement) -> list[int]:
    """The ops TF placed by `soft-fallback` (soft placement moved them), in graph order."""
    if SOFT not in map(_KIND, tf.decisions.values()):
        return []
    soft = {name for name, d in tf.decisions.items() if d.kind == SOFT}
    return [i for i, name in enumerate(flat.names) if name in soft]


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
