"""TensorFlow 2.21's placer on a two-task cluster, replayed from real TensorFlow.

`tests/conformance/data/cluster.json` was written by `tools/tf_capture/cluster.py`: two
CPU-only `tf.distribute.Server` tasks of job `worker` in one process, each case's graph run in
a session on its master task with log_device_placement. gpuplace places each case on a
cluster of two CPU-only tasks with the same master and must put every op where TF did, or fail
with TF's very message.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuplace.devices.cluster import TaskName
from gpuplace.graph import loads
from gpuplace.placement import PlacementError, place_cluster

DATA = Path(__file__).parent / "data" / "cluster.json"
TASKS = [(TaskName("worker", 0), 0), (TaskName("worker", 1), 0)]


@cache
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


CASES = [pytest.param(case, id=case["name"]) for case in document()["cases"]]


def test_captured_from_tensorflow_2_21() -> None:
    assert document()["tensorflow"] == "2.21.0"
    outcomes = {"placed" in c for c in document()["cases"]}
    assert outcomes == {True, False}  # both placements and errors were captured


@pytest.mark.parametrize("case", CASES)
def test_cluster_placement_matches_tensorflow(case: dict[str, Any]) -> None:
    spec = json.dumps({"graph": case["graph"], "fetch": case["fetch"]})
    graph = loads(spec, f"{case['name']}.json")
    master = TaskName("worker", case["master"])
    if "error" in case:
        with pytest.raises(PlacementError) as caught:
            place_cluster(graph, TASKS, master, allow_soft_placement=case["soft"])
        assert caught.value.tf_message == case["error"]
        assert caught.value.fix is not None
        assert "the cluster has tasks 0-1 of job worker" in str(caught.value.fix)
        return
    placement = place_cluster(graph, TASKS, master, allow_soft_placement=case["soft"])
    assert {n: d.device for n, d in placement.decisions.items()} == case["placed"]
