"""`replicate:` blocks: Keras multi_gpu_model's data parallelism on top of tower copies."""

from __future__ import annotations

import pytest

from gpuplace.errors import BadInput
from gpuplace.graph import loads
from gpuplace.graph.model import TensorRef

BODY = """
graph:
  - {name: x, op: placeholder, shape: [BATCH, 8]}
  - replicate: SETTINGS
    graph:
      - {name: w, op: variable, shape: [8, 4], initializer: ones}
      - {name: h, op: matmul, inputs: [x, w]}
      - {name: y, op: relu, inputs: [h]}
"""


def spec(settings: str = "{gpus: 4, split: [x]}", batch: int = 10) -> str:
    return BODY.replace("SETTINGS", settings).replace("BATCH", str(batch))


def test_copies_names_devices_and_keras_slices() -> None:
    graph = loads(spec())
    ops = graph.by_name()
    assert [op.name for op in graph.ops if op.name.startswith("replica_")][:3] == [
        "replica_0/x", "replica_0/h", "replica_0/y",
    ]  # fmt: skip
    rows = [ops[f"replica_{i}/x"].outputs[0].shape[0] for i in range(4)]
    assert rows == [2, 2, 2, 4]  # step = 10 // 4, the last replica takes the remainder
    assert [ops[f"replica_{i}/h"].device for i in range(4)] == [
        f"/device:GPU:{i}" for i in range(4)
    ]
    assert ops["replica_2/x"].colocate_with == "x"
    assert ops["replica_2/h"].inputs == (TensorRef("replica_2/x"), TensorRef("w"))
    merged = ops["y"]
    assert (merged.type, merged.device, merged.outputs[0].shape) == (
        "concat",
        "/device:CPU:0",
        (10, 4),
    )
    assert merged.inputs == tuple(TensorRef(f"replica_{i}/y") for i in range(4))
    assert graph.fetch == (TensorRef("y"),)
    assert sum(op.type == "variable" for op in graph.ops) == 1  # shared, as the template's weights


@pytest.mark.parametrize(("merge", "op"), [("add_n", "add_n"), ("mean", "average_n")])
def test_merge_kinds_and_device(merge: str, op: str) -> None:
    graph = loads(spec(f"{{gpus: [1, 3], split: [x], merge: {merge}, merge_device: /gpu:0}}", 6))
    y = graph.by_name()["y"]
    assert (y.type, y.device, y.outputs[0].shape) == (op, "/device:GPU:0", (3, 4))
    assert graph.by_name()["replica_3/h"].device == "/device:GPU:3"


@pytest.mark.parametrize(
    ("settings", "batch", "words"),
    [
        (
            "{gpus: 1, split: [x]}",
            10,
            "call `multi_gpu_model` with `gpus >= 2`. Received: `gpus=1`",
        ),
        ("{gpus: 4, split: [x]}", 3, "A batch of 3 is smaller than the 4 replicas"),
        ("{gpus: 2, split: [z]}", 10, "split names 'z', which no op before the block defines"),
        ("{gpus: 2, merge: max}", 10, "merge must be one of concat, add_n, mean"),
        ("{gpu: 2}", 10, "unknown setting 'gpu'; did you mean 'gpus'?"),
        ("{gpus: all, split: [x]}", 10, "gpus: all needs a machine"),
    ],
)
def test_errors_in_keras_terms(settings: str, batch: int, words: str) -> None:
    with pytest.raises(BadInput) as err:
        loads(spec(settings, batch), source="r.yaml")
    assert words in str(err.value)
