"""Inputs and attrs for each ONNX shape, index and logic op, shared by the onnxruntime comparison
(test_onnx_ops_ort.py) and the kernel checks (test_onnx_shape_ops.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

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


@st.composite
def slices(draw: st.DrawFn) -> tuple[np.ndarray, dict[str, list[int]]]:
    shape = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                         unique=True))  # fmt: skip
    bound = st.one_of(st.integers(-8, 8), st.sampled_from([2**63 - 1, -(2**63)]))
    n = len(axes)
    return x, {
        "starts": draw(st.lists(bound, min_size=n, max_size=n)),
        "ends": draw(st.lists(bound, min_size=n, max_size=n)),
        "axes": [a - len(shape) if draw(st.booleans()) else a for a in axes],
        "steps": draw(st.lists(st.integers(-3, 3).filter(bool), min_size=n, max_size=n)),
    }
