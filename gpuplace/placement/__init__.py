"""Placement: put every op on a device the way TensorFlow's graph-mode placer does, with a reason.

`place(graph, num_gpus)` mirrors `Placer::Run` (TF 1.x sessions and `tf.function` graphs):
explicit requests are honoured, other ops go to the highest-priority device with a kernel
(GPU:0 before CPU:0), generators follow their consumers, colocation groups share a device, and
`allow_soft_placement` (off by default, as in TF 1 graphs) falls back instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..devices.cluster import TaskName
from ..errors import BadInput
from ..graph.model import Graph, OpMeta
from .flat import default_meta
from .model import KINDS, Decision, Placement, PlacementError
from .tf import place_graph

__all__ = ["KINDS", "Decision", "Placement", "PlacementError", "place", "place_cluster"]


def place(
    graph: Graph,
    num_gpus: int,
    *,
    allow_soft_placement: bool = False,
    op_meta: Callable[[str], OpMeta] | None = None,
) -> Placement:
    """Place `graph` on CPU:0 plus GPU:0..num_gpus-1 (the GPUs the process sees).

    `op_meta(op.type)` tells kernels and generators apart; by default the op registry's
    `get_op`. Raises PlacementError (exit 1) with TensorFlow's message when the machine cannot
    satisfy a request.
    """
    if num_gpus < 0:
        raise BadInput(f"num_gpus must be >= 0, got {num_gpus}")
    return place_graph(graph, num_gpus, allow_soft_placement, default_meta(op_meta))


def place_cluster(
    graph: Graph,
    tasks: Sequence[tuple[TaskName, int]],
    master: TaskName | None = None,
    *,
    allow_soft_placement: bool = False,
    op_meta: Callable[[str], OpMeta] | None = None,
) -> Placement:
    """Place `graph` on the union of a cluster's tasks: each (task, number of GPUs) has
    CPU:0 and those GPUs, named `/job:J/replica:R/task:T/device:TYPE:i`. Unplaced ops prefer
    the `master` task's devices (default: the first task) after device type priority, as
    TensorFlow's session does; decisions carry full names."""
    if not tasks:
        raise BadInput("a cluster needs at least one task")
    names = [name for name, _ in tasks]
    if len(set(names)) != len(names):
        raise BadInput("a cluster names each task once")
    if any(gpus < 0 for _, gpus in tasks):
        raise BadInput("a task's number of GPUs must be >= 0")
    if master is not None and master not in names:
        listed = ", ".join(map(str, names))
        raise BadInput(f"the session's task {master} is not one of the cluster's tasks: {listed}")
    meta = default_meta(op_meta)
    return place_graph(graph, 0, allow_soft_placement, meta, tuple(tasks), master)
