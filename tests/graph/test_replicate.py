"""`replicate:` blocks: Keras multi_gpu_model's data parallelism on top of tower copies."""

from __future__ import annotations

import pytest

from gpuplace.cli.words import CLI
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
        ("{gpus: 4, split: [x]}", 3, "r.yaml:4: replicate: split 'x' has a batch of 3 (shape [3,8]), smaller than the 4 replicas (gpus: 4)"),
        ("{gpus: 2, split: [z]}", 10, "split names 'z', which no op before the block defines"),
        ("{gpus: 2, merge: max}", 10, "merge must be one of concat, add_n, mean"),
        ("{gpu: 2}", 10, "unknown setting 'gpu'; did you mean 'gpus'?"),
        ("{gpus: all, split: [x]}", 10, "gpus: all needs a machine"),
    ],
)  # fmt: skip
def test_errors_in_keras_terms(settings: str, batch: int, words: str) -> None:
    with pytest.raises(BadInput) as err:
        loads(spec(settings, batch), source="r.yaml")
    assert words in str(err.value)


def test_gpus_all_without_a_machine_names_the_library_way() -> None:
    with pytest.raises(BadInput) as err:
        loads(spec("{gpus: all, split: [x]}"), source="r.yaml")
    assert str(err.value) == (
        "r.yaml:4: replicate: gpus: all needs a machine to count its GPUs; run it with gpuplace "
        "run or plan, or pass gpus= to load() or loads() (a function from the spec's Config to "
        "the number of GPUs, e.g. gpus=lambda config: 4), or give a count (gpus: 4)"
    )
    graph = loads(spec("{gpus: all, split: [x]}"), gpus=lambda config: 4)  # as it says
    assert graph.by_name()["y"].inputs[-1].op == "replica_3/y"


def test_gpus_all_on_a_machine_with_one_gpu_is_this_machine_failing() -> None:
    """The spec runs where there are 2 GPUs or more: exit 1 (as --replicate all), not 2."""
    with pytest.raises(BadInput) as err:
        loads(spec("{gpus: all, split: [x]}"), source="r.yaml", gpus=lambda config: 1)
    assert err.value.exit_code == 1
    assert str(err.value) == (
        "r.yaml:4: For multi-gpu usage to be effective, call `multi_gpu_model` with `gpus >= 2`. "
        "Received: `gpus=1` (replicate: gpus: all; this machine only has: ['/cpu:0', '/gpu:0'])"
    )


MERGED = """
graph:
  - {name: x, op: placeholder, shape: [BATCH, 3]}
  - replicate: SETTINGS
    graph:
      - {name: h, op: relu, inputs: [x]}
      - BODY
"""


def body_error(body: str, settings: str = "{gpus: 2, split: [x]}", batch: int = 4) -> str:
    text = MERGED.replace("SETTINGS", settings).replace("BATCH", str(batch))
    with pytest.raises(BadInput) as err:
        loads(text.replace("BODY", body), source="r.yaml")
    assert err.value.exit_code == 2
    return str(err.value)


@pytest.mark.parametrize(
    ("body", "settings", "batch", "expected"),
    [
        ("{name: y, op: reduce_sum, inputs: [h]}", "{gpus: 2, split: [x]}", 4,
         "r.yaml:4: replicate: merge concat (along axis 0) cannot concatenate the scalar output 'y' of the replicas (shape [] in each); use merge: mean or merge: add_n for a scalar (a loss), or keep a batch dimension in 'y' (e.g. keepdims: true)"),
        ("{name: y, op: relu, inputs: [h]}", "{gpus: 2, split: [x], merge: add_n}", 5,
         "r.yaml:4: replicate: merge add_n cannot combine output 'y' of the replicas: their shapes differ ([2,3], [3,3]; the last replica takes the rest of a batch that does not divide evenly); use merge: concat for a per-sample output, reduce 'y' to one shape in each replica (e.g. reduce_mean), or give a batch the replicas divide evenly"),
        ("{name: y, op: transpose, inputs: [h]}", "{gpus: 2, split: [x]}", 5,
         "r.yaml:4: replicate: merge concat (along axis 0) cannot concatenate output 'y' of the replicas: their shapes ([3,2], [3,3]) differ beyond axis 0; keep the batch on axis 0 of 'y'"),
        ("{name: s, op: save, inputs: [h], path: h.npy}", "{gpus: 2, split: [x]}", 4,
         "r.yaml:4: replicate: op 's' (save) in the body has no output to merge, and each replica would write its own share of the batch to 'h.npy'; move the save below the block, where it saves the merged 'h'"),
        ("{name: y, op: relu, inputs: [h]}", "{gpus: 2, split: [x]}", 1,
         "r.yaml:4: replicate: split 'x' has a batch of 1 (shape [1,3]), smaller than the 2 replicas (gpus: 2); give 'x' a batch of at least 2 along axis 0, or replicate over fewer GPUs"),
    ],
)  # fmt: skip
def test_block_errors_in_the_block_terms_with_its_line(
    body: str, settings: str, batch: int, expected: str
) -> None:
    assert body_error(body, settings, batch) == expected


def test_scalar_split_names_the_input() -> None:
    text = MERGED.replace("[BATCH, 3]", "[]").replace("SETTINGS", "{gpus: 2, split: [x]}")
    with pytest.raises(BadInput) as err:
        loads(text.replace("BODY", "{name: y, op: neg, inputs: [h]}"), source="r.yaml")
    assert str(err.value) == (
        "r.yaml:4: replicate: split 'x' is a scalar (shape []), which cannot be cut into replicas "
        "along axis 0; split only inputs with a batch dimension (drop 'x' from split)"
    )


def test_replicate_flag_errors_cite_the_ops_and_the_flag() -> None:
    text = "graph:\n  - {name: x, op: placeholder, shape: [1, 3]}\n  - {name: y, op: relu, inputs: [x]}\n"
    with pytest.raises(BadInput) as err:
        loads(text, source="r.yaml", replicate=2)
    assert err.value.render(CLI) == (
        "r.yaml:2: --replicate 2: split 'x' has a batch of 1 (shape [1,3]), smaller than the 2 "
        "replicas; give 'x' a batch of at least 2 along axis 0, or replicate over fewer GPUs"
    )
    scalar = text.replace("[1, 3]", "[4, 3]").replace("op: relu", "op: reduce_sum")
    with pytest.raises(BadInput) as err:
        loads(scalar, source="r.yaml", replicate=2)
    assert err.value.render(CLI) == (
        "r.yaml:3: --replicate 2: merge concat (along axis 0) cannot concatenate the scalar "
        "output 'y' of the replicas (shape [] in each); write a replicate: block with merge: mean "
        "or merge: add_n instead of the flag, or keep a batch dimension in 'y' (e.g. keepdims: "
        "true)"
    )


def test_block_errors_in_json_get_the_block_line() -> None:
    text = (
        '{"graph": [\n {"name": "x", "op": "placeholder", "shape": [1, 3]},\n'
        ' {"replicate": {"gpus": 2, "split": ["x"]},\n'
        '  "graph": [{"name": "y", "op": "relu", "inputs": ["x"]}]}]}'
    )
    with pytest.raises(BadInput) as err:
        loads(text, source="r.json")
    assert str(err.value).startswith("r.json:3: replicate: split 'x' has a batch of 1")
