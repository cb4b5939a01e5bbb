"""`plan` across hosts on simulated clusters: the Cluster line, full names, network copies,
NET IN / NET OUT per task, and the JSON fields (no Dask: plan runs nothing)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[1]
TOWERS = str(ROOT / "examples/cluster/multi_tower.yaml")

PLAN = """\
Plan on a simulated cluster (strategy tensorflow)
Cluster: 2 tasks of job worker, simulated (2x(1xK20m)); session on /job:worker/replica:0/task:0
OP        TYPE      DEVICE        REASON                                     SHAPE  DTYPE    BYTES  COPIES IN
Const     constant  task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [2,2]  float32  16 B   -
Const_1   constant  task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [2,2]  float32  16 B   -
MatMul    matmul    task:0/GPU:0  requested /job:worker/task:0/device:GPU:0  [2,2]  float32  16 B   -
Const_2   constant  task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [2,2]  float32  16 B   -
Const_3   constant  task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [2,2]  float32  16 B   -
MatMul_1  matmul    task:1/GPU:0  requested /job:worker/task:1/device:GPU:0  [2,2]  float32  16 B   -
AddN      add_n     task:0/CPU:0  requested /job:worker/task:0/device:CPU:0  [2,2]  float32  16 B   MatMul task:0/GPU:0->task:0/CPU:0 16 B; MatMul_1 task:1/GPU:0->task:0/CPU:0 16 B (network)

DEVICE        OPS  OUTPUT BYTES  COPIES IN  COPY BYTES IN  COPIES OUT  BUSY (EST)  PEAK (PREDICTED)  LIMIT    FITS
task:0/GPU:0  3    48 B          0          0 B            1 (16 B)    0.015 ms    768B              4620MiB  yes
task:1/GPU:0  3    48 B          0          0 B            1 (16 B)    0.015 ms    768B              4620MiB  yes
task:0/CPU:0  1    16 B          2          32 B           0 (0 B)     0.002 ms    768B              -        -
task:1/CPU:0  0    0 B           0          0 B            0 (0 B)     0.000 ms    0MiB              -        -

TASK                          HOST   DEVICES  NET IN  NET BYTES IN  NET OUT  NET BYTES OUT
/job:worker/replica:0/task:0  sim-0  2        1       16 B          0        0 B
/job:worker/replica:0/task:1  sim-1  2        0       0 B           1        16 B
Network between tasks: 10 Gbit/s, 50 us (default); each cross-task copy also waits about 10 ms for the runtime (a Dask task per chunk)
rates: task:0/GPU:0 from the preset Tesla K20m; task:1/GPU:0 from the preset Tesla K20m
"""


def test_plan_on_a_simulated_cluster(run: Run) -> None:
    result = run("--machine", "2x(1xK20m)", "plan", TOWERS)
    assert result.code == 0, result.err
    *lines, makespan = result.out.splitlines()
    assert "\n".join(lines) + "\n" == PLAN
    # one network copy: 16 B at 10 Gbit/s after 50 us, and the runtime's 10 ms hand-over
    assert makespan.startswith("Estimated makespan 10.0")
    # the bound charges that copy too: no placement keeping these tasks does better
    assert makespan.endswith(
        "lower bounds: critical path 10.056 ms, work / GPUs 0.004 ms, stage by stage 0.006 ms; "
        "makespan / bound 1.00"
    )


def test_a_faster_network_from_a_cluster_file_shortens_the_estimate(
    run: Run, tmp_path: Path
) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(
        "graph:\n"
        "  - {name: a, op: zeros, shape: [4096, 4096], device: /job:worker/task:1/device:GPU:0}\n"
        "  - {name: b, op: neg, inputs: [a], device: /job:worker/task:0/device:GPU:0}\n"
    )
    times = []
    for rate in ("1Gbit/s", "100Gbit/s"):
        cluster = tmp_path / f"c{rate[:3]}.yaml"
        cluster.write_text(
            "cluster:\n  worker:\n    - {machine: 1xK20m}\n    - {machine: 1xK20m}\n"
            f"  network: {{bandwidth: {rate}, latency: 20us}}\n"
        )
        result = run("--cluster", str(cluster), "plan", str(big), "--json")
        assert result.code == 0, result.err
        doc = json.loads(result.out)
        assert doc["network"]["source"] == "cluster file"
        assert doc["tasks"][0]["net_bytes_in"] == 4096 * 4096 * 4
        times.append(doc["estimate"]["makespan_seconds"])
    # 64 MiB: 0.54 s at 1 Gbit/s, 5.4 ms at 100 Gbit/s
    assert times[0] > 0.5 > 0.1 > times[1]


def test_plan_json_names_the_cluster_and_full_devices(run: Run) -> None:
    result = run("--machine", "2x(1xK20m)", "plan", TOWERS, "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["cluster"] == {
        "scheduler": None, "simulated": True, "master": "/job:worker/replica:0/task:0",
        "description": "2x(1xK20m)",
    }  # fmt: skip
    devices = [d["device"] for d in doc["devices"]]
    assert devices[0] == "/job:worker/replica:0/task:0/device:GPU:0"
    assert {p["device"] for p in doc["placement"]} <= set(devices)
    assert [t["net_copies_out"] for t in doc["tasks"]] == [0, 1]


def test_worker_devices_without_a_cluster_say_how_to_give_one(run: Run) -> None:
    result = run("--machine", "2xK20m", "plan", TOWERS)
    assert result.code == 1
    assert result.err.startswith(
        "error: Cannot assign a device for operation MatMul: {{node MatMul}} was explicitly "
        "assigned to /job:worker/task:0/device:GPU:0 but available devices are ["
    )
    assert result.err.rstrip().endswith(
        "to place ops on other tasks, describe the cluster (--cluster (or a cluster: block in "
        "the spec))."
    )


def test_localhost_names_inside_a_cluster(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "local.yaml"
    spec.write_text("graph:\n  - {op: constant, value: 1.0, device: /job:localhost/device:CPU:0}\n")
    result = run("--machine", "1xT4+1xK20m", "plan", str(spec))
    assert result.code == 1
    assert "gpuplace: the cluster has tasks 0-1 of job worker; /job:localhost names" in result.err


SPREAD = """\
graph:
  - device: /job:worker/task:1
    graph:
      - {name: x, op: random_normal, shape: [2048, 2048]}
      - {name: a, op: matmul, inputs: [x, x]}
      - {name: b, op: matmul, inputs: [x, x]}
      - {name: c, op: matmul, inputs: [x, x]}
      - {name: d, op: matmul, inputs: [x, x]}
  - {name: s, op: add_n, inputs: [a, b, c, d], device: /job:worker/task:1}
"""


def test_balanced_spreads_within_the_task_ops_are_pinned_to(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "spread.yaml"
    spec.write_text(SPREAD)
    result = run("--machine", "2x(2xK20m)", "plan", str(spec), "--json", "--strategy", "balanced")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    used = {p["device"] for p in doc["placement"]}
    assert used == {
        "/job:worker/replica:0/task:1/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:1"
    }  # fmt: skip
    assert all(t["net_copies_in"] == 0 for t in doc["tasks"])


def test_balanced_crosses_hosts_when_one_host_runs_out(run: Run) -> None:
    small = str(ROOT / "examples/small_model.yaml")
    args = ("plan", small, "--json", "--strategy", "balanced", "--memory-limit", "100MiB")
    result = run("--machine", "2x(1xK20m)", *args)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    hosts = {p["device"].split("/device:")[0] for p in doc["placement"]}
    assert hosts == {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"}
    assert all(d["fits"] is not False for d in doc["devices"])
    assert sum(t["net_copies_in"] for t in doc["tasks"]) >= 1
    # one host of the same card cannot hold it at all
    assert run("--machine", "1xK20m", *args).code == 1


def test_round_robin_does_not_place_across_hosts(run: Run) -> None:
    result = run("--machine", "2x(1xK20m)", "plan", TOWERS, "--strategy", "round-robin")
    assert result.code == 2
    assert "placement strategy 'round-robin' does not place across hosts" in result.err


def test_a_training_step_across_hosts_is_refused_in_one_line(run: Run) -> None:
    result = run("--machine", "2x(1xK20m)", "plan", TOWERS, "--training", "adam")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "error: --training sizes a training step on one host; across hosts (2x(1xK20m)) it is "
        "not modelled yet: plan the step on one task's machine (--machine without the cluster)\n"
    )


def test_html_and_dot_reports_of_a_cluster_plan(run: Run, tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    result = run("--machine", "2x(1xK20m)", "plan", TOWERS, "--format", "html", "-o", str(page))
    assert result.code == 0, result.err
    text = page.read_text()
    assert "<h2>Plan on a simulated cluster (strategy tensorflow)</h2>" in text
    assert "<title>gpuplace plan on 2 tasks of job worker, simulated (2x(1xK20m))" in text
    # the network copy lands 10 ms later on task 0's CPU, as plan's estimate says
    assert "MatMul_1:0 from task:1/GPU:0: 0.015 ms to 10.07 ms" in text
    dot = run("--machine", "2x(1xK20m)", "plan", TOWERS, "--format", "dot")
    assert dot.code == 0, dot.err
    assert 'label="Plan on a simulated cluster (strategy tensorflow)"' in dot.out
    assert 'label="task:1/GPU:0"' in dot.out


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["CPU", "GPU"]), st.integers(0, 9)),
                min_size=1, max_size=12))  # fmt: skip
def test_cluster_bounds_never_exceed_the_estimate_and_count_each_crossing(
    steps: list[tuple[int, str, int]],
) -> None:
    """A random chain of matmuls hopping between two tasks: the estimate is at least every
    bound, and the critical path at least one hand-over per crossing of the chain."""
    from gpuplace.devices import discover, view
    from gpuplace.options import Options
    from gpuplace.pipeline import estimate_plan, prepare
    from gpuplace.placement.cost import DASK_HOP
    from tests.cluster_run.helpers import cluster_of

    lines = ["graph:", "  - {name: x0, op: random_uniform, shape: [64, 64], seed: 1,"
             " device: /job:worker/task:0/cpu:0}"]  # fmt: skip
    for i, (task, kind, other) in enumerate(steps, 1):
        second = f"x{min(other, i - 1)}"
        lines.append(f"  - {{name: x{i}, op: matmul, inputs: [x{i - 1}, {second}], "
                     f"device: /job:worker/task:{task}/device:{kind}:0}}")  # fmt: skip
    lines.append(f"fetch: [x{len(steps)}]")
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "chain.yaml"
        spec.write_text("\n".join(lines) + "\n")
        seen = view(discover("1xK20m"), {})
        prepared = prepare(spec, seen, Options(), {}, cluster=cluster_of("1xK20m", "1xK20m"))
        planned = estimate_plan(prepared, seen)
    crossings = sum(a[0] != b[0] for a, b in zip([(0,), *steps], steps, strict=False))
    bounds = planned.bounds
    assert planned.estimate.makespan >= bounds.best * (1 - 1e-9)
    assert bounds.critical_path >= crossings * DASK_HOP
