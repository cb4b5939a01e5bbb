"""The ONNX shape, index and logic ops (graph/onnx_ops/{shape,index,logic}.py): values against
numpy references written another way, properties of Slice's clamping and of Reshape, Expand and
Gather shapes, the errors' words, 0-d, int64 and bool inputs, and FLOP counts."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuplace
from gpuplace.errors import BadInput, RuntimeFailure
from gpuplace.graph import TensorSpec, get_op, loads
from gpuplace.graph.fold import evaluate
from tests.onnx_ops.helpers import ours

from .onnx_cases import CASES, HOST_CASES, slices
from .test_ops import RecordingXp

FAST = settings(max_examples=60, deadline=None)
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


def slice_reference(x: np.ndarray, starts: list[int], ends: list[int], axes: list[int],
                    steps: list[int]) -> np.ndarray:  # fmt: skip
    """ONNX's Slice as its spec words it, one index at a time."""
    picks = [list(range(d)) for d in x.shape]
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        d = x.shape[axis]
        if step < 0 and end == 2**63 - 1:  # onnxruntime: to the start (ONNX's text: nothing)
            end = -(2**63)
        s = start + d if start < 0 else start
        e = end + d if end < 0 else end
        s = min(max(s, 0), d) if step > 0 else min(max(s, 0), d - 1)
        e = min(max(e, 0), d) if step > 0 else min(max(e, -1), d - 1)
        chosen, i = [], s
        while (i < e) if step > 0 else (i > e):
            chosen.append(i)
            i += step
        picks[axis] = chosen
    out = np.empty([len(p) for p in picks], x.dtype)
    for where in itertools.product(*(range(len(p)) for p in picks)):
        out[where] = x[tuple(p[w] for p, w in zip(picks, where, strict=True))]
    return out


@FAST
@given(slices())
def test_slice_clamps_as_onnx_says(case: tuple[np.ndarray, dict[str, list[int]]]) -> None:
    x, attrs = case
    axes = [a % x.ndim for a in attrs["axes"]]
    want = slice_reference(x, attrs["starts"], attrs["ends"], axes, attrs["steps"])
    (got,) = evaluate("Slice", [x], attrs)
    np.testing.assert_array_equal(got, want)
    spec = get_op("Slice").infer(
        "s", get_op("Slice").normalize("s", attrs), (TensorSpec(x.shape, "int64"),)
    )
    assert spec[0].shape == want.shape


@st.composite
def reshapes(draw: st.DrawFn) -> tuple[tuple[int, ...], list[int], tuple[int, ...]]:
    """An input shape, a target with 0s (copy) and a -1, and the shape it means."""
    dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    cut = draw(st.integers(0, len(dims)))
    given = (int(np.prod(dims[:cut])), *dims[cut:])
    want = tuple(draw(st.permutations(dims)))
    target = [0 if i < len(given) and d == given[i] and draw(st.booleans()) else d
              for i, d in enumerate(want)]  # fmt: skip
    target[draw(st.integers(0, len(target) - 1))] = -1
    return given, target, want


@FAST
@given(reshapes())
def test_reshape_copies_zeros_and_infers_minus_one(
    case: tuple[tuple[int, ...], list[int], tuple[int, ...]],
) -> None:
    given_shape, target, want = case
    x = np.arange(int(np.prod(given_shape)), dtype=np.float32).reshape(given_shape)
    (got,) = evaluate("Reshape", [x], {"shape": target})
    assert got.shape == want
    np.testing.assert_array_equal(got.ravel(), x.ravel())


@FAST
@given(shapes, shapes, st.data())
def test_expand_broadcasts_both_ways(a: tuple[int, ...], b: tuple[int, ...], data: Any) -> None:
    # make b compatible with a where they overlap: each dim equal, or 1 on either side
    def fit(mine: int) -> int:
        return data.draw(st.integers(0, 4) if mine == 1 else st.sampled_from([1, mine]))

    b = tuple(fit(a[-len(b) + i]) if len(b) - i <= len(a) else d for i, d in enumerate(b))
    x = np.arange(int(np.prod(a)), dtype=np.int64).reshape(a)
    (got,) = evaluate("Expand", [x], {"shape": list(b)})
    want_shape = np.broadcast_shapes(a, b)
    assert got.shape == want_shape
    np.testing.assert_array_equal(got, x * np.ones(want_shape, np.int64))


@FAST
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), shapes, st.data())
def test_gather_shape_and_values(data_shape: list[int], index_shape: tuple[int, ...],
                                 data: Any) -> None:  # fmt: skip
    axis = data.draw(st.integers(-len(data_shape), len(data_shape) - 1))
    size = data_shape[axis]
    x = np.arange(int(np.prod(data_shape)), dtype=np.float32).reshape(data_shape)
    flat = data.draw(st.lists(st.integers(-size, size - 1), min_size=int(np.prod(index_shape)),
                              max_size=int(np.prod(index_shape))))  # fmt: skip
    indices = np.array(flat, np.int64).reshape(index_shape)
    (got,) = evaluate("Gather", [x, indices], {"axis": axis})
    a = axis % len(data_shape)
    assert got.shape == (*data_shape[:a], *index_shape, *data_shape[a + 1 :])
    for where in np.ndindex(*got.shape):  # out[pre, idx, post] = x[pre, indices[idx], post]
        pre, idx, post = where[:a], where[a : a + len(index_shape)], where[a + len(index_shape) :]
        key = (*pre, int(indices[idx]) % size, *post)
        assert got[where] == x[key]


def test_embedding_lookup() -> None:
    table = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    tokens = np.array([[1, 49, 0], [-1, 7, 7]], np.int64)
    (got,) = evaluate("Gather", [table, tokens], {})
    assert got.shape == (2, 3, 8)
    np.testing.assert_array_equal(got[1, 0], table[49])
    np.testing.assert_array_equal(got[0, 2], table[0])


def test_gather_nd_picks_rows_per_batch() -> None:
    x = np.arange(24).reshape(2, 3, 4)
    (got,) = evaluate("GatherND", [x, np.array([[2], [0]], np.int64)], {"batch_dims": 1})
    assert got.tolist() == [x[0, 2].tolist(), x[1, 0].tolist()]
    (got,) = evaluate("GatherND", [x, np.array([[1, 2, 3], [0, -1, -1]], np.int64)], {})
    assert got.tolist() == [23, 11]


def test_cumsum_exclusive_and_reverse() -> None:
    x = np.array([1, 2, 3, 4], np.int32)
    runs = {
        (0, 0): [1, 3, 6, 10],
        (1, 0): [0, 1, 3, 6],
        (0, 1): [10, 9, 7, 4],
        (1, 1): [9, 7, 4, 0],
    }
    for (exclusive, reverse), want in runs.items():
        (got,) = evaluate("CumSum", [x], {"axis": 0, "exclusive": exclusive, "reverse": reverse})
        assert got.dtype == np.int32 and got.tolist() == want


def test_split_parts() -> None:
    x = np.arange(10)
    assert [p.tolist() for p in evaluate("Split", [x], {"num_outputs": 3})] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # fmt: skip
    assert [len(p) for p in evaluate("Split", [x], {"split": [0, 7, 3]})] == [0, 7, 3]
    assert get_op("Split").num_outputs({"split": (1, 2, 3)}) == 3


def test_range_and_constants_are_built_on_the_host() -> None:
    assert evaluate("Range", [], {"start": 0, "limit": 10, "delta": 4})[0].tolist() == [0, 4, 8]
    assert evaluate("Range", [], {"start": 1, "limit": 1, "delta": 1})[0].shape == (0,)
    assert evaluate("Range", [], {"start": 0.0, "limit": 1, "delta": 0.5})[0].dtype == np.float32
    assert evaluate("ConstantOfShape", [], {"input": [2], "value": True})[0].tolist() == [True] * 2
    assert evaluate("Constant", [], {"value": [[1, 2]], "dtype": "float16"})[0].dtype == np.float16
    assert all(get_op(t).generator for t in ("Range", "Constant", "ConstantOfShape"))


# 0-d, int64 and bool inputs: what a shape subgraph folded at import feeds these ops
SCALARS = [
    ("Shape", [np.int64(3)], {}, np.zeros(0, np.int64)),
    ("Reshape", [np.int64(3)], {"shape": [1, 1]}, np.array([[3]])),
    ("Reshape", [np.array([3])], {"shape": []}, np.int64(3)),
    ("Unsqueeze", [np.int64(3)], {"axes": [0]}, np.array([3])),
    ("Squeeze", [np.array([[3]])], {}, np.int64(3)),
    ("Concat", [np.array([2]), np.array([-1, 4])], {"axis": 0}, np.array([2, -1, 4])),
    ("Gather", [np.array([2, 3, 4]), np.int64(-1)], {}, np.int64(4)),
    ("Cast", [np.int64(3)], {"to": "bool"}, np.bool_(True)),
    ("Equal", [np.int64(3), np.array([3, 4])], {}, np.array([True, False])),
    ("Not", [np.bool_(False)], {}, np.bool_(True)),
    ("And", [np.bool_(True), np.array([True, False])], {}, np.array([True, False])),
    ("Where", [np.bool_(False), np.int64(1), np.int64(2)], {}, np.int64(2)),
    ("Max", [np.int64(3), np.int64(-3)], {}, np.int64(3)),
    ("Min", [np.int64(3), np.array([5, 1])], {}, np.array([3, 1])),
    ("Clip", [np.int64(30)], {"max": 8}, np.int64(8)),
    ("Expand", [np.bool_(True)], {"shape": [2]}, np.array([True, True])),
    ("Less", [np.int64(3), np.int64(4)], {}, np.bool_(True)),
    ("Slice", [np.array([5, 6, 7])], {"starts": [-2], "ends": [2**63 - 1]}, np.array([6, 7])),
    ("Tile", [np.array([True])], {"repeats": [3]}, np.array([True] * 3)),
    ("IsNaN", [np.float32(np.nan)], {}, np.bool_(True)),
    ("CumSum", [np.array([1, 2], np.int64)], {"axis": -1}, np.array([1, 3])),
    ("Transpose", [np.int64(3)], {}, np.int64(3)),
    ("Pad", [np.bool_(True)], {"pads": []}, np.bool_(True)),
    ("Cast", [np.array([True, False])], {"to": 1}, np.array([1.0, 0.0], np.float32)),
    ("Greater", [np.array([1, 5], np.int32), np.int32(2)], {}, np.array([False, True])),
    ("Xor", [np.bool_(True), np.array([True, False])], {}, np.array([False, True])),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "want"), SCALARS, ids=[c[0] for c in SCALARS])
def test_scalars_int64_and_bool(
    op: str, inputs: list[Any], attrs: dict[str, Any], want: Any
) -> None:
    (got,) = evaluate(op, inputs, attrs)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


ERRORS = [
    ("Reshape", [np.zeros((2, 3))], {"shape": [4, -1]},
     "Cannot reshape to [4,-1]: 6 elements do not divide into [4,-1] for 'Reshape' (op: 'Reshape') "
     "with input shapes: [2,3]. Fix: give a shape with as many elements as the input (0 copies a "
     "dimension, -1 infers one)"),
    ("Slice", [np.zeros(3)], {"starts": [0], "ends": [3], "steps": [0]},
     "Slice step cannot be 0 for 'Slice' (op: 'Slice') with input shapes: [3]. Fix: give steps != 0"),
    ("Squeeze", [np.zeros((1, 2))], {"axes": [1]},
     "Cannot squeeze axis 1 of size 2 for 'Squeeze' (op: 'Squeeze') with input shapes: [1,2]. "
     "Fix: squeeze only axes of size 1"),
    ("Unsqueeze", [np.zeros(2)], {"axes": [0, -3]},
     "axes [0, -3] name axis 0 twice for 'Unsqueeze' (op: 'Unsqueeze') with input shapes: [2]. "
     "Fix: give each axis once"),
    ("Cast", [np.zeros(2)], {"to": 2},
     "op 'Cast' (Cast): to: 2 is not accepted; expected a supported type (float16, float32, "
     "float64, int32, int64, bool); 2 is UINT8, which gpuplace lacks"),
    ("Gather", [np.zeros(3), np.zeros(2)], {},
     "Value for attr 'T' of float64 is not in the list of allowed values: int32, int64 for "
     "'Gather' (op: 'Gather'). Fix: cast the input first (op: cast, dtype: int32)"),
    ("Where", [np.zeros(2, np.int64), np.zeros(2), np.zeros(2)], {},
     "Value for attr 'T' of int64 is not in the list of allowed values: bool for 'Where' (op: "
     "'Where'). Fix: cast the input first (op: cast, dtype: bool)"),
    ("Max", [np.zeros(2), np.zeros(2, np.float32)], {},
     "Input 'inputs[1]' of 'Max' Op has type float32 that does not match type float64 of "
     "argument 'inputs[0]' for 'Max'. Fix: cast one of them (op: cast, dtype: float64)"),
    ("Equal", [np.zeros((2, 3)), np.zeros(2)], {},
     "Dimensions must be equal, but are 2 and 3 for 'Equal' (op: 'Equal') with input shapes: "
     "[2,3], [2]. Fix: use equal shapes, or dimensions of 1 that broadcast (numpy's rule)"),
    ("Split", [np.zeros(4)], {},
     "op 'Split' (Split): give exactly one of split (the sizes) and num_outputs"),
    ("Concat", [np.zeros(2)], {"axis": 1},
     "Concatenating dimension 1 out of range for input with 1 dimensions for 'Concat' (op: "
     "'Concat') with input shapes: [2]. Fix: use an axis in [-1, 0]"),
    ("GatherND", [np.zeros((2, 3)), np.zeros((2, 3), np.int64)], {},
     "GatherND cannot index: the last dimension of indices is 3, not in [1, 2] for 'GatherND' "
     "(op: 'GatherND') with input shapes: [2,3], [2,3]. Fix: indices[..., :] picks entries along "
     "data's leading axes after batch_dims"),
    ("Range", [], {"start": 0, "limit": 4, "delta": 0},
     "op 'Range' (Range): delta is 0; give a step other than 0"),
    ("Range", [], {"start": 0, "limit": 1e308, "delta": 1e-308},
     "op 'Range' (Range): 0 to 1e+308 by 1e-308 is more than 9223372036854775807 values"),
    ("Range", [], {"start": 0, "limit": 2**64, "delta": 1},
     "op 'Range' (Range): start, limit and delta must fit int64, in [-9223372036854775808, "
     "9223372036854775807]"),
    ("Range", [], {"start": 0, "limit": float("nan"), "delta": 1},
     "op 'Range' (Range): start, limit and delta must be finite numbers"),
    ("Pad", [np.zeros(2)], {"pads": [1]},
     "pads has 1 entries for 1 axes for 'Pad' (op: 'Pad') with input shapes: [2]. Fix: give 2: "
     "every axis's start, then every axis's end"),
    ("Reshape", [np.zeros(1)], {"shape": [1] * 65},
     "The output would have 65 dimensions for 'Reshape' (op: 'Reshape') with input shapes: [1]. "
     "Fix: arrays have at most 64 (numpy's limit; TensorFlow allows 254, but every array here is "
     "numpy's)"),
    ("TopK", [np.zeros(2)], {"K": 3},
     "K 3 is not in [0, 2] (axis 0) for 'TopK' (op: 'TopK') with input shapes: [2]. Fix: ask for "
     "at most 2 entries"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "inputs", "attrs", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_and_the_fix(op: str, inputs: list[Any], attrs: dict[str, Any],
                                        message: str) -> None:  # fmt: skip
    with pytest.raises(BadInput) as err:
        evaluate(op, inputs, attrs)
    assert str(err.value) == message


MORE_ERRORS = [  # (op, inputs, attrs, what the message says)
    ("Reshape", [np.zeros(2)], {"shape": [-2, 1]}, "shape holds integers >= -1, at most one"),
    ("Reshape", [np.zeros(2)], {"shape": [0, -1], "allowzero": 1}, "cannot hold both 0 and -1"),
    ("Reshape", [np.zeros(2)], {"shape": [2, 0]}, "shape[1] is 0 (copy the input's dimension) "
     "but the input has 1"),
    ("Reshape", [np.zeros(6)], {"shape": [4]}, "6 elements do not fill [4] (4 elements)"),
    ("Split", [np.zeros(5)], {"num_outputs": 4}, "Cannot split dimension 0 of size 5 into 4 "
     "parts of 2"),
    ("Split", [np.zeros(5)], {"split": [2, 2]}, "split [2, 2] does not add up to dimension 0 of "
     "size 5"),
    ("Split", [np.zeros(5)], {"num_outputs": 0}, "num_outputs is 0; give at least 1"),
    ("Split", [np.zeros(5)], {"split": []}, "split is empty; give at least one size"),
    ("Slice", [np.zeros(5)], {"starts": [0], "ends": [1, 2]}, "starts, ends, axes and steps have "
     "1, 2, 1 and 1 entries"),
    ("Expand", [np.zeros(2)], {"shape": [-1]}, "Expand shape [-1] holds a negative dimension"),
    ("Tile", [np.zeros(2)], {"repeats": [2, 2]}, "Tile repeats [2, 2] for an input of rank 1"),
    ("ConstantOfShape", [], {"input": [-1]}, "ConstantOfShape input [-1] holds a negative"),
    ("GatherND", [np.zeros((2, 3)), np.zeros((2, 1), np.int64)], {"batch_dims": 2},
     "batch_dims 2 needs data and indices of rank above it"),
    ("GatherND", [np.zeros((2, 3)), np.zeros((3, 1), np.int64)], {"batch_dims": 1},
     "the first 1 dimensions differ: [2,3] and [3,1]"),
    ("Clip", [np.zeros(2, np.int64)], {"min": 0.5}, "Clip min 0.5 is not an integer for a int64"),
    ("Constant", [], {"value": np.zeros(2, np.uint8)}, "an array of a supported dtype (float16, "
     "float32, float64, int32, int64, bool), not uint8"),
    ("Cast", [np.zeros(2)], {"to": "float8"}, "a TensorProto type number (1 = float32, 7 = int64)"),
    ("Clip", [np.zeros(2)], {"min": np.zeros(1, np.uint8)}, "a number of a supported dtype"),
    ("Clip", [np.zeros(2)], {"max": "1"}, "a number, e.g. 0 or 1.5"),
    ("Constant", [], {"value": 1, "dtype": "int8"}, "one of float16, float32"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "inputs", "attrs", "says"), MORE_ERRORS,
                         ids=[e[0] for e in MORE_ERRORS])  # fmt: skip
def test_more_errors(op: str, inputs: list[Any], attrs: dict[str, Any], says: str) -> None:
    with pytest.raises(BadInput) as err:
        evaluate(op, inputs, attrs)
    assert says in str(err.value) and f"'{op}'" in str(err.value)


def test_is_inf_detecting_neither_sign() -> None:
    x = np.array([np.inf, -np.inf, 1.0])
    attrs = {"detect_positive": 0, "detect_negative": 0}
    assert evaluate("IsInf", [x], attrs)[0].tolist() == [False] * 3


def test_an_index_out_of_range_fails_the_run_naming_the_op() -> None:
    with pytest.raises(
        RuntimeFailure, match=r"^Gather: an index is out of range for axis 0 of size 3"
    ):
        evaluate("Gather", [np.zeros(3), np.array([3])], {})
    with pytest.raises(RuntimeFailure, match=r"^GatherND: an index is out of range for data"):
        evaluate("GatherND", [np.zeros((2, 2)), np.array([[0, -3]])], {})


def test_no_op_builds_more_dimensions_than_numpy_has() -> None:
    big = np.zeros([1] * 64)
    for op, inputs, attrs in [("Unsqueeze", [big], {"axes": [0]}),
                              ("Expand", [big], {"shape": [1] * 65}),
                              ("Gather", [big, np.zeros((1, 1), np.int64)], {}),
                              ("ConstantOfShape", [], {"input": [1] * 65})]:  # fmt: skip
        with pytest.raises(BadInput, match=f"^The output would have 65 dimensions for '{op}'"):
            evaluate(op, inputs, attrs)


def test_split_outputs_count_against_the_op_limit() -> None:
    spec = "graph: [{name: c, op: Constant, value: [1]}, {name: r, op: Split, inputs: [c], %s}]"
    with pytest.raises(BadInput, match=r"op 'r' \(Split\): 100,000,000 outputs, more than the"):
        loads(spec % "num_outputs: 100000000")
    assert len(loads(spec % "split: [1, 0, 0]").by_name()["r"].outputs) == 3


def test_evaluate_refuses_what_the_op_cannot_take() -> None:
    with pytest.raises(
        BadInput, match=r"op 'Not' \(Not\) takes at least 1 and at most 1 inputs, got 2"
    ):
        evaluate("Not", [np.bool_(True)] * 2, {})
    with pytest.raises(BadInput, match=r"input 0 is uint8; supported: float16, float32"):
        evaluate("Shape", [np.zeros(2, np.uint8)], {})


def test_flops() -> None:
    def flops(op: str, inputs: list[tuple[int, ...]], attrs: dict[str, Any]) -> float:
        opdef = get_op(op)
        checked = opdef.normalize(op, attrs)
        specs = tuple(TensorSpec(s, "int64" if op == "Gather" else "float32") for s in inputs)
        assert opdef.flops is not None
        return opdef.flops(checked, specs, opdef.infer(op, checked, specs))

    assert flops("Reshape", [(4, 6)], {"shape": [-1]}) == 0
    assert flops("Gather", [(4, 6), (2,)], {}) == 0
    assert flops("Less", [(4, 6), (6,)], {}) == 24
    assert flops("Max", [(4, 6), (6,), ()], {}) == 48
    assert flops("TopK", [(2, 8)], {"K": 1}) == 16 * 3


CUPY_HAS = {  # each is in cupy's API as in numpy's (https://docs.cupy.dev/en/stable/reference/)
    "asarray", "int64", "reshape", "split", "transpose", "concatenate", "broadcast_to", "tile",
    "pad", "where", "take", "arange", "flip", "cumsum", "zeros_like", "argsort", "take_along_axis",
    "equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_xor", "logical_not", "isnan", "isinf", "inf", "zeros", "maximum", "minimum",
    "copyto", "empty", "result_type",
}  # fmt: skip


@pytest.mark.parametrize(
    ("op", "inputs", "attrs"),
    [*CASES, *((op, [], attrs) for op, attrs, _ in HOST_CASES), *(c[:3] for c in SCALARS)],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_kernels_make_what_the_shape_rule_says(
    op: str, inputs: list[Any], attrs: dict[str, Any]
) -> None:
    """The executor trusts the rule: each output's shape and dtype are the kernel's exactly."""
    ours(op, [np.asarray(x) for x in inputs], attrs)


def test_device_kernels_call_only_what_cupy_also_has() -> None:
    xp = RecordingXp()
    for op, inputs, attrs in CASES:
        opdef = get_op(op)
        opdef.compute(xp, [np.asarray(x) for x in inputs], opdef.normalize(op, attrs))
    assert xp.calls <= CUPY_HAS, xp.calls - CUPY_HAS


MASK_SPEC = """
graph:
  - {name: ids, op: placeholder, shape: [2, 4], dtype: int64}
  - {name: seq, op: Range, start: 0, limit: 4, delta: 1}
  - {name: rows, op: Unsqueeze, inputs: [seq], axes: [1]}
  - {name: causal, op: LessOrEqual, inputs: [seq, rows]}
  - {name: pad, op: Equal, inputs: [ids, zero]}
  - {name: zero, op: Constant, value: 0}
  - {name: keep, op: Not, inputs: [pad]}
  - {name: keep3, op: Unsqueeze, inputs: [keep], axes: [1]}
  - {name: both, op: And, inputs: [causal, keep3]}
  - {name: big, op: ConstantOfShape, input: [1], value: -1.0e4}
  - {name: nil, op: ConstantOfShape, input: [1]}
  - {name: bias, op: Where, inputs: [both, nil, big]}
  - {name: table, op: variable, shape: [5, 3], initializer: random_normal}
  - {name: emb, op: Gather, inputs: [table, ids]}
  - {name: flat, op: Reshape, inputs: [emb], shape: [0, -1]}
  - {name: cut, op: Slice, inputs: [flat], starts: [-1], ends: [-13], axes: [1], steps: [-2]}
fetch: [bias, cut, table]
"""


def test_a_mask_subgraph_loads_places_and_runs(tmp_path: Path) -> None:
    spec = tmp_path / "mask.yaml"
    spec.write_text(textwrap.dedent(MASK_SPEC))
    ops = loads(MASK_SPEC).by_name()
    assert ops["bias"].outputs == (TensorSpec((2, 4, 4), "float32"),)
    assert ops["cut"].outputs == (TensorSpec((2, 6), "float32"),)
    seen = gpuplace.view(gpuplace.discover("4xK520"), {})
    ids = np.array([[3, 1, 0, 0], [4, 4, 4, 2]], np.int64)
    prepared = gpuplace.prepare(str(spec), seen, gpuplace.Options(feeds={"ids": ids}), {})
    values = gpuplace.execute_prepared(prepared, seen).result.values
    causal = np.tril(np.ones((4, 4), bool))
    keep = ids != 0
    want = np.where(causal[None] & keep[:, None, :], 0.0, -1.0e4).astype(np.float32)
    np.testing.assert_array_equal(values["bias"], want)
    np.testing.assert_array_equal(values["cut"], values["table"][ids].reshape(2, 12)[:, ::-2])
    decisions = prepared.placement.decisions  # ONNX ops have GPU kernels for every dtype
    assert all(decisions[op].device.endswith("GPU:0") for op in ("cut", "seq", "both", "emb"))
