"""Baselines to judge a placement against: lower bounds on the makespan, and round-robin.

`lower_bounds` follows the reference notes (A.5): no placement that honours the graph's
requests can beat the critical path at each op's fastest allowed device with free copies,
nor the work that must run on GPUs spread evenly over them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..devices.names import full_name
from ..graph.model import Graph, OpMeta
from . import place
from .cost import DeviceModel, split_devices, work_time
from .flat import Flat, default_meta, flatten, free_groups
from .model import Decision, Placement


def _options(flat: Flat, tf: Placement, gpus: Sequence[DeviceModel], cpu: DeviceModel,
             models: dict[str, DeviceModel], num_gpus: int) -> list[list[DeviceModel]]:  # fmt: skip
    """The devices each op may end up on under any strategy that honours TF's pins: TF's
    device for a pinned op; the group's GPUs for a free op, plus the CPU for an unrequested
    generator with a CPU kernel (it may follow a consumer there, as TF's heuristic A does)."""
    groups, free = free_groups(flat, tf, num_gpus)
    out = []
    for j, name in enumerate(flat.names):
        cands = free.get(groups[j])
        if cands is None:
            out.append([models[tf.decisions[name].device]])
            continue
        options = [gpus[k] for k in cands]
        if flat.generator[j] and "CPU" in flat.kernels[j] and not flat.graph.ops[j].device:
            options.append(cpu)
        out.append(options)
    return out


def lower_bounds(
    graph: Graph,
    devices: Sequence[DeviceModel],
    *,
    op_meta: Callable[[str], OpMeta] | None = None,
    allow_soft_placement: bool = False,
) -> tuple[float, float]:
    """(critical path, work per GPU): no placement honouring the graph's requests finishes sooner.

    With w_min(op) its fastest time on a device it may use (reference notes A.5): the critical
    path is the longest chain of w_min with free copies; the work bound is the w_min of the ops
    that must run on a GPU, summed and divided by the number of GPUs (or the CPU-bound ops'
    total, when that is larger: the CPU runs them one at a time).
    """
    meta = default_meta(op_meta)
    gpus, cpu = split_devices(devices)
    tf = place(graph, len(gpus), allow_soft_placement=allow_soft_placement, op_meta=meta)
    flat = flatten(graph, meta)
    options = _options(flat, tf, gpus, cpu, {m.name: m for m in (*gpus, cpu)}, len(gpus))
    longest = [0.0] * len(flat.names)
    gpu_work = cpu_work = 0.0
    for j, opts in enumerate(options):
        w = min(work_time(flat.flops[j], flat.nbytes[j], m) for m in opts)
        longest[j] = w + max((longest[p] for p, _ in flat.inputs[j]), default=0.0)
        if all(m.kind == "GPU" for m in opts):
            gpu_work += w
        elif len(opts) == 1:
            cpu_work += w
    work = max(gpu_work / len(gpus), cpu_work) if gpus else gpu_work + cpu_work
    return max(longest, default=0.0), work


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
