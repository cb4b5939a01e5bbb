"""The balanced strategy: spread the ops nobody placed over the GPUs, within every memory limit.

Memory-aware list scheduling: HEFT's rule (Topcuoglu, Hariri and Wu, 2002), each op goes to
the device where it would finish earliest counting the copies its inputs need, with Baechi
m-ETF's memory filter (Jeon et al., 2020): a device is a candidate only if everything the op
adds there (outputs, copies of inputs, generators that come along) fits under its limit at
every step those tensors live (`occupancy.py`). Ops are taken in graph order, the order the
executor runs them, and each is run as it is placed on the executor's model in miniature
(`timeline.py`: memory as the ledgers count it, each device running its ops in graph order,
copies in the links' idle time), the model `estimate` replays, so the plan and the estimate
agree; the priority list is thus graph order rather than HEFT's upward rank. One pass:
O((V + E) x GPUs), candidates pruned by a cheap lower bound (`Draft`). The greedy rule is
myopic about copies an op's outputs cause later, so a second pass chooses with every copy
counted twice (leaning to keep chains together, in the spirit of Baechi m-SCT's favourite
child); the pass estimated faster is kept (`WEIGHTS`; on big graphs the plain pass is given up
once it is not ahead at 15% of the ops or later, `_best_pass`). Both check memory the same way.

TensorFlow's placer runs first: ops it pins (explicit devices, CPU-only kernels, soft placement)
keep its decision, colocation groups move together, and a generator (constant, variable) with
no request is decided with its first consumer, which it follows as TF's heuristic A would. Last,
if the spread is estimated slower than TensorFlow's own placement and that fits, TF's is kept,
so the strategy is never worse than TF's placement where that fits (TF's is simulated only when
the seconds of the ops on its busiest device leave it a chance and its variables fit every
device, `_faster_alone`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import NamedTuple

from ..devices.cluster import short_name, split_device
from ..devices.names import placer_spec
from ..echo import sample
from ..gc_pause import gc_paused
from ..graph.model import Graph, OpMeta
from ..units import device_memory
from . import place
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_times
from .estimate import Estimate, Judged, devices_of, judge, simulate
from .flat import Flat, default_meta, flatten, free_groups
from .links import Link, walk
from .model import Decision, NoFit, Placement
from .occupancy import Occupancy
from .timeline import Network, Slot, Timeline

_MANY = 8  # copies from which a draft is bounded by its queue first (`_serial`), walks known time
_READY = itemgetter(1)
_INF = float("inf")
WEIGHTS = (1.0, 2.0)  # copy weights of the passes tried (see the module docstring)
# On graphs of _LONG ops or more, a later pass is given up at the first of its marks (every
# 1 / _MARKS of the ops) from the _BEHINDth on where its makespan so far is not below the best
# pass's at the same op (`_best_pass`)
_LONG, _MARKS, _BEHIND = 20_000, 20, 3
PendingCopy = tuple[int, float, float]  # (source device, ready, seconds) of a copy to plan
Read = tuple[int, int, Slot | None]  # (producer, output, slot read): see _Balancer._reads
Tensor = tuple[int, float, int, int, float]  # see _Balancer._tensors


class TFWalk(NamedTuple):
    """TensorFlow's placement as the passes and `_faster_alone` read it, walked once for all
    of them (each walk builds and compares a list of the graph's names: five walks took 0.3 s
    at 1,000,000 ops): its decisions in graph order, no lookup by name, and each op's device
    as an index into the models."""

    decisions: list[Decision]
    device: list[int]


def tf_walk(tf: Placement, flat: Flat, models: Sequence[DeviceModel]) -> TFWalk:
    """`tf`'s decisions of `flat`'s ops, in graph order, and their devices in `models`."""
    decisions = tf.in_order(flat.names)
    return TFWalk(decisions, devices_of(decisions, models))


def _cpu_allowed(flat: Flat, op: int) -> bool:
    """Whether `op` may run on CPU:0: it has a CPU kernel and its request (`/gpu:*` may leave
    every GPU free to choose) matches the CPU."""
    device = flat.graph.ops[op].device
    return "CPU" in flat.kernels[op] and (not device or placer_spec(device).matches("CPU", 0))


@dataclass
class Draft:
    """Op `op` on one device, planned cheaply (no link booked): what it adds to the device's
    memory, `before` bytes over steps first..op-1 (the lives of inputs there it extends) and
    `total` over op..last, and when it would finish with its copies as if the links were idle
    (`bound`, a lower bound: the links may be busy)."""

    # slots named here, not `dataclass(slots=True)`: compiled, Draft is a C type (balanced.pxd)
    # made a dataclass by Cython, which takes no `slots`
    __slots__ = ("before", "bound", "copies", "device", "first", "last", "ready", "seconds",
                 "start", "total")  # fmt: skip
    device: int
    first: int
    before: int
    last: int
    total: int
    bound: float
    start: float  # when the device is free, after the generators that come along
    ready: float  # when its inputs are there, its copies as if the links were idle
    seconds: float  # its own time on the device
    copies: Sequence[PendingCopy]  # the copies it needs, to plan on the links


class _Balancer:
    """One pass over one graph: ops are run on the executor's model (`Timeline`) as they are
    placed, every byte-step charged to `occupancy`, which the memory check reads."""

    def __init__(self, flat: Flat, models: Sequence[DeviceModel], link: LinkModel,
                 tf: TFWalk, groups: list[int], free: dict[int, tuple[int, ...]],
                 times: Sequence[Sequence[float]], weight: float = 1.0,
                 network: Network | None = None) -> None:  # fmt: skip
        ops = len(flat.names)
        self.times = times  # seconds of each op on each device
        self.weight = weight  # copies count this many times their length when choosing
        self.flat, self.models, self.link = flat, models, link
        # the GPUs, and the CPU:0 of each task (one on one host; across hosts, one per task)
        self.gpus = tuple(i for i, m in enumerate(models) if m.kind == "GPU")
        self.cpus = frozenset(i for i, m in enumerate(models) if m.kind == "CPU")
        self.tf, self.tf_device = tf  # walked once for every pass (`TFWalk`)
        self.groups, self.free = groups, free
        self.occupancy = Occupancy([d.memory_limit for d in models], ops)
        self.timeline = Timeline(flat, len(models), link, self.occupancy, network)
        self.network = network
        self.placed = [-1] * ops  # each op's device, -1 until it is placed
        self.marks: list[float] = []  # the makespan so far at every _MARKSth of the ops (`run`)
        self.decisions: list[Decision | None] = [None] * ops
        self.reasons: dict[tuple[int, tuple[int, ...], str], Decision] = {}
        size = [0] * ops  # ops in each group, by its root (an op)
        for root in groups:
            size[root] += 1
        every_gpu = self.gpus
        self.deferred = [  # generators decided with their first consumer
            flat.generator[op] and flat.first_reader[op] >= 0 and size[groups[op]] == 1
            and free.get(groups[op]) == every_gpu
            for op in range(ops)
        ]  # fmt: skip
        self.reserved = [groups[op] not in free for op in range(ops)]  # pinned: charged first
        for op in range(ops):  # pinned outputs first: every later choice sees them
            if self.reserved[op] and not flat.is_print[op]:
                self._reserve(op, self.tf_device[op])

    def _reserve(self, op: int, device: int) -> None:
        """Charge pinned `op`'s outputs to `device` for their whole lives; NoFit if they overflow."""
        flat, occupancy = self.flat, self.occupancy
        for size, last in zip(flat.sizes[op], flat.ends[op], strict=True):
            if not occupancy.fits(device, op, op, last, 0, size):
                need = Draft(device, op, 0, last, size, 0.0, 0.0, 0.0, 0.0, ())
                raise self._no_fit(op, [need], self.tf[op].reason)
            occupancy.add(device, op, last, size)

    def run(self, lead: Sequence[float] = ()) -> list[Decision] | None:
        """Place every op in graph order; a colocation group goes where its first op goes.

        `marks` gets the plan's makespan so far at every `_MARKS`th of the ops; `lead`: the
        marks of a pass already run, which this one gives up on (None) at the first mark from
        the `_BEHIND`th on where its makespan so far is not below lead's."""
        group_device: dict[int, tuple[int, str]] = {}
        names = self.flat.names
        every, free_at, marks = max(len(names) // _MARKS, 1), self.timeline.free_at, self.marks
        for op, name in enumerate(names):
            if op % every == 0 and op:
                marks.append(max(free_at))
                n = len(marks)
                if n >= _BEHIND and n <= len(lead) and marks[-1] >= lead[n - 1]:
                    return None
            if self.placed[op] >= 0 or self.deferred[op]:
                continue
            root = self.groups[op]
            candidates = self.free.get(root)
            if candidates is None:
                device, decision = self.tf_device[op], self.tf[op]
                self._force(op, device, decision.reason)
            elif root in group_device:
                device, first = group_device[root]
                why = f"colocated with {first}"
                self._force(op, device, why)
                decision = Decision(self.models[device].name, "colocated", why)
            else:
                device, excluded = self._choose(op, candidates)
                group_device[root] = (device, name)
                decision = self._chosen(op, device, excluded)
            self.decisions[op] = decision
            self._commit(op, device)
        return [d if d is not None else self.tf[op] for op, d in enumerate(self.decisions)]

    def estimate(self) -> Estimate | None:
        """The estimate of the plan, from the run it was planned on, when that run is the one
        `simulate` makes: every op run in graph order (no generator waited for its consumer)
        and every output's static life its real one (no `print` forwards a buffer); else None."""
        flat = self.flat
        if any(self.deferred) or any(flat.is_print):
            return None
        busy = [0.0] * len(self.models)
        for op, device in enumerate(self.placed):
            busy[device] += self.times[op][device]
        return judge(self.timeline, self.placed, self.models, busy)

    def _chosen(self, op: int, device: int, excluded: tuple[int, ...]) -> Decision:
        """`balanced: earliest finish on GPU:2 (GPU:0 would exceed its 3596MiB limit)`."""
        request = self.flat.graph.ops[op].device
        key = (device, excluded, request)
        found = self.reasons.get(key)
        if found is None:
            models = self.models
            text = f"balanced: earliest finish on {models[device].short}"
            if self.weight != 1:
                text += f" counting copies {self.weight:g}x"
            if excluded:
                limits = {device_memory(models[other].memory_limit or 0) for other in excluded}
                names = sample([models[other].short for other in excluded])
                its = "its" if len(excluded) == 1 else "their"
                text += f" ({names} would exceed {its} {', '.join(sorted(limits))} limit)"
            kind = "explicit" if request else "balanced"
            text = f"requested {request}; {text}" if request else text
            found = self.reasons[key] = Decision(models[device].name, kind, text)
        return found

    def _choose(self, op: int, candidates: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """The candidate where `op` finishes first among those with room, and those without;
        NoFit if none has room.

        Candidates are drafted cheaply (copies as if the links were idle) and planned in
        order of that lower bound (ties: in candidate order), stopping once it cannot beat
        the best finish found; one with many copies is not planned when they cannot end in
        time to beat it even one after another on its inbound link (`_serial`), and a draft's
        copies are planned only until one ends too late to beat it (`_finish`'s `limit`).
        """
        best: Draft | None = None
        best_finish: float = 0.0  # typed: C doubles where compiled
        finish: float
        excluded: list[int] = []
        planned: list[Draft] = []
        reads = self._reads(op)
        tensors = self._tensors(reads)
        limits, high = self.occupancy.limits, self.occupancy.high  # `Occupancy.fits`'s first test
        for bound, _, device in sorted(self._bounds(op, candidates, reads, tensors)):
            if best is not None and bound >= best_finish:
                break
            draft = self._draft(op, device, reads, tensors)
            planned.append(draft)
            limit = limits[device]
            if (
                limit is not None
                and high[device] + draft.total > limit
                and not self._fits(op, draft)
            ):
                excluded.append(draft.device)
            elif best is None:
                best, best_finish = draft, self._finish(draft)
            elif (
                len(draft.copies) < _MANY
                or self.network is not None
                or _serial(draft) < best_finish
            ):
                finish = self._finish(draft, best_finish) if draft.copies else draft.bound
                if finish < best_finish:
                    best, best_finish = draft, finish
        if best is None:
            raise self._no_fit(op, planned)
        return best.device, tuple(sorted(excluded))

    def _fits(self, op: int, draft: Draft) -> bool:
        """Whether what `draft` adds fits under its device's limit at every step."""
        return self.occupancy.fits(
            draft.device, draft.first, op, draft.last, draft.before, draft.total
        )

    def _force(self, op: int, device: int, why: str) -> None:
        """`op` must go to `device`: bring generators it reads that cannot follow it, then
        check that it fits."""
        flat = self.flat
        if device in self.cpus:  # a generator that may not go to the CPU stays on a GPU
            for producer, _ in flat.inputs[op]:
                if self.placed[producer] < 0 and not _cpu_allowed(flat, producer):
                    gpu, excluded = self._choose(producer, self.gpus)
                    self.decisions[producer] = self._chosen(producer, gpu, excluded)
                    self._commit(producer, gpu)
        reads = self._reads(op)
        draft = self._draft(op, device, reads, self._tensors(reads))
        if not self._fits(op, draft):
            raise self._no_fit(op, [draft], why)

    def _no_fit(self, op: int, drafts: Sequence[Draft], why: str = "") -> NoFit:
        rooms = []
        for draft in drafts:
            model = self.models[draft.device]
            room = self.occupancy.room(draft.device, draft.first, draft.last)
            rooms.append((model.short, room or 0, model.memory_limit or 0))
        ops, name = self.flat.graph.ops, self.flat.names[op]
        what = f"op '{name}' ({ops[op].type})"
        brought = [
            f"{ops[producer].type} '{ops[producer].name}'"
            for producer, _ in self.flat.inputs[op]
            if self.placed[producer] < 0
        ]
        if brought:
            what += f" with the {sample(list(dict.fromkeys(brought)))} it reads"
        need = max(draft.total for draft in drafts)
        return NoFit(what, name, need, rooms, why)

    def _reads(self, op: int) -> list[Read]:
        """The tensors `op` reads, each once, with the slot it would read (None: a deferred
        generator's output; the generator comes along to the op's device)."""
        reads: list[Read] = []
        seen: set[tuple[int, int]] = set()
        flat, home, placed = self.flat, self.timeline.home, self.placed
        for producer, output in flat.inputs[op]:
            if (producer, output) in seen:
                continue
            if placed[producer] < 0:  # comes along once, whichever outputs op reads
                seen.update((producer, k) for k in range(len(flat.out_bytes[producer])))
                reads.append((producer, output, None))
            else:
                seen.add((producer, output))
                reads.append((producer, output, home[producer][output]))
        return reads

    def _tensors(self, reads: Sequence[Read]) -> list[Tensor | None]:
        """What `_bounds` and `_draft` need of each read that does not depend on the device,
        in the order of `reads`: (home device, when it is there, producer, output, seconds of
        a copy, weighted), or None for a deferred generator's output."""
        done, link, weight = self.timeline.done, self.link, self.weight
        out_bytes = self.flat.out_bytes
        return [
            None if slot is None else (
                slot.device, max(done[producer], slot.ready), producer, output,
                copy_time(out_bytes[producer][output], link) * weight,
            )
            for producer, output, slot in reads
        ]  # fmt: skip

    def _bounds(self, op: int, candidates: Sequence[int], reads: Sequence[Read],
                tensors: Sequence[Tensor | None]) -> list[tuple[float, int, int]]:  # fmt: skip
        """(`Draft.bound`, position, device) of `op` on each candidate, worked out without
        drafting each one: what does not depend on the device is looked up once (`tensors`:
        `_tensors(reads)`)."""
        timeline, times = self.timeline, self.times
        done, sent = timeline.done, timeline.sent
        generators = [times[producer] for producer, _, slot in reads if slot is None]
        placed = [tensor for tensor in tensors if tensor is not None]
        seconds, free_at, network = times[op], timeline.free_at, self.network
        # typed: C doubles (and a C type's slots) where compiled
        far: float
        ready: float
        start: float
        at: float
        length: float
        copy: Slot | None
        if not generators and network is None and not any(sent[t[2]] for t in placed):
            # no copy of them yet: each input is there at `at` on its home, a copy later elsewhere
            far, near = 0.0, {}
            for home, at, _, _, length in placed:
                near[home] = 0.0
                if at + length > far:
                    far = at + length
            for device in near:
                ready = 0.0
                for home, at, _, _, length in placed:
                    if home != device:
                        at += length
                    if at > ready:
                        ready = at
                near[device] = ready
            return [
                (max(free_at[device], near.get(device, far)) + seconds[device], n, device)
                for n, device in enumerate(candidates)
            ]
        out = []
        for n, device in enumerate(candidates):
            start, ready = free_at[device], 0.0
            for generator in generators:  # they run on `device` first
                start += generator[device]
            for home, at, producer, output, length in placed:
                if home != device:
                    copy = timeline.copy_of(producer, output, device)
                    if copy is None and network is not None:  # the route's, across hosts
                        length = self._copy_seconds(producer, output, home, device)
                    at = at + length if copy is None else max(done[producer], copy.ready)
                if at > ready:
                    ready = at
            out.append((max(start, ready) + seconds[device], n, device))
        return out

    def _draft(self, op: int, device: int, reads: Sequence[Read],
               tensors: Sequence[Tensor | None]) -> Draft:  # fmt: skip
        """`op` on `device`, planned cheaply (see Draft; `tensors`: `_tensors(reads)`)."""
        flat, timeline, times = self.flat, self.timeline, self.times
        done = timeline.done
        # typed: C doubles (and C types' slots) where compiled
        start: float = timeline.free_at[device]
        ready: float = 0.0
        at: float
        seconds: float
        slot: Slot | None
        copy: Slot | None
        first = last = op
        before = total = 0
        copies: list[PendingCopy] = []
        for (producer, output, slot), tensor in zip(reads, tensors, strict=True):
            if slot is None or tensor is None:  # a deferred generator runs on `device` first
                start += times[producer][device]
                if start > ready:
                    ready = start
                size = sum(flat.sizes[producer])
                first, last = min(first, producer), max(last, *flat.ends[producer])
                before, total = before + size, total + size
                continue
            home, at, _, _, seconds = tensor
            if home != device:
                copy = timeline.copy_of(producer, output, device)
                if copy is None:
                    if self.network is not None:  # the route's, across hosts
                        seconds = self._copy_seconds(producer, output, home, device)
                    copies.append((home, at, seconds))
                    if at + seconds > ready:
                        ready = at + seconds
                    total += slot.size
                    continue
                slot = copy
                at = max(done[producer], slot.ready)
            if at > ready:
                ready = at
            if slot.last < op:  # a copy (or forwarded buffer) on `device` lives on to this step
                first = min(first, slot.last + 1)
                before, total = before + slot.size, total + slot.size
        if not self.reserved[op] and flat.sizes[op]:
            total += sum(flat.sizes[op])
            last = max(last, *flat.ends[op])
        seconds = times[op][device]
        finish: float = max(start, ready) + seconds
        return Draft(device, first, before, last, total, finish, start, ready, seconds, copies)

    def _copy_seconds(self, producer: int, output: int, source: int, device: int) -> float:
        """How long copying a tensor from `source` to `device` counts when choosing: its
        transfer over the route between them (weighted), plus the hand-over across tasks."""
        link, _, _, hop = self.timeline.route(source, device)
        return copy_time(self.flat.out_bytes[producer][output], link) * self.weight + hop

    def _finish(self, draft: Draft, limit: float = _INF) -> float:
        """When a draft would finish with its copies planned on the links (none booked); or,
        once the copies planned so far end too late for it to finish before `limit`, a time
        at or after `limit` no later than its finish (the rest are not planned)."""
        ready: float = draft.ready  # typed: C doubles (and C types) where compiled
        start: float
        seconds: float
        end: float
        own: Link | None
        copies = draft.copies
        timeline, device = self.timeline, draft.device
        inbound, outbound = timeline.inbound[device], timeline.outbound
        route = None if self.network is None else timeline.route  # across hosts: NICs too
        if not copies:
            return max(draft.start, ready) + draft.seconds
        # Known busy time (links.transfer) only saves steps of the walk, never moves its end:
        # the links' (`Timeline.solid`) pays from _MANY copies on (a fan-in), not below
        if len(copies) == 1:  # nothing planned before it: no held time, no known time of its own
            source, start, seconds = copies[0]
            out, into = (outbound[source], inbound) if route is None else route(source, device)[1:3]
            end, _ = walk(out, into, start, seconds, None, ())
            return max(draft.start, ready, end) + draft.seconds
        held: Link | None = None  # copies planned into the device (none yet)
        mine: dict[int, Link] = {}  # per source: its copies planned so far, as known busy time
        last, many = len(copies) - 1, len(copies) >= _MANY
        for n, (source, start, seconds) in enumerate(copies):
            booked = timeline.solid.get((source, device)) if many else None
            own = mine.get(source)
            known: tuple[Link, ...]  # time known busy (links.transfer)
            if own is None:
                known = () if booked is None else (booked,)
            else:
                known = (own,) if booked is None else (own, booked)
            out, into = (outbound[source], inbound) if route is None else route(source, device)[1:3]
            end, pieces = walk(out, into, start, seconds, held, known)
            if end > ready:
                ready = end
                if max(draft.start, ready) + draft.seconds >= limit:
                    break  # later copies only end later: it cannot finish before `limit`
            if n < last:  # what the last copy takes, no later one avoids
                if held is None:
                    held = Link()
                held.book(pieces)
                if own is None:
                    own = mine[source] = Link()
                own.cover(start, end)
        return max(draft.start, ready) + draft.seconds

    def _commit(self, op: int, device: int) -> None:
        """Place `op` on `device` with the deferred generators it reads, and run it there."""
        for producer, _ in self.flat.inputs[op]:
            if self.placed[producer] < 0:
                self.decisions[producer] = Decision(
                    self.models[device].name, "follows-consumer",
                    f"balanced: generator goes with its first consumer {self.flat.names[op]} "
                    f"to {self.models[device].short}",
                )  # fmt: skip
                self._commit(producer, device)
        self.placed[op] = device
        charge = not self.reserved[op]  # a pinned op's outputs were charged up front
        self.timeline.run(op, device, self.times[op][device], charge)


def _serial(draft: Draft) -> float:
    """A lower bound of `_Balancer._finish(draft)` that counts its copies queueing: they share
    the device's inbound link and take its idle time in pieces that never overlap, so the
    last ends no sooner than any copy's ready time plus the lengths of every copy ready as
    late or later. A hair under it: the pieces' lengths may not sum to exactly a copy's."""
    lengths, latest = 0.0, 0.0
    for _, ready, seconds in sorted(draft.copies, key=_READY, reverse=True):
        lengths += seconds
        if ready + lengths > latest:
            latest = ready + lengths
    return (max(draft.start, draft.ready, latest) + draft.seconds) * (1 - 1e-9)


def _best_pass(flat: Flat, models: Sequence[DeviceModel], link: LinkModel, tf: TFWalk,
               groups: list[int], free: dict[int, tuple[int, ...]],
               times: Sequence[Sequence[float]],
               network: Network | None = None) -> tuple[list[Decision], Estimate]:  # fmt: skip
    """The decisions of the pass, among `WEIGHTS`, whose plan is estimated fastest (the first
    on a tie), and that estimate. The first pass's NoFit is raised; a later pass that finds no
    room is skipped. A pass's timeline is dropped once its plan is estimated; `times`: each
    op's seconds on each device (`work_times`).

    The passes run last first. On a graph of `_LONG` ops or more, a pass is given up at its
    first mark from 15% of the ops on where it is not ahead of the best pass so far
    (`_Balancer.run`): the plain pass only goes on while it leads. On big graphs the heavier
    weight wins or ties (random DAGs, transformers, fans, chains and wide layers of 25,000
    ops on 2, 4 and 8 GPUs: 20 of 21; the plain pass won a fan on 8 GPUs by 0.44%), so there
    a tie keeps the heavier pass, and a plain pass that would run out of room after it was
    given up raises no NoFit."""
    best: tuple[list[Decision], Estimate] | None = None
    lead: list[float] = []  # the marks of the best pass so far (`_Balancer.run`)
    for k in reversed(range(len(WEIGHTS))):
        balancer = _Balancer(flat, models, link, tf, groups, free, times, WEIGHTS[k], network)
        try:
            decided = balancer.run(lead if len(flat.names) >= _LONG else ())
        except NoFit:
            if k == 0:
                raise
            continue
        if decided is None:  # fell behind the best pass
            continue
        placed, marks = balancer.placed, balancer.marks
        est = balancer.estimate()
        del balancer
        if est is None:
            est = simulate(flat, placed, models, link, network)
        if best is None or est.makespan <= best[1].makespan:  # a tie: the earlier weight
            best, lead = (decided, est), marks
    assert best is not None
    return best


def place_balanced(
    graph: Graph,
    devices: Sequence[DeviceModel],
    link: LinkModel | None = None,
    *,
    allow_soft_placement: bool = False,
    op_meta: Callable[[str], OpMeta] | None = None,
    footprint: Callable[[Flat], Flat] | None = None,
) -> Placement:
    """Place `graph` on `devices` (GPU:0..n-1 and CPU:0) with the balanced strategy.

    TensorFlow's rules and errors apply first (`place`); raises NoFit when an op fits on no
    candidate device. `footprint` resizes the flattened graph's buffers and lives before the
    memory checks (a training step's footprint, `memory.training.training_flat`).
    """
    meta = default_meta(op_meta)
    link = link or LinkModel()
    gpus, cpu = split_devices(devices)
    models = [*gpus, cpu]
    tf = place(graph, len(gpus), allow_soft_placement=allow_soft_placement, op_meta=meta)
    with gc_paused():  # flat, slots and drafts are acyclic, freed by reference counting
        base = flat = flatten(graph, meta)
        if footprint is not None:  # charged as the footprint sizes it; judged as it is
            flat = footprint(base)
        groups, free = free_groups(flat, tf, len(gpus))
        times = work_times(flat.flops, flat.nbytes, models)
        walk = tf_walk(tf, flat, models)
        decisions, spread = _best_pass(flat, models, link, walk, groups, free, times)
        chosen = spread
        alone = _faster_alone(flat, walk.device, models, link, times, spread) if free else None
        if alone is not None:  # TF's own placement is faster and fits
            decisions = _kept(walk.decisions, groups, free, alone.makespan, spread.makespan)
            chosen = alone
        by_name = dict(zip(flat.names, decisions, strict=True))
    soft = allow_soft_placement  # judged only with the op registry, as `plan` estimates it
    judged = (
        Judged(base, tf, soft, tuple(models), link, by_name, chosen) if op_meta is None else None
    )
    return Placement(by_name, tf.devices, judged=judged)


def _faster_alone(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
                  link: LinkModel, times: Sequence[Sequence[float]], spread: Estimate,
                  network: Network | None = None) -> Estimate | None:  # fmt: skip
    """The estimate of TensorFlow's own placement (op i on `dev[i]`) when it is faster than
    `spread` and fits every device, else None. Not simulated when it cannot be faster: each
    device runs its ops one after another, so no op ends before the sum of its device's op
    times so far (summed in graph order, as `simulate` adds them: rounding is monotonic, so
    the float sum is never above the device's end), and a sum at or above `spread`'s makespan
    settles it. Nor when it cannot fit (`_outlive_a_limit`). `times`: each op's seconds on
    each device (`work_times`)."""
    busy = [0.0] * len(models)
    for seconds, device in zip(times, dev, strict=True):
        busy[device] += seconds[device]
    if max(busy, default=0.0) >= spread.makespan or _outlive_a_limit(flat, dev, models):
        return None
    alone = simulate(flat, dev, models, link, network)
    fits = all(m.memory_limit is None or alone.peak[m.name] <= m.memory_limit for m in models)
    return alone if alone.makespan < spread.makespan and fits else None


def _outlive_a_limit(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel]) -> bool:
    """Whether the outputs of resident ops (variables) on some device, op i on `dev[i]`,
    exceed its limit: the estimate frees them only after the last step, so a device's peak
    holds them all, and that placement cannot fit (a 1,000,000-op chain's variables on
    GPU:0, TF's placement, overflow it: no need to simulate it to find out)."""
    held = [0] * len(models)
    sizes = flat.sizes
    for op in compress(range(len(dev)), flat.resident):
        held[dev[op]] += sum(sizes[op])
    return any(
        m.memory_limit is not None and kept > m.memory_limit
        for m, kept in zip(models, held, strict=True)
    )


def _kept(tf: Sequence[Decision], groups: list[int], free: dict[int, tuple[int, ...]],
          alone: float, spread: float) -> list[Decision]:  # fmt: skip
    """TensorFlow's placement (its decisions in graph order), each free op saying why the
    spread was not kept (colocated ops keep TF's reason: their group moved with its first op)."""
    why = (
        f"balanced: spreading was estimated slower ({spread * 1e3:.3g} ms vs {alone * 1e3:.3g} ms)"
    )
    out, made = [], dict[str, Decision]()
    for op, decision in enumerate(tf):
        if groups[op] in free and decision.kind != "colocated":
            device = decision.device
            decision = made.get(device) or made.setdefault(
                device,
                Decision(device, "balanced", f"{why}; kept on {short_name(device)}"),
            )
        out.append(decision)
    return out


def place_balanced_cluster(
    graph: Graph, tf: Placement, models: Sequence[DeviceModel], tasks: Sequence[int],
    link: LinkModel, network: LinkModel, hop: float,
) -> Placement:  # fmt: skip
    """Balanced across hosts: `tf` is TensorFlow's placement over the cluster
    (`place_cluster`), `models` every task's devices by full name (GPUs first; `tasks[d]` the
    task of model d). Ops keep TF's pins; a free group spreads over the GPUs its request
    matches: within the task it names, or across hosts when it names none, with copies
    between tasks over `network` plus `hop` seconds each. TF's placement is kept where the
    spread is estimated slower and TF's fits."""
    gpu_tasks = [split_device(m.name)[0] for m in models if m.kind == "GPU"]
    route = Network(tuple(tasks), network, hop)
    with gc_paused():
        flat = flatten(graph)
        groups, free = free_groups(flat, tf, len(gpu_tasks), gpu_tasks)
        times = work_times(flat.flops, flat.nbytes, models)
        walk = tf_walk(tf, flat, models)
        decisions, spread = _best_pass(flat, models, link, walk, groups, free, times, route)
        dev = walk.device
        alone = _faster_alone(flat, dev, models, link, times, spread, route) if free else None
        if alone is not None:
            decisions = _kept(walk.decisions, groups, free, alone.makespan, spread.makespan)
        by_name = dict(zip(flat.names, decisions, strict=True))
    return Placement(by_name, tf.devices)
