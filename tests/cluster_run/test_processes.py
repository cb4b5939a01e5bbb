"""Tiers 2 and 4: one worker process per task on 127.0.0.1 (Nannies, port 0, dashboard off):
per-task machines and CUDA_VISIBLE_DEVICES as each process discovers them, a run compared
with the local one, and a worker SIGKILLed mid-run failing the run within seconds (Dask's
defaults would wait forever). Clusters are ended by PID in fixtures."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gpuplace.errors import RuntimeFailure
from gpuplace.execute import dask_run, dask_session
from gpuplace.memory.policy import resolve_policy
from tests.cluster_run.helpers import T0, T1, TOWERS, cluster_of, local_run, placed, slow_chain

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("cluster_run/test_processes")]

CLUSTER = cluster_of("1xK20m", "2xT4", cvd=(None, "1"))
POLICY = resolve_policy({}, {}, {})


@contextlib.contextmanager
def ended(session: dask_session.Session) -> Iterator[dask_session.Session]:
    """Yield the session; then close it, and SIGKILL by PID any worker left behind."""
    try:
        yield session
    finally:
        session.close()
        for pid in session.pids.values():
            dask_session.kill_pid(pid)


@pytest.fixture(scope="module")
def session() -> Iterator[dask_session.Session]:
    with ended(dask_session.start_simulated(CLUSTER)) as running:
        yield running


def test_each_task_discovers_its_own_machine_and_visible_gpus(
    session: dask_session.Session,
) -> None:
    tasks = dask_session.inventory_tasks(session, [T0, T1])
    assert [[(g.cuda_index, g.gpu.nvml_index, g.product) for g in t.view.gpus] for t in tasks] == [
        [(0, 0, "Tesla K20m")],
        [(0, 1, "Tesla T4")],  # CUDA_VISIBLE_DEVICES=1: the second T4 is its GPU:0
    ]
    assert len({t.view.machine.host.simulated for t in tasks}) == 1
    pids = {session.pids[T0], session.pids[T1]}
    assert len(pids) == 2 and all(p != __import__("os").getpid() for p in pids)


def test_a_run_across_processes_matches_the_local_run(
    session: dask_session.Session, tmp_path: Path
) -> None:
    path = tmp_path / "towers.yaml"
    path.write_text(TOWERS)
    graph, devices = placed(path)
    done = dask_run.run_graph(session, CLUSTER, graph, devices, POLICY)
    local = local_run(graph, devices)
    np.testing.assert_allclose(done.values["p"], local.values["p"], rtol=1e-6)
    assert done.printed == ["p: [[ 44.  56.]\n [ 98. 128.]]"]
    assert [(c.tensor, c.nbytes) for c in done.copies if c.kind == "network"] == [("MatMul_1", 16)]


def test_a_worker_killed_mid_run_fails_the_run_within_seconds(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(slow_chain(400))
    graph, devices = placed(path, gpus=0)
    cluster = cluster_of("1xK20m", "1xK20m")
    with ended(dask_session.start_simulated(cluster)) as running:
        victim = running.pids[T1]
        killed: list[float] = []

        def kill() -> None:
            client, address = running.client, dask_session.task_addresses(running)[T1]
            deadline = time.monotonic() + 60
            while not any(
                str(k).startswith("gpuplace-") for k in client.processing().get(address, ())
            ):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)
            time.sleep(0.2)  # the chain on task 1 is running
            dask_session.kill_pid(victim)
            killed.append(time.monotonic())

        killer = threading.Thread(target=kill)
        killer.start()
        with pytest.raises(RuntimeFailure) as caught:
            dask_run.run_graph(running, cluster, graph, devices, POLICY)
        failed = time.monotonic()
        killer.join()
        assert killed and failed - killed[0] < 5
        text = str(caught.value)
        assert text.startswith("/job:worker/replica:0/task:1 (worker tcp://127.0.0.1:")
        assert text.endswith(
            ", host localhost) left the cluster during the run: its process died or its host is "
            "unreachable; nothing was retried (TensorFlow aborts the step too) and the tensors it "
            "held are lost. Check its log and run again."
        )
