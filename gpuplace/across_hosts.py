"""The pipeline's stages across hosts: the cluster a command works on (a flag, the spec's
`cluster:` block, a simulated `--machine '2x(...)'`, or a live Dask cluster's inventory), placing
over its tasks, their memory limits, the estimate with the network between tasks, and the runtime
(`execute/dask_runtime.py`, imported on first use so a command without a cluster never imports
Dask). `pipeline.py` sequences these; TensorFlow's cluster rules are in `placement/`, the Dask runtime
in `execute/`. See docs/cluster.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .devices.cluster import Cluster, Network, TaskName, full_device
from .devices.cluster_spec import ClusterDescription, simulated_cluster, with_machine
from .devices.model import LogicalGpu, View
from .devices.rates import Rates
from .errors import BadInput
from .graph.model import Graph
from .memory.policy import Policy, logical_gpus
from .placement import place_cluster
from .placement.model import Placement
from .results import Outcome, PlanEstimate, Prepared

if TYPE_CHECKING:
    from .execute.dask_runtime import Runtime

Connect = Callable[[ClusterDescription], Cluster]  # a live cluster's inventory (the runtime's)


def resolve_cluster(
    given: Cluster | ClusterDescription | None, graph: Graph, view: View,
    env: Mapping[str, str], connect: Connect | None = None,
) -> Cluster | None:  # fmt: skip
    """The cluster a run places over: `given` (the flag beats the spec), else the spec's
    `cluster:` block, else None. A bare scheduler address (`--cluster tcp://...`) keeps the
    spec's tasks; tasks without a machine of their own simulate the view's machine when that
    is simulated (`--machine 4xK520` next to `cluster: {worker: 2}`); a description with a
    scheduler needs `connect` (the Dask runtime), which the `cluster` extra provides."""
    if isinstance(given, Cluster):
        return given
    described = given or graph.cluster
    if described is None:
        return None
    if given is not None and not given.tasks and graph.cluster is not None:
        described = graph.cluster._replace(scheduler=given.scheduler, source=given.source)
    if given is None and view.machine.simulated and described.scheduler is not None:
        # the spec names a live cluster, but a simulated machine was asked for: plan on it
        described = with_machine(described, view.machine.description, "--machine")
    if described.scheduler is not None:
        if connect is None:
            raise BadInput(
                f"{described.source}: running on the Dask cluster at {described.scheduler} "
                "needs gpuplace's cluster runtime; install it with pip install "
                "'gpuplace[cluster]'"
            )
        return connect(described)
    if view.machine.simulated and any(t.machine is None for t in described.tasks):
        described = with_machine(described, view.machine.description, "--machine")
    return simulated_cluster(described, env, view.host_available)


def measured_network(cluster: Cluster, rates: Rates) -> Cluster:
    """The cluster with the network `devices --check` measured on it (saved by its scheduler's
    address) when it names none itself; a simulated cluster keeps what it was given."""
    measured = rates.networks.get(str(cluster.scheduler))
    if cluster.network is not None or cluster.simulated or measured is None:
        return cluster
    network = Network(measured.bandwidth_gbs * 1e9, measured.latency_us / 1e6, "measured")
    return cluster._replace(network=network)


def task_gpus(cluster: Cluster, policy: Policy) -> dict[TaskName, tuple[LogicalGpu, ...]]:
    """Each task's TensorFlow GPUs under the one policy (each task's process resolves it)."""
    return {t.name: tuple(logical_gpus(t.view.gpus, policy)) for t in cluster.tasks}


def cluster_limits(
    cluster: Cluster, per_task: Mapping[TaskName, Sequence[LogicalGpu]]
) -> dict[str, int | None]:
    """The memory each device of each task may use, by full name (`device_limits` per task)."""
    sizes: dict[str, int | None] = {}
    for task in cluster.tasks:
        sizes[full_device(task.name, "CPU:0")] = task.view.machine.host.memory_total
        for g in per_task[task.name]:
            sizes[full_device(task.name, f"GPU:{g.index}")] = g.limit
    return sizes


def refuse_training(cluster: Cluster, training: object | None) -> None:
    """`--training` sizes one host's training step; across hosts it is not modelled yet."""
    if training is not None:
        raise BadInput(
            f"--training sizes a training step on one host; across hosts "
            f"({cluster.description or 'a cluster'}) it is not modelled yet: plan the step on "
            "one task's machine (--machine without the cluster)"
        )


def place_on_cluster(
    strategy: str, graph: Graph, cluster: Cluster,
    per_task: Mapping[TaskName, Sequence[LogicalGpu]], soft: bool,
    rates: Mapping[str, Any] | None = None,
) -> Placement:  # fmt: skip
    """TensorFlow's placer over the tasks' devices (the master's first among equals), or
    balanced spread over them with the network between tasks in its cost model."""
    tasks = [(t.name, len(per_task[t.name])) for t in cluster.tasks]
    if strategy not in ("tensorflow", "balanced"):
        raise BadInput(
            f"placement strategy {strategy!r} does not place across hosts; use tensorflow or "
            "balanced (--strategy, or config placement.strategy)"
        )
    tf = place_cluster(graph, tasks, cluster.master, allow_soft_placement=soft)
    if strategy == "tensorflow":
        return tf
    from .placement.balanced import place_balanced_cluster
    from .placement.cost import DASK_HOP, LinkModel, cluster_models, network_link

    models, task_of = cluster_models(cluster, per_task, rates)
    network = network_link(cluster)
    return place_balanced_cluster(graph, tf, models, task_of, LinkModel(), network, DASK_HOP)


def task_devices(prepared: Prepared) -> dict[str, LogicalGpu | None]:
    """Every task's devices by full name, task by task (CPU:0 then its GPUs), each GPU with
    its logical GPU: the devices a layout across hosts has."""
    out: dict[str, LogicalGpu | None] = {}
    if prepared.cluster is None:
        return out
    for task in prepared.cluster.tasks:
        out[full_device(task.name, "CPU:0")] = None
        for g in prepared.task_logical[task.name]:
            out[full_device(task.name, f"GPU:{g.index}")] = g
    return out


def estimate_on_cluster(prepared: Prepared) -> PlanEstimate:
    """`estimate_plan` across hosts: every task's devices, network copies between tasks."""
    from .placement.cost import DASK_HOP, LinkModel, cluster_models, network_link
    from .placement.estimate import estimate_cluster

    cluster = prepared.cluster
    assert cluster is not None
    models, tasks = cluster_models(cluster, prepared.task_logical, prepared.rates.by_uuid)
    network = network_link(cluster)
    est, bounds = estimate_cluster(
        prepared.graph, prepared.placement, models, tasks, LinkModel(), network, DASK_HOP
    )
    return PlanEstimate(est, bounds)


class ClusterRuns:
    """The runtime across hosts for one command (`execute/dask_runtime.py: Runtime`), made on first
    use, so a command without a cluster never imports Dask. `connect` is `prepare`'s; `close`
    ends what it connected to and the worker processes of a simulated cluster."""

    def __init__(self, processes: bool = True) -> None:
        self.processes = processes
        self._runtime: Runtime | None = None

    def runtime(self) -> Runtime:
        if self._runtime is None:
            from .execute.dask_runtime import Runtime
            from .execute.dask_session import load_distributed

            load_distributed()  # one line naming the extra when it is missing
            self._runtime = Runtime(self.processes)
        return self._runtime

    def connect(self, description: ClusterDescription) -> Cluster:
        return self.runtime().connect(description)

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()


def run_on_cluster(prepared: Prepared, runs: ClusterRuns) -> Outcome:
    """Run a graph placed across hosts on its cluster's tasks (see `pipeline.execute_on_cluster`)."""
    from .execute.executor import RunResult

    if prepared.cluster is None:
        raise BadInput("execute_on_cluster: the graph was prepared for one process; use "
                       "execute_prepared")  # fmt: skip
    devices = {name: d.device for name, d in prepared.placement.decisions.items()}
    done = runs.runtime().run(prepared.cluster, prepared.graph, devices, prepared.policy)
    peaks = {m.device: m.peak for m in done.memory}
    return Outcome(RunResult(done.values, done.copies, peaks, done.printed), done.memory)
