"""The example ONNX models (gpuplace/examples/onnx/, made by tools/make_onnx_examples.py): small,
genuine PyTorch export names, and the promises they are shipped for: `branches.onnx` runs out of
memory on GPU:0 of 4xK520 under TensorFlow's placement and fits under balanced, and its device
map spreads the branches' modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run

onnx = pytest.importorskip("onnx")

EXAMPLES = Path(__file__).resolve().parents[1] / "gpuplace" / "examples" / "onnx"
NAMES = ["branches", "cnn", "gpt2_tiny", "mlp"]
BIG = ("--dim", "batch=262144")


def test_each_example_is_small_and_named_as_pytorch_names_it() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.onnx")) == NAMES
    for name in NAMES:
        path = EXAMPLES / f"{name}.onnx"
        assert path.stat().st_size < 1_000_000
        model = onnx.load(str(path))
        assert model.opset_import[0].version == 20
        assert all(
            n.name.startswith("/")
            for n in model.graph.node
            if n.op_type not in ("Constant", "Identity")
        )
    mlp = onnx.load(str(EXAMPLES / "mlp.onnx")).graph
    assert [t.name for t in mlp.initializer][:2] == [
        "model.layers.0.fc.weight",
        "model.layers.0.fc.bias",
    ]
    assert mlp.node[0].name == "/model/layers.0/fc/Gemm"
    gpt2 = {n.op_type for n in onnx.load(str(EXAMPLES / "gpt2_tiny.onnx")).graph.node}
    assert {"Range", "CumSum", "LessOrEqual", "Equal", "Not", "And", "Where"} <= gpt2  # the mask
    assert {"LayerNormalization", "Softmax", "Gelu", "Gather", "Split"} <= gpt2


def test_branches_run_out_of_memory_on_gpu_0_under_tensorflow_and_fit_under_balanced(
    run: Run,
) -> None:
    path = str(EXAMPLES / "branches.onnx")
    tf = run("--machine", "4xK520", "plan", path, *BIG, "--json")
    assert tf.code == 1
    devices = json.loads(tf.out)["devices"]
    assert [d["fits"] for d in devices[:4]] == [False, True, True, True]
    assert "OOM when allocating" in tf.err and "device:GPU:0" in tf.err
    balanced = run("--machine", "4xK520", "plan", path, *BIG, "--strategy", "balanced", "--json")
    assert balanced.code == 0, balanced.err
    devices = json.loads(balanced.out)["devices"]
    assert all(d["fits"] for d in devices[:4]) and all(d["ops"] > 0 for d in devices[:4])


def test_the_device_map_of_balanced_puts_each_branch_s_modules_on_one_gpu(run: Run) -> None:
    path = str(EXAMPLES / "branches.onnx")
    result = run("--machine", "4xK520", "plan", path, *BIG, "--strategy", "balanced",
                 "--format", "device-map")  # fmt: skip
    assert result.code == 0, result.err
    device_map = json.loads(result.out)["device_map"]
    assert sorted(device_map) == sorted(
        [f"up.{i}" for i in range(8)] + [f"down.{i}" for i in range(8)]
    )
    assert {device_map[f"up.{i}"] for i in range(8)} == {0, 1, 2, 3}
    for i in range(8):  # a branch's two layers share a GPU: no copy of its activations
        assert device_map[f"up.{i}"] == device_map[f"down.{i}"]


@pytest.mark.parametrize(
    ("name", "shape"), [("mlp", (4, 32)), ("cnn", (2, 3, 32, 32)), ("branches", (4, 16))]
)
def test_the_example_runs_spread_and_agrees_with_onnxruntime(
    run: Run, tmp_path: Path, name: str, shape: tuple[int, ...]
) -> None:
    pytest.importorskip("onnxruntime")
    import numpy as np

    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal(shape, dtype=np.float32))
    result = run("--machine", "4xK520", "run", str(EXAMPLES / f"{name}.onnx"), "--dim",
                 f"batch={shape[0]}", "--feed", f"x={x}", "--verify", "--strategy", "balanced")  # fmt: skip
    assert result.code == 0, result.err
    verified = [line for line in result.out.splitlines() if line.startswith("verify logits:")]
    assert len(verified) == 2 and all(line.endswith(": ok") for line in verified)
    assert "vs onnxruntime" in verified[1]
