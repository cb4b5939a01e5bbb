"""The CLI on a simulated cluster (one worker process per task, loopback): `run`'s log, its
`--explain` table with the copy between tasks marked `network`, `--verify`, and `mem`'s
per-task peaks. One cluster start per command: kept to two tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster_run.helpers import TOWERS
from tests.conftest import Run, write_spec

pytestmark = pytest.mark.timeout(120)

LOG = """\
Cluster: 2 tasks of job worker, simulated (2x(1xK20m)); session on /job:worker/replica:0/task:0
Device mapping:
/job:worker/replica:0/task:0/device:GPU:0 -> device: 0, name: Tesla K20m, pci bus id: 0000:02:00.0, compute capability: 3.5 [simulated]
/job:worker/replica:0/task:1/device:GPU:0 -> device: 0, name: Tesla K20m, pci bus id: 0000:02:00.0, compute capability: 3.5 [simulated]
Const: /job:worker/replica:0/task:0/device:GPU:0
Const_1: /job:worker/replica:0/task:0/device:GPU:0
MatMul: /job:worker/replica:0/task:0/device:GPU:0
Const_2: /job:worker/replica:0/task:1/device:GPU:0
Const_3: /job:worker/replica:0/task:1/device:GPU:0
MatMul_1: /job:worker/replica:0/task:1/device:GPU:0
AddN: /job:worker/replica:0/task:0/device:CPU:0
p: /job:worker/replica:0/task:0/device:CPU:0
OP        TYPE      DEVICE        REASON                                     SHAPE  DTYPE    BYTES  COPIES IN
Const     constant  task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [2,3]  float32  24 B   -
Const_1   constant  task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [3,2]  float32  24 B   -
MatMul    matmul    task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [2,2]  float32  16 B   -
Const_2   constant  task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [2,3]  float32  24 B   -
Const_3   constant  task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [3,2]  float32  24 B   -
MatMul_1  matmul    task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [2,2]  float32  16 B   -
AddN      add_n     task:0/CPU:0  requested /job:worker/task:0/device:CPU:0  [2,2]  float32  16 B   MatMul task:0/GPU:0->task:0/CPU:0 16 B; MatMul_1 task:1/GPU:0->task:0/CPU:0 16 B (network)
p         print     task:0/CPU:0  requested /job:worker/task:0/device:CPU:0  [2,2]  float32  16 B   -
p:
[[ 44.  56.]
 [ 98. 128.]]
verify p: max relative error 0.0e+00 vs float64 CPU (float32, tolerance 1e-04): ok
"""


def test_run_on_a_simulated_cluster_logs_every_task_and_marks_network_copies(
    run: Run, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, TOWERS)
    done = run("--machine", "2x(1xK20m)", "run", spec, "--log-placement", "--explain", "--verify")
    assert done.code == 0, done.err
    assert done.out == LOG
    assert done.err == "p: [[ 44.  56.]\n [ 98. 128.]]\n"


def test_mem_on_a_simulated_cluster_gives_each_task_s_peaks(run: Run, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, TOWERS)
    done = run("--machine", "1xK20m+1xT4", "mem", spec, "--json", "--memory-limit", "64MiB",
               "--require-gpus", "3")  # fmt: skip
    assert done.code == 1  # counted over both tasks, after the run
    assert done.err == (
        "error: 3 GPUs required, 2 visible over the cluster (task:0 1, task:1 1); "
        "/job:worker/replica:0/task:0 on sim-0 has the fewest\n"
    )
    [policy] = json.loads(done.out)["policies"]
    assert [(d["device"], d["product"], d["peak"], d["limit"]) for d in policy["devices"]] == [
        ("/job:worker/replica:0/task:0/device:GPU:0", "Tesla K20m", 768, 64 * 2**20),
        ("/job:worker/replica:0/task:1/device:GPU:0", "Tesla T4", 768, 64 * 2**20),
    ]


CHECKED = """\
Cluster: 2 tasks of job worker, simulated (1xT4+1xK20m); session on /job:worker/replica:0/task:0
DEVICE                                     HOST   CUDA  NVML  PRODUCT                             MEMORY TOTAL
/job:worker/replica:0/task:0/device:CPU:0  sim-0  -     -     Simulated CPU, 8 cores [simulated]  64.0 GiB
/job:worker/replica:0/task:0/device:GPU:0  sim-0  0     0     Tesla T4 [simulated]                15360MiB
/job:worker/replica:0/task:1/device:CPU:0  sim-1  -     -     Simulated CPU, 8 cores [simulated]  64.0 GiB
/job:worker/replica:0/task:1/device:GPU:0  sim-1  0     0     Tesla K20m [simulated]              5120MiB
Check: 256x256 float32 matmul vs a float64 CPU reference; rates: 32x32 float32 matmul, a + b on 256 KiB arrays
DEVICE                                     PRODUCT                    RESULT  MAX REL ERR  TIME  TFLOP/S  GB/S
/job:worker/replica:0/task:0/device:CPU:0  Simulated CPU [simulated]  pass    E            T     R        R
/job:worker/replica:0/task:0/device:GPU:0  Tesla T4 [simulated]       pass    E            T     R        R
/job:worker/replica:0/task:1/device:CPU:0  Simulated CPU [simulated]  pass    E            T     R        R
/job:worker/replica:0/task:1/device:GPU:0  Tesla K20m [simulated]     pass    E            T     R        R
Simulated devices compute on this host with numpy: their TFLOP/S and GB/S are the host's, measured once, not the card's (plans use the card's preset rates)
Network task:1 -> task:0: 256.0 KiB in T, R GB/s (R), latency T (best of 3 Dask transfers of a host array)
Simulated tasks are processes on this host: that is loopback's rate, not a network's, and it is not saved for plan (give the cluster a network: instead)
"""


def _masked(text: str) -> str:
    """The check's volatile numbers (errors, times, rates) as letters (the columns' widths
    follow them, so the table's rows are compared with their spaces collapsed)."""
    import re

    text = re.sub(r"\d\.\de[-+]\d\d", "E", text)
    text = re.sub(r"[\d.]+ ms", "T", text)
    text = re.sub(r"[\d.]+ [GM]bit/s", "R", text)
    text = re.sub(r"(pass    E +T +)[\d.]+( +)[\d.]+", r"\1R\2R", text)
    return re.sub(r"T, [\d.]+ GB/s", "T, R GB/s", text)


def test_check_on_a_simulated_cluster_runs_in_every_worker_and_times_the_network(
    run: Run, tmp_path: Path
) -> None:
    env = {"GPUPLACE_CHECK_SIZES": "matmul=32,stream=256KiB", "HOME": str(tmp_path)}
    done = run("--machine", "1xT4+1xK20m", "devices", "--check", "--require-gpus", "3", env=env)
    assert done.code == 1
    lines = _masked(done.out).splitlines()
    expected = CHECKED.splitlines()
    assert lines[:7] == expected[:7]
    assert [" ".join(x.split()) for x in lines[7:]] == [" ".join(x.split()) for x in expected[7:]]
    assert done.err == (
        "error: 3 GPUs required, 2 visible over the cluster (task:0 1, task:1 1); "
        "/job:worker/replica:0/task:0 on sim-0 has the fewest\n"
    )
    assert not (tmp_path / ".cache").exists()  # loopback's rate is not saved
