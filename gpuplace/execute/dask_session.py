"""Dask sessions for runs across TensorFlow tasks: connecting, versions, each task's inventory.

One task (`/job:worker/replica:0/task:N`) is one Dask worker process of that name, started by
`gpuplace worker` (`serve_worker`, here) or, for a simulated cluster, here (one Nanny per task
on 127.0.0.1, port 0, dashboard off, `GPUPLACE_MACHINE` and `CUDA_VISIBLE_DEVICES` in its env).
Clusters started here set `allowed-failures: 0` and `no-workers-timeout`
(../shared/reference/multihost-dask.md §5); a task missing at start and a version mismatch each
end the command with one line naming the task, the worker's address and the fix (exit 1).
The run itself is `dask_run.py`; the runtime one command uses is `dask_runtime.py`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..devices.cluster import Cluster, Task, TaskName
from ..devices.cluster_spec import ClusterDescription
from ..errors import BadInput, RuntimeFailure
from .task_state import Inventory, gpuplace_version, inventory

INSTALL = "pip install 'gpuplace[cluster]'"
POLL = 0.25  # seconds between the watchdog's looks at the scheduler's workers
CONFIG = {  # for clusters gpuplace starts: fail at once rather than wait (§4.4)
    "distributed.scheduler.allowed-failures": 0,
    "distributed.scheduler.no-workers-timeout": "10s",
    "distributed.comm.timeouts.connect": "5s",
    # workers fork from a fresh single-threaded server instead of importing everything anew:
    # a 2-task cluster starts in about 0.4 s instead of 1.6 s (each Nanny's env still applies)
    "distributed.worker.multiprocessing-method": "forkserver",
    # set before a worker process starts (its logging is configured as distributed loads)
    "distributed.nanny.pre-spawn-environ.DASK_LOGGING__DISTRIBUTED": "error",
}


def load_distributed() -> ModuleType:
    """`distributed`, or one line naming the extra to install (exit 2)."""
    try:
        import distributed
    except ImportError:
        raise BadInput(
            f"running across hosts needs Dask distributed, which is not installed; {INSTALL}"
        ) from None
    return distributed


@dataclass
class Session:
    """A client connected to a scheduler and, when gpuplace started it, the cluster itself."""

    client: Any
    scheduler: str
    cluster: Any = None  # a SpecCluster gpuplace started (simulated tasks), else None
    pids: dict[TaskName, int] = field(default_factory=dict)

    def close(self) -> None:
        """Close the client and any cluster gpuplace started, each with a short timeout."""
        with contextlib.suppress(Exception):
            self.client.close(timeout=2)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=5)


def _spec(distributed: ModuleType, task: Task, processes: bool) -> dict[str, Any]:
    env = {"GPUPLACE_MACHINE": task.machine_spec or ""}
    if task.cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = task.cuda_visible_devices
    options: dict[str, Any] = {"nthreads": 1, "name": str(task.name), "host": "127.0.0.1"}
    if processes:
        options.update(env=env, dashboard=False)
        return {"cls": distributed.Nanny, "options": options}
    return {"cls": distributed.Worker, "options": options}


def start_simulated(cluster: Cluster, processes: bool = True) -> Session:
    """Start one local worker per task of `cluster` (processes by default; in-process Workers
    for tests that need bit-equal BLAS) and a scheduler in this process, all on 127.0.0.1."""
    distributed = load_distributed()
    import dask

    dask.config.set(CONFIG)
    scheduler = {
        "cls": distributed.Scheduler,
        "options": {
            "host": "127.0.0.1",
            "port": 0,
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",
        },
    }
    workers = {str(t.name): _spec(distributed, t, processes) for t in cluster.tasks}
    spec_cluster = distributed.SpecCluster(
        workers=workers, scheduler=scheduler, silence_logs=50, name="gpuplace"
    )
    try:
        client = distributed.Client(spec_cluster, set_as_default=False)
    except BaseException:
        spec_cluster.close(timeout=5)
        raise
    session = Session(client, spec_cluster.scheduler_address, spec_cluster)
    try:
        found = wait_for_tasks(session, [t.name for t in cluster.tasks], timeout=30.0)
        pids = client.run(os.getpid)
        session.pids = {name: pids[address] for name, address in found.items()}
    except BaseException:
        session.close()
        raise
    return session


def scheduler_target(spec: str) -> dict[str, str]:
    """`Client` keywords for a scheduler address or a `scheduler.json` file."""
    if spec.endswith(".json"):
        if not Path(spec).is_file():
            raise BadInput(
                f"scheduler file {spec!r} does not exist; give the file `dask scheduler "
                "--scheduler-file` wrote, or the scheduler's address (tcp://host:8786)"
            )
        return {"scheduler_file": spec}
    if "://" not in spec:
        raise BadInput(
            f"scheduler {spec!r} is neither an address nor a scheduler.json file; "
            "for example tcp://head:8786"
        )
    return {"address": spec}


def connect(spec: str, timeout: float = 10.0) -> Session:
    """A client of the running scheduler `spec` (address or scheduler.json), versions checked."""
    distributed = load_distributed()
    target = scheduler_target(spec)
    try:
        client = distributed.Client(**target, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise RuntimeFailure(
            f"cannot reach the Dask scheduler {spec}: {exc}. Start it with `dask scheduler` "
            "and check the address (and the network between here and there)"
        ) from None
    session = Session(client, client.scheduler.address)
    try:
        check_versions(session)
    except BaseException:
        session.close()
        raise
    return session


def check_versions(session: Session, mine: str | None = None) -> None:
    """Dask's own check of client, scheduler and workers, then gpuplace's version in each
    against `mine` (this process's, unless given)."""
    mine = mine or gpuplace_version()
    try:
        session.client.get_versions(check=True)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0]
        raise RuntimeFailure(
            f"the Dask scheduler {session.scheduler} and its workers run other versions than "
            f"this client ({first}); install the same dask, distributed and gpuplace everywhere"
        ) from None
    names = worker_names(session)
    for address, version in session.client.run(gpuplace_version).items():
        if version != mine:
            raise RuntimeFailure(
                f"{names.get(address, 'a worker')} (worker {address}) runs gpuplace {version}, "
                f"this client {mine}; install gpuplace {mine} on every worker "
                "and on the scheduler's host"
            )


def worker_names(session: Session) -> dict[str, str]:
    """Worker address -> name, as the scheduler sees them now: asked of the scheduler itself.
    Not `Client.scheduler_info()`, which returns the client's cached identity: the client's
    periodic refresh (every 2 s) may overwrite it between the fetch and the return with one
    that lists no worker, and every task would then seem to have left the cluster. An
    OSError: the scheduler is gone."""
    client = session.client
    workers = client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    return {address: str(w.get("name")) for address, w in workers.items()}


def task_addresses(session: Session) -> dict[TaskName, str]:
    """The TF task of each worker whose name is one (`/job:worker/replica:0/task:1`)."""
    out: dict[TaskName, str] = {}
    for address, name in worker_names(session).items():
        with contextlib.suppress(BadInput):
            if str(TaskName.parse(name)) == name:
                out[TaskName.parse(name)] = address
    return out


def wait_for_tasks(
    session: Session, names: Sequence[TaskName], timeout: float = 5.0
) -> dict[TaskName, str]:
    """Each task's worker address, waiting up to `timeout` s; one line for a missing one."""
    deadline = time.monotonic() + timeout
    while True:
        found = task_addresses(session)
        missing = [n for n in names if n not in found]
        if not missing:
            return {n: found[n] for n in names}
        if time.monotonic() > deadline:
            have = ", ".join(str(n) for n in sorted(found)) or "none"
            first = missing[0]
            raise RuntimeFailure(
                f"no worker for {first} on {session.scheduler} (workers: {have}); start it with "
                f"gpuplace worker {session.scheduler} --task {first.task}"
                + ("" if first.job == "worker" else f" --job {first.job}")
            )
        time.sleep(POLL)


def inventory_tasks(session: Session, names: Sequence[TaskName] | None = None) -> list[Task]:
    """Every task's devices as its own process sees them (gpuplace's discovery, run there)."""
    found = task_addresses(session) if names is None else wait_for_tasks(session, names)
    seen: dict[str, Inventory] = session.client.run(inventory, workers=list(found.values()))
    return [
        Task(name, seen[address].host, seen[address].view, address, pid=seen[address].pid)
        for name, address in sorted(found.items())
    ]


def check_hosts(description: ClusterDescription, tasks: Sequence[Task]) -> None:
    """A task described on a host (`node2`, `node2:8788`) must have its worker there."""
    by_name = {t.name: t for t in tasks}
    for plan in description.tasks:
        if plan.host is None or plan.name not in by_name:
            continue
        task = by_name[plan.name]
        where = str(task.address).split("://", 1)[-1]
        host, _, port = plan.host.partition(":")
        if host not in (task.host, where.rsplit(":", 1)[0]) or (
            port and not where.endswith(f":{port}")
        ):
            raise BadInput(
                f"{description.source}: {plan.name} should run on {plan.host}, but its worker "
                f"is {task.address} on host {task.host}; start gpuplace worker on {plan.host}, "
                "or fix the cluster's host list"
            )


def kill_pid(pid: int) -> None:
    """SIGKILL one process by its id (tests end workers and schedulers this way)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def simulated(cluster: Cluster, processes: bool = True) -> Iterator[Session]:
    """A simulated cluster for the duration of a `with` block, closed however it ends."""
    session = start_simulated(cluster, processes)
    try:
        yield session
    finally:
        session.close()


def blas_environ(cores: int) -> dict[str, str]:
    """`pre-spawn-environ` for a task's worker: BLAS on the host's cores (the Nanny's default is
    one thread, which makes a task's CPU:0 slower than TensorFlow's and its sums differ)."""
    threads = str(max(1, cores))
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    return {f"distributed.nanny.pre-spawn-environ.{name}": threads for name in names}


def serve_worker(scheduler: str, task: TaskName, machine_spec: str | None = None) -> None:
    """`gpuplace worker`: serve `task` as a Nanny-managed Dask worker of the scheduler
    (address or scheduler.json), named `/job:J/replica:0/task:N`, one thread, until stopped
    (SIGTERM, Ctrl-C) or until the scheduler goes away. A name already taken is refused."""
    distributed = load_distributed()
    import asyncio
    import signal

    import dask

    session = connect(scheduler)
    try:
        taken = task_addresses(session).get(task)
    finally:
        session.close()
    if taken is not None:
        raise BadInput(
            f"{task} is already served by worker {taken} on {scheduler}; give another --task "
            "(or --job), or stop that worker first"
        )
    dask.config.set(blas_environ(os.cpu_count() or 1))
    if machine_spec is not None:
        dask.config.set({"distributed.nanny.pre-spawn-environ.GPUPLACE_MACHINE": machine_spec})
    target = scheduler_target(scheduler)
    where = (
        {"scheduler_file": target["scheduler_file"]}
        if "scheduler_file" in target
        else {"scheduler_ip": target["address"]}
    )

    async def serve() -> None:
        async with distributed.Nanny(**where, name=str(task), nthreads=1) as nanny:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            ends = [asyncio.ensure_future(nanny.finished()), asyncio.ensure_future(stop.wait())]
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)

    try:
        asyncio.run(serve())
    except (OSError, TimeoutError, RuntimeError) as exc:
        raise RuntimeFailure(
            f"{task} could not join the Dask scheduler {scheduler}: {exc}. Check that the "
            "scheduler runs and that no other worker has that name"
        ) from None
