"""Each ONNX shape, index and logic op against onnxruntime (an independent implementation): the
node is built with onnx.helper (opset 18), the attrs gpuplace folds become the tensor inputs
ONNX passes them as, and `fold.evaluate` (the op's numpy compute) must give the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuplace.graph.fold import evaluate

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
ints = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
floats = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
with_nan = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.5]], np.float32)
mask = np.array([[True, False, True], [False, False, True]])
other = np.array([True, True, False])
vocab = np.arange(20, dtype=np.float32).reshape(5, 4)

CASES: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("Shape", [floats], {}),
    ("Shape", [floats], {"start": -2}),
    ("Shape", [floats], {"start": 1, "end": -1}),
    ("Shape", [np.float32(2.0)], {}),
    ("Reshape", [floats], {"shape": [0, -1]}),
    ("Reshape", [ints], {"shape": [4, 0, 2]}),
    ("Reshape", [floats], {"shape": [24]}),
    ("Reshape", [np.zeros((0, 3), np.float32)], {"shape": [3, 0], "allowzero": 1}),
    ("Transpose", [floats], {}),
    ("Transpose", [ints], {"perm": [1, 0, 2]}),
    ("Concat", [floats, floats[:, :1]], {"axis": 1}),
    ("Concat", [ints, ints, ints], {"axis": -1}),
    ("Split", [floats], {"axis": 2, "split": [1, 3]}),
    ("Split", [ints], {"axis": 1, "num_outputs": 2}),
    ("Split", [floats], {"axis": -1, "num_outputs": 3}),
    ("Slice", [floats], {"starts": [1], "ends": [100], "axes": [2]}),
    ("Slice", [ints], {"starts": [-1, 0], "ends": [-100, 3], "axes": [2, 1], "steps": [-1, 2]}),
    ("Slice", [ints], {"starts": [5, -7], "ends": [-9, 9], "steps": [-2, 1]}),
    ("Slice", [floats], {"starts": [2], "ends": [2], "axes": [-1]}),
    ("Slice", [ints], {"starts": [0], "ends": [2**63 - 1], "axes": [0], "steps": [3]}),
    ("Squeeze", [floats[:1, :, :1]], {}),
    ("Squeeze", [floats[:1, :, :1]], {"axes": [-1]}),
    ("Unsqueeze", [floats], {"axes": [0, -1]}),
    ("Unsqueeze", [np.int64(7)], {"axes": [0]}),
    ("Expand", [floats[:, :1, :]], {"shape": [3, 1]}),
    ("Expand", [np.float32(1.5)], {"shape": [2, 2]}),
    ("Expand", [mask[:, :1]], {"shape": [2, 5]}),
    ("Tile", [ints[0]], {"repeats": [2, 1]}),
    ("Pad", [floats], {"pads": [0, 1, 0, 0, 2, -1]}),
    ("Pad", [ints], {"pads": [1, 1], "constant_value": 7, "axes": [0]}),
    ("Pad", [floats[0]], {"pads": [1, 2, 1, 0], "mode": "reflect"}),
    ("Pad", [floats[0]], {"pads": [0, 2, 1, 1], "mode": "edge"}),
    ("Cast", [floats], {"to": 7}),
    ("Cast", [ints], {"to": 1}),
    ("Cast", [with_nan], {"to": 9}),
    ("Cast", [mask], {"to": 6}),
    ("Gather", [vocab, np.array([[0, 4, -1], [2, 2, -5]], np.int64)], {}),
    ("Gather", [floats, np.array([2, 0], np.int32)], {"axis": -1}),
    ("Gather", [ints[0, 0], np.int64(-2)], {}),
    ("GatherND", [floats, np.array([[1, 2], [0, -1]], np.int64)], {}),
    ("GatherND", [floats, np.array([[1], [0]], np.int64)], {"batch_dims": 1}),
    ("GatherND", [ints, np.array([[[1, 3]], [[2, 0]]], np.int64)], {"batch_dims": 1}),
    ("CumSum", [ints], {"axis": 1}),
    ("CumSum", [floats], {"axis": -1, "exclusive": 1}),
    ("CumSum", [ints], {"axis": 2, "reverse": 1, "exclusive": 1}),
    ("CumSum", [floats], {"axis": 0, "reverse": 1}),
    ("TopK", [floats], {"K": 2}),
    ("TopK", [np.array([[3, 1, 3, 2]], np.int64)], {"K": 3, "axis": 1, "largest": 0}),
    ("Equal", [ints, np.int64(5)], {}),
    ("Equal", [mask, other], {}),
    ("Less", [floats, floats[:, :1]], {}),
    ("LessOrEqual", [ints[0], ints[1, 0]], {}),
    ("Greater", [floats, np.float32(0)], {}),
    ("GreaterOrEqual", [ints, ints[:, :, :1]], {}),
    ("And", [mask, other], {}),
    ("Or", [mask, other], {}),
    ("Xor", [mask, other], {}),
    ("Not", [mask], {}),
    ("Where", [mask, with_nan, np.float32(9)], {}),
    ("Where", [other, ints[:, :1, :3], ints[0, :, :3]], {}),
    ("IsNaN", [with_nan], {}),
    ("IsInf", [with_nan], {}),
    ("IsInf", [with_nan], {"detect_negative": 0}),
    ("IsInf", [with_nan], {"detect_positive": 0}),
    ("Max", [floats, floats[:, :1], np.float32(0.5)], {}),
    ("Min", [ints, ints[::-1]], {}),
    ("Max", [ints], {}),
    ("Clip", [floats], {"min": -1.0, "max": 2.0}),
    ("Clip", [ints], {"max": 10}),
    ("Clip", [floats], {"min": 1.0, "max": -1.0}),
]
HOST_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [  # op, gpuplace attrs, ONNX ones
    ("Range", {"start": np.int64(3), "limit": np.int64(-8), "delta": np.int64(-3)}, {}),
    ("Range", {"start": np.float32(0.5), "limit": np.float32(2), "delta": np.float32(0.25)}, {}),
    ("Range", {"start": np.int32(0), "limit": np.int32(5), "delta": np.int32(1)}, {}),
    ("ConstantOfShape", {"input": [2, 3]}, {}),
    ("ConstantOfShape", {"input": [3], "value": np.array([7], np.int64)}, {}),
    ("Constant", {"value": ints}, {}),
    ("Constant", {"value": mask}, {}),
]


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
