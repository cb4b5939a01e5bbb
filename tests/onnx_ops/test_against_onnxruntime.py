"""Each ONNX op of graph/onnx_ops/ against onnxruntime (an independent implementation) on a
one-node model built with onnx.helper; skipped where onnx or onnxruntime is not installed.
Also: the kernels call only what cupy also has, so the same code runs on a GPU."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest

from gpuplace.graph import list_ops
from tests.graph.test_ops import RecordingXp
from tests.onnx_ops.helpers import onnxruntime_run, ours

RNG = np.random.default_rng(11)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def positive(*shape: int) -> np.ndarray:
    return (np.abs(f32(*shape)) + 0.1).astype(np.float32)


class Case(NamedTuple):
    op: str
    inputs: list[np.ndarray]
    attrs: dict[str, Any]
    constants: tuple[np.ndarray | None, ...] = ()  # later inputs onnxruntime takes as tensors
    ours_attrs: dict[str, Any] | None = None  # gpuplace's attrs, where they differ (folded)
    opset: int = 20


def axes(*values: int) -> tuple[np.ndarray]:
    return (np.array(values, np.int64),)


I64 = np.array([7, -7, 9, -9, 0], np.int64)
CASES = [
    Case("MatMul", [f32(2, 3, 4), f32(4, 5)], {}),
    Case("MatMul", [f32(4), f32(3, 4, 2)], {}),
    Case("Gemm", [f32(4, 3), f32(5, 4), f32(5)], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 3.0}),
    Case("Gemm", [f32(3, 4), f32(4, 5), f32(3, 1)], {}),
    Case("Add", [f32(2, 1, 4), f32(3, 1)], {}),
    Case("Sub", [f32(2, 3), f32(3)], {}),
    Case("Mul", [f32(2, 3), f32(1)], {}),
    Case("Div", [f32(2, 3), positive(2, 3)], {}),
    Case("Div", [I64, np.array([2, 2, -2, -2, 3], np.int64)], {}),
    Case("Pow", [positive(2, 3), f32(3)], {}),
    Case("Sqrt", [positive(2, 3)], {}),
    Case("Neg", [f32(2, 3)], {}),
    Case("Exp", [f32(2, 3)], {}),
    Case("Log", [positive(2, 3)], {}),
    Case("Tanh", [f32(2, 3)], {}),
    Case("Relu", [f32(2, 3)], {}),
    Case("Sigmoid", [f32(2, 3)], {}),
    Case("Erf", [np.linspace(-4, 4, 81, dtype=np.float32)], {}),
    Case("Gelu", [f32(3, 7)], {}),
    Case("Gelu", [f32(3, 7)], {"approximate": "tanh"}),
    Case("Softmax", [f32(2, 3, 4)], {"axis": 1}),
    Case("Softmax", [f32(2, 3, 4)], {}),
    Case("LogSoftmax", [f32(2, 3, 4)], {"axis": 0}),
    Case("Identity", [f32(2, 3)], {}),
    Case("Dropout", [f32(2, 3)], {}),
    Case("Conv", [f32(2, 3, 7, 6), f32(4, 3, 3, 3), f32(4)], {}),
    Case("Conv", [f32(2, 4, 7, 6), f32(6, 2, 3, 2), f32(6)],
         {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    Case("Conv", [f32(1, 4, 7, 6), f32(4, 1, 3, 3)], {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    Case("Conv", [f32(1, 4, 7, 6), f32(4, 1, 2, 2)], {"group": 4, "auto_pad": "SAME_LOWER"}),
    Case("Conv", [f32(2, 3, 7, 6), f32(6, 1, 3, 3), f32(6)], {"group": 3, "pads": [1, 0, 1, 2]}),
    Case("Conv", [f32(1, 3, 7, 6), f32(2, 3, 3, 3)], {"auto_pad": "VALID", "strides": [2, 2]}),
    Case("Conv", [f32(2, 3, 9), f32(4, 3, 3), f32(4)], {"pads": [1, 1]}),
    Case("Conv", [f32(1, 2, 5, 4, 3), f32(3, 2, 2, 2, 2)], {}),
    Case("MaxPool", [f32(2, 3, 7, 6)], {"kernel_shape": [3, 3], "strides": [2, 2]}),
    Case("MaxPool", [f32(2, 3, 7, 6)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1]}),
    Case("MaxPool", [f32(2, 3, 7, 6)], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    Case("MaxPool", [f32(1, 2, 8, 8)], {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    Case("AveragePool", [f32(2, 3, 7, 6)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("AveragePool", [f32(2, 3, 7, 6)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1, "ceil_mode": 1}),
    Case("AveragePool", [f32(2, 3, 7, 6)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    Case("AveragePool", [f32(2, 3, 7, 6)], {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    Case("GlobalAveragePool", [f32(2, 3, 4, 5)], {}),
    Case("GlobalMaxPool", [f32(2, 3, 4, 5)], {}),
    Case("BatchNormalization", [f32(2, 3, 4, 5), f32(3), f32(3), f32(3), positive(3)], {"epsilon": 1e-3}),
    Case("LayerNormalization", [f32(2, 3, 4), f32(4), f32(4)], {}, opset=17),
    Case("LayerNormalization", [f32(2, 3, 4), f32(3, 4)], {"axis": 1, "epsilon": 1e-3}, opset=17),
    Case("LayerNormalization", [f32(2, 3, 4).astype(np.float16), f32(4).astype(np.float16)], {}, opset=17),
    Case("ReduceMean", [f32(2, 3, 4)], {}, axes(1), {"axes": [1]}, opset=18),
    Case("ReduceMean", [f32(2, 3, 4)], {"keepdims": 0}, axes(0, -1), {"axes": [0, -1], "keepdims": 0}),
    Case("ReduceSum", [f32(2, 3, 4)], {"keepdims": 0}),
    Case("ReduceSum", [f32(2, 3, 4)], {"noop_with_empty_axes": 1}),
    Case("ReduceMax", [f32(2, 3, 4)], {}, axes(-2), {"axes": [-2]}),
    Case("Flatten", [f32(2, 3, 4)], {}),
    Case("Flatten", [f32(2, 3, 4)], {"axis": -1}),
    Case("Flatten", [f32(2, 3, 4)], {"axis": 0}),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}-{i}" for i, c in enumerate(CASES)])
def test_op_agrees_with_onnxruntime(case: Case) -> None:
    want = onnxruntime_run(case.op, case.inputs, case.attrs, case.constants, case.opset)
    attrs = case.attrs if case.ours_attrs is None else case.ours_attrs
    got = ours(case.op, case.inputs, attrs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        tolerance = 1e-3 if g.dtype == np.float16 else 1e-5
        assert np.allclose(g, w, rtol=tolerance, atol=tolerance)


def test_every_onnx_op_here_has_a_case() -> None:
    """The cases cover the ops of onnx_ops/nn.py (another module's ops have their own tests)."""
    from gpuplace.graph.onnx_ops import nn

    assert {d.name for d in nn.OPS} <= {c.op for c in CASES}
    assert all(d.onnx and d.flops is not None for d in nn.OPS)
    assert {d.name for d in nn.OPS} <= {d.name for d in list_ops()}


# numpy and cupy both provide these: the ONNX kernels may call nothing else on xp
XP_CALLS = {
    "abs", "add", "asarray", "divide", "exp", "float16", "float32", "floor_divide", "log",
    "matmul", "max", "maximum", "mean", "multiply", "negative", "ones", "pad", "power", "reshape",
    "sign", "sqrt", "stack", "subtract", "sum", "tanh", "where", "clip", "empty_like",
    "ascontiguousarray", "__name__", "broadcast_to", "empty", "may_share_memory", "concatenate",
}  # fmt: skip


def test_kernels_call_only_what_cupy_also_has() -> None:
    xp = RecordingXp()
    for case in CASES:
        ours(case.op, case.inputs, case.attrs if case.ours_attrs is None else case.ours_attrs,
             xp=xp)  # fmt: skip
    assert xp.calls <= XP_CALLS, xp.calls - XP_CALLS
