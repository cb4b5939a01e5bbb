"""Tiers 3 and 4, the deployment shape: a real `dask scheduler` and `gpuplace worker`
processes (ports 0, loopback), `gpuplace --cluster scheduler.json run`, a name already taken,
and the scheduler killed mid-run (exit 1, one line, within 5 s). Every process is ended by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_run.helpers import TOWERS, slow_chain
from tests.test_json_contract import cluster_validator

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPLACE_", "CUDA_", "DASK_"))}


def _gpuplace(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpuplace", *args]


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """A scheduler and the workers of tasks 0 and 1 (written as the worker command's examples
    are: `gpuplace worker SCHEDULER --task 1`, `gpuplace --machine M worker FILE --task 0 --job
    worker`); yields the scheduler file and the processes, scheduler first."""
    file = tmp_path / "scheduler.json"
    started: list[subprocess.Popen[str]] = []
    try:
        started.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(file)],
            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        ))  # fmt: skip
        address = _address(file)
        for argv in (_gpuplace("--machine", "1xK20m", "worker", str(file), "--task", "0", "--job", "worker"),
                     _gpuplace("--machine", "1xK20m", "worker", address, "--task", "1")):  # fmt: skip
            started.append(subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True))  # fmt: skip
        yield file, started
    finally:
        _stop(started[::-1])


def _address(file: Path) -> str:
    """The scheduler's address, once it has written the whole file (not atomically)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return str(json.loads(file.read_text())["address"])
        except (OSError, ValueError, KeyError):
            assert time.monotonic() < deadline, "the scheduler never wrote its file"
            time.sleep(0.1)


def _wait_for_workers(file: Path, count: int) -> None:
    """Until `count` workers have joined; each gpuplace worker runs BLAS on the host's cores."""
    from distributed import Client

    with Client(scheduler_file=str(file), timeout=30) as client:  # type: ignore[no-untyped-call]
        client.wait_for_workers(count, timeout=60)
        threads = client.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS"))
        assert set(threads.values()) == {str(os.cpu_count())}


def _wait_until_running(file: Path, prefix: str) -> None:
    """Until a worker is processing a task whose key starts with `prefix`."""
    from distributed import Client

    with Client(scheduler_file=str(file), timeout=30) as client:  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + 60
        while not any(str(k).startswith(prefix) for keys in client.processing().values()
                      for k in keys):  # fmt: skip
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.1)


def test_workers_serve_their_tasks_and_a_run_uses_them(
    cluster: tuple[Path, list[subprocess.Popen[str]]], tmp_path: Path
) -> None:
    file = cluster[0]
    _wait_for_workers(file, 2)
    spec = tmp_path / "towers.yaml"
    spec.write_text(TOWERS)
    done = subprocess.run(_gpuplace("--cluster", str(file), "run", str(spec), "--verify", "--explain"),
                          env=ENV, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "p: [[ 44.  56.]\n [ 98. 128.]]" in done.stderr
    assert "MatMul_1 task:1/GPU:0->task:0/CPU:0 16 B (network)" in done.stdout
    assert "verify p: max relative error" in done.stdout and ": ok" in done.stdout
    listed = subprocess.run(_gpuplace("devices", "--cluster", str(file)), env=ENV,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].startswith(
        "Cluster: 2 tasks of job worker, Dask scheduler tcp://127.0.0.1:"
    )
    rows = [line.split()[0] for line in listed.stdout.splitlines()[2:]]
    assert rows == [
        f"/job:worker/replica:0/task:{t}/device:{d}" for t in (0, 1) for d in ("CPU:0", "GPU:0")
    ]
    planned = subprocess.run(_gpuplace("--cluster", str(file), "plan", str(spec)), env=ENV,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert "/job:worker/replica:0/task:1  " in planned.stdout and "NET IN" in planned.stdout
    rates = tmp_path / "rates.json"
    env = {**ENV, "GPUPLACE_RATES": str(rates), "GPUPLACE_CHECK_SIZES": "matmul=32,stream=256KiB"}
    checked = subprocess.run(_gpuplace("devices", "--cluster", str(file), "--check", "--json",
                                       "--require-gpus", "3", "--min-memory", "6GiB"),
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 1, checked.stderr
    doc = json.loads(checked.stdout)
    cluster_validator().validate(doc)
    assert all(t["pid"] > 0 and t["worker"].startswith("tcp://127.0.0.1:") for t in doc["tasks"])
    assert [(c["device"], c["passed"]) for c in doc["checks"]] == [  # each in its own worker
        (f"/job:worker/replica:0/task:{t}/device:{d}", True) for t in (0, 1) for d in ("CPU:0", "GPU:0")
    ]  # fmt: skip
    [moved] = doc["network"]
    assert (moved["source"], moved["target"], moved["bytes"]) == (
        "/job:worker/replica:0/task:1",
        "/job:worker/replica:0/task:0",
        256 * 1024,
    )
    saved = f"Saved the measured network of {_address(file)} to {rates} (plan uses it on this "
    assert checked.stderr.startswith(saved)  # on stderr under --json
    assert checked.stderr.splitlines()[1].startswith("error: 3 GPUs required, 2 visible over the cluster "
                                     "(task:0 1, task:1 1); /job:worker/replica:0/task:0 on ")  # fmt: skip
    assert "/job:worker/replica:0/task:1/device:GPU:0 (Tesla K20m, host " in checked.stderr
    assert "less than --min-memory 6GiB" in checked.stderr
    replanned = subprocess.run(_gpuplace("--cluster", str(file), "plan", str(spec)), env=env,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
    assert replanned.returncode == 0, replanned.stderr
    assert "Network between tasks: " in replanned.stdout
    assert " (measured); each cross-task copy" in replanned.stdout
    taken = subprocess.run(_gpuplace("worker", str(file), "--task", "1"), env=ENV,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert taken.returncode == 2
    assert taken.stderr.startswith(
        "error: /job:worker/replica:0/task:1 is already served by worker tcp://127.0.0.1:"
    )
    assert taken.stderr.endswith("; give another --task (or --job), or stop that worker first\n")


def test_a_lost_scheduler_ends_the_run_within_seconds(
    cluster: tuple[Path, list[subprocess.Popen[str]]], tmp_path: Path
) -> None:
    file, processes = cluster
    _wait_for_workers(file, 2)
    spec = tmp_path / "chain.yaml"
    spec.write_text(slow_chain(400))
    running = subprocess.Popen(_gpuplace("--cluster", str(file), "run", str(spec)), env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_until_running(file, "gpuplace-")  # connected, and the chain runs on task 1
        assert running.poll() is None
        processes[0].kill()
        killed = time.monotonic()
        err = running.communicate(timeout=30)[1]
        assert time.monotonic() - killed < 5
    finally:
        _stop([running])
    address = _address(file)
    assert running.returncode == 1
    assert err.splitlines()[-1] == (
        f"error: lost the connection to the Dask scheduler at {address}: it stopped or its "
        "host is unreachable; nothing was retried. Check the scheduler and run again."
    )
