"""The estimated schedule as something to draw: each op's and each copy's interval on its
device, and each device's bytes in use over time.

It replays the placement on the cost model's timeline (`placement/timeline.py`) exactly as
`placement/estimate.py: simulate` does (same device models, same link model, ops in graph order),
keeping what the estimate sums up: when each op starts and ends, when each copy lands, and when
each buffer (slot) is allocated and freed. So the drawing's makespan is the plan's makespan.

Memory over time: a buffer is in use from the start of the step that allocates it (a copy: from
when it starts moving) to the end of the last step that reads it; resident outputs (variables)
and fetched tensors stay to the end of the schedule. A copy is drawn as one bar of its transfer
time ending when it lands (the links may split it into pieces; its end is exact).
Linear in the ops, slots and copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...devices.cluster import short_name
from ...devices.model import View
from ...gc_pause import gc_paused
from ...placement.cost import (
    DASK_HOP,
    LinkModel,
    cluster_models,
    copy_time,
    device_models,
    network_link,
    split_devices,
    work_time,
)
from ...placement.estimate import device_index
from ...placement.flat import flatten
from ...placement.timeline import Network, Timeline
from ...results import Prepared


@dataclass(frozen=True)
class Bar:
    """One op or copy on a device's lane: seconds from the start of the schedule."""

    device: int  # index into Trace.devices
    start: float
    end: float
    label: str  # the op's name, or `tensor from GPU:0` for a copy
    nbytes: int = 0  # a copy's bytes


@dataclass(frozen=True)
class Trace:
    """The estimated schedule of one placement (see the module docstring)."""

    devices: tuple[str, ...]  # full names: GPU:0..n-1, then CPU:0 (the cost model's order)
    limits: tuple[int | None, ...]  # each device's memory limit (None: unknown)
    ops: tuple[Bar, ...]
    copies: tuple[Bar, ...]  # on the receiving device's lane
    memory: tuple[tuple[tuple[float, int], ...], ...]  # per device: (time, bytes in use) steps
    makespan: float


def trace(prepared: Prepared, view: View) -> Trace:
    """The estimated schedule of `prepared` on the machine `view` shows (what `plan` estimates)."""
    network = None
    if prepared.cluster is None:
        gpus, cpu = split_devices(
            device_models(prepared.logical, view.machine.host, prepared.rates.by_uuid)
        )
        models = [*gpus, cpu]
    else:  # across hosts: every task's devices, copies between tasks over the network
        models, tasks = cluster_models(
            prepared.cluster, prepared.task_logical, prepared.rates.by_uuid
        )
        network = Network(tuple(tasks), network_link(prepared.cluster), DASK_HOP)
    flat = flatten(prepared.graph)
    dev = device_index(prepared.placement, flat, models)
    link = LinkModel()
    timeline = Timeline(flat, len(models), link, None, network)
    starts: list[float] = []
    with gc_paused():  # the slots are acyclic, freed by reference counting
        for op, device in enumerate(dev):
            seconds = work_time(flat.flops[op], flat.nbytes[op], models[device])
            starts.append(timeline.run(op, device, seconds) - seconds)
    done = timeline.done
    makespan = max(done, default=0.0)
    ops = tuple(
        Bar(device, start, end, name)
        for device, start, end, name in zip(dev, starts, done, flat.names, strict=True)
    )
    names = [short_name(m.name) for m in models]
    copies: list[Bar] = []
    began: dict[int, float] = {}  # id(copy slot) -> when it starts moving
    for (producer, output, device), slot in timeline.copied.items():
        nbytes = flat.out_bytes[producer][output]
        route, _, _, hop = timeline.route(timeline.home[producer][output].device, device)
        start = max(slot.ready - hop - copy_time(nbytes, route), 0.0)
        began[id(slot)] = start
        source = names[timeline.home[producer][output].device]
        label = f"{flat.names[producer]}:{output} from {source}"
        copies.append(Bar(device, start, slot.ready, label, nbytes))
    kept = {id(s) for outputs, resident in zip(timeline.home, flat.resident, strict=True)
            if resident for s in outputs}  # fmt: skip
    kept.update(id(timeline.home[producer][output]) for producer, output in flat.fetched())
    events: list[list[tuple[float, int]]] = [[] for _ in models]
    for slot in timeline.slots:
        alloc = began.get(id(slot), starts[slot.step])
        free = makespan if id(slot) in kept else done[slot.last]
        events[slot.device] += ((alloc, slot.size), (free, -slot.size))
    return Trace(
        devices=tuple(m.name for m in models),
        limits=tuple(m.memory_limit for m in models),
        ops=ops,
        copies=tuple(sorted(copies, key=lambda b: (b.device, b.start))),
        memory=tuple(_in_use(e) for e in events),
        makespan=makespan,
    )


def _in_use(events: list[tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """(time, bytes in use from then on), one point per distinct time; at one instant the
    frees come before the allocations (a step frees what it read before the next allocates)."""
    events.sort(key=lambda e: (e[0], e[1]))
    points: list[tuple[float, int]] = [(0.0, 0)]
    in_use = 0
    for time, change in events:
        in_use += change
        if points[-1][0] == time:
            points[-1] = (time, in_use)
        else:
            points.append((time, in_use))
    return tuple(points)
