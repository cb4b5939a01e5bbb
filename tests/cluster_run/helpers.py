"""Graphs placed across two tasks, the same graphs run in one process, and simulated clusters."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpuplace.devices import discover, view
from gpuplace.devices.cluster import Cluster, Task, TaskName, split_device
from gpuplace.devices.names import full_name
from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import RunResult, execute
from gpuplace.graph import get_op, load
from gpuplace.graph.model import Graph
from gpuplace.placement import place_cluster

T0, T1 = TaskName("worker", 0), TaskName("worker", 1)

TOWERS = """\
graph:
  - towers: ["/job:worker/task:0/device:GPU:0", "/job:worker/task:1/device:GPU:0"]
    graph:
      - {op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [2, 3]}
      - {op: constant, value: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape: [3, 2]}
      - {op: matmul, inputs: [Const, Const_1]}
  - {op: add_n, inputs: [MatMul], device: /job:worker/task:0/cpu:0}
  - {op: print, inputs: [AddN], name: p, device: /job:worker/task:0/cpu:0}
fetch: [p]
"""


def slow_chain(n: int, size: int = 600) -> str:
    """A chain of `n` matmuls of size x size on task 1, read by one op on task 0."""
    lines = [
        "graph:",
        f"  - {{name: x0, op: random_uniform, shape: [{size}, {size}], seed: 1,"
        " device: /job:worker/task:1/cpu:0}",
    ]
    for i in range(1, n + 1):
        lines.append(
            f"  - {{name: x{i}, op: matmul, inputs: [x{i - 1}, x0], device: /job:worker/task:1/cpu:0}}"
        )
    lines.append(f"  - {{name: out, op: relu, inputs: [x{n}], device: /job:worker/task:0/cpu:0}}")
    return "\n".join(lines) + "\nfetch: [out]\n"


def placed(path: Path, gpus: int = 1) -> tuple[Graph, dict[str, str]]:
    """The spec at `path` placed on tasks 0 and 1 of job worker, `gpus` GPUs each."""
    graph = load(path, gpus=lambda config: gpus)
    placement = place_cluster(graph, [(T0, gpus), (T1, gpus)], T0)
    return graph, {name: d.device for name, d in placement.decisions.items()}


def local_run(graph: Graph, devices: Mapping[str, str], gpus: int = 1) -> RunResult:
    """The same graph in one process: task t's GPU:i is local GPU:(t * gpus + i), every CPU:0
    is CPU:0 (numpy everywhere, as simulated GPUs are)."""

    def local(full: str) -> str:
        task, device = split_device(full)
        kind, index = device.split(":")
        return full_name(kind, 0 if kind == "CPU" else task.task * gpus + int(index))

    mapped = {name: local(full) for name, full in devices.items()}
    names = [full_name("CPU", 0), *(full_name("GPU", i) for i in range(2 * gpus))]
    backends: dict[str, Backend] = {n: NumpyBackend(n, simulated=True) for n in names}
    return execute(graph, mapped, backends, get_op)


def cluster_of(*machines: str, cvd: tuple[str | None, ...] = ()) -> Cluster:
    """A simulated cluster: task i of job worker runs machine i (with CUDA_VISIBLE_DEVICES)."""
    tasks = []
    for i, spec in enumerate(machines):
        visible = cvd[i] if i < len(cvd) else None
        env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
        seen = view(discover(spec), env)
        tasks.append(Task(TaskName("worker", i), "localhost", seen, None, spec, visible))
    return Cluster(tuple(tasks), tasks[0].name, simulated=True, description="+".join(machines))
