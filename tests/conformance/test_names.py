"""Op names against real TensorFlow: TF 2.21's `Graph.unique_name`, as captured by
tools/tf_capture/capture.py (TensorFlow is not a test dependency: the JSON is).

Each case is a spec the capture script built in a fresh `tf.compat.v1` graph in file order;
`names` is every op's TensorFlow name in creation order. gpuplace must give the same names in
the same order (its ops come in execution order, which is file order for these specs: no
input names an op below it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.graph import loads
from gpuplace.graph.scope import Names

DATA = json.loads((Path(__file__).parent / "data" / "names.json").read_text())
CASES = DATA["cases"]


def test_the_data_comes_from_tensorflow_and_covers_the_classes() -> None:
    assert DATA["tensorflow"].startswith("2.21")
    ids = [c["id"] for c in CASES]
    assert sum(i.startswith("guide/") for i in ids) == 4
    assert sum(i.startswith("random-") for i in ids) >= 50
    names = [n for c in CASES for n in c["names"]]
    assert "Const_1_1" in names and "A_1" in names and "scope/A_1" in names  # the rule's cases


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_names_match_tensorflow(case: dict[str, Any]) -> None:
    graph = loads(json.dumps(case["spec"]), f"{case['id']}.json")
    assert [op.name for op in graph.ops] == case["names"]


def test_inputs_keep_the_names_as_written() -> None:
    """TF renames the written `Const_1` (a generated Const_1 came first) and `A`; the spec's
    inputs still mean the ops written with those names."""
    graph = loads(
        json.dumps(
            {"graph": [
                {"op": "constant", "value": 1.0}, {"op": "constant", "value": 2.0},
                {"name": "Const_1", "op": "constant", "value": 3.0},
                {"name": "a", "op": "constant", "value": 4.0},
                {"name": "A", "op": "constant", "value": 5.0},
                {"name": "s", "op": "add", "inputs": ["Const_1", "A"]},
            ]}
        )
    )  # fmt: skip
    by_name = graph.by_name()
    assert [str(r) for r in by_name["s"].inputs] == ["Const_1_1", "A_1"]
    assert by_name["Const_1_1"].attrs["value"] == 3.0 and by_name["A_1"].attrs["value"] == 5.0


def test_a_duplicate_written_name_is_still_refused() -> None:
    with pytest.raises(Exception, match="duplicate op name 'a'"):
        loads("graph: [{name: a, op: constant, value: 1.0}, {name: a, op: constant, value: 2.0}]")


NAME = st.sampled_from(["Const", "const", "Const_1", "CONST_1", "Const_1_1", "a", "A", "a_1"])


@given(st.lists(NAME, max_size=30))
def test_unique_names_keep_fresh_names_and_never_clash(asked: list[str]) -> None:
    names = Names()
    seen: set[str] = set()
    for name in asked:
        got = names.unique(name)
        if name.lower() not in seen:
            assert got == name  # a name not used yet is kept
        else:
            assert got.startswith(name + "_")  # else the name, an underscore and a number
        assert got.lower() not in seen  # unique, case-insensitively
        seen.add(got.lower())


def test_a_replica_scope_takes_its_name_by_the_same_rule() -> None:
    """`tf.name_scope("replica_0")` after an op named `replica_0` is `replica_0_1/` (TF 2.21:
    constant `replica_0`, then a Const under name_scope("replica_0") is `replica_0_1/Const`)."""
    graph = loads(
        json.dumps(
            {"graph": [
                {"name": "replica_0", "op": "constant", "value": 1.0},
                {"name": "x", "op": "placeholder", "shape": [4, 2]},
                {"replicate": {"gpus": 2, "split": ["x"]}, "graph": [{"op": "relu", "inputs": ["x"]}]},
            ]}
        ),
        gpus=lambda config: 2,
    )  # fmt: skip
    assert [op.name for op in graph.ops] == [
        "replica_0", "x", "replica_0_1/x", "replica_0_1/Relu", "replica_1/x", "replica_1/Relu",
        "Relu",
    ]  # fmt: skip
