"""The clusters one command works on (`Runtime`) and `devices --check` across tasks.

`Runtime` connects to a live cluster or starts a simulated one's workers (`dask_session.py`)
and runs graphs there (`dask_run.py`); `check_cluster` runs gpuplace's device check in every
task's worker and times Dask moving a host array between tasks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..devices.cluster import NETWORK_REPEATS, Cluster, TaskName, Transfer
from ..devices.cluster_spec import ClusterDescription
from ..errors import BadInput, GpuplaceError, RuntimeFailure
from ..graph.model import Graph
from ..memory.policy import Policy
from .dask_run import ClusterRun, TaskLost, Watch, failure, run_graph
from .dask_session import (
    Session,
    check_hosts,
    connect,
    inventory_tasks,
    start_simulated,
    wait_for_tasks,
)
from .device_check import CheckResult, RateSizes
from .task_state import check_here, filled, size_of

TRANSFER_TIMEOUT = 60.0  # seconds one measured transfer may take before the check fails


@dataclass(frozen=True)
class ClusterCheck:
    """`devices --check` across hosts: each task's results (local names), then the transfers
    from every other task to the first."""

    results: dict[TaskName, list[CheckResult]]
    transfers: list[Transfer]


def _transfer_log(key: str, dask_worker: Any) -> float:
    for entry in reversed(dask_worker.transfer_incoming_log):
        if key in entry["keys"]:
            return float(entry["duration"])
    return 0.0


def _moved(session: Session, source: str, target: str, nbytes: int) -> float:
    """Seconds the worker at `target` took to fetch an `nbytes` array made at `source`."""
    client = session.client
    pinned = {"allow_other_workers": False, "pure": False}
    made = client.submit(filled, nbytes, workers=[source], **pinned)
    read = client.submit(size_of, made, workers=[target], **pinned)
    try:
        read.result(timeout=TRANSFER_TIMEOUT)
        key = str(made.key)
        return float(client.run(_transfer_log, key, workers=[target])[target])
    finally:
        for future in (read, made):
            with contextlib.suppress(Exception):
                future.release()


def measure_transfer(
    session: Session, source: tuple[TaskName, str], target: tuple[TaskName, str], nbytes: int
) -> Transfer:
    """Time Dask moving a host array between two tasks' workers (by address), best of
    NETWORK_REPEATS, and a 1-byte one for the latency."""
    timed = {size: [_moved(session, source[1], target[1], size) for _ in range(NETWORK_REPEATS)]
             for size in (nbytes, 1)}  # fmt: skip
    if not all(timed[nbytes]):  # Dask logs every transfer between two workers
        raise RuntimeFailure(
            f"the worker of {target[0]} ({target[1]}) logged no transfer from {source[0]} "
            f"({source[1]}); check that the two workers are distinct processes"
        )
    big = min(timed[nbytes])
    return Transfer(source[0], target[0], nbytes, big, min(*timed[1], big))


def check_cluster(session: Session, cluster: Cluster, sizes: RateSizes) -> ClusterCheck:
    """gpuplace's device check in every task's worker, one task after the other (tasks sharing
    a host would slow each other's measurements), then from every other task to the first one
    a timed transfer of a `sizes.stream`-byte host array."""
    addresses = wait_for_tasks(session, [t.name for t in cluster.tasks])
    results: dict[TaskName, list[CheckResult]] = {}
    try:
        for task, address in addresses.items():
            results[task] = session.client.run(check_here, sizes, workers=[address])[address]
        first, *others = addresses.items()
        transfers = [measure_transfer(session, other, first, sizes.stream) for other in others]
    except GpuplaceError:
        raise
    except Exception as exc:  # a worker or the scheduler went away, or a transfer timed out
        hosts = {t.name: t.host for t in cluster.tasks}
        found = failure(exc, Watch(session, addresses, hosts), next(iter(addresses)))
        if isinstance(exc, TimeoutError) and not isinstance(found, TaskLost):
            raise RuntimeFailure(
                f"a timed transfer between the workers took more than {TRANSFER_TIMEOUT:g} s; "
                f"check the network between {', '.join(sorted(set(hosts.values())))} and run "
                "again (GPUPLACE_CHECK_SIZES=stream=... moves less)"
            ) from None
        raise found from None
    return ClusterCheck(results, transfers)


class Runtime:
    """The clusters one command works on: connected on first use, closed by `close`.

    `connect(description)` turns a description with a scheduler into a Cluster of the live
    workers (versions checked, each task's own inventory); `run` runs on a connected cluster,
    or starts a simulated one's worker processes (once per command)."""

    def __init__(self, processes: bool = True) -> None:
        self.processes = processes
        self.sessions: dict[str, Session] = {}  # by scheduler address, or the simulated text

    def connect(self, description: ClusterDescription) -> Cluster:
        scheduler = str(description.scheduler)
        session = self.sessions.get(scheduler)
        if session is None:
            session = self.sessions[scheduler] = connect(scheduler)
            self.sessions.setdefault(session.scheduler, session)  # a file: by its address too
        names = [t.name for t in description.tasks] or None
        tasks = inventory_tasks(session, names)
        if not tasks:
            raise RuntimeFailure(
                f"the Dask scheduler {scheduler} has no gpuplace task among its workers; start "
                f"one on each node with gpuplace worker {scheduler} --task N"
            )
        check_hosts(description, tasks)
        master = description.master or (description.default_master() if names else tasks[0].name)
        return Cluster(tuple(tasks), master, session.scheduler, False, description.network,
                       description.text)  # fmt: skip

    def session(self, cluster: Cluster) -> Session:
        key = str(cluster.scheduler)
        if cluster.simulated:  # one set of worker processes per simulated cluster (mem --compare)
            key = repr(
                [(str(t.name), t.machine_spec, t.cuda_visible_devices) for t in cluster.tasks]
            )
        found = self.sessions.get(key)
        if found is None:
            if not cluster.simulated:
                raise BadInput(f"the cluster at {cluster.scheduler} was not connected")
            found = self.sessions[key] = start_simulated(cluster, self.processes)
        return found

    def run(
        self, cluster: Cluster, graph: Graph, devices: Mapping[str, str], policy: Policy,
        effects: bool = True,
    ) -> ClusterRun:  # fmt: skip
        session = self.session(cluster)
        if cluster.simulated:  # the workers' addresses are known only now
            names = wait_for_tasks(session, [t.name for t in cluster.tasks])
            cluster = cluster._replace(tasks=tuple(
                t._replace(address=names[t.name]) for t in cluster.tasks))  # fmt: skip
        return run_graph(session, cluster, graph, devices, policy, effects=effects)

    def check(self, cluster: Cluster, sizes: RateSizes) -> ClusterCheck:
        """`devices --check` on every task of `cluster` (a simulated one's workers start here)."""
        return check_cluster(self.session(cluster), cluster, sizes)

    def close(self) -> None:
        for session in {id(s): s for s in self.sessions.values()}.values():
            session.close()
        self.sessions.clear()
