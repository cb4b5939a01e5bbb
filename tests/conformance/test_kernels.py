"""Kernels by dtype against TensorFlow 2.21 (issue 13, item 1), replayed from captured goldens.

`tests/conformance/data/kernels.json` is written by `tools/tf_capture/placement.py` (TensorFlow
is not a test dependency: only the JSON is read here). Every case is one small spec (constant
inputs, then the op under test `t`, for every op type and dtype gpuplace has) under one request
for `t`: none, `/cpu:0`, `/gpu:0` with soft placement, `/gpu:0` without.

- "cpu" cases ran on TensorFlow 2.21's CPU build (graph mode, a Session with the partition
  graphs returned). gpuplace, on a machine without a GPU, must put every op the spec names
  where TensorFlow did, fetch the same values, or fail with TensorFlow's message. Two
  documented differences: the CPU build adds "The requested device appears to be a GPU, but
  CUDA is not enabled." (gpuplace models the CUDA build, which does not), and for an integer
  `div` TensorFlow's first failing node is the `t/Cast` it builds before `t` (gpuplace's `div`
  is one op, `t`).
- "cuda" cases cannot run here: no GPU TensorFlow run is possible on this machine. Their
  expectation for `t` on a machine with one GPU is derived from the CUDA build's own kernel
  lookup (`FindKernelDef` on `t`'s real NodeDef, with the device set to GPU and to CPU) and
  the placer's rule for a lone op (GPU:0 when the GPU has a kernel; else CPU:0 with soft
  placement or no request; else TensorFlow's "no supported kernel" error).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuplace
from gpuplace.graph import Graph, get_op, loads
from gpuplace.placement import PlacementError, place

DATA = json.loads((Path(__file__).parent / "data" / "kernels.json").read_text())
CASES = DATA["cases"]
CPU_BUILD_ONLY = " The requested device appears to be a GPU, but CUDA is not enabled."


def case_id(case: dict[str, Any]) -> str:
    request = case["device"] or "unplaced"
    soft = "-soft" if case["soft"] else ""
    return f"{case['build']}-{case['kind']}-{case['dtype']}-{request}{soft}"


def spec_text(case: dict[str, Any]) -> str:
    entries = [dict(e) for e in DATA["specs"][case["spec"]]]
    if case["device"]:
        next(e for e in entries if e["name"] == "t")["device"] = case["device"]
    outputs = len(case["result"].get("values", [None]))
    fetch = ["t"] if outputs == 1 else [f"t:{i}" for i in range(outputs)]
    return json.dumps({"graph": entries, "fetch": fetch})


def graph_of(case: dict[str, Any]) -> Graph:
    return loads(spec_text(case), "case.yaml")


def short(device: str) -> str:
    return device.rsplit("device:", 1)[-1]


def test_the_goldens_cover_every_case_class() -> None:
    assert DATA["tf_version"] == "2.21.0"
    builds = {c["build"] for c in CASES}
    assert builds == {"cpu", "cuda"}
    kinds = {c["kind"] for c in CASES}
    assert len(kinds) >= 30  # every op type, Split and SplitV, Const and Fill, casts by source
    assert sum("error" in c["result"] for c in CASES) >= 150
    # the cases, as the CUDA build's registry answers them
    to_cpu = {
        (c["kind"], c["dtype"]) for c in CASES
        if c["build"] == "cuda" and not c["device"] and c["result"] == {"device": "CPU:0"}
    }  # fmt: skip
    assert to_cpu == {
        ("relu", "int32"), ("reduce_mean", "int32"), ("reduce_mean", "int64"),
        ("split", "int32"), ("split", "int64"), ("split", "bool"), ("split_v", "int64"),
        ("split_v", "bool"), ("variable", "int32"), ("matmul", "int32"), ("matmul", "int64"),
    }  # fmt: skip


def placed(case: dict[str, Any], gpus: int) -> dict[str, str] | str:
    """Where gpuplace puts each op of the case on a machine with `gpus` GPUs (short names), or
    the TensorFlow message of its placement error."""
    try:
        placement = place(graph_of(case), gpus, allow_soft_placement=case["soft"])
    except PlacementError as err:
        return err.tf_message
    return {name: short(d.device) for name, d in placement.decisions.items()}


@pytest.mark.parametrize("case", [c for c in CASES if c["build"] == "cpu"], ids=case_id)
def test_cpu_build_cases_place_and_fail_as_tensorflow_did(case: dict[str, Any]) -> None:
    result, mine = case["result"], placed(case, 0)
    if "error" in result:
        expected = result["error"].replace(CPU_BUILD_ONLY, "")
        if case["kind"] == "div":  # TF's first failing node is the cast it builds for t
            expected = expected.replace("t/Cast", "t")
        assert mine == expected
        return
    assert isinstance(mine, dict), mine
    assert {name: mine[name] for name in result["devices"]} == {
        name: short(device) for name, device in result["devices"].items()
    }


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["build"] == "cpu" and not c["device"] and "values" in c["result"]],
    ids=case_id,
)
def test_cpu_build_values_match_tensorflow(case: dict[str, Any], tmp_path: Path) -> None:
    """The executor runs every op and dtype TF has a kernel for (int64 MatMul on the CPU, ...)
    and fetches what TF fetched: exactly for integers and bools, within float16's precision."""
    path = tmp_path / "case.yaml"
    path.write_text(spec_text(case))
    seen = gpuplace.view(gpuplace.discover("1xK520"), {"CUDA_VISIBLE_DEVICES": ""})
    prepared = gpuplace.prepare(path, seen, gpuplace.Options(), {})
    values = gpuplace.execute_prepared(prepared, seen).result.values
    got = [values[k] for k in sorted(values)]
    for mine, theirs in zip(got, case["result"]["values"], strict=True):
        if isinstance(theirs, dict):  # a large value: its shape and sum
            assert list(mine.shape) == theirs["shape"]
            assert float(mine.astype("float64").sum()) == pytest.approx(theirs["sum"])
            continue
        expected = np.asarray(theirs, dtype=mine.dtype)
        assert mine.shape == expected.shape
        if mine.dtype.kind in "fc":
            np.testing.assert_allclose(mine, expected, rtol=1e-3, atol=1e-3)
        else:
            np.testing.assert_array_equal(mine, expected)


@pytest.mark.parametrize("case", [c for c in CASES if c["build"] == "cuda"], ids=case_id)
def test_cuda_build_cases_on_a_simulated_gpu(case: dict[str, Any]) -> None:
    result, mine = case["result"], placed(case, 1)
    if "error" in result:
        assert mine == result["error"]
    else:
        assert isinstance(mine, dict), mine
        assert mine["t"] == result["device"]
    t = graph_of(case).by_name()["t"]
    assert get_op(t.type).tf_type_for(t.attrs) == case["tf_type"]  # the node TF built
