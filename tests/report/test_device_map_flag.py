"""`--device-map FILE`: a device map read back and judged by gpuplace (Accelerate's map, or the
document `plan --format device-map` wrote), and the files it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.conftest import write_spec as write

SPEC = """\
graph:
  - {name: x, op: placeholder, shape: [64, 32]}
  - {name: enc.fc.weight, op: variable, shape: [32, 64], initializer: random_normal, seed: 1}
  - {name: enc/fc/MatMul, op: matmul, inputs: [x, enc.fc.weight]}
  - {name: enc/Relu, op: relu, inputs: [enc/fc/MatMul]}
  - {name: head.weight, op: variable, shape: [64, 10], initializer: random_normal, seed: 2}
  - {name: head/MatMul, op: matmul, inputs: [enc/Relu, head.weight]}
fetch: [head/MatMul]
"""
K520 = ("--machine", "4xK520")


def placed(run: Run, *args: str) -> dict[str, str]:
    result = run(*K520, "plan", *args, "--json")
    assert result.code == 0, result.err
    return {p["op"]: p["device"] for p in json.loads(result.out)["placement"]}


def test_a_plan_read_back_places_every_op_where_it_was(run: Run, tmp_path: Path) -> None:
    spec = write(tmp_path, SPEC)
    mapped = tmp_path / "map.json"
    pinned = ("--strategy", "round-robin")
    result = run(*K520, "plan", spec, *pinned, "--format", "device-map", "-o", str(mapped))
    assert result.code == 0, result.err
    assert placed(run, spec, "--device-map", str(mapped)) == placed(run, spec, *pinned)


@pytest.mark.parametrize("value", [2, "cuda:2"])  # Accelerate's ints, torch's device strings
def test_an_accelerate_map_pins_its_modules(run: Run, tmp_path: Path, value: object) -> None:
    spec = write(tmp_path, SPEC)
    mapped = tmp_path / "acc.json"
    mapped.write_text(json.dumps({"enc": value, "head": "cpu"}))
    devices = placed(run, spec, "--device-map", str(mapped))
    assert devices["enc/fc/MatMul"].endswith("GPU:2")
    assert devices["enc.fc.weight"].endswith("GPU:2")
    assert devices["head/MatMul"].endswith("CPU:0")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"enc": "disk"}',
         "error: --device-map enc: 'disk' is not a device of this machine; expected a GPU index "
         "0..3 or 'cpu'\n"),
        ("[1]",
         "error: MAP: expected a JSON object of module paths mapped to GPU indices or \"cpu\" (e.g. "
         '{"model.layers.0": 0, "lm_head": "cpu"}), or the document plan --format device-map '
         "writes; got [1]\n"),
        ("{", "error: MAP:1:2: JSON syntax error: Expecting property name enclosed in double "
         "quotes\n"),
    ],
)  # fmt: skip
def test_a_bad_map_is_one_line(run: Run, tmp_path: Path, text: str, error: str) -> None:
    mapped = tmp_path / "bad.json"
    mapped.write_text(text)
    result = run(*K520, "plan", write(tmp_path, SPEC), "--device-map", str(mapped))
    assert (result.code, result.out, result.err) == (2, "", error.replace("MAP", str(mapped)))


def test_a_device_is_not_read(run: Run, tmp_path: Path) -> None:
    result = run(*K520, "plan", write(tmp_path, SPEC), "--device-map", "/dev/zero")
    assert (result.code, result.err) == (
        2, "error: cannot read device map '/dev/zero': it is a device, not a file\n"
    )  # fmt: skip
