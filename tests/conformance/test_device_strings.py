"""Device strings as TensorFlow 2.21 reads them, replayed from real TensorFlow.

`tests/conformance/data/device_strings.json` was written by `tools/tf_capture/devices.py` with
the TensorFlow 2.21 CPU build (graph mode, one CPU, soft placement off). For each string S it
holds what TF did with

    a = tf.constant(1.0, name="a")
    with g.device(S):
        b = tf.negative(a, name="b")

Python's `DeviceSpec` either refused S (`python_error`) or gave b its requested device
(`requested`, the canonical string); the session then placed b (`device`) or failed
(`run_error`). gpuplace runs the same graph (`constant` a, `neg` b with `device: S`) on a
simulated machine with no GPU visible, TF's CPU-only process: every string must be refused
with TF's words (then gpuplace's hint), or get the same requested device and then the same
device or the same error. TensorFlow itself is not needed here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuplace.devices.names import parse_device
from gpuplace.errors import BadInput
from gpuplace.graph import Graph, loads
from gpuplace.placement import PlacementError, place
from tests.conftest import Run, write_spec

DATA = Path(__file__).parent / "data" / "device_strings.json"
SHORT = 60  # gpuplace quotes values up to this long whole (gpuplace.echo.VALUE_CHARS)
# The CPU build adds this to its "no such device" error for GPU requests; gpuplace models a
# CUDA build, which does not.
NO_CUDA = " The requested device appears to be a GPU, but CUDA is not enabled."


@cache
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def cases(kind: str) -> list[Any]:
    return [
        pytest.param(case, id=ascii(case["spec"][:40]))
        for case in document()["cases"]
        if kind in case
    ]


def spec_text(device: str) -> str:
    ops = [
        {"name": "a", "op": "constant", "value": 1.0},
        {"name": "b", "op": "neg", "inputs": ["a"], "device": device},
    ]
    return json.dumps({"graph": ops})


def graph(device: str) -> Graph:
    return loads(spec_text(device), "s.json")


def test_captured_from_tensorflow_2_21() -> None:
    assert document()["tensorflow"] == "2.21.0"
    assert len(document()["cases"]) > 150


@pytest.mark.parametrize("case", cases("python_error"))
def test_refused_with_tensorflows_words(case: dict[str, Any]) -> None:
    kind, message = case["python_error"]
    assert kind == "ValueError"
    with pytest.raises(BadInput) as err:
        graph(case["spec"])
    text = str(err.value)
    assert err.value.exit_code == 2
    assert text.startswith("s.json:1: op 'b': ")
    if len(case["spec"]) <= SHORT:  # the whole message, then gpuplace's hint
        shown = message.replace("\n", "\\n")
        assert f"op 'b': {shown} gpuplace: " in text
    else:  # a long value is clipped: TF's words up to it, and one short line
        assert message[:40] in text
        assert len(text) < 400


@pytest.mark.parametrize("case", cases("requested"))
def test_requested_device_is_tensorflows_canonical_string(case: dict[str, Any]) -> None:
    assert parse_device(case["spec"]).to_string() == case["requested"]
    b = graph(case["spec"]).ops[1]
    assert b.device == case["requested"]


@pytest.mark.parametrize("case", cases("device"))
def test_accepted_strings_place_where_tensorflow_placed(case: dict[str, Any]) -> None:
    placed = place(graph(case["spec"]), 0)
    assert placed.decisions["b"].device == case["device"]
    assert placed.decisions["a"].device == case["device"]  # the constant follows it


@pytest.mark.parametrize("case", cases("run_error"))
def test_placement_errors_are_tensorflows(case: dict[str, Any]) -> None:
    with pytest.raises(PlacementError) as err:
        place(graph(case["spec"]), 0)
    expected = case["run_error"].removesuffix(NO_CUDA)
    if len(case["spec"]) <= SHORT:
        assert err.value.tf_message == expected
    else:
        assert err.value.tf_message[:60] == expected[:60]
        assert len(str(err.value)) < 2000


GPU_STRINGS = ["/gpu: 1", "/gpu:+1", "/gpu:0_1", "/gpu:\u0661", "/gpu:\uff11", "/device:gpu:1"]


@pytest.mark.parametrize("spec", GPU_STRINGS)
def test_gpu_strings_tf_reads_as_gpu_1_place_on_gpu_1(spec: str) -> None:
    """Derived: TF's requested device for these is /device:GPU:1 (captured above), which a
    2-GPU machine has."""
    assert place(graph(spec), 2).decisions["b"].device.endswith("/device:GPU:1")


@pytest.mark.parametrize(
    ("device", "words"),
    [
        ("/foo:0", "Unknown attribute 'foo' is encountered while parsing the device spec"),
        ("/cpu:0/gpu:0", "Multiple device types are not allowed while parsing the device spec"),
        ("/gpu:x", "invalid literal for int() with base 10: 'x'"),
        ("/device:GPU:-1", "Malformed device specification '/device:GPU:-1' in node: "),
        ("/job:a-b/gpu:0", "Malformed device specification '/job:a-b/device:GPU:0' in node: "),
    ],
)
def test_cli_refuses_with_exit_2(run: Run, tmp_path: Path, device: str, words: str) -> None:
    path = write_spec(tmp_path, spec_text(device), "g.json")
    result = run("--machine", "2xK520", "run", path)
    assert result.code == 2
    assert words in result.err
    assert " gpuplace: " in result.err
    assert "Traceback" not in result.err
    assert result.err.count("\n") == 1


@pytest.mark.parametrize("case", [pytest.param(c, id=c["op"]) for c in document()["malformed_ops"]])
def test_malformed_names_the_node_as_tensorflow_does(case: dict[str, Any]) -> None:
    """`b` (requesting /device:GPU:-1) built by other ops; gpuplace's NodeDef summary holds the
    dtype attr and the device, which is all of it for these ops (a Const's value aside)."""
    kind = case["op"]
    ops: list[dict[str, Any]] = [{"name": "a", "op": "constant", "value": [1.0, 2.0]}]
    made = {"identity": ["a"], "add": ["a", "a"]}
    b: dict[str, Any] = {"name": "b", "op": kind, "device": "/device:GPU:-1"}
    b.update({"inputs": made[kind]} if kind in made else {"value": [1.0, 2.0]})
    with pytest.raises(PlacementError) as err:
        place(loads(json.dumps({"graph": [*ops, b]}), "s.json"), 2)
    expected = case["run_error"]
    if kind == "constant":  # TF also shows the value: value=Tensor<type: float shape: [2] ...>
        expected = expected.replace(", value=Tensor<type: float shape: [2] values: 1 2>", "")
    assert err.value.tf_message == expected
    assert err.value.exit_code == 2
