"""Judge any placement with one cost model: estimated makespan, busy time, peak memory, copies.

The placement is replayed on the executor's run in miniature (`timeline.py`), the model the
balanced placer plans with, so its plan and the estimate agree. Memory is counted as the
ledgers count it (`execute/executor.py`): each step allocates its outputs and the copies it
needs on its device, then frees the tensors it read last; outputs of resident ops (variables)
and fetched tensors stay to the end; sizes are rounded to 256 B. Time: ops and copies take
what `cost.py` says, each device runs its ops in graph order, copies use the links' idle time.
`lower_bounds` and `round_robin` (in `baselines.py`) are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, OpMeta
from .arrays import int_array
from .baselines import (
    Bounds,
    by_label,
    lower_bounds,
    rate_table,
    round_robin,
    stage_bound,
    times_on,
)
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_time
from .flat import Flat, flatten
from .links import Link, transfer
from .model import Decision, Placement
from .timeline import Network, Slot, Timeline

_LAST = attrgetter("last")

__all__ = [
    "Estimate",
    "Judged",
    "estimate",
    "estimate_cluster",
    "estimate_with_bounds",
    "lower_bounds",
    "round_robin",
    "simulate",
]


class Estimate(NamedTuple):
    """What a placement costs: seconds, bytes and copies per device (full names)."""

    makespan: float
    busy: dict[str, float]  # seconds of compute on each device
    peak: dict[str, int]  # peak bytes in use, as the ledgers count them
    copies_in: dict[str, tuple[int, int]]  # (copies, bytes) arriving at each device
    copies_out: dict[str, tuple[int, int]]  # (copies, bytes) leaving each device


def _peaks(timeline: Timeline, dev: Sequence[int], devices: int) -> list[int]:
    """The ledgers' peaks: each step allocates its slots on its device, then frees those it
    read last (taken in order of their last step: no list per step)."""
    return _peak_counts(timeline.slots, dev, devices)


def _peak_counts(slots: Sequence[Slot], dev: Sequence[int], devices: int) -> list[int]:
    """`_peaks` of `slots`."""
    allocated = [0] * len(dev)
    for slot in slots:
        allocated[slot.step] += slot.size
    freed = sorted(slots, key=_LAST)
    in_use, peak = [0] * devices, [0] * devices
    k, count = 0, len(freed)
    for step, device in enumerate(dev):
        in_use[device] += allocated[step]
        peak[device] = max(peak[device], in_use[device])
        while k < count and freed[k].last == step:
            in_use[freed[k].device] -= freed[k].size
            k += 1
    return peak


def _copies(timeline: Timeline, flat: Flat, devices: int) -> tuple[list[int], ...]:
    """(copies in, bytes in, copies out, bytes out) per device."""
    counts: tuple[list[int], ...] = tuple([0] * devices for _ in range(4))
    copies_in, bytes_in, copies_out, bytes_out = counts
    for producer, output, device in timeline.copied:
        source, nbytes = timeline.home[producer][output].device, flat.out_bytes[producer][output]
        copies_in[device] += 1
        bytes_in[device] += nbytes
        copies_out[source] += 1
        bytes_out[source] += nbytes
    return counts


def device_index(placement: Placement, flat: Flat, models: Sequence[DeviceModel]) -> list[int]:
    """Each op's device as an index into `models`."""
    try:
        return devices_of(placement.in_order(flat.names), models)
    except KeyError as err:  # an op the placement lacks
        raise _lacking(err) from None


def devices_of(decisions: list[Decision], models: Sequence[DeviceModel]) -> list[int]:
    """The device of each of `decisions` as an index into `models` (`device_index` of a
    placement's decisions already walked in graph order)."""
    index = {m.name: i for i, m in enumerate(models)}
    try:
        found: list[int] = _indices(decisions, index).tolist()
    except KeyError as err:
        raise _lacking(err) from None
    return found


def _lacking(err: KeyError) -> BadInput:
    return BadInput(f"the placement names a device or op the models lack: {err}")


def _indices(decided: Any, index: Any) -> Any:
    """Each decision's device (`decided`, a list) by `index` (full name to index), as an int
    array: looked up once per run of the very same decision (ops share them: a few objects
    for a large graph), not by name per op; in a C loop where compiled (estimate.pxd)."""
    n = len(decided)
    out = np.empty(n, np.intp)
    into = out  # a view of its memory where compiled
    last: Any = None
    k = -1
    j = 0
    while j < n:
        decision = decided[j]
        if decision is not last:
            k = index[decision.device]
            last = decision
        into[j] = k
        j += 1
    return out


def simulate(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
             link: LinkModel, network: Network | None = None) -> Estimate:  # fmt: skip
    """`estimate` on a flattened graph and a device index per op (the placers call this);
    `network`: the tasks of a cluster and the link between them. On one host the timeline is
    replayed over plain lists (`_replay`), else on `Timeline`; the two agree to the last bit."""
    if network is None:
        return _replay(flat, dev, models, link)
    return simulate_on_timeline(flat, dev, models, link, network)


def simulate_on_timeline(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
                         link: LinkModel, network: Network | None = None) -> Estimate:  # fmt: skip
    """`simulate` on `Timeline`, the model the balanced placer plans on."""
    timeline, busy = Timeline(flat, len(models), link, None, network), [0.0] * len(models)
    with gc_paused():  # the slots are acyclic, freed by reference counting
        for op, device in enumerate(dev):
            seconds = work_time(flat.flops[op], flat.nbytes[op], models[device])
            busy[device] += seconds
            timeline.run(op, device, seconds)
    return judge(timeline, dev, models, busy)


def op_seconds(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel]) -> Any:
    """`work_time` of each op on its device (`dev`: a list or an int array), as a float64
    array, over arrays (`baselines.times_on`): each op's own of every op's times at each rate
    (`rate_table`, a few rates), else the ops of each device apart."""
    flops, nbytes = flat.cost_arrays
    n = len(dev)
    table = rate_table(flops, nbytes, models) if n else None
    if table is not None:
        rows, which = table
        rate = int_array(which)[int_array(dev)]
        seconds = np.choose(rate, rows) if len(rows) > 1 else rows[0]
    else:
        seconds = np.empty(n)
        for m, on in zip(models, by_label(dev, len(models)), strict=True):
            seconds[on] = times_on(flops[on], nbytes[on], m)
    return seconds


def _replay(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
            link: LinkModel) -> Estimate:  # fmt: skip
    """`simulate_on_timeline` on one host over plain lists: the same steps in the same order
    (`Timeline.run` and `_copy`, then `judge`). An op's outputs (its home slots: on its device,
    allocated at its step, ready at its end) need only their last step; copies are kept whole;
    a print's outputs are the slots it read, as (home slot or copy, device, ready)."""
    n, devices = len(dev), len(models)
    where = int_array(dev)
    seconds = op_seconds(flat, where, models)
    reads, sizes, is_print, out_bytes = flat.reads, flat.sizes, flat.is_print, flat.out_bytes
    home_size, width = _home_sizes(sizes)
    first = np.zeros(n + 1, np.intp)  # each op's first home slot (an int array), then the end
    np.cumsum(width, out=first[1:])
    homes = int(first[n])
    owner = np.repeat(np.arange(n, dtype=np.intp), width)  # each home slot's op
    home_last = owner.copy()  # read by no later op: freed after its own step
    # each op's end, each device's free time and busy seconds (float64 arrays)
    done, free_at, busy = np.zeros(n), np.zeros(devices), np.zeros(devices)
    copies: list[list[Any]] = []  # [device, size, step, last, ready], slot homes + index
    copied: dict[tuple[int, int, int], int] = {}  # (producer, output, device) -> copy's index
    forwarded: dict[int, list[tuple[int, int, float]]] = {}  # per print: what it read
    outbound, inbound = [Link() for _ in range(devices)], [Link() for _ in range(devices)]
    solid: dict[tuple[int, int], Link] = {}

    def copy_of(p: int, k: int, source: int, size: int, ready: float, d: int, op: int) -> int:
        """`Timeline._copy` of output k of p (on `source`, `ready` then) to `d` for step op."""
        length = copy_time(out_bytes[p][k], link)
        start = max(float(done[p]), ready)
        both = solid.get((source, d))
        if both is None:
            both = solid[source, d] = Link()
        end, pieces = transfer(outbound[source], inbound[d], start, length, None, both)
        outbound[source].book(pieces)
        inbound[d].book(pieces)
        both.cover(start, end)
        copy = copied[p, k, d] = homes + len(copies)
        copies.append([d, size, op, op, end + 0.0])
        return copy

    _steps(where, reads.producer, reads.output, reads.offsets, is_print, seconds, first,
           home_size, home_last, done, free_at, busy, copies, copied, forwarded,
           copy_of)  # fmt: skip
    last = flat.last
    for i in compress(range(n), flat.resident):
        for slot in range(first[i], first[i] + len(sizes[i])):
            home_last[slot] = last
    for p, k in flat.fetched():  # never freed (a fetched print output is the slot it forwards)
        slot = forwarded[p][k][0] if is_print[p] else first[p] + k
        if slot < homes:
            home_last[slot] = last
        else:
            copies[slot - homes][3] = last
    counts: tuple[list[int], ...] = tuple([0] * devices for _ in range(4))
    copies_in, bytes_in, copies_out, bytes_out = counts
    for p, k, d in copied:
        source, nbytes = forwarded[p][k][1] if is_print[p] else dev[p], out_bytes[p][k]
        copies_in[d] += 1
        bytes_in[d] += nbytes
        copies_out[source] += 1
        bytes_out[source] += nbytes
    names = [m.name for m in models]
    peaks = _slot_peaks(where, devices, owner, home_size, home_last, copies)
    return Estimate(
        makespan=float(done.max()) if n else 0.0,
        busy=dict(zip(names, busy.tolist(), strict=True)),
        peak=dict(zip(names, peaks, strict=True)),
        copies_in=dict(zip(names, zip(copies_in, bytes_in, strict=True), strict=True)),
        copies_out=dict(zip(names, zip(copies_out, bytes_out, strict=True), strict=True)),
    )


def _steps(dev: Any, producer: Any, output: Any, offsets: Any, is_print: Sequence[bool],
           seconds: Any, first: Any, home_size: Sequence[int], home_last: Any, done: Any,
           free_at: Any, busy: Any, copies: MutableSequence[Any],
           copied: Mapping[tuple[int, int, int], int],
           forwarded: MutableMapping[int, list[tuple[int, int, float]]],
           copy_of: Callable[[int, int, int, int, float, int, int], int]) -> None:  # fmt: skip
    """`_replay`'s pass over the ops in graph order: each op's reads (`Reads`' int arrays
    `producer`, `output`, `offsets`; a copy where its input is on another device: `copy_of`;
    each op's device, first home slot and each home slot's last step are int arrays too),
    its end on its device and the device's busy seconds (float64 arrays, as `seconds`: added
    in graph order), a print's forwarded slots. Its loops run on C integers and doubles
    where compiled, over the arrays' memory (estimate.pxd)."""
    n, homes = len(dev), len(home_size)  # slots from `homes` on are copies
    op = 0  # counters: compiled, C integers
    while op < n:
        d, ready, printing = dev[op], 0.0, is_print[op]
        read: Any = [] if printing else None  # a print's forwarded slots
        r, stop = offsets[op], offsets[op + 1]
        while r < stop:
            p, k = producer[r], output[r]
            r += 1
            if is_print[p]:  # the slot it forwards
                slot, source, there = forwarded[p][k]
                if slot < homes:
                    home_last[slot] = op
                else:
                    copies[slot - homes][3] = op
            else:
                slot, source, there = first[p] + k, dev[p], done[p]
                home_last[slot] = op  # ops come in order: each read is the latest so far
                if source == d and not printing:  # the common case: max(ready, done[p])
                    if there > ready:
                        ready = there
                    continue
            if source != d:
                copy = copied.get((p, k, d))
                if copy is None:
                    size = home_size[slot] if slot < homes else copies[slot - homes][1]
                    copy = copy_of(p, k, source, size, there, d, op)
                else:
                    copies[copy - homes][3] = op
                slot, source, there = copy, d, copies[copy - homes][4]
            ready = max(ready, done[p], there)
            if printing:
                read.append((slot, source, there))
        end = free_at[d]
        done[op] = free_at[d] = (end if end > ready else ready) + seconds[op]
        busy[d] += seconds[op]
        if printing:
            forwarded[op] = read
        op += 1


def _home_sizes(sizes: Any) -> tuple[list[int], Any]:
    """Every op's rounded output sizes (`Flat.sizes`, a tuple per op) in one list, op by op:
    the home slots' sizes; and each op's number of them (an int array). In a C loop over the
    tuples where compiled (estimate.pxd): no iterator per op, as `chain` makes."""
    n = len(sizes)
    width = np.empty(n, np.intp)
    count = width  # a view of its memory where compiled
    out: list[int] = []
    j = 0
    while j < n:
        mine = sizes[j]
        count[j] = len(mine)
        for size in mine:
            out.append(size)
        j += 1
    return out, width


def _slot_peaks(dev: Any, devices: int, owner: Any, home_size: list[int],
                home_last: Any, copies: list[list[Any]]) -> list[int]:  # fmt: skip
    """`_peaks` of `_replay`'s slots (each step's device `dev`, the home slots' ops `owner`
    and last steps `home_last`, as int arrays): at each step its device holds what it
    allocated up to that step less what was freed before it (after each slot's last step). A
    slot is allocated on the device of its step (a home slot on its op's, a copy on its
    reader's). In int64 arrays when the sizes' total fits one (`_held_peaks`), else as
    `_peak_counts` counts (Python's integers)."""
    sizes = home_size + [c[1] for c in copies]
    steps = [owner, int_array([c[2] for c in copies])]
    lasts = [home_last, int_array([c[3] for c in copies])]
    step, last = np.concatenate(steps), np.concatenate(lasts)
    if sum(sizes) >= 1 << 62:
        on = dev.tolist()
        slots = [Slot(on[s], size, s, e, 0.0)
                 for size, s, e in zip(sizes, step.tolist(), last.tolist(), strict=True)]  # fmt: skip
        return _peak_counts(slots, on, devices)
    size = int_array(sizes).astype(np.int64, copy=False)  # (intp is int64 here)
    return _held_peaks(dev, devices, step, last, size)


def _held_peaks(where: Any, devices: Any, step: Any, last: Any, size: Any) -> list[int]:
    """`_peak_counts` over int arrays: each step's device (`where`), and each slot's step,
    last step and size (their total below 2**62: no int64 overflows). Each step adds what it
    allocated on its device, checks the device's peak, then frees the slots it read last (a
    list per step, linked through the arrays `head` and `below`); in C loops where compiled
    (estimate.pxd), over the arrays' memory."""
    n, count = len(where), len(size)
    allocated = np.zeros(n, np.int64)
    head = np.full(n, -1, np.intp)  # per step: a slot whose last step it is, -1 for none
    below = np.empty(count, np.intp)  # the next slot of the same last step, -1 after the last
    s = 0
    while s < count:
        allocated[step[s]] += size[s]
        below[s] = head[last[s]]
        head[last[s]] = s
        s += 1
    peaks = np.zeros(devices, np.int64)  # a device's peak: at least 0
    in_use, peak = np.zeros(devices, np.int64), peaks  # (`peak`: a view where compiled)
    t = 0
    while t < n:
        d = where[t]
        in_use[d] += allocated[t]
        if in_use[d] > peak[d]:
            peak[d] = in_use[d]
        s = head[t]
        while s >= 0:
            in_use[where[step[s]]] -= size[s]
            s = below[s]
        t += 1
    out: list[int] = peaks.tolist()
    return out


def judge(timeline: Timeline, dev: Sequence[int], models: Sequence[DeviceModel],
          busy: Sequence[float]) -> Estimate:  # fmt: skip
    """The estimate of a timeline that ran every op of its graph in graph order, op i on
    device `dev[i]` for a total of `busy[d]` seconds on device d."""
    flat = timeline.flat
    kept = [slot for outputs, resident in zip(timeline.home, flat.resident, strict=True)
            if resident for slot in outputs]  # fmt: skip
    kept += (timeline.home[producer][output] for producer, output in flat.fetched())
    for slot in kept:  # never freed (a fetched print output is the slot it forwards)
        timeline.extend(slot, flat.last)
    names = [m.name for m in models]
    copies_in, bytes_in, copies_out, bytes_out = _copies(timeline, flat, len(models))
    return Estimate(
        makespan=max(timeline.done, default=0.0),
        busy=dict(zip(names, busy, strict=True)),
        peak=dict(zip(names, _peaks(timeline, dev, len(models)), strict=True)),
        copies_in=dict(zip(names, zip(copies_in, bytes_in, strict=True), strict=True)),
        copies_out=dict(zip(names, zip(copies_out, bytes_out, strict=True), strict=True)),
    )


def estimate(
    graph: Graph,
    placement: Placement,
    devices: Sequence[DeviceModel],
    link: LinkModel | None = None,
    *,
    op_meta: Callable[[str], OpMeta] | None = None,
) -> Estimate:
    """Simulate `placement` of `graph` on `devices` (GPU:0..n-1 and CPU:0; see above)."""
    flat = flatten(graph, op_meta)
    gpus, cpu = split_devices(devices)
    models = [*gpus, cpu]
    return simulate(flat, device_index(placement, flat, models), models, link or LinkModel())


class Judged(NamedTuple):
    """What a strategy worked out on its way to a placement, for `estimate_with_bounds` to
    reuse (`Placement.judged`): the flattened graph, TensorFlow's placement of it (with the
    soft-placement flag it used), and the estimate of the placement's `decisions` on `models`
    over `link`. Valid only for that very graph and those very decisions (`reusable`)."""

    flat: Flat
    tf: Placement
    soft: bool
    models: tuple[DeviceModel, ...]
    link: LinkModel
    decisions: object  # the Placement.decisions it was estimated for (compared by identity)
    estimate: Estimate

    def reusable(self, graph: Graph, placement: Placement, models: Sequence[DeviceModel],
                 link: LinkModel, soft: bool) -> bool:  # fmt: skip
        """Whether this is the estimate of `placement` of `graph` on `models` over `link`."""
        return (
            self.flat.graph is graph and self.decisions is placement.decisions
            and self.soft == soft and self.link == link and self.models == tuple(models)
        )  # fmt: skip


def estimate_with_bounds(
    graph: Graph, placement: Placement, devices: Sequence[DeviceModel], *,
    allow_soft_placement: bool, tf: Placement | None = None, flat: Flat | None = None,
) -> tuple[Estimate, Bounds]:  # fmt: skip
    """What `gpuplace plan` judges a placement by: its estimate, and the lower bounds no
    placement of `graph` on `devices` can beat, from one flattening of the graph. `tf`:
    TensorFlow's own placement of `graph`, when that is what `placement` is (not placed again).
    What the strategy already worked out (`placement.judged`) is reused, not done again, and so
    is `flat`, the graph flattened already (by `memory.training`, say)."""
    gpus, cpu = split_devices(devices)
    models, link, soft = [*gpus, cpu], LinkModel(), allow_soft_placement
    judged = placement.judged
    with gc_paused():  # flat, slots and bounds are acyclic, freed by reference counting
        if isinstance(judged, Judged) and judged.reusable(graph, placement, models, link, soft):
            flat, est, tf = judged.flat, judged.estimate, tf or judged.tf
        else:
            flat = flat if flat is not None and flat.graph is graph else flatten(graph)
            est = simulate(flat, device_index(placement, flat, models), models, link)
        bounds = lower_bounds(graph, devices, link, allow_soft_placement=soft, tf=tf, flat=flat)
    return est, bounds


def estimate_cluster(
    graph: Graph, placement: Placement, models: Sequence[DeviceModel], tasks: Sequence[int],
    link: LinkModel, network: LinkModel, hop: float,
) -> tuple[Estimate, Bounds]:  # fmt: skip
    """`plan` across hosts: the estimate of `placement` on every task's devices (`models`,
    full names; `tasks[d]` the task of model d), copies within a task over `link`, between
    tasks over `network` plus `hop` seconds each; and the lower bounds of any placement that
    keeps each op on the task `placement` gave it (TensorFlow's soft placement never changes
    an op's task), each op at its fastest device with a kernel: the critical path, where every
    edge between two tasks costs at least one network copy (latency, bytes over the bandwidth
    and the hop), the work spread over every device, and stage by stage (`_Stages`, copies
    within a task at `link`'s rate, which no network copy beats)."""
    flat = flatten(graph)
    dev = device_index(placement, flat, models)
    with gc_paused():
        est = simulate(flat, dev, models, link, Network(tuple(tasks), network, hop))
    fastest, where = [], []
    for j in range(len(flat.names)):
        usable = [m for m in models if m.kind in flat.kernels[j]] or list(models)
        fastest.append(min(work_time(flat.flops[j], flat.nbytes[j], m) for m in usable))
        where.append(1 if all(m.kind == "GPU" for m in usable) else 0)
    task = [tasks[d] for d in dev]
    longest = [0.0] * len(fastest)
    for j, w in enumerate(fastest):
        longest[j] = w + max(
            (longest[p] + (0.0 if task[p] == task[j] else
                           hop + copy_time(flat.out_bytes[p][k], network))
             for p, k in flat.inputs[j]),
            default=0.0,
        )  # fmt: skip
    gpus = sum(m.kind == "GPU" for m in models)
    work = sum(fastest) / max(len(models), 1)
    stages = stage_bound(flat, fastest, where, gpus, link)
    return est, Bounds(max(longest, default=0.0), work, stages)
