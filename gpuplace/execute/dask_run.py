"""A placed graph run across TensorFlow tasks on Dask distributed: the one module that imports it.

One task (`/job:worker/replica:0/task:N`) is one Dask worker process of that name, started by
`gpuplace worker` or, for a simulated cluster, here (one Nanny per task on 127.0.0.1, port 0,
dashboard off, `GPUPLACE_MACHINE` and `CUDA_VISIBLE_DEVICES` in its env). The graph runs in
(task, stage) chunks (`chunks.py`), each one `client.submit` pinned to its worker's ADDRESS
(a name that no worker has would become a host restriction that waits forever), running
gpuplace's executor on per-run state the worker opened (`task_state.py`).

Dask's defaults hang when a worker dies (../shared/reference/multihost-dask.md §5), so:
- a watchdog polls the scheduler's workers every 0.25 s while the run waits and fails the run as
  soon as a task's worker address changes or disappears;
- clusters started here also set `allowed-failures: 0` and `no-workers-timeout`;
- a lost scheduler, a task missing at start and a version mismatch each end the command with
  one line naming the task, the worker's address and the fix (exit 1). Nothing is retried.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..devices.cluster import NETWORK_REPEATS, Cluster, Task, TaskName, Transfer, split_device
from ..devices.cluster_spec import ClusterDescription
from ..errors import BadInput, GpuplaceError, RuntimeFailure
from ..graph.model import Graph, TensorRef
from ..memory.policy import Policy
from ..memory.pools import DeviceMemory
from .chunks import Chunk, split
from .device_check import CheckResult, RateSizes
from .schedule import CopyRecord
from .task_state import (
    ChunkSpec,
    Closed,
    Inventory,
    check_here,
    close_run,
    filled,
    gpuplace_version,
    inventory,
    open_run,
    run_chunk,
    size_of,
)

INSTALL = "pip install 'gpuplace[cluster]'"
POLL = 0.25  # seconds between the watchdog's looks at the scheduler's workers
GATHER_TIMEOUT = 120.0  # seconds the fetched values may take to arrive once every chunk is done
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
    names = _names(session)
    for address, version in session.client.run(gpuplace_version).items():
        if version != mine:
            raise RuntimeFailure(
                f"{names.get(address, 'a worker')} (worker {address}) runs gpuplace {version}, "
                f"this client {mine}; install gpuplace {mine} on every worker "
                "and on the scheduler's host"
            )


def _names(session: Session) -> dict[str, str]:
    """Worker address -> name, as the scheduler sees them now."""
    workers = session.client.scheduler_info(n_workers=-1)["workers"]
    return {address: str(w.get("name")) for address, w in workers.items()}


def task_addresses(session: Session) -> dict[TaskName, str]:
    """The TF task of each worker whose name is one (`/job:worker/replica:0/task:1`)."""
    out: dict[TaskName, str] = {}
    for address, name in _names(session).items():
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


@dataclass(frozen=True)
class ClusterRun:
    """What a run across tasks returns: the fetched values (by fetch name), every copy (those
    between tasks of kind `network`), print lines in stage order, each device's memory."""

    values: dict[str, np.ndarray]
    copies: list[CopyRecord]
    printed: list[str]
    memory: list[DeviceMemory]
    chunks: int


def _chunk_task(run_id: str, spec: ChunkSpec, keys: Sequence[str], *arrays: np.ndarray) -> Any:
    """On the worker: run a chunk, timing how long Dask took to bring each input here."""
    from distributed import get_worker

    transfer = dict.fromkeys(keys, 0.0)
    log = get_worker().transfer_incoming_log
    for entry in itertools.islice(reversed(log), 256):  # newest first, bounded
        total = entry["total"] or 1
        for key, nbytes in entry["keys"].items():
            if key in transfer and not transfer[key]:
                transfer[key] = entry["duration"] * nbytes / total
    return run_chunk(run_id, spec, arrays, [transfer[k] for k in keys])


def _specs(
    graph: Graph, devices: Mapping[str, str], chunks: Sequence[Chunk], effects: bool
) -> list[ChunkSpec]:
    by_name = graph.by_name()
    targets = set(graph.targets)
    out = []
    for chunk in chunks:
        local = {name: split_device(devices[name])[1] for name in chunk.ops}
        full = {n: f"/job:localhost/replica:0/task:0/device:{d}" for n, d in local.items()}
        imports = tuple(
            (i.tensor, f"/job:localhost/replica:0/task:0/device:{i.device}", devices[i.tensor.op])
            for i in chunk.imports
        )
        ops = tuple(by_name[n] for n in chunk.ops)
        mine = tuple(n for n in chunk.ops if n in targets)
        out.append(
            ChunkSpec(
                chunk.task,
                chunk.stage,
                ops,
                full,
                imports,
                chunk.exports,
                mine,
                graph.config,
                graph.source,
                effects,
            )
        )
    return out


class TaskLost(RuntimeFailure):
    """A task's worker, or the scheduler (`task` None), went away during a run."""

    def __init__(self, message: str, task: TaskName | None) -> None:
        super().__init__(message)
        self.task = task


class _Watch:
    """The run's watchdog: every task's worker must keep the address it had at start."""

    def __init__(
        self, session: Session, addresses: Mapping[TaskName, str], hosts: Mapping[TaskName, str]
    ) -> None:
        self.session, self.addresses, self.hosts = session, dict(addresses), hosts
        self.keys: dict[str, TaskName] = {}  # each submitted Dask key's task

    def check(self) -> None:
        client = self.session.client
        if client.status not in ("running", "newly-created"):
            raise self.lost()
        try:
            now = _names(self.session)
        except (OSError, TimeoutError):
            raise self.lost() from None
        for task, address in self.addresses.items():
            if now.get(address) != str(task):
                raise self.left(task)

    def stuck(self, task: TaskName, limit: float) -> TaskLost:
        return TaskLost(
            f"{task} (worker {self.addresses[task]}, host {self.hosts.get(task, 'unknown host')})"
            f" did not hand over the run's results within {limit:g} s: its process is stuck or "
            "its host is unreachable; nothing was retried. Check its log and run again.",
            task,
        )

    def lost(self) -> TaskLost:
        return TaskLost(
            f"lost the connection to the Dask scheduler at {self.session.scheduler}: it stopped "
            "or its host is unreachable; nothing was retried. Check the scheduler and run again.",
            None,
        )

    def left(self, task: TaskName) -> TaskLost:
        host = self.hosts.get(task, "unknown host")
        return TaskLost(
            f"{task} (worker {self.addresses[task]}, host {host}) left the cluster during the "
            "run: its process died or its host is unreachable; nothing was retried (TensorFlow "
            "aborts the step too) and the tensors it held are lost. Check its log and run again.",
            task,
        )


def _failure(exc: BaseException, watch: _Watch, task: TaskName) -> BaseException:
    """What a failed (or cancelled) chunk means to the user. A worker that left explains its
    chunks' errors and their readers': the scheduler may take a moment to drop it, so look
    for that for up to a second before reading the error itself."""
    if isinstance(exc, GpuplaceError):
        return exc
    deadline = time.monotonic() + 1.0
    while True:
        try:
            watch.check()
        except TaskLost as gone:
            return gone
        if time.monotonic() > deadline:
            break
        time.sleep(POLL / 2)
    name = type(exc).__name__
    if name == "KilledWorker":  # allowed-failures 0: its `task` is the chunk that was running
        return watch.left(watch.keys.get(str(getattr(exc, "task", "")), task))
    return RuntimeFailure(
        f"{task} (worker {watch.addresses.get(task)}) failed a chunk: {name}: {exc}"
    )


def _wait(futures: Sequence[Any], watch: _Watch) -> None:
    """Wait for every future, checking the cluster between waits; raise the first failure."""
    import distributed

    wait: Callable[..., tuple[set[Any], set[Any]]] = distributed.wait
    pending = list(futures)
    while pending:
        try:
            with watch.session.client.as_current():
                done, not_done = wait(pending, POLL, "FIRST_COMPLETED")
        except (TimeoutError, distributed.TimeoutError):
            done, not_done = set(), set(pending)
        except Exception as exc:  # a future was cancelled: the scheduler, or a worker, left
            raise _failure(exc, watch, next(iter(watch.addresses))) from None
        for future in done:
            if future.status in ("error", "cancelled"):
                task = watch.keys[future.key]
                try:
                    error = future.exception(timeout=5)
                except BaseException as exc:  # cancelled: the scheduler went away
                    error = exc
                raise _failure(error, watch, task) from None
        pending = list(not_done)
        if pending:
            watch.check()


def gather(futures: Sequence[Any], watch: _Watch, limit: float | None = None) -> list[Any]:
    """Each finished future's value, fetched from its worker. A worker that dies after the
    run's wait would leave Dask's gather waiting forever, so each fetch waits POLL at a time,
    the watchdog looks between waits (its one line names the task that left), and the whole
    gather gives up after `limit` seconds (GATHER_TIMEOUT) naming the task it waited on."""
    limit = GATHER_TIMEOUT if limit is None else limit
    deadline = time.monotonic() + limit
    values = []
    for future in futures:
        task = watch.keys[future.key]
        while True:
            try:
                values.append(future.result(timeout=POLL))
                break
            except TimeoutError:
                pass
            except Exception as exc:  # cancelled or lost on the way: the scheduler, or a worker
                raise _failure(exc, watch, task) from None
            watch.check()
            if time.monotonic() > deadline:
                raise watch.stuck(task, limit)
    return values


def run_graph(
    session: Session,
    cluster: Cluster,
    graph: Graph,
    devices: Mapping[str, str],
    policy: Policy,
    *,
    effects: bool = True,
) -> ClusterRun:
    """Run `graph` placed by `devices` (op -> full device name with a task) on the tasks of
    `cluster`, whose workers `session` reaches; raises a GpuplaceError naming the task."""
    client = session.client
    chunks = split(graph, devices)
    used = sorted({c.task for c in chunks})
    addresses = wait_for_tasks(session, used)
    hosts = {t.name: t.host for t in cluster.tasks}
    watch = _Watch(session, addresses, hosts)
    run_id = uuid.uuid4().hex[:12]
    try:
        _on_tasks(client, _open_on, watch, run_id, policy)
        return _submit(session, watch, run_id, graph, devices, chunks, effects)
    except GpuplaceError as exc:
        gone = exc.task if isinstance(exc, TaskLost) else None
        if not isinstance(exc, TaskLost) or gone is not None:  # the scheduler is still there
            alive = {a: t for t, a in addresses.items() if t != gone}  # give their pools back
            with contextlib.suppress(Exception):
                client.run(_close_on, run_id, alive, workers=list(alive))
        raise


def _open_on(run_id: str, tasks: Mapping[str, TaskName], policy: Policy, dask_worker: Any) -> None:
    """`open_run` on each worker at once (client.run passes `dask_worker`)."""
    open_run(run_id, tasks[dask_worker.address], policy)


def _close_on(run_id: str, tasks: Mapping[str, TaskName], dask_worker: Any) -> Closed | None:
    return close_run(run_id, tasks[dask_worker.address])


def _on_tasks(
    client: Any, fn: Callable[..., Any], watch: _Watch, *args: Any
) -> dict[TaskName, Any]:
    """`fn(run_id, tasks, *args)` on every task's worker at once, by task; a GpuplaceError
    raised there re-raised as itself."""
    tasks = {address: task for task, address in watch.addresses.items()}
    try:
        got = client.run(fn, *args[:1], tasks, *args[1:], workers=list(tasks))
    except GpuplaceError:
        raise
    except Exception as exc:  # a worker, or the scheduler, went away
        raise _failure(exc, watch, next(iter(watch.addresses))) from None
    return {tasks[address]: value for address, value in got.items()}


def _submit(
    session: Session, watch: _Watch, run_id: str, graph: Graph, devices: Mapping[str, str],
    chunks: Sequence[Chunk], effects: bool,
) -> ClusterRun:  # fmt: skip
    client = session.client
    specs = _specs(graph, devices, chunks, effects)
    futures: list[Any] = []
    pieces: dict[tuple[int, TensorRef], Any] = {}
    tasks = watch.keys

    def piece(source: int, ref: TensorRef) -> Any:
        """The future of tensor `ref` exported by chunk `source` (its own, or a getitem)."""
        if len(chunks[source].exports) == 1:
            return futures[source]
        found = pieces.get((source, ref))
        if found is None:
            address = watch.addresses[chunks[source].task]
            key = f"gpuplace-{run_id}-{chunks[source].key}-{ref}"
            found = client.submit(operator.getitem, futures[source], str(ref), key=key,
                                  workers=[address], allow_other_workers=False, pure=False)  # fmt: skip
            pieces[source, ref] = found
            tasks[key] = chunks[source].task
        return found

    try:
        for chunk, spec in zip(chunks, specs, strict=True):
            inputs = [piece(i.source, i.tensor) for i in chunk.imports]
            key = f"gpuplace-{run_id}-{chunk.key}"
            address = watch.addresses[chunk.task]
            futures.append(client.submit(
                _chunk_task, run_id, spec, [f.key for f in inputs], *inputs, key=key,
                workers=[address], allow_other_workers=False, pure=False,
            ))  # fmt: skip
            tasks[key] = chunk.task
        chunk_of = {name: c.index for c in chunks for name in c.ops}
        fetched = [piece(chunk_of[ref.op], ref) for ref in graph.fetch]
        _wait([*futures, *pieces.values()], watch)
        arrays = gather(fetched, watch)
    except BaseException:
        for future in [*futures, *pieces.values()]:
            with contextlib.suppress(Exception):
                future.cancel()
        raise
    values = {str(ref): np.asarray(a) for ref, a in zip(graph.fetch, arrays, strict=True)}
    closed: list[Closed] = []
    for task, got in sorted(_on_tasks(client, _close_on, watch, run_id).items()):
        if got is None:  # restarted: its state is gone
            raise watch.left(task)
        closed.append(got)
    copies = [c for got in closed for c in got.copies]
    printed = [line for _, line in sorted(
        (item for got in closed for item in got.printed), key=operator.itemgetter(0))]  # fmt: skip
    memory = [m for got in closed for m in got.memory]
    return ClusterRun(values, copies, printed, memory, len(chunks))


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
        found = _failure(exc, _Watch(session, addresses, hosts), next(iter(addresses)))
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
            cluster = replace(cluster, tasks=tuple(
                replace(t, address=names[t.name]) for t in cluster.tasks))  # fmt: skip
        return run_graph(session, cluster, graph, devices, policy, effects=effects)

    def check(self, cluster: Cluster, sizes: RateSizes) -> ClusterCheck:
        """`devices --check` on every task of `cluster` (a simulated one's workers start here)."""
        return check_cluster(self.session(cluster), cluster, sizes)

    def close(self) -> None:
        for session in {id(s): s for s in self.sessions.values()}.values():
            session.close()
        self.sessions.clear()


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
