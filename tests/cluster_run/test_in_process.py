"""Tier 1: Dask workers in this process (no BLAS-thread difference): a run across two tasks is
bit-equal to the same graph run in one process, with one `network` copy per (tensor,
destination device); errors raised on a worker arrive as the same gpuplace errors, naming
task-qualified devices; a missing task fails at once."""

from __future__ import annotations

import pickle
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplace.devices.cluster import Task, TaskName
from gpuplace.errors import BadInput, Message, RuntimeFailure, Setting
from gpuplace.execute import dask_run, dask_runtime, dask_session
from gpuplace.execute.task_state import run_chunk
from gpuplace.memory.ledger import OutOfMemory
from gpuplace.memory.policy import Policy, resolve_policy
from gpuplace.options import Options
from tests.cluster_run.helpers import T0, T1, TOWERS, cluster_of, local_run, placed

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("cluster_run/test_in_process")]

CLUSTER = cluster_of("1xK20m", "1xK20m")


@pytest.fixture(scope="module")
def session() -> Iterator[dask_session.Session]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GPUPLACE_MACHINE", "1xK20m")  # in-process workers discover this process's env
    with dask_session.simulated(CLUSTER, processes=False) as running:
        yield running
    mp.undo()


@pytest.fixture
def towers(tmp_path: Path) -> Path:
    path = tmp_path / "towers.yaml"
    path.write_text(TOWERS)
    return path


def _policy(memory_limit: str | None = None) -> Policy:
    return resolve_policy({}, Options(memory_limit=memory_limit).memory_flags(), {})


def test_a_run_across_two_tasks_is_bit_equal_to_the_local_run(
    session: dask_session.Session, towers: Path
) -> None:
    graph, devices = placed(towers)
    done = dask_run.run_graph(session, CLUSTER, graph, devices, _policy())
    local = local_run(graph, devices)
    assert list(done.values) == ["p"]
    assert done.values["p"].tobytes() == local.values["p"].tobytes()
    assert done.values["p"].tolist() == [[44.0, 56.0], [98.0, 128.0]]
    assert done.printed == local.printed == ["p: [[ 44.  56.]\n [ 98. 128.]]"]
    assert done.chunks == 3
    network = [(c.op, c.tensor, c.src, c.dst, c.nbytes, c.kind) for c in done.copies
               if c.kind == "network"]  # fmt: skip
    assert network == [
        ("AddN", "MatMul_1", "/job:worker/replica:0/task:1/device:GPU:0",
         "/job:worker/replica:0/task:0/device:CPU:0", 16, "network"),
    ]  # fmt: skip
    assert all(c.seconds >= 0 for c in done.copies)
    within = sorted((c.tensor, c.src, c.dst) for c in done.copies if c.kind != "network")
    assert within == [("MatMul", "/job:worker/replica:0/task:0/device:GPU:0",
                       "/job:worker/replica:0/task:0/device:CPU:0")]  # fmt: skip
    peaks = {m.device: m.peak for m in done.memory}
    assert sorted(peaks) == [f"/job:worker/replica:0/task:{t}/device:{d}"
                             for t in (0, 1) for d in ("CPU:0", "GPU:0")]  # fmt: skip
    assert peaks["/job:worker/replica:0/task:1/device:GPU:0"] == 3 * 256  # 2 consts + matmul


def test_an_oom_on_a_worker_arrives_as_out_of_memory_naming_the_task(
    session: dask_session.Session, towers: Path
) -> None:
    graph, devices = placed(towers)
    with pytest.raises(OutOfMemory) as caught:
        dask_run.run_graph(session, CLUSTER, graph, devices, _policy(memory_limit="256B"))
    found = re.fullmatch(r"/job:worker/replica:0/task:([01])/device:GPU:0", caught.value.device)
    assert found is not None  # whichever tower fails first: its second constant
    op = {"0": "Const_1", "1": "Const_3"}[found.group(1)]
    assert str(caught.value).startswith(
        f"OOM when allocating 256 B for op '{op}' on {caught.value.device}: 256 B in use"
    )
    # the run after a failure starts clean on the same workers
    done = dask_run.run_graph(session, CLUSTER, graph, devices, _policy())
    assert done.values["p"].tolist() == [[44.0, 56.0], [98.0, 128.0]]


def test_a_missing_task_fails_at_once_naming_it_and_the_command_that_starts_it(
    session: dask_session.Session,
) -> None:
    start = time.monotonic()
    with pytest.raises(RuntimeFailure) as caught:
        dask_session.wait_for_tasks(session, [T0, TaskName("worker", 7)], timeout=0.5)
    assert time.monotonic() - start < 5
    address = session.scheduler
    assert str(caught.value) == (
        f"no worker for /job:worker/replica:0/task:7 on {address} (workers: "
        "/job:worker/replica:0/task:0, /job:worker/replica:0/task:1); start it with "
        f"gpuplace worker {address} --task 7"
    )


def test_the_inventory_is_each_task_s_own_discovery(session: dask_session.Session) -> None:
    tasks = dask_session.inventory_tasks(session, [T0, T1])
    assert [str(t.name) for t in tasks] == [
        "/job:worker/replica:0/task:0",
        "/job:worker/replica:0/task:1",
    ]
    assert [[g.product for g in t.view.gpus] for t in tasks] == [["Tesla K20m"], ["Tesla K20m"]]
    assert all(t.address and t.address.startswith("tcp://127.0.0.1:") for t in tasks)


def test_a_chunk_without_run_state_fails_rather_than_run_on_half_a_ledger() -> None:
    from gpuplace.execute.task_state import ChunkSpec
    from gpuplace.graph.model import Config

    spec = ChunkSpec(T1, 0, (), {}, (), (), (), Config(), "<spec>")
    with pytest.raises(
        RuntimeFailure,
        match=r"^/job:worker/replica:0/task:1 has no state for this run: its worker restarted",
    ):
        run_chunk("no-such-run", spec, [], [])


def test_gpuplace_errors_pickle_with_every_field() -> None:
    oom = OutOfMemory(
        "MatMul", "/job:worker/replica:0/task:1/device:GPU:0", 512, 256, 600, hint="shrink it"
    )
    back = pickle.loads(pickle.dumps(oom))
    assert type(back) is OutOfMemory and str(back) == str(oom)
    assert (back.op, back.device, back.requested, back.limit) == ("MatMul", oom.device, 512, 600)
    bad = BadInput(Message(Setting("memory_limit", "1x"), ": not a size"), fix="e.g. 64MiB")
    again = pickle.loads(pickle.dumps(bad))
    assert (type(again), str(again), again.exit_code) == (BadInput, str(bad), 2)
    assert again.setting == Setting("memory_limit", "1x")


def test_without_the_extra_a_cluster_needs_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    real = builtins.__import__

    def no_distributed(name: str, *args: object, **kw: object) -> object:
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(BadInput) as caught:
        dask_session.load_distributed()
    assert str(caught.value) == (
        "running across hosts needs Dask distributed, which is not installed; "
        "pip install 'gpuplace[cluster]'"
    )
    assert caught.value.exit_code == 2


def test_a_worker_with_another_gpuplace_version_is_named_at_connect(
    session: dask_session.Session,
) -> None:
    with pytest.raises(RuntimeFailure) as caught:
        dask_session.check_versions(session, mine="0.0.0+other")
    text = str(caught.value)
    assert re.fullmatch(
        r"/job:worker/replica:0/task:[01] \(worker tcp://127\.0\.0\.1:\d+\) runs gpuplace \S+, "
        r"this client 0\.0\.0\+other; install gpuplace 0\.0\.0\+other on every worker and on "
        r"the scheduler's host",
        text,
    ), text
    dask_session.check_versions(session)  # the same version everywhere: no error


def test_a_task_described_on_another_host_is_refused() -> None:
    from gpuplace.devices.cluster_spec import ClusterDescription, TaskPlan

    tasks = [Task(T1, "node7", CLUSTER.tasks[1].view, "tcp://10.0.0.7:40001")]
    described = ClusterDescription((TaskPlan(T1, host="node2"),), source="cluster.yaml")
    with pytest.raises(BadInput) as caught:
        dask_session.check_hosts(described, tasks)
    assert str(caught.value) == (
        "cluster.yaml: /job:worker/replica:0/task:1 should run on node2, but its worker is "
        "tcp://10.0.0.7:40001 on host node7; start gpuplace worker on node2, or fix the "
        "cluster's host list"
    )
    for host in ("node7", "10.0.0.7", "node7:40001"):  # by name, by address, with its port
        ok = ClusterDescription((TaskPlan(T1, host=host),), source="cluster.yaml")
        dask_session.check_hosts(ok, tasks)


def test_the_workers_are_asked_of_the_scheduler_not_of_the_client_s_cache(
    session: dask_session.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's periodic refresh of its cached identity lists no worker (it asks for none):
    when it lands between a fetch and its return, the cache says every task left. Here every
    refresh does so; the watchdog still sees both tasks where they were."""
    client = session.client

    async def refreshed_without_workers(n_workers: int = 0) -> None:
        client._scheduler_identity = {"workers": {}}

    monkeypatch.setattr(client, "_update_scheduler_info", refreshed_without_workers)
    names = dask_session.worker_names(session)
    assert sorted(names.values()) == [str(T0), str(T1)]
    addresses = dask_session.task_addresses(session)
    dask_run.Watch(session, addresses, {T0: "localhost", T1: "localhost"}).check()


def test_the_cluster_check_runs_in_each_worker_and_times_a_transfer(
    session: dask_session.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuplace.execute.device_check import RateSizes

    sizes = RateSizes(32, 64 * 1024)
    done = dask_runtime.check_cluster(session, CLUSTER, sizes)
    assert {t: [(r.device, r.product, r.passed) for r in rs] for t, rs in done.results.items()} == {
        t: [("/device:CPU:0", "Simulated CPU", True), ("/device:GPU:0", "Tesla K20m", True)]
        for t in (T0, T1)
    }
    [moved] = done.transfers
    assert (moved.source, moved.target, moved.nbytes) == (T1, T0, 64 * 1024)
    assert moved.seconds >= moved.latency > 0 and moved.bandwidth > 0
    monkeypatch.setattr(dask_runtime, "TRANSFER_TIMEOUT", 1e-6)  # no transfer is that fast
    with pytest.raises(RuntimeFailure, match=r"^a timed transfer between the workers took more "
                       r"than 1e-06 s; check the network between localhost and run again"):  # fmt: skip
        dask_runtime.check_cluster(session, CLUSTER, sizes)
