"""A placed graph run across TensorFlow tasks on Dask distributed: chunks, watchdog, gather.

The graph runs in (task, stage) chunks (`chunks.py`), each one `client.submit` pinned to its
task's worker ADDRESS (a name that no worker has would become a host restriction that waits
forever), running gpuplace's executor on per-run state the worker opened (`task_state.py`).
The session the run uses (connecting, each task's worker) is `dask_session.py`.

Dask's defaults hang when a worker dies (../shared/reference/multihost-dask.md §5), so:
- a watchdog polls the scheduler's workers every 0.25 s while the run waits and fails the run as
  soon as a task's worker address changes or disappears;
- a lost scheduler or worker ends the command with one line naming the task, the worker's
  address and the fix (exit 1). Nothing is retried.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..devices.cluster import Cluster, TaskName, split_device
from ..errors import GpuplaceError, RuntimeFailure
from ..graph.model import Graph, TensorRef
from ..memory.policy import Policy
from ..memory.pools import DeviceMemory
from .chunks import Chunk, split
from .dask_session import POLL, Session, wait_for_tasks, worker_names
from .schedule import CopyRecord
from .task_state import ChunkSpec, Closed, close_run, open_run, run_chunk

GATHER_TIMEOUT = 120.0  # seconds the fetched values may take to arrive once every chunk is done


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


class Watch:
    """The run's watchdog: every task's worker must keep the address it had at start
    (`check_cluster` in `dask_runtime.py` uses it too, to explain a failure)."""

    def __init__(
        self, session: Session, addresses: Mapping[TaskName, str], hosts: Mapping[TaskName, str]
    ) -> None:
        self.session, self.addresses, self.hosts = session, dict(addresses), hosts
        self.keys: dict[str, TaskName] = {}  # each submitted Dask key's task

    def check(self) -> None:
        """Raise a TaskLost if the scheduler is gone or a task's worker changed or left."""
        client = self.session.client
        if client.status not in ("running", "newly-created"):
            raise self.lost()
        try:
            now = worker_names(self.session)
        except (OSError, TimeoutError):
            raise self.lost() from None
        for task, address in self.addresses.items():
            if now.get(address) != str(task):
                raise self.left(task)

    def stuck(self, task: TaskName, limit: float) -> TaskLost:
        """`task` did not hand over its results within `limit` seconds."""
        return TaskLost(
            f"{task} (worker {self.addresses[task]}, host {self.hosts.get(task, 'unknown host')})"
            f" did not hand over the run's results within {limit:g} s: its process is stuck or "
            "its host is unreachable; nothing was retried. Check its log and run again.",
            task,
        )

    def lost(self) -> TaskLost:
        """The scheduler went away."""
        return TaskLost(
            f"lost the connection to the Dask scheduler at {self.session.scheduler}: it stopped "
            "or its host is unreachable; nothing was retried. Check the scheduler and run again.",
            None,
        )

    def left(self, task: TaskName) -> TaskLost:
        """`task`'s worker left the cluster."""
        host = self.hosts.get(task, "unknown host")
        return TaskLost(
            f"{task} (worker {self.addresses[task]}, host {host}) left the cluster during the "
            "run: its process died or its host is unreachable; nothing was retried (TensorFlow "
            "aborts the step too) and the tensors it held are lost. Check its log and run again.",
            task,
        )


def failure(exc: BaseException, watch: Watch, task: TaskName) -> BaseException:
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


def _wait(futures: Sequence[Any], watch: Watch) -> None:
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
            raise failure(exc, watch, next(iter(watch.addresses))) from None
        for future in done:
            if future.status in ("error", "cancelled"):
                task = watch.keys[future.key]
                try:
                    error = future.exception(timeout=5)
                except BaseException as exc:  # cancelled: the scheduler went away
                    error = exc
                raise failure(error, watch, task) from None
        pending = list(not_done)
        if pending:
            watch.check()


def gather(futures: Sequence[Any], watch: Watch, limit: float | None = None) -> list[Any]:
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
                raise failure(exc, watch, task) from None
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
    watch = Watch(session, addresses, hosts)
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


def _on_tasks(client: Any, fn: Callable[..., Any], watch: Watch, *args: Any) -> dict[TaskName, Any]:
    """`fn(run_id, tasks, *args)` on every task's worker at once, by task; a GpuplaceError
    raised there re-raised as itself."""
    tasks = {address: task for task, address in watch.addresses.items()}
    try:
        got = client.run(fn, *args[:1], tasks, *args[1:], workers=list(tasks))
    except GpuplaceError:
        raise
    except Exception as exc:  # a worker, or the scheduler, went away
        raise failure(exc, watch, next(iter(watch.addresses))) from None
    return {tasks[address]: value for address, value in got.items()}


def _submit(
    session: Session, watch: Watch, run_id: str, graph: Graph, devices: Mapping[str, str],
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
