"""Judge any placement with one cost model: estimated makespan, busy time, peak memory, copies.

Memory follows the ledgers exactly (`execute/executor.py`), walking the graph in order:
outputs are charged to their op's device; an input from another device is copied there once
per (tensor, device) and freed after its last reader there; a source lives until its last
reader anywhere; outputs of resident ops (variables) and fetched tensors are never freed;
`print` forwards its input buffers; sizes are rounded to 256 B.

Time follows the same walk (`cost.py` for op and copy times): each device runs its ops one at
a time in graph order, and an op starts once its device is free and its inputs are there. A
copy is made when its reader's turn comes, as the executor makes it, in the idle time of the two
links it uses once its tensor is ready (`links.py`). The balanced placer plans with this
model, so its plan and the estimate agree.
`lower_bounds` and `round_robin` (in `baselines.py`) are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BadInput
from ..graph.model import Graph, OpMeta
from .baselines import lower_bounds, round_robin
from .cost import DeviceModel, LinkModel, copy_time, split_devices, work_time
from .flat import Flat, flatten
from .links import Link, transfer
from .model import Placement

__all__ = ["Estimate", "estimate", "lower_bounds", "round_robin", "simulate"]


@dataclass(frozen=True)
class Estimate:
    """What a placement costs: seconds, bytes and copies per device (full names)."""

    makespan: float
    busy: dict[str, float]  # seconds of compute on each device
    peak: dict[str, int]  # peak bytes in use, as the ledgers count them
    copies_in: dict[str, tuple[int, int]]  # (copies, bytes) arriving at each device
    copies_out: dict[str, tuple[int, int]]  # (copies, bytes) leaving each device


class _Walk:
    """The executor's planner in miniature: a slot per output and per (tensor, device) copy,
    each with a device, a rounded size, the last step that reads it and when it is ready."""

    def __init__(self, flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
                 link: LinkModel) -> None:  # fmt: skip
        self.flat, self.dev, self.link = flat, dev, link
        devices = len(models)
        self.models = models
        self.done = [0.0] * len(flat.names)
        self.avail, self.busy = [0.0] * devices, [0.0] * devices
        self.ins, self.outs = [Link() for _ in models], [Link() for _ in models]
        self.s_ready: list[float] = []
        self.s_dev: list[int] = []
        self.s_size: list[int] = []
        self.s_last: list[int] = []
        self.home: list[tuple[int, ...]] = [()] * len(flat.names)
        self.copied: dict[tuple[int, int, int], int] = {}
        self.alloc = [0] * len(flat.names)
        self.keep: set[int] = set()
        self.c_in = [[0, 0] for _ in range(devices)]
        self.c_out = [[0, 0] for _ in range(devices)]

    def slot(self, d: int, size: int, step: int, ready: float) -> int:
        self.s_ready.append(ready)
        self.s_dev.append(d)
        self.s_size.append(size)
        self.s_last.append(step)
        return len(self.s_dev) - 1

    def copy(self, p: int, k: int, src: int, d: int, j: int) -> int:
        """A new copy of slot `src` (output k of op p) on device d, made for op j."""
        nbytes, s_dev, link = self.flat.out_bytes[p][k], self.s_dev[src], self.link
        length = copy_time(nbytes, link)
        ready = max(self.done[p], self.s_ready[src])
        end, pieces = transfer(self.outs[s_dev], self.ins[d], ready, length)
        self.outs[s_dev].book(pieces)
        self.ins[d].book(pieces)
        for count in (self.c_out[s_dev], self.c_in[d]):
            count[0] += 1
            count[1] += nbytes
        self.alloc[j] += self.s_size[src]
        c = self.copied[(p, k, d)] = self.slot(d, self.s_size[src], j, end)
        return c

    def op(self, j: int) -> None:
        """Op j's step: copy its inputs in, compute, create (or forward) its outputs."""
        flat, d = self.flat, self.dev[j]
        reads, ready = [], 0.0
        for p, k in flat.inputs[j]:
            s = self.home[p][k]
            if self.s_dev[s] != d:
                self.s_last[s] = j
                c = self.copied.get((p, k, d))
                s = self.copy(p, k, s, d, j) if c is None else c
            self.s_last[s] = j
            ready = max(ready, self.done[p], self.s_ready[s])
            reads.append(s)
        seconds = work_time(flat.flops[j], flat.nbytes[j], self.models[d])
        end = self.done[j] = self.avail[d] = max(self.avail[d], ready) + seconds
        self.busy[d] += seconds
        if flat.is_print[j]:
            self.home[j] = tuple(reads)
            return
        self.home[j] = tuple(self.slot(d, size, j, end) for size in flat.sizes[j])
        self.alloc[j] += sum(flat.sizes[j])
        if flat.resident[j]:
            self.keep.update(self.home[j])

    def peaks(self) -> list[int]:
        """The ledgers' peaks: each step charges its device, then frees what it read last."""
        frees: list[list[int]] = [[] for _ in self.flat.names]
        for s, last in enumerate(self.s_last):
            if s not in self.keep:
                frees[last].append(s)
        in_use, peak = [0] * len(self.c_in), [0] * len(self.c_in)
        s_dev, s_size = self.s_dev, self.s_size
        for j, d in enumerate(self.dev):
            in_use[d] += self.alloc[j]
            peak[d] = max(peak[d], in_use[d])
            for s in frees[j]:
                in_use[s_dev[s]] -= s_size[s]
        return peak


def device_index(placement: Placement, flat: Flat, models: Sequence[DeviceModel]) -> list[int]:
    """Each op's device as an index into `models`."""
    index = {m.name: i for i, m in enumerate(models)}
    try:
        return [index[placement.decisions[name].device] for name in flat.names]
    except KeyError as err:
        raise BadInput(f"the placement names a device or op the models lack: {err}") from None


def simulate(flat: Flat, dev: Sequence[int], models: Sequence[DeviceModel],
             link: LinkModel) -> Estimate:  # fmt: skip
    """`estimate` on a flattened graph and a device index per op (the placers call this)."""
    walk = _Walk(flat, dev, models, link)
    for j in range(len(flat.names)):
        walk.op(j)
    walk.keep.update(walk.home[p][k] for p, k in flat.fetched())
    names = [m.name for m in models]
    return Estimate(
        makespan=max(walk.done, default=0.0),
        busy=dict(zip(names, walk.busy, strict=True)),
        peak=dict(zip(names, walk.peaks(), strict=True)),
        copies_in={n: (c[0], c[1]) for n, c in zip(names, walk.c_in, strict=True)},
        copies_out={n: (c[0], c[1]) for n, c in zip(names, walk.c_out, strict=True)},
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
