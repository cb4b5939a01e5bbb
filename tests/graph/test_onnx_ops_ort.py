"""Each ONNX shape, index and logic op against onnxruntime (an independent implementation): the
node is built with onnx.helper (opset 18), the attrs gpuplace folds become the tensor inputs
ONNX passes them as, and `fold.evaluate` (the op's numpy compute) must give the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph.fold import evaluate
from tests.onnx_ops.helpers import onnxruntime_run

from .onnx_cases import CASES, HOST_CASES, slices

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

OPSET = 18
# attrs that ONNX passes as tensor inputs after the data inputs, in ONNX's input order
TENSOR_INPUTS = {
    "Reshape": ("shape",), "Slice": ("starts", "ends", "axes", "steps"), "Squeeze": ("axes",),
    "Unsqueeze": ("axes",), "Expand": ("shape",), "Split": ("split",), "Tile": ("repeats",),
    "CumSum": ("axis",), "Pad": ("pads", "constant_value", "axes"), "Clip": ("min", "max"),
    "TopK": ("K",), "Range": ("start", "limit", "delta"), "ConstantOfShape": ("input",),
}  # fmt: skip


def _tensor_input(op: str, name: str, value: Any, data: list[np.ndarray]) -> np.ndarray:
    """An attr as the tensor ONNX passes: int64 lists, 0-d bounds in the data's dtype."""
    if op in ("Range",):
        return np.asarray(value)
    if name in ("constant_value", "min", "max"):
        return np.asarray(value, dtype=data[0].dtype)
    if name in ("axis",):
        return np.asarray(value, dtype=np.int64)
    if name == "K":
        return np.asarray([value], dtype=np.int64)
    return np.asarray(value, dtype=np.int64)


def run_ort(op: str, data: list[np.ndarray], attrs: dict[str, Any], got: list[Any]) -> list[Any]:
    """The op run by onnxruntime: gpuplace's folded attrs become initializers."""
    folded = TENSOR_INPUTS.get(op, ())
    node_attrs = {k: v for k, v in attrs.items() if k not in folded}
    if op in ("Constant", "ConstantOfShape") and "value" in node_attrs:
        node_attrs["value"] = onnx.numpy_helper.from_array(np.asarray(node_attrs["value"]))
    given = [k for k in folded if k in attrs]
    constants = [
        _tensor_input(op, k, attrs[k], data) if k in attrs else None
        for k in (folded[: folded.index(given[-1]) + 1] if given else ())
    ]
    return onnxruntime_run(op, data, node_attrs, constants, opset=OPSET, outputs=len(got))


def _check(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "data", "attrs"), CASES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_op_matches_onnxruntime(op: str, data: list[np.ndarray], attrs: dict[str, Any]) -> None:
    got = evaluate(op, data, attrs)
    _check(got, run_ort(op, [np.asarray(x) for x in data], attrs, got))


@pytest.mark.parametrize(
    ("op", "attrs", "extra"), HOST_CASES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_host_op_matches_onnxruntime(op: str, attrs: dict[str, Any], extra: dict[str, Any]) -> None:
    got = evaluate(op, [], attrs)
    if op == "Range":  # ONNX's inputs are 0-d tensors
        _check(got, run_ort(op, [], attrs, got))
    else:
        _check(got, run_ort(op, [], {**attrs, **extra}, got))


@settings(max_examples=40, deadline=None)
@given(slices())
def test_slice_clamping_matches_onnxruntime(case: tuple[np.ndarray, dict[str, list[int]]]) -> None:
    x, attrs = case
    got = evaluate("Slice", [x], attrs)
    _check(got, run_ort("Slice", [x], attrs, got))


@st.composite
def pads(draw: st.DrawFn) -> tuple[np.ndarray, dict[str, Any]]:
    """An input and Pad attrs that keep every axis whole: crops at most what the axis has."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    mode = draw(st.sampled_from(["constant", "edge", "reflect"]))
    before, after = [], []
    for d in shape:
        low = -(d - 1) if mode != "constant" else -d
        b = draw(st.integers(max(low, -3), 3))
        e = draw(st.integers(max(low - min(b, 0), -3), 3))
        if mode == "reflect":  # pads below what is kept
            kept = d + min(b, 0) + min(e, 0)
            b, e = min(b, kept - 1), min(e, kept - 1)
        before.append(b)
        after.append(e)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return x, {"pads": before + after, "mode": mode, "constant_value": 1.5}


@settings(max_examples=30, deadline=None)
@given(pads())
def test_pad_matches_onnxruntime(case: tuple[np.ndarray, dict[str, Any]]) -> None:
    x, attrs = case
    got = evaluate("Pad", [x], attrs)
    _check(got, run_ort("Pad", [x], attrs, got))
