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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

from ..errors import BadInput
from ..gc_pause import gc_paused
from ..graph.model import Graph, OpMeta
from .baselines import Bounds, lower_bounds, round_robin, stage_bound
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_time
from .flat import Flat, flatten
from .model import Placement
from .timeline import Network, Timeline

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


@dataclass(frozen=True)
class Estimate:
    """What a placement costs: seconds, bytes and copies per device (full names)."""

    makespan: float
    busy: dict[str, float]  # seconds of compute on each device
    peak: dict[str, int]  # peak bytes in use, as the ledgers count them
    copies_in: dict[str, tuple[int, int]]  # (copies, bytes) arriving at each device
    copies_out: dict[str, tuple[int, int]]  # (copies, bytes) leaving each device


def _peaks(timeline: Timeline, dev: Sequence[int], devices: int) -> list[int]:
    """The ledgers' peaks: each step allocates its slots on its device, then frees those it
    read last (taken in order of their last step: no list per step)."""
    allocated = [0] * len(dev)
    for slot in timeline.slots:
        allocated[slot.step] += slot.size
    freed = sorted(timeline.slots, key=_LAST)
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
    index = {m.name: i for i, m in enumerate(models)}
    try:
        return [index[placement.decisions[name].device] for name in flat.names]
    except KeyError as err:
        raise BadInput(f"the placement names a device or op the models lack: {err}") from None


def simulate(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
             link: LinkModel, network: Network | None = None) -> Estimate:  # fmt: skip
    """`estimate` on a flattened graph and a device index per op (the placers call this);
    `network`: the tasks of a cluster and the link between them."""
    timeline, busy = Timeline(flat, len(models), link, None, network), [0.0] * len(models)
    with gc_paused():  # the slots are acyclic, freed by reference counting
        for op, device in enumerate(dev):
            seconds = work_time(flat.flops[op], flat.nbytes[op], models[device])
            busy[device] += seconds
            timeline.run(op, device, seconds)
    return judge(timeline, dev, models, busy)


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


@dataclass(frozen=True)
class Judged:
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
