"""Baselines to judge a placement against: lower bounds on the makespan, and round-robin.

`lower_bounds` follows the reference notes (A.5): no placement that honours the graph's
requests can beat the critical path at each op's fastest allowed device with free copies,
nor the work that must run on GPUs spread evenly over them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np

from ..devices.names import full_name, placer_spec
from ..graph.model import Graph, OpMeta
from . import place
from .arrays import float_array, int_array
from .cost import DeviceModel, LinkModel, copy_time, split_devices
from .flat import (
    _DEVICE,
    SOFT,
    Flat,
    Reads,
    _alone,
    _matching_gpus,
    default_meta,
    flatten,
    free_candidates,
    free_groups,
)
from .model import Decision, Placement


def _options(flat: Flat, tf: Placement, gpus: Sequence[DeviceModel], cpu: DeviceModel,
             models: dict[str, DeviceModel], num_gpus: Any,
             ) -> tuple[list[list[DeviceModel]], Any]:  # fmt: skip
    """The devices each op may end up on under any strategy that honours TF's pins: TF's
    device for a pinned op; the group's GPUs for a free op, plus the CPU for an unrequested
    generator with a CPU kernel (it may follow a consumer there, as TF's heuristic A does).
    As (the distinct lists, each op's index into them as an int array): ops share a few lists.

    Where each op is a group of its own (most graphs), an op's GPUs are worked out in this
    one pass, as `free_groups` finds them: its request's GPUs (once per request), when there
    are more than one, it has a GPU kernel and soft placement did not move it; else by
    group (`free_candidates`). What decides an op's list is its request, its kernels (a set
    ops share), its decision (an object ops share) and its generator flag (and its group's
    candidates): an op with the very same ones as the op before has its list, with no rule
    worked out again (most ops of a large graph)."""
    decisions, ops, kernels, generator = tf.decisions, flat.graph.ops, flat.kernels, flat.generator
    names = flat.names
    every = None if _alone(flat.graph, flat.distinct) else free_candidates(flat, tf, num_gpus)
    everyone = tuple(range(num_gpus))
    movable: dict[str, Any] = {}  # per request: its GPUs (more than one), else None
    choices: list[list[DeviceModel]] = []
    known: dict[Any, int] = {}  # a list's index: by device (pinned), by candidates (free)
    decided = (list(decisions.values()) if tuple(decisions) == names
               else list(map(decisions.__getitem__, names)))  # in graph order  # fmt: skip
    requests = list(map(_DEVICE, ops))
    n = len(names)
    picked = np.empty(n, np.intp)
    pick = picked  # a view of its memory where compiled
    k = -1
    # the op before's request, kernels, decision, generator flag and candidates (`known`:
    # none yet)
    last_request: Any = known
    last_kernels: Any = known
    last_decision: Any = known
    last_generator: Any = known
    last_every: Any = known
    asked: Any = known  # the last request looked up in `movable`, and its GPUs
    asked_gpus: Any = None
    keyed: Any = known  # the last candidates keyed, and their id
    keyed_id = 0
    j = 0  # a counter, not enumerate(): compiled, a C integer
    while j < n:
        request, kinds, decision, gen = requests[j], kernels[j], decided[j], generator[j]
        group = None if every is None else every[j]
        if not (kinds is last_kernels and decision is last_decision and gen is last_generator
                and group is last_every
                and (request is last_request or request == last_request)):  # fmt: skip
            if every is None:  # a group of its own
                if request is not asked:
                    cands = movable.get(request, known)  # (`known`: not yet known)
                    if cands is known:
                        found_gpus = _matching_gpus(placer_spec(request), everyone)
                        cands = movable[request] = found_gpus if len(found_gpus) > 1 else None
                    asked, asked_gpus = request, cands
                cands = asked_gpus
                if cands is not None and ("GPU" not in kinds or decision.kind == SOFT):
                    cands = None
            else:
                cands = group
            if cands is None:
                key: Any = decision.device
                flag = False
            else:  # groups share candidate tuples
                flag = gen and "CPU" in kinds and not request
                if cands is not keyed:
                    keyed, keyed_id = cands, id(cands)
                key = (keyed_id, flag)
            found = known.get(key)
            if found is None:
                found = known[key] = len(choices)
                if cands is None:
                    choices.append([models[key]])
                else:  # a bound needs one GPU per rate, not all 20,000 logical GPUs
                    choices.append(
                        [*_one_per_rate([gpus[i] for i in cands]), *([cpu] if flag else [])]
                    )
            k = found
            last_request, last_kernels, last_decision = request, kinds, decision
            last_generator, last_every = gen, group
        pick[j] = k
        j += 1
    return choices, picked


def _one_per_rate(models: Sequence[DeviceModel]) -> list[DeviceModel]:
    """The first of each kind and rate among `models`: the same fastest time as all of them."""
    seen: dict[tuple[str, float, float, float], DeviceModel] = {}
    for m in models:
        seen.setdefault((m.kind, m.flops, m.bandwidth, m.overhead), m)
    return list(seen.values())


class Bounds(NamedTuple):
    """Three makespans no placement honouring the graph's requests can beat (seconds)."""

    critical_path: float  # the longest chain at each op's fastest allowed device, free copies
    work: float  # the GPU-bound work spread evenly over the GPUs (or the CPU-bound ops' total)
    stages: float  # stage by stage, with the copies into and out of the ops every path crosses

    @property
    def best(self) -> float:
        """The tightest of the three."""
        return max(self)


def lower_bounds(
    graph: Graph,
    devices: Sequence[DeviceModel],
    link: LinkModel | None = None,
    *,
    op_meta: Callable[[str], OpMeta] | None = None,
    allow_soft_placement: bool = False,
    tf: Placement | None = None,
    flat: Flat | None = None,
) -> Bounds:
    """Critical path, work per GPU and stage by stage: no placement honouring the graph's
    requests finishes sooner under the cost model (`estimate`).

    With w_min(op) its fastest time on a device it may use (reference notes A.5): the critical
    path is the longest chain of w_min with free copies; the work bound is the w_min of the ops
    that must run on a GPU, summed and divided by the number of GPUs (or the CPU-bound ops'
    total, when that is larger: the CPU runs them one at a time). The stage bound applies both
    per stage and counts the copies a stage cannot avoid (`_Stages`). A caller that already has
    TensorFlow's placement of `graph` (`tf`) or its flattened form (`flat`) passes them.
    """
    meta = default_meta(op_meta)
    gpus, cpu = split_devices(devices)
    if tf is None:
        tf = place(graph, len(gpus), allow_soft_placement=allow_soft_placement, op_meta=meta)
    if flat is None:
        flat = flatten(graph, meta)
    choices, pick = _options(flat, tf, gpus, cpu, {m.name: m for m in (*gpus, cpu)}, len(gpus))
    w, where = _fastest(flat, choices, pick)
    cp, work = _critical_path(flat.reads, w, where, len(gpus))
    return Bounds(cp, work, _Stages(flat, w, where, len(gpus), link or LinkModel()).total())


def by_label(labels: Sequence[int], count: int) -> list[Any]:
    """The positions holding each label 0..count-1 (int arrays, ascending): one stable sort,
    not a scan of every position per label (20,000 logical GPUs are 20,000 labels)."""
    label = int_array(labels)
    order = np.argsort(label, kind="stable")
    ends = np.cumsum(np.bincount(label, minlength=count))
    return np.split(order, ends[:-1])


def times_on(flops: Any, nbytes: Any, device: DeviceModel) -> Any:
    """`work_time` of arrays of FLOPs and bytes on `device`: numpy's float64 division,
    maximum and addition are Python's, so each time is `work_time`'s to the last bit."""
    return np.maximum(flops / device.flops, nbytes / device.bandwidth) + device.overhead


def _fastest(flat: Flat, choices: Sequence[Sequence[DeviceModel]],
             pick: Sequence[int]) -> tuple[Any, Any]:  # fmt: skip
    """Per op: its fastest time on the devices it may use (`choices[pick[op]]`), and where it
    must run (1: a GPU, 2: the CPU, 0: either), as a float64 and an int array, over arrays
    (`times_on`). A few lists over a few rates (`RATE_TABLE`): each list's fastest time of
    every op, then each op's own (`np.choose`), with no sort of the ops by list; else the ops
    of each list apart."""
    flops, nbytes = flat.cost_arrays
    kinds = [1 if all(m.kind == "GPU" for m in opts) else 2 if len(opts) == 1 else 0
             for opts in choices]  # fmt: skip
    picked = int_array(pick)
    table = None
    if 0 < len(choices) <= RATE_TABLE:
        table = rate_table(flops, nbytes, [m for opts in choices for m in opts])
    if table is not None:
        rows, which = table
        at = 0
        bests = []
        for opts in choices:  # the minimum in each list's order, as below
            best = rows[which[at]]
            for i in range(at + 1, at + len(opts)):
                best = np.minimum(best, rows[which[i]])
            bests.append(best)
            at += len(opts)
        w = np.choose(picked, bests)
    else:
        w = np.empty(len(picked))
        for opts, sel in zip(choices, by_label(picked, len(choices)), strict=True):
            f, b = flops[sel], nbytes[sel]
            best = None
            for m in opts:
                t = times_on(f, b, m)
                best = t if best is None else np.minimum(best, t)
            w[sel] = best
    return w, np.array(kinds, np.intp)[picked]


RATE_TABLE = 4  # up to this many rates (or lists of devices), times are found for every op


def rate_table(flops: Any, nbytes: Any,
               models: Sequence[DeviceModel]) -> tuple[list[Any], list[int]] | None:  # fmt: skip
    """`times_on` of every op (`flops`, `nbytes`) at each rate (FLOP/s, bandwidth, overhead)
    of `models`, where they have at most `RATE_TABLE` rates between them: each rate's times
    found once (the same numbers, the same float operations), with each model's rate (an
    index into them); else None."""
    index: dict[tuple[float, float, float], int] = {}
    which = [index.setdefault((m.flops, m.bandwidth, m.overhead), len(index)) for m in models]
    if len(index) > RATE_TABLE:
        return None
    firsts = {k: m for k, m in zip(which, models, strict=True)}  # each rate's last model
    return [times_on(flops, nbytes, firsts[k]) for k in range(len(index))], which


def _critical_path(reads: Reads, w: Sequence[float], where: Sequence[int],
                   num_gpus: int) -> tuple[float, float]:  # fmt: skip
    """(critical path, work bound) of the whole graph (its `reads`), in one pass over its ops."""
    path, gpu_work, cpu_work = _chains(reads.producer, reads.offsets, float_array(w),
                                       int_array(where))  # fmt: skip
    work = max(gpu_work / num_gpus, cpu_work) if num_gpus else gpu_work + cpu_work
    return path, work


def _chains(producer: Any, offsets: Any, w: Any, where: Any) -> tuple[float, float, float]:
    """(the longest chain of `w` over the reads (`Reads`' int arrays `producer` and
    `offsets`), the GPU-bound work, the CPU-bound work: `w` a float64 and `where` an int
    array); its loops run on C integers and doubles where compiled, over the arrays' memory
    (baselines.pxd)."""
    n = len(w)
    longest = np.zeros(n)
    chain = longest  # a view of its memory where compiled
    j = 0  # counters, not enumerate(): compiled, C integers (enumerate's are objects)
    path = 0.0  # max(): the first of the longest, at least 0.0
    while j < n:
        r, stop = offsets[j], offsets[j + 1]
        if r < stop:
            p = producer[r]
            best = chain[p]
            r += 1
            while r < stop:
                p = producer[r]
                if chain[p] > best:
                    best = chain[p]
                r += 1
            chain[j] = w[j] + best
        else:
            chain[j] = w[j] + 0.0
        if chain[j] > path:
            path = chain[j]
        j += 1
    gpu_work = cpu_work = 0.0
    j = 0
    while j < n:  # in graph order, one addition at a time
        kind = where[j]
        if kind == 1:
            gpu_work += w[j]
        elif kind == 2:
            cpu_work += w[j]
        j += 1
    return path, gpu_work, cpu_work


def stage_bound(flat: Flat, w: Sequence[float], where: Sequence[int], num_gpus: int,
                link: LinkModel) -> float:  # fmt: skip
    """The stage-by-stage bound (`_Stages`) of ops taking `w` seconds at best, `where` they
    must run (1: a GPU, 2: the CPU, 0: either)."""
    return _Stages(flat, w, where, num_gpus, link).total()


NUMPY_OPS = 2_000  # from this many ops on, the cuts are found over arrays (`_cuts`)


def _cuts(reads: Reads, keep: Sequence[bool]) -> list[int]:
    """`_Stages.cuts` over numpy arrays (the flattened graph's `reads`), the same integers
    counted the same way: the edges (reader, kept producer) once each, sorted; each
    producer's first reader; each reader's newest input; the prefix's sinks and the suffix's
    sources as cumulative sums."""
    n = len(keep)
    producer, reader = reads.producer, reads.reader
    kept = int_array(keep) != 0
    edge = reader[kept[producer]] * n + producer[kept[producer]]
    if not (edge[1:] >= edge[:-1]).all():  # (most graphs list each op's inputs in order)
        edge = np.sort(edge)
    edge = edge[np.r_[True, edge[1:] != edge[:-1]]] if len(edge) else edge  # np.unique's,
    # without the hash table numpy 2 builds first (ten times the sort here)
    reader, producer = edge // n, edge % n
    first_reader = np.full(n, n, dtype=np.intp)
    np.minimum.at(first_reader, producer, reader)  # no sort of the producers
    newest = np.ones(len(edge), dtype=bool)  # each reader's last edge: its newest input
    newest[:-1] = reader[1:] != reader[:-1]
    newest_read = np.bincount(producer[newest], minlength=n)
    firsts = np.bincount(reader[first_reader[producer] == reader], minlength=n)
    sinks = np.cumsum(np.where(kept, 1 - firsts, 0))
    sources = np.cumsum(np.where(kept, 1 - newest_read, 0)[::-1])[::-1]
    cuts: list[int] = np.flatnonzero(kept & (sinks == 1) & (sources == 1)).tolist()
    return cuts


def _stage_pass(members: Any, stage: Any, producer: Any, offsets: Any, w: Any, where: Any,
                longest: Any, path: Any, gpu_work: Any, cpu_work: Any,
                size: Any) -> None:  # fmt: skip
    """`_Stages.total`'s pass over the stages' ops (`members`, in graph order): the longest
    chain ending at each op over its stage's own edges, and per stage its critical path, its
    GPU and CPU work and its ops. The reads are `Reads`' int arrays `producer` and `offsets`;
    every other argument is an int or float64 array too. Its loops run on C integers and
    doubles where compiled, over the arrays' memory (baselines.pxd)."""
    i, n = 0, len(members)  # a counter, not a for loop: compiled, a C integer
    while i < n:
        j = members[i]
        i += 1
        mine = stage[j]
        best = 0.0
        r, stop = offsets[j], offsets[j + 1]
        while r < stop:
            p = producer[r]
            r += 1
            if stage[p] == mine and longest[p] > best:
                best = longest[p]
        here = longest[j] = w[j] + best
        if here > path[mine]:
            path[mine] = here
        kind = where[j]
        if kind == 1:
            gpu_work[mine] += w[j]
        elif kind == 2:
            cpu_work[mine] += w[j]
        size[mine] += 1


def _total(values: Any) -> float:
    """The sum of a float64 array one addition at a time, in order: `sum` of its floats as a
    list, to the last bit (numpy's own sum adds pairwise); on C doubles where compiled."""
    total = 0.0
    i, n = 0, len(values)
    while i < n:
        total += values[i]
        i += 1
    return total


def _fan_in_split(works: Any, copies: Any, order: Any, local: float, remote: float) -> float:
    """`_Stages._fan_in`'s split: the producers (`works`, `copies`: float64 arrays) taken in
    `order` (an int array) move their work to the cut's device (`local`) while that stays
    within the copies still to make (`remote`); the first that does not is split by
    fractions. On C doubles where compiled (baselines.pxd): Python's float arithmetic, to the
    last bit."""
    i, n = 0, len(order)  # a counter, not a for loop: compiled, a C integer
    while i < n:
        j: int = order[i]
        i += 1
        work: float = works[j]
        copy: float = copies[j]
        if local + work <= remote - copy:
            local, remote = local + work, remote - copy
            continue
        return min(_total(works), local + work * (remote - local) / (work + copy))
    return local  # every producer on the cut's device: no copy at all


def _firsts_of_runs(values: Any) -> Any:
    """Where each run of equal items of the int array `values` starts (an int array)."""
    starts = np.ones(len(values), dtype=bool)
    starts[1:] = values[1:] != values[:-1]
    return np.flatnonzero(starts)


def _read_sizes(out_bytes: Any, producer: Any, output: Any, at: Any) -> Any:
    """The exact sizes (`Flat.out_bytes`, a tuple per op) of the outputs the reads `at` read
    (read indices into `Reads`' int arrays `producer` and `output`), as a float64 array: each
    int converted as `int / float` converts it; in a C loop where compiled (baselines.pxd)."""
    n = len(at)
    out = np.empty(n, np.float64)
    into = out  # a view of its memory where compiled
    i = 0
    while i < n:
        r = at[i]
        into[i] = out_bytes[producer[r]][output[r]]
        i += 1
    return out


class _Stages:
    """The stage-by-stage bound, in O(V + E) (plus sorting each cut's inputs).

    A cut is an op that every other op leads to or follows from: in graph order, it is the only
    op of the graph up to it that nothing up to it reads (the only sink of that prefix), and the
    only op from it on that reads nothing from it on (the only source of that suffix). The ops
    between two cuts form a stage; stages and cuts cannot overlap in time, so the makespan is at
    least the cuts' own times plus, per stage, the longest of:
    - its critical path and its work / GPUs (free copies);
    - fan-out: the stage's readers of the cut before it run on that cut's device or wait for a
      copy from there, and its outbound link makes one copy at a time (`_fan_out`);
    - fan-in: the stage's ops that the next cut reads run on its device or send it a copy, and
      its inbound link takes one at a time (`_fan_in`).
    Generators (variables, constants) may run at any time: they are left out, which keeps the
    sum a lower bound (a schedule of every op is also one of the rest). `w` and `where` are
    kept as a float64 and an int array: the stages' passes work over arrays, not per op.
    """

    def __init__(self, flat: Flat, w: Sequence[float], where: Sequence[int], num_gpus: int,
                 link: LinkModel) -> None:  # fmt: skip
        self.flat, self.num_gpus, self.link = flat, num_gpus, link
        self.w, self.where = float_array(w), int_array(where)
        self.keep = [not g for g in flat.generator]

    def reads(self) -> list[list[int]]:
        """Per op, the ops it reads that are kept (not generators), ascending, once each."""
        keep, reads = self.keep, self.flat.reads
        producer, offsets = reads.producer.tolist(), reads.offsets.tolist()
        return [sorted({p for p in producer[a:b] if keep[p]}) for a, b in pairwise(offsets)]

    def cuts(self) -> list[int]:
        """The cuts in graph order: over arrays from `NUMPY_OPS` ops on (`_cuts`)."""
        if len(self.w) >= NUMPY_OPS:
            return _cuts(self.flat.reads, self.keep)
        n, reads, keep = len(self.w), self.reads(), self.keep
        first_reader, newest_read = [n] * n, [0] * n
        for j in range(n):
            for p in reads[j]:
                first_reader[p] = min(first_reader[p], j)
            if reads[j]:  # j stops being a suffix source once its newest input joins
                newest_read[reads[j][-1]] += 1
        sinks, sink_only = 0, [False] * n
        for j in range(n):
            if keep[j]:
                sinks += 1 - sum(1 for p in reads[j] if first_reader[p] == j)
                sink_only[j] = sinks == 1
        sources, cuts = 0, []
        for j in range(n - 1, -1, -1):
            if keep[j]:
                sources += 1 - newest_read[j]
                if sources == 1 and sink_only[j]:
                    cuts.append(j)
        return cuts[::-1]

    def total(self) -> float:
        cuts = self.cuts()
        if not cuts:
            return 0.0
        n, w = len(self.w), self.w
        # each kept op's stage (the cuts before it), -1 for the cuts and generators
        cut_at = np.array(cuts, dtype=np.intp)
        at = np.searchsorted(cut_at, np.arange(n), side="right")
        cut = np.zeros(n, dtype=bool)
        cut[cuts] = True
        stage_of = np.where((int_array(self.keep) != 0) & ~cut, at, -1)
        members = np.flatnonzero(stage_of >= 0)  # in graph order
        # per stage, in one pass over its ops: the longest chain ending at each op over
        # the stage's own edges, its critical path, its GPU and CPU work, its ops
        longest = np.zeros(n)
        count = len(cuts) + 1
        sums = np.zeros((3, count))  # per stage: its critical path, GPU work and CPU work
        sizes = np.zeros(count, np.intp)
        reads = self.flat.reads
        _stage_pass(members, stage_of, reads.producer, reads.offsets, w, self.where, longest,
                    sums[0], sums[1], sums[2], sizes)  # fmt: skip
        total: float = sum(w[cut_at].tolist())  # one addition at a time, in graph order
        gpus = self.num_gpus
        staged = np.flatnonzero(sizes)  # the stages with ops (a chain's cuts leave none between)
        out_reads = self._reads_of_cuts(stage_of, cut_at, staged)
        per_stage = zip(staged.tolist(), *sums[:, staged].tolist(), out_reads, strict=True)
        for k, path, gpu_work, cpu_work, crossing in per_stage:
            work = max(gpu_work / gpus, cpu_work) if gpus else gpu_work + cpu_work
            out = self._fan_out(cuts[k - 1], crossing) if k else 0.0
            into = self._fan_in(cuts[k], longest, stage_of, k) if k < len(cuts) else 0.0
            total += max(path, work, out, into)
        return total

    def _reads_of_cuts(self, stage: Any, cut_at: Any, staged: Any) -> list[Any]:
        """Per stage of `staged` (an int array, ascending), its ops' reads of the cut before it
        (read indices in `Reads`, an int array in graph order of the readers), over arrays:
        `stage` each op's stage (-1: a cut or generator), `cut_at` the cuts."""
        reads = self.flat.reads
        mine = stage[reads.reader]
        before = np.concatenate(([-1], cut_at))[mine]  # the cut before each read's stage
        crossing = np.flatnonzero((mine >= 0) & (before == reads.producer))
        of = mine[crossing]
        order = np.argsort(of, kind="stable")
        crossing, of = crossing[order], of[order]
        starts = np.searchsorted(of, staged).tolist()
        ends = np.searchsorted(of, staged, side="right").tolist()
        return [crossing[a:b] for a, b in zip(starts, ends, strict=True)]

    def _fan_out(self, cut: int, crossing: Any) -> float:
        """The stage's ops reading `cut` have work W: the share W_L run on the cut's device, the
        rest on k other devices, the i-th of which waits for the i-th copy (i x c). The stage
        lasts at least max(W_L, mean of i x c + its share) = (W + c k (k + 1) / 2) / (k + 1) at
        the best split, or W with no copy; the smallest over k = 1..GPUs (GPUs - 1 when the cut
        and its readers must all run on GPUs). Copies come from the tensor's own device, as the
        executor makes them. `crossing`: the stage's reads of `cut` (read indices in `Reads`,
        an int array in graph order of their readers)."""
        w, where, made, reads = self.w, self.where, self.flat.out_bytes[cut], self.flat.reads
        if not len(crossing):
            return 0.0
        read_by = reads.reader[crossing]  # ascending: in graph order
        readers = read_by[_firsts_of_runs(read_by)]  # once each
        total = _total(w[readers])
        sizes = {made[o] for o in set(reads.output[crossing].tolist())}
        c = copy_time(min(sizes), self.link)
        gpus_only = where[cut] == 1 and bool((where[readers] == 1).all())
        best = total
        for k in range(1, self.num_gpus + (0 if gpus_only else 1)):
            best = min(best, (total + c * k * (k + 1) / 2) / (k + 1))
        return best

    def _fan_in(self, cut: int, longest: Any, stage: Any, k: int) -> float:
        """The stage's ops that `cut` reads run on its device (their work counts there) or send a
        copy through its inbound link, one at a time, none before the earliest of them can
        finish (m). The least over every split, relaxed to fractions (which can only lower it):
        min(all local, max(local work, m + copies)). `longest`: the longest chain ending at
        each op within its stage (float64 array), `stage` each op's (int array), `k` the stage
        before `cut`. Over arrays: a producer's copy is of the output it reads first, or the
        sum of each it reads where it reads more than one."""
        reads = self.flat.reads
        a, b = reads.offsets[cut], reads.offsets[cut + 1]
        mine = np.flatnonzero(stage[reads.producer[a:b]] == k) + a  # read indices
        if not len(mine):
            return 0.0
        producers = reads.producer[mine]
        order = np.argsort(producers, kind="stable")  # each producer's reads together, in order
        at = np.sort(order[_firsts_of_runs(producers[order])])  # each producer's first read
        first = producers[at]
        copies = self._copy_times(mine[at])
        if len(at) < len(mine):  # a producer read more than once, perhaps of more outputs
            self._more_copies(first, producers, reads.output[mine], copies)
        works = self.w[first]
        remote = float(longest[first].min()) + _total(copies)
        # the producers by copy time per second of work, most first (a stable sort, as
        # `sorted` by -copy / max(work, 1e-30))
        order = np.argsort(-copies / np.maximum(works, 1e-30), kind="stable")
        return _fan_in_split(works, copies, order, 0.0, remote)

    def _copy_times(self, at: Any) -> Any:
        """`copy_time` of the outputs the reads `at` read (read indices, an int array), as a
        float64 array: every output's size as a float (an int converted as `int / float`
        does), then the link's latency plus size over bandwidth, the float operations of
        `copy_time`, where the link's rates are floats (every link the commands make); else
        one by one."""
        link, reads, out_bytes = self.link, self.flat.reads, self.flat.out_bytes
        if type(link.bandwidth) is float and type(link.latency) is float:
            sizes = _read_sizes(out_bytes, reads.producer, reads.output, at)
            return link.latency + sizes / link.bandwidth
        read = zip(reads.producer[at].tolist(), reads.output[at].tolist(), strict=True)
        return float_array([copy_time(out_bytes[p][o], link) for p, o in read])

    def _more_copies(self, first: Any, producers: Any, outputs: Any, copies: Any) -> None:
        """Set in `copies` (one per producer of `first`) the copies of each producer read for
        more than one output: the sum of every output's `copy_time`, in the order of a set of
        them, the first read's output first (`producers` and `outputs`: the reads, in order)."""
        read: dict[int, set[int]] = {}
        for p, out in zip(producers.tolist(), outputs.tolist(), strict=True):
            found = read.get(p)
            if found is None:
                read[p] = {out}
            else:
                found.add(out)
        out_bytes, link = self.flat.out_bytes, self.link
        for i, p in enumerate(first.tolist()):
            outs = read[p]
            if len(outs) > 1:
                copies[i] = sum([copy_time(out_bytes[p][o], link) for o in outs])


def round_robin(
    graph: Graph,
    num_gpus: int,
    *,
    allow_soft_placement: bool = False,
    op_meta: Callable[[str], OpMeta] | None = None,
) -> Placement:
    """The naive spreading baseline: free ops (and colocation groups) take the GPUs in turn, in
    graph order; pinned ops keep TensorFlow's decisions."""
    meta = default_meta(op_meta)
    tf = place(graph, num_gpus, allow_soft_placement=allow_soft_placement, op_meta=meta)
    flat = flatten(graph, meta)
    groups, free = free_groups(flat, tf, num_gpus)
    turns = [
        Decision(full_name("GPU", k), "round-robin", f"round-robin: GPU:{k} is next in turn")
        for k in range(num_gpus)
    ]
    chosen: dict[int, tuple[str, str]] = {}  # group root -> (device, first member)
    turn = 0
    decisions = {}
    for j, name in enumerate(flat.names):
        root = groups[j]
        cands = free.get(root)
        if cands is None:
            decisions[name] = tf.decisions[name]
        elif root in chosen:
            device, first = chosen[root]
            decisions[name] = Decision(device, "colocated", f"colocated with {first}")
        else:
            decisions[name] = turns[cands[turn % len(cands)]]
            chosen[root] = (decisions[name].device, name)
            turn += 1
    return Placement(decisions, tf.devices)
