"""Each ONNX shape, index and logic op against onnxruntime (an independent implementation): the
node is built with onnx.helper (opset 18), the attrs gpuplace folds become the tensor inputs
ONNX passes them as, and `fold.evaluate` (the op's numpy compute) must give the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from gpuplace.graph.fold import evaluate

from .onnx_cases import CASES, HOST_CASES, slices

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper = onnx.helper

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
    if op in ("ConstantOfShape",) and "value" in node_attrs:
        node_attrs["value"] = onnx.numpy_helper.from_array(np.asarray(node_attrs["value"]))
    if op == "Constant":
        node_attrs["value"] = onnx.numpy_helper.from_array(np.asarray(node_attrs["value"]))
    names = [f"x{i}" for i in range(len(data))]
    inits = []
    given = [k for k in folded if k in attrs]
    for k in folded[: folded.index(given[-1]) + 1] if given else ():
        if k in attrs:
            inits.append(onnx.numpy_helper.from_array(_tensor_input(op, k, attrs[k], data), k))
            names.append(k)
        else:
            names.append("")
    outs = [f"y{i}" for i in range(len(got))]
    node = helper.make_node(op, names, outs, **node_attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for i, x in enumerate(data)],
        [helper.make_tensor_value_info(y, helper.np_dtype_to_tensor_dtype(g.dtype), None)
         for y, g in zip(outs, got, strict=True)],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, {f"x{i}": np.asarray(x) for i, x in enumerate(data)}))


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
