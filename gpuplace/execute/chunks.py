"""A graph placed across TensorFlow tasks, split into the chunks a cluster runs: plain data.

One Dask task per op costs milliseconds (../shared/reference/multihost-dask.md §1.3), so a run
across hosts fuses ops into chunks, one per (task, stage), each run by gpuplace's own executor on
that task's worker. An op's stage is the largest of its inputs' stages, plus one for an input on
another task; an op without inputs is at stage 0. A cross-task edge thus always raises the stage
and a same-task edge never lowers it, so every edge between chunks goes to a higher stage: the
chunk graph is acyclic and ordering chunks by stage is topological.

A chunk imports each tensor made by another chunk once per device of its task that reads it (TF's
Send/Recv rule: one copy per (tensor, destination device)) and exports the tensors that other
chunks read or the run fetches. No Dask here: `execute/dask_run.py` submits the chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..devices.cluster import TaskName, split_device
from ..graph.model import Graph, TensorRef


@dataclass(frozen=True)
class Import:
    """Tensor `tensor` (made by chunk `source`) wanted on local device `device` of the chunk."""

    tensor: TensorRef
    source: int  # index of the chunk that exports it
    device: str  # the task-local device (`GPU:0`) that reads it


@dataclass(frozen=True)
class Chunk:
    """The ops of one (task, stage), in graph order, with what crosses its border."""

    index: int
    task: TaskName
    stage: int
    ops: tuple[str, ...]
    imports: tuple[Import, ...]
    exports: tuple[TensorRef, ...]  # read by later chunks or fetched, in first-use order

    @property
    def key(self) -> str:
        """The Dask key suffix of this chunk: `worker-r0-t1-s2` (job, replica, task, stage)."""
        return f"{self.task.job}-r{self.task.replica}-t{self.task.task}-s{self.stage}"


def stages(graph: Graph, tasks: Mapping[str, TaskName]) -> dict[str, int]:
    """Each op's stage (see the module docstring); `graph.ops` are in topological order."""
    out: dict[str, int] = {}
    for op in graph.ops:
        mine, stage = tasks[op.name], 0
        for ref in op.inputs:
            other = out[ref.op] + (tasks[ref.op] != mine)
            stage = other if other > stage else stage
        out[op.name] = stage
    return out


def split(graph: Graph, devices: Mapping[str, str]) -> list[Chunk]:
    """The chunks of `graph` placed by `devices` (op -> full device name with a task), ordered
    by (stage, task): a topological order of the chunk graph. One pass over the ops and edges."""
    local = {name: split_device(full) for name, full in devices.items()}
    tasks = {name: task for name, (task, _) in local.items()}
    stage_of = stages(graph, tasks)
    keys = sorted({(stage_of[op.name], tasks[op.name]) for op in graph.ops})
    index = {key: i for i, key in enumerate(keys)}
    chunk_of = {op.name: index[stage_of[op.name], tasks[op.name]] for op in graph.ops}
    ops: list[list[str]] = [[] for _ in keys]
    imports: list[dict[tuple[TensorRef, str], Import]] = [{} for _ in keys]
    exports: list[dict[TensorRef, None]] = [{} for _ in keys]
    for op in graph.ops:
        mine = chunk_of[op.name]
        ops[mine].append(op.name)
        device = local[op.name][1]
        for ref in op.inputs:
            source = chunk_of[ref.op]
            if source != mine:
                imports[mine].setdefault((ref, device), Import(ref, source, device))
                exports[source][ref] = None
    for ref in graph.fetch:
        exports[chunk_of[ref.op]][ref] = None
    return [
        Chunk(i, task, stage, tuple(ops[i]), tuple(imports[i].values()), tuple(exports[i]))
        for i, (stage, task) in enumerate(keys)
    ]
