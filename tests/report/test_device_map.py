"""`gpuplace plan --format device-map` and `--format tf`: the documents users hand to Accelerate
and TensorFlow (golden), `-o` written atomically, and where they may not go."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuplace.echo import clip_middle
from tests.conftest import Run
from tests.conftest import write_spec as write

# PyTorch-style names, as an export has them: state_dict weights and exporter node scopes
SPEC = """\
graph:
  - {name: x, op: placeholder, shape: [64, 32]}
  - {name: model.layers.0.fc.weight, op: variable, shape: [32, 64], initializer: random_normal, seed: 1}
  - {name: model/layers.0/fc/MatMul, op: matmul, inputs: [x, model.layers.0.fc.weight]}
  - {name: model/layers.0/Relu, op: relu, inputs: [model/layers.0/fc/MatMul]}
  - {name: model.layers.1.fc.weight, op: variable, shape: [64, 64], initializer: random_normal, seed: 2}
  - {name: model/layers.1/fc/MatMul, op: matmul, inputs: [model/layers.0/Relu, model.layers.1.fc.weight]}
  - {name: model/layers.1/Relu, op: relu, inputs: [model/layers.1/fc/MatMul], device: /cpu:0}
  - {name: lm_head.weight, op: variable, shape: [64, 10], initializer: random_normal, seed: 3, device: /gpu:1}
  - {name: lm_head/MatMul, op: matmul, inputs: [model/layers.1/Relu, lm_head.weight], device: /gpu:1}
fetch: [lm_head/MatMul]
"""

DEVICE_MAP = """\
{
  "schema_version": 1,
  "kind": "device-map",
  "machine": "4xK520",
  "simulated": true,
  "strategy": "tensorflow",
  "source": "SPEC",
  "device_map": {
    "model": 0,
    "lm_head": 1
  },
  "modules": {
    "x": 0,
    "model.layers.0": 0,
    "model.layers.1.fc": 0,
    "model.layers.1.Relu": "cpu",
    "lm_head": 1
  },
  "ops": {
    "x": 0,
    "model.layers.0.fc.weight": 0,
    "model/layers.0/fc/MatMul": 0,
    "model/layers.0/Relu": 0,
    "model.layers.1.fc.weight": 0,
    "model/layers.1/fc/MatMul": 0,
    "model/layers.1/Relu": "cpu",
    "lm_head.weight": 1,
    "lm_head/MatMul": 1
  }
}
"""

TF_BLOCKS = """\
# Placement by gpuplace (strategy tensorflow) of SPEC on the simulated machine 4xK520 (simulated GPUs).
# One block per name scope whose ops all share a device: build that scope's ops inside it.
import tensorflow as tf

# name scope (or op outside any) -> device
DEVICES = {
    "x": "/device:GPU:0",
    "model.layers.0.fc.weight": "/device:GPU:0",
    "model/layers.0": "/device:GPU:0",
    "model/layers.1/fc": "/device:GPU:0",
    "model/layers.1/Relu": "/device:CPU:0",
    "model.layers.1.fc.weight": "/device:GPU:0",
    "lm_head.weight": "/device:GPU:1",
    "lm_head": "/device:GPU:1",
}

with tf.device("/device:GPU:0"):
    pass  # build op x here
    pass  # build op model.layers.0.fc.weight here
    with tf.name_scope("model/layers.0"):
        pass  # build name scope model/layers.0/ here (2 ops)
    with tf.name_scope("model/layers.1/fc"):
        pass  # build name scope model/layers.1/fc/ here (1 op)
with tf.device("/device:CPU:0"):
    pass  # build op model/layers.1/Relu here
with tf.device("/device:GPU:0"):
    pass  # build op model.layers.1.fc.weight here
with tf.device("/device:GPU:1"):
    pass  # build op lm_head.weight here
    with tf.name_scope("lm_head"):
        pass  # build name scope lm_head/ here (1 op)
"""


def test_the_device_map_groups_modules_in_accelerate_s_shape(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, SPEC)
    result = run("--machine", "4xK520", "plan", spec, "--format", "device-map")
    assert (result.code, result.err) == (0, "")
    assert result.out == DEVICE_MAP.replace("SPEC", spec)


def test_the_tf_blocks_are_python_keyed_by_name_scope(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, SPEC)
    result = run("--machine", "4xK520", "plan", spec, "--format", "tf")
    assert (result.code, result.err) == (0, "")
    assert result.out == TF_BLOCKS.replace("SPEC", spec)
    compile(result.out, "placement.py", "exec")  # valid Python


@pytest.mark.parametrize(("fmt", "name", "what"), [
    ("device-map", "map.json", "Device map"), ("tf", "placement.py", "Tf.device blocks"),
])  # fmt: skip
def test_o_writes_the_file_atomically_and_says_so(
    run: Run, tmp_path: Path, fmt: str, name: str, what: str
) -> None:
    spec = write(tmp_path, SPEC)
    printed = run("--machine", "4xK520", "plan", spec, "--format", fmt, "--strategy", "balanced")
    out = tmp_path / name
    out.symlink_to(tmp_path / "elsewhere")  # a link at the path is replaced, never written through
    result = run("--machine", "4xK520", "plan", spec, "--format", fmt, "-o", str(out),
                 "--strategy", "balanced")  # fmt: skip
    assert (result.code, result.err) == (0, "")
    size = len(printed.out.encode())
    shown = f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
    assert result.out == (
        f"{what} (strategy balanced, simulated GPUs) written to {clip_middle(str(out))} ({shown})\n"
    )
    assert not out.is_symlink() and out.read_text() == printed.out
    assert not (tmp_path / "elsewhere").exists()
    assert sorted(os.listdir(tmp_path)) == ["g.yaml", name]  # no temporary file left
    if fmt == "device-map":
        assert json.loads(out.read_text())["strategy"] == "balanced"


@pytest.mark.parametrize(("args", "error"), [
    (("--format", "device-map", "-o", "map.yaml"), "-o map.yaml: the device map is JSON; name a file ending in .json (e.g. -o device_map.json)"),
    (("--format", "tf", "-o", "g.yaml"), "-o g.yaml: the tf.device blocks are Python; name a file ending in .py (e.g. -o placement.py)"),
    (("--format", "tf", "-o", "d.py"), "-o d.py: is a folder; name a file ending in .py (e.g. -o placement.py) in it"),
    (("--format", "device-map", "-o", "no/such/m.json"), "-o no/such/m.json: the folder no/such does not exist; create it first, or write the file somewhere that exists"),
    (("--format", "dot", "-o", "m.json"), "-o m.json: only --format html, device-map or tf write a file (the other formats print); add one of them, or drop -o"),
])  # fmt: skip
def test_where_the_file_may_not_go_is_refused_before_anything_runs(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.py").mkdir()
    spec = write(tmp_path, SPEC)
    before = sorted(os.listdir(tmp_path))
    result = run("--machine", "4xK520", "plan", spec, *args)
    assert (result.code, result.out, result.err) == (2, "", f"error: {error}\n")
    assert sorted(os.listdir(tmp_path)) == before


def test_a_hostile_op_name_stays_inside_its_string_and_its_comment(
    run: Run, tmp_path: Path
) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    evil = '/evil\nimport os; os.system("x")\n#/Relu'
    node = helper.make_node("Relu", ["x"], ["y"], name=evil)
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    graph = helper.make_graph([node], "g", io[:1], io[1:])
    path = tmp_path / "evil.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    result = run("--machine", "2xK520", "plan", str(path), "--format", "tf",
                 "--strategy", "round-robin")  # fmt: skip
    assert result.code == 0, result.err
    compile(result.out, "placement.py", "exec")
    assert not any(line.startswith("import os") for line in result.out.splitlines())
    assert '    with tf.name_scope("evil\\nimport os; os.system(\\"x\\")\\n#"):' in result.out
