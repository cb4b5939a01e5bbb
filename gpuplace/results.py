"""What the pipeline (`pipeline.py`) hands to the reports and the CLI: plain, typed results.

A leaf module: it names types and no behaviour, so `report/` and `cli/` can name a Prepared
graph or an Outcome without importing the orchestrator; the types are imported for type
checkers only, so that a command loads only the modules it runs (`run` no estimate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from .devices.rates import Rates

if TYPE_CHECKING:  # names for annotations only: a command imports what it runs (start-up)
    from collections.abc import Mapping

    from .devices.cluster import Cluster, TaskName
    from .devices.model import LogicalGpu
    from .execute.executor import Layout, RunResult
    from .graph.model import Graph
    from .memory.policy import Policy
    from .memory.pools import DeviceMemory
    from .memory.training import Training
    from .placement.baselines import Bounds
    from .placement.estimate import Estimate
    from .placement.flat import Flat
    from .placement.model import Placement


@dataclass(frozen=True)
class Prepared:
    """A placed graph ready to run. `graph` and `placement` hold the ops the fetches need (what
    runs); `pruned` names the others, and `whole` is the whole graph as it was placed (TF's
    placer sees every op: the placement log lists them all), or None when nothing was pruned."""

    graph: Graph
    placement: Placement
    log_device_placement: bool
    policy: Policy
    logical: tuple[LogicalGpu, ...]
    strategy: str = "tensorflow"
    rates: Rates = field(default_factory=Rates)  # measured by `devices --check`, from env's file
    allow_soft_placement: bool = False  # in effect: the flag, else the spec's config
    pruned: tuple[str, ...] = ()  # ops the fetches do not need, in graph order: not run
    whole: tuple[Graph, Placement] | None = None
    # across hosts: the tasks the graph was placed over (decisions name devices in full,
    # /job:worker/replica:0/task:1/device:GPU:0), and each task's TensorFlow GPUs under
    # `policy`; `logical` is then the master task's. None: one process, /job:localhost
    cluster: Cluster | None = None
    task_logical: Mapping[TaskName, tuple[LogicalGpu, ...]] = field(default_factory=dict)
    training: Training | None = None  # the training step to size (--training), if any
    # the next run's layout, planned by predict_memory for execute_prepared (pipeline.py)
    planned: list[Layout] = field(default_factory=list, init=False, repr=False, compare=False)
    # the graph flattened once for predict_training and estimate_plan (pipeline.py)
    flats: list[Flat] = field(default_factory=list, init=False, repr=False, compare=False)

    def placed(self) -> tuple[Graph, Placement]:
        """Every op as placed (the placement log's view), pruned or not."""
        return self.whole or (self.graph, self.placement)


class Outcome(NamedTuple):
    """A finished run: `result` holds the fetched values (numpy arrays, by fetch name), the
    copies and the `print` output; `memory` what each device reserved, peaked at and may use."""

    result: RunResult
    memory: list[DeviceMemory]


class PlanEstimate(NamedTuple):
    """The cost model's view of a placement: per-device busy time and copies, the makespan,
    and the lower bounds no placement can beat (reference notes A.5, and stage by stage)."""

    estimate: Estimate  # makespan, and per device busy seconds, peak bytes, copies in and out
    bounds: Bounds  # critical_path, work, stages (seconds)

    @property
    def bound(self) -> float:
        """The tightest lower bound (seconds): `estimate.makespan / bound` is plan's ratio."""
        return float(self.bounds.best)


class PolicyRun(NamedTuple):
    """One run of `compare_policies` (`gpuplace mem --compare`): `label` is the policy it was
    asked for ("default", "allow_growth", "fraction 0.3"; "" for a single run), `name` what it
    resolved to (TF_FORCE_GPU_ALLOW_GROWTH can make two the same), and the run itself."""

    label: str
    name: str
    prepared: Prepared
    outcome: Outcome | None  # None: the same policy as the run labelled `repeat_of`: not rerun
    repeat_of: str = ""


class Reservation(NamedTuple):
    """What TensorFlow would set aside on each GPU at start under one policy, with no graph run
    (`gpuplace mem --compare` without a graph): `label` and `name` as in PolicyRun; `logical`
    holds each logical GPU's limit and what it reserves at start (0 under allow_growth)."""

    label: str
    name: str
    logical: tuple[LogicalGpu, ...]
    repeat_of: str = ""
