"""Baselines to judge a placement against: lower bounds on the makespan, and round-robin.

`lower_bounds` follows the reference notes (A.5): no placement that honours the graph's
requests can beat the critical path at each op's fastest allowed device with free copies,
nor the work that must run on GPUs spread evenly over them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from ..devices.names import full_name
from ..graph.model import Graph, OpMeta
from . import place
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_time
from .flat import Flat, default_meta, flatten, free_groups
from .model import Decision, Placement


def _options(flat: Flat, tf: Placement, gpus: Sequence[DeviceModel], cpu: DeviceModel,
             models: dict[str, DeviceModel], num_gpus: int) -> list[list[DeviceModel]]:  # fmt: skip
    """The devices each op may end up on under any strategy that honours TF's pins: TF's
    device for a pinned op; the group's GPUs for a free op, plus the CPU for an unrequested
    generator with a CPU kernel (it may follow a consumer there, as TF's heuristic A does)."""
    groups, free = free_groups(flat, tf, num_gpus)
    rates: dict[int, list[DeviceModel]] = {}  # per candidate tuple (groups share them): see below
    pinned: dict[str, list[DeviceModel]] = {}  # one list per device (the bounds read it by id)
    decisions = tf.decisions
    out = []
    for j, name in enumerate(flat.names):
        cands = free.get(groups[j])
        if cands is None:
            device = decisions[name].device
            options = pinned.get(device)
            if options is None:
                options = pinned[device] = [models[device]]
            out.append(options)
            continue
        options = rates.get(id(cands))
        if options is None:  # a bound needs one GPU per rate, not all 20,000 logical GPUs
            options = rates[id(cands)] = _one_per_rate([gpus[k] for k in cands])
        if flat.generator[j] and "CPU" in flat.kernels[j] and not flat.graph.ops[j].device:
            options = [*options, cpu]
        out.append(options)
    return out


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
    options = _options(flat, tf, gpus, cpu, {m.name: m for m in (*gpus, cpu)}, len(gpus))
    w, where = _fastest(flat, options)
    cp, work, _ = _bound(flat, range(len(w)), w, where, len(gpus))
    return Bounds(cp, work, _Stages(flat, w, where, len(gpus), link or LinkModel()).total())


def _fastest(flat: Flat, options: Sequence[Sequence[DeviceModel]]) -> tuple[list[float], list[int]]:
    """Per op: its fastest time on the devices it may use, and where it must run (1: a GPU,
    2: the CPU, 0: either). Worked out once per options list and cost: ops share both (the
    options lists by identity, `_options`; equal costs are one object, `flatten`)."""
    w: list[float] = []
    where: list[int] = []
    times: dict[tuple[int, float, float], float] = {}
    kinds: dict[int, int] = {}
    for opts, flops, nbytes in zip(options, flat.flops, flat.nbytes, strict=True):
        key = (id(opts), flops, nbytes)
        best = times.get(key)
        if best is None:
            best = times[key] = min(work_time(flops, nbytes, m) for m in opts)
        w.append(best)
        kind = kinds.get(id(opts))
        if kind is None:
            kind = kinds[id(opts)] = (
                1 if all(m.kind == "GPU" for m in opts) else 2 if len(opts) == 1 else 0
            )
        where.append(kind)
    return w, where


def stage_bound(flat: Flat, w: Sequence[float], where: Sequence[int], num_gpus: int,
                link: LinkModel) -> float:  # fmt: skip
    """The stage-by-stage bound (`_Stages`) of ops taking `w` seconds at best, `where` they
    must run (1: a GPU, 2: the CPU, 0: either)."""
    return _Stages(flat, w, where, num_gpus, link).total()


def _bound(flat: Flat, ops: Iterable[int], w: Sequence[float], where: Sequence[int],
           num_gpus: int, stage: Sequence[int] | None = None,
           ) -> tuple[float, float, dict[int, float]]:  # fmt: skip
    """(critical path, work bound, longest chain ending at each op) of `ops` (ascending),
    counting only edges inside `stage` (an op -> stage number list; None: every edge)."""
    longest: dict[int, float] = {}
    gpu_work = cpu_work = 0.0
    for j in ops:
        mine = -1 if stage is None else stage[j]
        longest[j] = w[j] + max(
            (longest[p] for p, _ in flat.inputs[j] if stage is None or stage[p] == mine),
            default=0.0,
        )
        if where[j] == 1:
            gpu_work += w[j]
        elif where[j] == 2:
            cpu_work += w[j]
    work = max(gpu_work / num_gpus, cpu_work) if num_gpus else gpu_work + cpu_work
    return max(longest.values(), default=0.0), work, longest


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
    sum a lower bound (a schedule of every op is also one of the rest).
    """

    def __init__(self, flat: Flat, w: Sequence[float], where: Sequence[int], num_gpus: int,
                 link: LinkModel) -> None:  # fmt: skip
        self.flat, self.w, self.where, self.num_gpus, self.link = flat, w, where, num_gpus, link
        self.keep = keep = [not g for g in flat.generator]
        self.reads = [sorted({p for p, _ in flat.inputs[j] if keep[p]}) for j in range(len(w))]

    def cuts(self) -> list[int]:
        n, reads, keep = len(self.w), self.reads, self.keep
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
        stage, c = [-1] * n, 0
        members: list[list[int]] = [[] for _ in range(len(cuts) + 1)]
        for j in range(n):
            if c < len(cuts) and cuts[c] == j:
                c += 1
            elif self.keep[j]:
                stage[j] = c
                members[c].append(j)
        total = sum(w[c] for c in cuts)
        for k, ops in enumerate(members):
            if not ops:
                continue
            cp, work, longest = _bound(self.flat, ops, w, self.where, self.num_gpus, stage)
            out = self._fan_out(cuts[k - 1], ops) if k else 0.0
            into = self._fan_in(cuts[k], longest) if k < len(cuts) else 0.0
            total += max(cp, work, out, into)
        return total

    def _fan_out(self, cut: int, ops: Sequence[int]) -> float:
        """The stage's ops reading `cut` have work W: the share W_L run on the cut's device, the
        rest on k other devices, the i-th of which waits for the i-th copy (i x c). The stage
        lasts at least max(W_L, mean of i x c + its share) = (W + c k (k + 1) / 2) / (k + 1) at
        the best split, or W with no copy; the smallest over k = 1..GPUs (GPUs - 1 when the cut
        and its readers must all run on GPUs). Copies come from the tensor's own device, as the
        executor makes them."""
        readers = [j for j in ops if cut in self.reads[j]]
        total = sum(self.w[j] for j in readers)
        sizes = {self.flat.out_bytes[cut][k] for j in readers for p, k in self.flat.inputs[j]
                 if p == cut}  # fmt: skip
        if not sizes:
            return 0.0
        c = copy_time(min(sizes), self.link)
        gpus_only = all(self.where[j] == 1 for j in (cut, *readers))
        best = total
        for k in range(1, self.num_gpus + (0 if gpus_only else 1)):
            best = min(best, (total + c * k * (k + 1) / 2) / (k + 1))
        return best

    def _fan_in(self, cut: int, longest: dict[int, float]) -> float:
        """The stage's ops that `cut` reads run on its device (their work counts there) or send a
        copy through its inbound link, one at a time, none before the earliest of them can
        finish (m). The least over every split, relaxed to fractions (which can only lower it):
        min(all local, max(local work, m + copies))."""
        made: dict[int, set[int]] = {}
        for p, k in self.flat.inputs[cut]:
            if p in longest:
                made.setdefault(p, set()).add(k)
        if not made:
            return 0.0
        items = [
            (self.w[p], sum(copy_time(self.flat.out_bytes[p][k], self.link) for k in outs))
            for p, outs in made.items()
        ]
        local, remote = 0.0, min(longest[p] for p in made) + sum(c for _, c in items)
        for work, copy in sorted(items, key=lambda item: -item[1] / max(item[0], 1e-30)):
            if local + work <= remote - copy:
                local, remote = local + work, remote - copy
                continue
            return min(
                sum(work for work, _ in items), local + work * (remote - local) / (work + copy)
            )
        return local  # every producer on the cut's device: no copy at all


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
