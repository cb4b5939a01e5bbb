"""The balanced strategy: spread the ops nobody placed over the GPUs, within every memory limit.

Memory-aware list scheduling: HEFT's rule (Topcuoglu, Hariri and Wu, 2002), each op goes to
the device where it would finish earliest counting the copies its inputs need, with Baechi
m-ETF's memory filter (Jeon et al., 2020): a device is a candidate only if everything the op
adds there (outputs, copies of inputs, generators that come along) fits under its limit at
every step those tensors live (`occupancy.py`). Ops are taken in graph order, the order the
executor runs them, so memory is counted as the ledgers count it; the priority list is thus
graph order rather than HEFT's upward rank, each device runs its ops in that order, and copies
use the links' idle time (`links.py`). That is the model `estimate` simulates, so the plan and
the estimate agree. One pass: O((V + E) x GPUs), candidates pruned by a cheap lower bound.
The greedy rule is myopic about copies an op's outputs cause later, so a second pass chooses
with every copy counted twice (leaning to keep chains together, in the spirit of Baechi
m-SCT's favourite child); the pass estimated faster is kept (`WEIGHTS`). Both passes check memory the same way.

TensorFlow's placer runs first: ops it pins (explicit devices, CPU-only kernels, soft placement)
keep its decision, colocation groups move together, and a generator (constant, variable) with
no request is decided with its first consumer, which it follows as TF's heuristic A would. Last,
if the spread is estimated slower than TensorFlow's own placement and that fits, TF's is kept,
so the strategy is never worse than TF's placement where that fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..devices.names import parse_device
from ..echo import sample
from ..errors import Message, Setting, Term
from ..graph.model import Graph, OpMeta
from ..units import human
from . import place
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_time
from .estimate import Estimate, simulate
from .flat import Flat, default_meta, flatten, free_groups
from .links import Link, transfer
from .model import Decision, Placement, PlacementError
from .occupancy import Occupancy

WEIGHTS = (1.0, 2.0)  # copy weights of the passes tried (see the module docstring)
Plan = tuple[float, int, int, int, int]  # finish, first step, bytes before j, last step, bytes
# lower bound, device, start, inputs ready, seconds, copies, then memory as in Plan
Draft = tuple[float, int, float, float, float, list[tuple[int, float, float]], int, int, int, int]


class NoFit(PlacementError):
    """No candidate device can take an op within its memory limit: names the op (and the
    generators that would come with it), the bytes it needs and the room on each candidate."""

    def __init__(self, what: str, op: str, need: int, rooms: Sequence[tuple[str, int, int]],
                 pinned: str = "") -> None:  # fmt: skip
        where = ", ".join(
            f"{short} has {human(max(room, 0))} free of its {human(limit)} limit"
            for short, room, limit in sorted(rooms, key=lambda r: -r[1])[:4]
        )
        if pinned:
            text = f"{what} must stay on its device ({pinned}) and needs {human(need)} more there"
        else:
            text = f"{what} needs {human(need)} more on the GPU that takes it"
        super().__init__(
            f"balanced placement: {text}, but at that step {where}.",
            Message(
                "gpuplace: the graph needs more memory than these GPUs offer under this policy; "
                "add GPUs (", Term.MACHINE, "), give each more (", Setting("memory_limit"), ", ",
                Setting("memory_fraction"), "), or make the largest tensors smaller.",
            ),
            op,
        )  # fmt: skip
        self.need, self.rooms = need, tuple(rooms)


def _cpu_allowed(flat: Flat, j: int) -> bool:
    """Whether op j may run on CPU:0: it has a CPU kernel and its request (`/gpu:*` may leave
    every GPU free to choose) matches the CPU."""
    device = flat.graph.ops[j].device
    return "CPU" in flat.kernels[j] and (not device or parse_device(device).matches("CPU", 0))


class _Balancer:
    """One pass over one graph. Slots are the executor's: one per output and per (tensor,
    device) copy, each with a device, rounded size, last reading step and ready time."""

    def __init__(self, flat: Flat, models: Sequence[DeviceModel], link: LinkModel,
                 tf: Placement, groups: list[int], free: dict[int, tuple[int, ...]],
                 weight: float = 1.0) -> None:  # fmt: skip
        n, m = len(flat.names), len(models)
        self.weight = weight  # copies count this many times their length when choosing
        self.flat, self.models, self.link = flat, models, link
        index = {d.name: i for i, d in enumerate(models)}
        self.tf = [tf.decisions[name] for name in flat.names]
        self.tf_dev = tf_dev = [index[d.device] for d in self.tf]
        self.groups, self.free = groups, free
        self.occ = Occupancy([d.memory_limit for d in models], n)
        self.dev = [-1] * n
        self.done = [0.0] * n
        self.home: list[tuple[int, ...]] = [()] * n
        self.copied: dict[tuple[int, int, int], int] = {}
        self.s_dev: list[int] = []
        self.s_size: list[int] = []
        self.s_last: list[int] = []
        self.s_ready: list[float] = []
        self.avail = [0.0] * m
        self.ins, self.outs = [Link() for _ in models], [Link() for _ in models]
        self.decisions: list[Decision | None] = [None] * n
        self.decided: list[Decision] = []
        self.reasons: dict[tuple[int, tuple[int, ...], str], Decision] = {}
        size = dict.fromkeys(groups, 0)
        for root in groups:
            size[root] += 1
        every = tuple(range(len(models) - 1))
        self.deferred = [
            flat.generator[j] and flat.first_reader[j] >= 0 and size[groups[j]] == 1
            and free.get(groups[j]) == every
            for j in range(n)
        ]  # fmt: skip
        self.reserved = [groups[j] not in free for j in range(n)]
        for j in range(n):  # pinned outputs first: every later choice sees them
            if self.reserved[j] and not flat.is_print[j]:
                self._reserve(j, tf_dev[j])

    def _reserve(self, j: int, d: int) -> None:
        """Charge pinned op j's outputs to d for their whole lives; NoFit if they overflow."""
        flat = self.flat
        for size, end in zip(flat.sizes[j], flat.ends[j], strict=True):
            if not self.occ.fits(d, j, j, end, 0, size):
                raise self._no_fit(j, [(d, (0.0, j, 0, end, size))], self.tf[j].reason)
            self.occ.add(d, j, end, size)

    def seconds(self, j: int, d: int) -> float:
        return work_time(self.flat.flops[j], self.flat.nbytes[j], self.models[d])

    def run(self) -> list[Decision]:
        """Place every op in graph order; a colocation group goes where its first op goes."""
        flat, tf_dev, free = self.flat, self.tf_dev, self.free
        group_dev: dict[int, tuple[int, str]] = {}
        for j, name in enumerate(flat.names):
            if self.dev[j] >= 0 or self.deferred[j]:
                continue
            root = self.groups[j]
            cands = free.get(root)
            if cands is None:
                d, decision = tf_dev[j], self.tf[j]
                self._force(j, d, decision.reason)
            elif root in group_dev:
                d, first = group_dev[root]
                self._force(j, d, f"colocated with {first}")
                decision = Decision(self.models[d].name, "colocated", f"colocated with {first}")
            else:
                d, excluded = self._choose(j, cands)
                group_dev[root] = (d, name)
                decision = self._chosen(j, d, excluded)
            self.decisions[j] = decision
            self._commit(j, d)
        return [d if d is not None else self.tf[j] for j, d in enumerate(self.decisions)]

    def _chosen(self, j: int, d: int, excluded: tuple[int, ...]) -> Decision:
        """`balanced: earliest finish on GPU:2 (GPU:0 would exceed its 3.5 GiB limit)`."""
        request = self.flat.graph.ops[j].device
        key = (d, excluded, request)
        found = self.reasons.get(key)
        if found is None:
            models = self.models
            text = f"balanced: earliest finish on {models[d].short}"
            if self.weight != 1:
                text += f" counting copies {self.weight:g}x"
            if excluded:
                limits = {human(models[e].memory_limit or 0) for e in excluded}
                names = sample([models[e].short for e in excluded])
                its = "its" if len(excluded) == 1 else "their"
                text += f" ({names} would exceed {its} {', '.join(sorted(limits))} limit)"
            kind = "explicit" if request else "balanced"
            text = f"requested {request}; {text}" if request else text
            found = self.reasons[key] = Decision(models[d].name, kind, text)
        return found

    def _choose(self, j: int, cands: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """The candidate where op j finishes first among those with room; NoFit if none.

        Candidates are drafted cheaply (copies as if the links were free) and planned in
        order of that lower bound, stopping once it cannot beat the best finish found.
        """
        best, best_finish = -1, 0.0
        excluded: list[int] = []
        plans = []
        for draft in sorted(self._draft(j, d) for d in cands):
            if best >= 0 and draft[0] >= best_finish:
                break
            d = draft[1]
            plan = self._plan(j, draft)
            plans.append((d, plan))
            finish, lo, before, hi, total = plan
            if not self.occ.fits(d, lo, j, hi, before, total):
                excluded.append(d)
            elif best < 0 or finish < best_finish:
                best, best_finish = d, finish
        if best < 0:
            raise self._no_fit(j, plans)
        return best, tuple(sorted(excluded))

    def _force(self, j: int, d: int, why: str) -> None:
        """Op j must go to d: bring generators it reads that cannot follow it, then check."""
        flat = self.flat
        if d == len(self.models) - 1:  # the CPU: a generator that may not go there stays on a GPU
            for p, _ in flat.inputs[j]:
                if self.dev[p] < 0 and not _cpu_allowed(flat, p):
                    g, excluded = self._choose(p, range(len(self.models) - 1))
                    self.decisions[p] = self._chosen(p, g, excluded)
                    self._commit(p, g)
        plan = self._plan(j, self._draft(j, d))
        _, lo, before, hi, total = plan
        if not self.occ.fits(d, lo, j, hi, before, total):
            raise self._no_fit(j, [(d, plan)], why)

    def _no_fit(self, j: int, plans: Sequence[tuple[int, Plan]], why: str = "") -> NoFit:
        rooms = []
        for d, (_, lo, _, hi, _) in plans:
            limit = self.models[d].memory_limit or 0
            rooms.append((self.models[d].short, self.occ.room(d, lo, hi) or 0, limit))
        ops, name = self.flat.graph.ops, self.flat.names[j]
        what = f"op '{name}' ({ops[j].type})"
        brought = [
            f"{ops[p].type} '{ops[p].name}'" for p, _ in self.flat.inputs[j] if self.dev[p] < 0
        ]
        if brought:
            what += f" with the {sample(list(dict.fromkeys(brought)))} it reads"
        need = max(plan[4] for _, plan in plans)
        return NoFit(what, name, need, rooms, why)

    def _draft(self, j: int, d: int) -> Draft:
        """The cheap part of planning op j on d: a lower bound on its finish (copies as if
        the links were idle), the copies it needs, and what it adds to d's memory (the steps
        lo..hi, bytes before step j and in all)."""
        flat, link = self.flat, self.link
        avail, ready = self.avail[d], 0.0
        lo = hi = j
        before = total = 0
        copies: list[tuple[int, float, float]] = []  # (source device, ready, seconds)
        seen: set[tuple[int, int]] = set()
        for p, k in flat.inputs[j]:
            if (p, k) in seen or (p, -1) in seen:
                continue
            seen.add((p, k))
            if self.dev[p] < 0:  # a deferred generator comes along to d
                seen.add((p, -1))
                avail += self.seconds(p, d)
                ready = max(ready, avail)
                size = sum(flat.sizes[p])
                lo, hi = min(lo, p), max(hi, *flat.ends[p])
                before, total = before + size, total + size
                continue
            s = self.home[p][k]
            src = self.s_dev[s]
            if src != d:
                c = self.copied.get((p, k, d))
                if c is None:
                    length = copy_time(flat.out_bytes[p][k], link) * self.weight
                    start = max(self.done[p], self.s_ready[s])
                    copies.append((src, start, length))
                    ready = max(ready, start + length)
                    total += self.s_size[s]
                    continue
                s = c
            ready = max(ready, self.done[p], self.s_ready[s])
            if self.s_last[s] < j:  # a copy (or forwarded buffer) on d lives on to step j
                lo = min(lo, self.s_last[s] + 1)
                before, total = before + self.s_size[s], total + self.s_size[s]
        if not self.reserved[j] and flat.sizes[j]:
            total += sum(flat.sizes[j])
            hi = max(hi, *flat.ends[j])
        seconds = self.seconds(j, d)
        return max(avail, ready) + seconds, d, avail, ready, seconds, copies, lo, before, hi, total

    def _plan(self, j: int, draft: Draft) -> Plan:
        """A draft completed with its copies on the links' timelines: (finish, memory)."""
        _, d, avail, ready, seconds, copies, lo, before, hi, total = draft
        held = Link()  # copies planned into d
        for src, start, length in copies:
            end, pieces = transfer(self.outs[src], self.ins[d], start, length, held)
            held.book(pieces)
            ready = max(ready, end)
        return max(avail, ready) + seconds, lo, before, hi, total

    def _commit(self, j: int, d: int) -> None:
        """Place op j on d: generators it brings, copies, compute, and its outputs' memory."""
        flat, reads, ready = self.flat, [], 0.0
        for p, k in flat.inputs[j]:
            if self.dev[p] < 0:
                self.decisions[p] = Decision(
                    self.models[d].name, "follows-consumer",
                    f"balanced: generator goes with its first consumer {flat.names[j]} to "
                    f"{self.models[d].short}",
                )  # fmt: skip
                self._commit(p, d)
            s = self.home[p][k]
            self._extend(s, j)
            if self.s_dev[s] != d:
                c = self.copied.get((p, k, d))
                if c is None:
                    c = self._copy(p, k, s, d, j)
                self._extend(c, j)
                s = c
            ready = max(ready, self.done[p], self.s_ready[s])
            reads.append(s)
        end = max(self.avail[d], ready) + self.seconds(j, d)
        self.avail[d] = self.done[j] = end
        self.dev[j] = d
        if flat.is_print[j]:
            self.home[j] = tuple(reads)
            return
        self.home[j] = tuple(
            self._slot(d, size, last, end)
            for size, last in zip(flat.sizes[j], flat.ends[j], strict=True)
        )
        if not self.reserved[j]:
            for size, last in zip(flat.sizes[j], flat.ends[j], strict=True):
                self.occ.add(d, j, last, size)

    def _slot(self, d: int, size: int, last: int, ready: float) -> int:
        self.s_dev.append(d)
        self.s_size.append(size)
        self.s_last.append(last)
        self.s_ready.append(ready)
        return len(self.s_dev) - 1

    def _extend(self, s: int, j: int) -> None:
        """Slot s is read at step j: it lives at least until then."""
        last = self.s_last[s]
        if last < j:
            self.occ.add(self.s_dev[s], last + 1, j, self.s_size[s])
            self.s_last[s] = j

    def _copy(self, p: int, k: int, s: int, d: int, j: int) -> int:
        """Copy slot s (output k of op p) to d for op j, on the links' timelines."""
        src, link = self.s_dev[s], self.link
        length = copy_time(self.flat.out_bytes[p][k], link)
        ready = max(self.done[p], self.s_ready[s])
        end, pieces = transfer(self.outs[src], self.ins[d], ready, length)
        self.outs[src].book(pieces)
        self.ins[d].book(pieces)
        c = self.copied[(p, k, d)] = self._slot(d, self.s_size[s], j, end)
        self.occ.add(d, j, j, self.s_size[s])
        return c


def _best_pass(flat: Flat, models: Sequence[DeviceModel], link: LinkModel, tf: Placement,
               groups: list[int], free: dict[int, tuple[int, ...]]) -> tuple[_Balancer, Estimate]:  # fmt: skip
    """The pass, among `WEIGHTS`, whose plan is estimated fastest (the first on a tie). The
    first pass's NoFit is raised; a later pass that finds no room is skipped."""
    best: tuple[_Balancer, Estimate] | None = None
    for weight in WEIGHTS:
        balancer = _Balancer(flat, models, link, tf, groups, free, weight)
        try:
            balancer.decided = balancer.run()
        except NoFit:
            if best is None:
                raise
            continue
        est = simulate(flat, balancer.dev, models, link)
        if best is None or est.makespan < best[1].makespan:
            best = balancer, est
    assert best is not None
    return best


def _fits(est: Estimate, models: Sequence[DeviceModel]) -> bool:
    return all(m.memory_limit is None or est.peak[m.name] <= m.memory_limit for m in models)


def place_balanced(
    graph: Graph,
    devices: Sequence[DeviceModel],
    link: LinkModel | None = None,
    *,
    allow_soft_placement: bool = False,
    op_meta: Callable[[str], OpMeta] | None = None,
) -> Placement:
    """Place `graph` on `devices` (GPU:0..n-1 and CPU:0) with the balanced strategy.

    TensorFlow's rules and errors apply first (`place`); raises NoFit when an op fits on no
    candidate device.
    """
    meta = default_meta(op_meta)
    link = link or LinkModel()
    gpus, cpu = split_devices(devices)
    models = [*gpus, cpu]
    tf = place(graph, len(gpus), allow_soft_placement=allow_soft_placement, op_meta=meta)
    flat = flatten(graph, meta)
    groups, free = free_groups(flat, tf, len(gpus))
    balancer, spread = _best_pass(flat, models, link, tf, groups, free)
    decisions = balancer.decided
    if free:
        alone = simulate(flat, balancer.tf_dev, models, link)
        if _fits(alone, models) and alone.makespan < spread.makespan:
            decisions = _kept(flat, tf, groups, free, alone.makespan, spread.makespan)
    return Placement(dict(zip(flat.names, decisions, strict=True)), tf.devices)


def _kept(flat: Flat, tf: Placement, groups: list[int], free: dict[int, tuple[int, ...]],
          alone: float, spread: float) -> list[Decision]:  # fmt: skip
    """TensorFlow's placement, each free op saying why the spread was not kept (colocated
    ops keep TF's reason: their group moved with its first op)."""
    why = (
        f"balanced: spreading was estimated slower ({spread * 1e3:.3g} ms vs {alone * 1e3:.3g} ms)"
    )
    out, made = [], dict[str, Decision]()
    for j, name in enumerate(flat.names):
        d = tf.decisions[name]
        if groups[j] in free and d.kind != "colocated":
            d = made.get(d.device) or made.setdefault(
                d.device,
                Decision(
                    d.device, "balanced", f"{why}; kept on {d.device.rsplit('/device:', 1)[-1]}"
                ),
            )
        out.append(d)
    return out
