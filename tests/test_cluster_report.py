"""`devices` on a simulated cluster (one table with a HOST column, JSON, checks over the
cluster) and the run log's rendering across hosts (`Cluster:` line, `Device mapping:`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpuplace import Options
from gpuplace.devices import discover, view
from gpuplace.devices.cluster_spec import machine_cluster
from gpuplace.pipeline import prepare
from gpuplace.report.run import cluster_mapping, placement_log
from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]

DEVICES = """\
Cluster: 2 tasks of job worker, simulated (2xV100-16GB+1xT4); session on /job:worker/replica:0/task:0
DEVICE                                     HOST   CUDA  NVML  PRODUCT                             MEMORY TOTAL
/job:worker/replica:0/task:0/device:CPU:0  sim-0  -     -     Simulated CPU, 8 cores [simulated]  64.0 GiB
/job:worker/replica:0/task:0/device:GPU:0  sim-0  0     0     Tesla V100-SXM2-16GB [simulated]    16160MiB
/job:worker/replica:0/task:0/device:GPU:1  sim-0  1     1     Tesla V100-SXM2-16GB [simulated]    16160MiB
/job:worker/replica:0/task:1/device:CPU:0  sim-1  -     -     Simulated CPU, 8 cores [simulated]  64.0 GiB
/job:worker/replica:0/task:1/device:GPU:0  sim-1  0     0     Tesla T4 [simulated]                15360MiB
"""


def test_devices_of_a_simulated_cluster(run: Run) -> None:
    result = run("--machine", "2xV100-16GB+1xT4", "devices")
    assert (result.code, result.out, result.err) == (0, DEVICES, "")


def test_a_cluster_file_sets_each_tasks_cuda_visible_devices(run: Run, tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(
        "cluster:\n  worker:\n"
        "    - {machine: 2xV100-16GB, cuda_visible_devices: '1,0', host: node1}\n"
        "    - {machine: 1xT4, host: node2}\n"
    )
    result = run("devices", "--cluster", str(cluster))
    assert result.code == 0, result.err
    rows = [line.split()[:4] for line in result.out.splitlines()[2:]]
    assert rows[1] == ["/job:worker/replica:0/task:0/device:GPU:0", "node1", "0", "1"]
    assert rows[2] == ["/job:worker/replica:0/task:0/device:GPU:1", "node1", "1", "0"]
    assert rows[4][:2] == ["/job:worker/replica:0/task:1/device:GPU:0", "node2"]


def test_devices_json_of_a_cluster(run: Run) -> None:
    result = run("--machine", "2xV100-16GB+1xT4", "devices", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["cluster"] == {"scheduler": None, "simulated": True, "description":
                              "2xV100-16GB+1xT4", "master": "/job:worker/replica:0/task:0"}  # fmt: skip
    assert [t["task"] for t in doc["tasks"]] == [
        "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"
    ]  # fmt: skip
    task1 = doc["tasks"][1]
    assert (task1["host"], task1["worker"], task1["pid"]) == ("sim-1", None, None)
    assert [d["name"] for d in task1["devices"]] == [
        "/job:worker/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:1/device:GPU:0"
    ]  # fmt: skip
    assert task1["machine"]["description"] == "1xT4"


def test_require_gpus_counts_over_the_cluster_and_names_the_short_task(run: Run) -> None:
    assert run("--machine", "2xV100-16GB+1xT4", "devices", "--require-gpus", "3").code == 0
    result = run("--machine", "2xV100-16GB+1xT4", "devices", "--require-gpus", "4")
    assert result.code == 1
    assert result.err == (
        "error: 4 GPUs required, 3 visible over the cluster (task:0 2, task:1 1); "
        "/job:worker/replica:0/task:1 on sim-1 has the fewest\n"
    )


def test_min_memory_names_the_task_and_host(run: Run) -> None:
    result = run("--machine", "2xV100-16GB+1xT4", "devices", "--min-memory", "15.5GiB")
    assert result.code == 1
    assert result.err == (
        "error: /job:worker/replica:0/task:1/device:GPU:0 (Tesla T4, host sim-1) has 15.0 GiB "
        "total, less than --min-memory 15.5GiB\n"
    )


def test_watch_on_a_cluster_is_refused_in_one_line(run: Run) -> None:
    result = run("--machine", "2x(1xT4)", "devices", "--watch", "1")
    assert result.code == 2
    assert result.err == (
        "error: --watch refreshes one process's devices; across hosts each task's devices are "
        "fixed when its worker starts (run gpuplace devices --watch on a node to watch its GPUs)\n"
    )


def test_a_live_cluster_needs_the_runtime(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as without gpuplace[cluster]
    result = run("devices", env={"GPUPLACE_CLUSTER": "tcp://127.0.0.1:1"})
    assert result.code == 2
    assert result.err == (
        "error: running across hosts needs Dask distributed, which is not installed; "
        "pip install 'gpuplace[cluster]'\n"
    )


def test_cluster_log_gathers_every_tasks_devices() -> None:
    seen = view(discover("1xK20m"), {})
    spec = ROOT / "examples/cluster/multi_tower.yaml"
    prepared = prepare(spec, seen, Options(), {}, cluster=machine_cluster("2x(1xK20m)"))
    assert prepared.cluster is not None
    text = cluster_mapping(prepared.cluster, prepared.task_logical)
    text += "\n" + placement_log(*prepared.placed())
    assert text == (
        "Cluster: 2 tasks of job worker, simulated (2x(1xK20m)); session on "
        "/job:worker/replica:0/task:0\n"
        "Device mapping:\n"
        "/job:worker/replica:0/task:0/device:GPU:0 -> device: 0, name: Tesla K20m, pci bus id: "
        "0000:02:00.0, compute capability: 3.5 [simulated]\n"
        "/job:worker/replica:0/task:1/device:GPU:0 -> device: 0, name: Tesla K20m, pci bus id: "
        "0000:02:00.0, compute capability: 3.5 [simulated]\n"
        "Const: /job:worker/replica:0/task:0/device:GPU:0\n"
        "Const_1: /job:worker/replica:0/task:0/device:GPU:0\n"
        "MatMul: /job:worker/replica:0/task:0/device:GPU:0\n"
        "Const_2: /job:worker/replica:0/task:1/device:GPU:0\n"
        "Const_3: /job:worker/replica:0/task:1/device:GPU:0\n"
        "MatMul_1: /job:worker/replica:0/task:1/device:GPU:0\n"
        "AddN: /job:worker/replica:0/task:0/device:CPU:0"
    )
