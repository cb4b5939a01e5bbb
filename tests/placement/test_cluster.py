"""TensorFlow's placer over a cluster's tasks: priority, local-first, partial specs, errors.

The two-task CPU cases are replayed from real TensorFlow in tests/conformance/test_cluster.py;
these cover what a CPU-only TensorFlow cannot show (GPUs on some tasks) and gpuplace's hints.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.cli.words import CLI
from gpuplace.devices.cluster import TaskName
from gpuplace.devices.names import DeviceSpec
from gpuplace.errors import BadInput
from gpuplace.placement import PlacementError, place_cluster
from gpuplace.placement.candidates import DeviceTable, describe_tasks

from .helpers import graph, matmul_graph, meta, op

W0, W1, W2 = TaskName("worker", 0), TaskName("worker", 1), TaskName("worker", 2)
PS = TaskName("ps", 0)


def placed(g, tasks, master=None, soft=False):  # type: ignore[no-untyped-def]
    p = place_cluster(g, tasks, master, allow_soft_placement=soft, op_meta=meta)
    return {name: d.device for name, d in p.decisions.items()}


def test_type_priority_comes_before_the_master_task() -> None:
    # SortPrioritizedDeviceVector: a CPU-only master sends an unplaced op to task 1's GPU:0
    assert placed(matmul_graph(), [(W0, 0), (W1, 1)]) == {
        n: "/job:worker/replica:0/task:1/device:GPU:0" for n in ("a", "b", "MatMul")
    }


@pytest.mark.parametrize(("master", "task"), [(W0, 0), (W1, 1), (W2, 2)])
def test_among_equals_the_master_task_wins(master: TaskName, task: int) -> None:
    got = placed(matmul_graph(), [(W0, 2), (W1, 2), (W2, 2)], master)
    assert set(got.values()) == {f"/job:worker/replica:0/task:{task}/device:GPU:0"}


def test_partial_specs_match_across_tasks() -> None:
    g = graph(
        op("a", "constant"),
        op("x", "matmul", "a", "a", device="/device:GPU:1"),  # only task 1 has a GPU:1
        op("y", "matmul", "a", "a", device="/task:1/device:CPU:0"),
        op("z", "matmul", "a", "a", device="/job:worker"),
        op("s", "add_n", "x", "y", "z", device="/job:ps"),
    )
    got = placed(g, [(PS, 0), (W0, 1), (W1, 2)], master=W0)
    assert got["x"] == "/job:worker/replica:0/task:1/device:GPU:1"
    assert got["y"] == "/job:worker/replica:0/task:1/device:CPU:0"
    assert got["z"] == "/job:worker/replica:0/task:0/device:GPU:0"
    assert got["s"] == "/job:ps/replica:0/task:0/device:CPU:0"


def test_devices_sort_by_name_within_a_priority() -> None:
    table = DeviceTable(0, False, [(W0, 0), (W1, 11)], master=W1)
    shorts = [d.short for d in table.devices]
    assert shorts[:3] == ["task:1/GPU:0", "task:1/GPU:1", "task:1/GPU:10"]
    assert shorts[-2:] == ["task:1/CPU:0", "task:0/CPU:0"]


def test_short_names_carry_the_job_unless_it_is_worker() -> None:
    table = DeviceTable(0, False, [(PS, 0), (W0, 1), (TaskName("chief", 0, 2), 0)])
    assert [d.short for d in table.created] == [
        "ps/task:0/CPU:0", "task:0/CPU:0", "task:0/GPU:0", "chief/replica:2/task:0/CPU:0",
    ]  # fmt: skip


def test_soft_placement_keeps_the_task() -> None:
    g = graph(op("a", "constant"), op("p", "print", "a", device="/job:worker/task:1/device:GPU:0"))
    got = placed(g, [(W0, 1), (W1, 1)], soft=True)
    assert got["p"] == "/job:worker/replica:0/task:1/device:CPU:0"


def test_reason_names_the_task() -> None:
    p = place_cluster(matmul_graph(mm="/task:1"), [(W0, 1), (W1, 2)], op_meta=meta)
    assert p.decisions["MatMul"].reason == (
        "requested /task:1: task:1/GPU:0 is the highest-priority matching device with a "
        "MatMul kernel"
    )
    assert p.decisions["a"].reason == "generator follows its consumer MatMul on task:1/GPU:0"


def test_localhost_inside_a_cluster_hint() -> None:
    with pytest.raises(PlacementError) as caught:
        placed(matmul_graph(mm="/job:localhost/device:GPU:0"), [(W0, 1), (W1, 1)], soft=True)
    assert str(caught.value.fix) == (
        "gpuplace: the cluster has tasks 0-1 of job worker; /job:localhost names the one "
        "process of a run without a cluster: drop the job (/device:GPU:0) or name a task "
        "(/job:worker/replica:0/task:0/device:GPU:0)."
    )


def test_missing_task_hint() -> None:
    with pytest.raises(PlacementError) as caught:
        placed(matmul_graph(mm="/job:worker/task:7"), [(PS, 0), (W0, 1), (W2, 1)])
    assert str(caught.value.fix) == (
        "gpuplace: the cluster has task 0 of job ps and tasks 0, 2 of job worker; request a "
        "device of one of them (soft placement keeps the job, replica and task)."
    )


def test_missing_device_of_an_existing_task_names_the_cluster() -> None:
    with pytest.raises(PlacementError) as caught:
        placed(matmul_graph(mm="/job:worker/task:1/device:GPU:3"), [(W0, 1), (W1, 1)])
    assert CLI.say(caught.value.fix) == (
        "gpuplace: the cluster (tasks 0-1 of job worker) has 2 GPUs; request one of its "
        "devices, or pass --allow-soft-placement."
    )


def test_no_cluster_hint_says_how_to_give_one() -> None:
    from .helpers import run

    with pytest.raises(PlacementError) as caught:
        run(matmul_graph(mm="/job:worker/task:1/device:CPU:0"), gpus=1)
    assert CLI.say(caught.value.fix).endswith(
        "to place ops on other tasks, describe the cluster (--cluster (or a cluster: block in "
        "the spec))."
    )


@pytest.mark.parametrize(
    ("tasks", "master", "error"),
    [
        ([], None, "a cluster needs at least one task"),
        ([(W0, 1), (W0, 2)], None, "a cluster names each task once"),
        ([(W0, -1)], None, "a task's number of GPUs must be >= 0"),
        ([(W0, 1)], W1, "the session's task /job:worker/replica:0/task:1 is not one of"),
    ],
)
def test_bad_clusters_are_refused(tasks, master, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadInput, match=error):
        place_cluster(matmul_graph(), tasks, master, op_meta=meta)


def test_task_ranges_in_words() -> None:
    tasks = [TaskName("worker", i) for i in (0, 1, 2, 5, 7, 8)]
    assert describe_tasks(tasks) == "tasks 0-2, 5, 7-8 of job worker"


clusters = st.lists(st.integers(0, 3), min_size=1, max_size=4)
fields = st.tuples(
    st.sampled_from([None, "worker", "ps"]),
    st.sampled_from([None, 0, 1]),
    st.sampled_from([None, 0, 1, 3]),
    st.sampled_from([None, "CPU", "GPU"]),
    st.sampled_from([None, 0, 1, 2]),
).map(lambda f: f if f[3] is not None else (*f[:4], None))  # an index needs a type


@given(clusters, st.integers(0, 3), fields)
def test_first_candidate_is_the_best_matching_device(gpus: list[int], m: int, spec_fields) -> None:  # type: ignore[no-untyped-def]
    """The placer's choice for a lone op is the minimum over matching devices of (type
    priority, not the master's task, name), and an error when nothing matches."""
    tasks = [(TaskName("worker", i), n) for i, n in enumerate(gpus)]
    master = tasks[m % len(tasks)][0]
    spec = DeviceSpec(*spec_fields)
    candidates = [
        (0 if kind == "GPU" else 1, t != master, f"{t}/device:{kind}:{i}")
        for t, n in tasks
        for kind, i in [("CPU", 0), *(("GPU", k) for k in range(n))]
        if spec.matches_at(t.job, t.replica, t.task, kind, i)
    ]
    g = graph(op("x", "matmul", device=spec.to_string()))
    if not candidates:
        with pytest.raises(PlacementError):
            placed(g, tasks, master)
        return
    assert placed(g, tasks, master)["x"] == min(candidates)[2]
