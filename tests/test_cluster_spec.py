"""Where clusters come from: --machine's hosts, the cluster: block, --cluster, and the pipeline
placing over a simulated cluster (no Dask)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace import Options
from gpuplace.devices import discover, view
from gpuplace.devices.cluster import TaskName
from gpuplace.devices.cluster_spec import (
    MAX_TASKS,
    cluster_block,
    cluster_option,
    is_cluster_machine,
    machine_cluster,
    parse_bandwidth,
    parse_latency,
    simulated_cluster,
)
from gpuplace.errors import BadInput
from gpuplace.pipeline import prepare

W = "/job:worker/replica:0/task:{}/device:{}"
MULTI_TOWER = """\
graph:
  - towers: ["/job:worker/task:0/device:GPU:0", "/job:worker/task:1/device:GPU:0"]
    graph:
      - {op: constant, value: [[1.0, 2.0], [3.0, 4.0]]}
      - {op: constant, value: [[1.0, 2.0], [3.0, 4.0]]}
      - {op: matmul, inputs: [Const, Const_1]}
  - {op: add_n, inputs: [MatMul, MatMul_1], device: /job:worker/task:0/cpu:0}
"""


@pytest.mark.parametrize(
    ("text", "machines"),
    [
        ("2x(4xV100-16GB)", ["4xV100-16GB", "4xV100-16GB"]),
        ("4xV100-16GB+1xT4", ["4xV100-16GB", "1xT4"]),
        ("2x(1xK20m) + 2xA100-80GB,1xT4", ["1xK20m", "1xK20m", "2xA100-80GB,1xT4"]),
    ],
)
def test_machine_hosts_become_worker_tasks(text: str, machines: list[str]) -> None:
    assert is_cluster_machine(text)
    described = machine_cluster(text)
    assert [t.machine for t in described.tasks] == machines
    assert [t.name for t in described.tasks] == [
        TaskName("worker", i) for i in range(len(machines))
    ]
    assert described.default_master() == TaskName("worker", 0)


@pytest.mark.parametrize("text", ["4xK520", "2xA100-80GB,1xT4", "machine.yaml"])
def test_one_host_is_not_a_cluster(text: str) -> None:
    assert not is_cluster_machine(text)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "0x(1xT4)",
            "--machine: '0x(1xT4)' repeats a host 0 times; a simulated cluster has 1 to 64 tasks",
        ),
        ("9" * 40 + "x(1xT4)", "repeats a host 9999"),
        ("2x(2x(1xT4))", "nests hosts; write Nx(MACHINE) with one machine inside"),
        ("1xT4++1xT4", "has an empty host"),
        ("(1xT4+1xT4", "is not a host"),
        ("+".join(["1xT4"] * (MAX_TASKS + 1)), "makes more than 64 tasks"),
        ("1xT4+" + "x" * 5000, "characters long; a cluster's is at most 4096"),
    ],
)
def test_bad_hosts_are_one_line_errors(text: str, error: str) -> None:
    with pytest.raises(BadInput) as caught:
        machine_cluster(text)
    assert error in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


@given(st.lists(st.tuples(st.integers(1, 5), st.sampled_from(["1xT4", "2xK520", "1xK20m"])),
                min_size=1, max_size=6))  # fmt: skip
def test_repeats_count_hosts(parts: list[tuple[int, str]]) -> None:
    text = "+".join(f"{n}x({m})" if n > 1 else m for n, m in parts)
    described = machine_cluster(text)
    assert [t.machine for t in described.tasks] == [m for n, m in parts for _ in range(n)]


def test_cluster_block_jobs_hosts_master_network() -> None:
    block = {
        "scheduler": "tcp://head:8786",
        "ps": 1,
        "worker": ["node1", {"machine": "1xT4", "cuda_visible_devices": "1,0", "host": "node2"}],
        "master": "/job:worker/task:1",
        "network": {"bandwidth": "25Gbit/s", "latency": "20us"},
    }
    described = cluster_block(block, "spec.yaml")
    assert [str(t.name) for t in described.tasks] == [
        "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"
    ]  # fmt: skip
    assert described.tasks[1].host == "node1"
    assert described.tasks[2].machine == "1xT4" and described.tasks[2].cuda_visible_devices == "1,0"
    assert described.master == TaskName("worker", 1)
    assert described.scheduler == "tcp://head:8786"
    assert described.network is not None
    assert described.network.bandwidth == pytest.approx(25e9 / 8)
    assert described.network.latency == pytest.approx(20e-6)


def test_default_master_is_chief_else_first_job() -> None:
    assert cluster_block({"worker": 2, "chief": 1}, "x").default_master() == TaskName("chief", 0)
    assert cluster_block({"ps": 1, "worker": 2}, "x").default_master() == TaskName("ps", 0)
    assert cluster_block({"worker": {3: "n3", 1: "n1"}}, "x").default_master() == TaskName(
        "worker", 1
    )


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ({}, "cluster must be a mapping of jobs to tasks"),
        ({"worker": 0}, "job worker has 0 tasks; a cluster has 1 to 64"),
        ({"worker": 10**9}, "job worker has 1000000000 tasks"),
        ({"worker": [None] * 65}, "job worker lists 65 tasks"),
        ({"wor-ker": 2}, "cluster key 'wor-ker' is neither a job name"),
        ({"worker": 2, "master": "/job:ps/task:0"}, "cluster.master /job:ps/task:0 is not one"),
        ({"worker": 2, "master": "worker0"}, "cluster.master worker0 is not a task"),
        ({"worker": [{"gpu": 1}]}, "task 0 of job worker has no field gpu"),
        ({"worker": 2, "network": {"bandwidth": "fast"}}, "network bandwidth 'fast' is not a rate"),
        ({"worker": 2, "network": {"bandwidth": 1e9, "latency": "1h"}}, "network latency '1h'"),
        ({"worker": 2, "network": 5}, "network must be a mapping with a bandwidth"),
    ],
)
def test_bad_blocks_name_the_field(block: object, error: str) -> None:
    with pytest.raises(BadInput, match=None) as caught:
        cluster_block(block, "spec.yaml")
    assert error in str(caught.value)
    assert str(caught.value).startswith("spec.yaml: ")


@pytest.mark.parametrize(
    ("text", "rate"), [("25Gbit/s", 25e9 / 8), ("1.5GB/s", 1.5e9), ("100MiB/s", 100 * 2**20)]
)
def test_bandwidths(text: str, rate: float) -> None:
    assert parse_bandwidth(text, "x") == pytest.approx(rate)


@pytest.mark.parametrize(("text", "seconds"), [("20us", 20e-6), ("0.5ms", 5e-4), ("50µs", 5e-5)])
def test_latencies(text: str, seconds: float) -> None:
    assert parse_latency(text, "x") == pytest.approx(seconds)


def test_cluster_option_forms(tmp_path: Path) -> None:
    assert cluster_option("tcp://head:8786").scheduler == "tcp://head:8786"
    sched = tmp_path / "scheduler.json"
    sched.write_text(json.dumps({"type": "Scheduler", "address": "tcp://10.0.0.1:40000"}))
    assert cluster_option(str(sched)).scheduler == "tcp://10.0.0.1:40000"
    yaml_file = tmp_path / "cluster.yaml"
    yaml_file.write_text("cluster:\n  worker:\n    - {machine: 2xK520}\n    - {machine: 1xT4}\n")
    described = cluster_option(str(yaml_file))
    assert [t.machine for t in described.tasks] == ["2xK520", "1xT4"]
    with pytest.raises(BadInput, match="is neither a scheduler address nor a file"):
        cluster_option(str(tmp_path / "missing.yaml"))
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(BadInput, match="has neither a scheduler address"):
        cluster_option(str(other))


def test_simulated_cluster_sees_each_task_through_its_cuda_visible_devices() -> None:
    block = {"worker": [{"machine": "2xV100-16GB", "cuda_visible_devices": "1"},
                        {"machine": "1xT4"}]}  # fmt: skip
    cluster = simulated_cluster(cluster_block(block, "x"), {}, None)
    assert [len(t.view.gpus) for t in cluster.tasks] == [1, 1]
    assert cluster.tasks[0].view.gpus[0].gpu.nvml_index == 1
    assert [t.host for t in cluster.tasks] == ["sim-0", "sim-1"]
    assert cluster.simulated and cluster.master == TaskName("worker", 0)


def test_prepare_places_the_multi_tower_graph_over_two_tasks(tmp_path: Path) -> None:
    spec = tmp_path / "towers.yaml"
    spec.write_text(MULTI_TOWER)
    seen = view(discover("1xK20m"), {})
    prepared = prepare(spec, seen, Options(), {}, cluster=machine_cluster("2x(1xK20m)"))
    assert {n: d.device for n, d in prepared.placement.decisions.items()} == {
        "Const": W.format(0, "GPU:0"), "Const_1": W.format(0, "GPU:0"),
        "MatMul": W.format(0, "GPU:0"), "Const_2": W.format(1, "GPU:0"),
        "Const_3": W.format(1, "GPU:0"), "MatMul_1": W.format(1, "GPU:0"),
        "AddN": W.format(0, "CPU:0"),
    }  # fmt: skip
    assert prepared.cluster is not None and len(prepared.cluster.tasks) == 2
    assert set(prepared.task_logical) == {TaskName("worker", 0), TaskName("worker", 1)}


def test_the_spec_block_with_a_one_host_machine_simulates_each_task(tmp_path: Path) -> None:
    spec = tmp_path / "towers.yaml"
    spec.write_text("cluster: {worker: 2, master: /job:worker/task:1}\n" + MULTI_TOWER)
    seen = view(discover("2xK520"), {})
    prepared = prepare(spec, seen, Options(), {})
    assert prepared.cluster is not None
    assert [t.machine_spec for t in prepared.cluster.tasks] == ["2xK520", "2xK520"]
    assert prepared.cluster.master == TaskName("worker", 1)
    assert prepared.placement.devices[0] == W.format(1, "GPU:0")  # the master's first


def test_without_a_cluster_worker_devices_fail(tmp_path: Path) -> None:
    spec = tmp_path / "towers.yaml"
    spec.write_text(MULTI_TOWER)
    with pytest.raises(Exception, match="describe the cluster"):
        prepare(spec, view(discover("2xK520"), {}), Options(), {})


def test_a_scheduler_needs_the_runtime(tmp_path: Path) -> None:
    spec = tmp_path / "towers.yaml"
    spec.write_text(MULTI_TOWER)
    with pytest.raises(BadInput, match=r"needs gpuplace's cluster runtime.*gpuplace\[cluster\]"):
        prepare(spec, view(discover("2xK520"), {}), Options(), {},
                cluster=cluster_option("tcp://head:8786"))  # fmt: skip


def test_a_bad_spec_block_names_the_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("cluster:\n  worker: 0\n" + MULTI_TOWER)
    with pytest.raises(BadInput) as caught:
        prepare(spec, view(discover("2xK520"), {}), Options(), {})
    assert "bad.yaml:2" in str(caught.value) or "bad.yaml:1" in str(caught.value)
    assert "job worker has 0 tasks" in str(caught.value)


def test_a_simulated_machine_plans_a_spec_that_names_a_scheduler(tmp_path: Path) -> None:
    spec = tmp_path / "towers.yaml"
    spec.write_text(
        "cluster: {scheduler: 'tcp://head:8786', worker: [node1, node2]}\n" + MULTI_TOWER
    )
    prepared = prepare(spec, view(discover("1xT4"), {}), Options(), {})
    assert prepared.cluster is not None and prepared.cluster.simulated
    assert prepared.cluster.description == "the spec's cluster: block, each task 1xT4"
    assert [t.host for t in prepared.cluster.tasks] == ["node1", "node2"]
