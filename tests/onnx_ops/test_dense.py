"""ONNX's MLP ops (graph/onnx_ops/dense.py) against references written another way: loops,
einsum, Python's integer and math functions; shape rules as properties; errors; FLOPs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.graph.kernels import _ZERO_BLOCK
from gpuplace.graph.onnx_ops.dense import _softmax_by_row_max
from gpuplace.graph.onnx_ops.erf import BLOCK, erf
from tests.onnx_ops.helpers import flops, load_error, ours, spec

RNG = np.random.default_rng(7)


def normal(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def test_erf_against_math_erf_over_a_grid() -> None:
    """The documented bounds (graph/onnx_ops/erf.py): relative error below 7e-8 in float64
    (x times a ratio stays accurate relative to erf near 0), 4.5e-7 in float32."""
    x = np.concatenate([np.linspace(-6, 6, 24001), np.geomspace(1e-30, 6, 2000)])
    x = np.concatenate([x, -x[-2000:]])
    ref = np.array([math.erf(v) for v in x])
    rel = np.abs(erf(np, x) - ref) / np.abs(ref).clip(1e-300)
    assert rel.max() < 7e-8
    x32 = x.astype(np.float32)
    ref32 = np.array([math.erf(float(v)) for v in x32])
    got32 = erf(np, x32)
    assert got32.dtype == np.float32
    assert (np.abs(got32 - ref32) / np.abs(ref32).clip(1e-300)).max() < 4.5e-7
    half = erf(np, np.array([0.0, 0.5, -2.0], np.float16))
    assert half.dtype == np.float16
    assert np.allclose(half, [0.0, math.erf(0.5), math.erf(-2.0)], rtol=1e-3)
    assert erf(np, np.array([0.0]))[0] == 0.0 and erf(np, np.array([9.0]))[0] == 1.0
    # blocks: a tensor over several, not contiguous, keeps its shape and values
    big = np.linspace(-3, 3, 3 * BLOCK + 7).reshape(-1, 1)[::-1].T
    assert np.allclose(erf(np, big), np.vectorize(math.erf)(big), rtol=1e-7, atol=0)
    assert erf(np, np.zeros((0, 3))).shape == (0, 3)


def test_gelu_both_forms_by_their_formulas() -> None:
    x = np.linspace(-5, 5, 101)
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    tanh = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in x]
    assert np.allclose(ours("Gelu", [x])[0], exact, rtol=0, atol=2.5e-7)  # 0.5 |x| * erf's error
    assert np.allclose(ours("Gelu", [x], {"approximate": "tanh"})[0], tanh, rtol=0, atol=1e-12)


def test_matmul_batched_and_one_dimensional_against_loops() -> None:
    a, b = normal(2, 1, 3, 4), normal(5, 4, 2)
    got = ours("MatMul", [a, b])[0]
    assert got.shape == (2, 5, 3, 2)
    for i in range(2):
        for j in range(5):
            for r in range(3):
                for c in range(2):
                    want = sum(float(a[i, 0, r, t]) * float(b[j, t, c]) for t in range(4))
                    assert got[i, j, r, c] == pytest.approx(want, abs=1e-5)
    v = normal(4)
    assert ours("MatMul", [v, b])[0].shape == (5, 2)
    assert np.allclose(ours("MatMul", [a, v])[0], np.einsum("ijrt,t->ijr", a, v), atol=1e-5)
    assert ours("MatMul", [v, v])[0].shape == ()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=4), st.integers(0, 4), st.booleans())
def test_matmul_of_a_stack_by_one_matrix_is_numpy_s(lead: list[int], n: int, view: bool) -> None:
    """A contiguous stack by one matrix runs as one 2-D product of all its rows: numpy's
    result, empty dimensions and strided stacks (the plain way) included."""
    a = normal(*lead[:-1], lead[-1] + 1, lead[-1])
    if view:
        a = np.swapaxes(a, -1, -2)[..., : lead[-1] + 1]  # not contiguous
    b = normal(a.shape[-1], n)
    np.testing.assert_allclose(ours("MatMul", [a, b])[0], np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("ta", "tb"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_transposes_scales_and_broadcasts_c(ta: int, tb: int) -> None:
    a = normal(3, 4) if not ta else normal(4, 3)
    b = normal(4, 2) if not tb else normal(2, 4)
    c = normal(2)
    got = ours("Gemm", [a, b, c], {"transA": ta, "transB": tb, "alpha": 0.5, "beta": 2.0})[0]
    aa, bb = (a.T if ta else a), (b.T if tb else b)
    want = [[0.5 * sum(float(aa[i, t] * bb[t, j]) for t in range(4)) + 2.0 * float(c[j])
             for j in range(2)] for i in range(3)]  # fmt: skip
    assert np.allclose(got, want, atol=1e-5)
    assert np.allclose(ours("Gemm", [aa, bb])[0], aa @ bb, atol=1e-6)


def test_integer_division_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 6, -1, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3, 5, -3], np.int64)
    want = [int(x / y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]  # C's truncation
    assert ours("Div", [a, b])[0].tolist() == want == [3, -3, -3, 3, 2, 0, 0]
    assert ours("Div", [a.astype(np.int32), b.astype(np.int32)])[0].dtype == np.int32
    assert ours("Div", [np.array([-7.0], np.float32), np.array([2.0], np.float32)])[0] == -3.5


def test_elementwise_ops_by_their_scalar_definitions() -> None:
    x = np.array([[-1.5, 0.0, 0.25], [2.0, 3.0, -0.5]], np.float32)
    pos = np.abs(x) + 0.5
    for op, fn, data in [
        ("Sqrt", math.sqrt, pos), ("Exp", math.exp, x), ("Log", math.log, pos),
        ("Tanh", math.tanh, x), ("Sigmoid", lambda v: 1 / (1 + math.exp(-v)), x),
        ("Relu", lambda v: max(v, 0.0), x), ("Neg", lambda v: -v, x), ("Erf", math.erf, x),
    ]:  # fmt: skip
        got = ours(op, [data])[0]
        assert got.dtype == np.float32, op
        assert np.allclose(got, np.vectorize(fn)(data.astype(float)), rtol=1e-6, atol=1e-7), op
    y = np.array([2.0, 0.5, 3.0], np.float32)
    for op, fn in [("Add", float.__add__), ("Sub", float.__sub__), ("Mul", float.__mul__),
                   ("Div", float.__truediv__), ("Pow", math.pow)]:  # fmt: skip
        base = pos if op == "Pow" else x
        got = ours(op, [base, y])[0]
        want = [[fn(float(v), float(w)) for v, w in zip(row, y, strict=True)] for row in base]
        assert np.allclose(got, want, rtol=1e-6), op
    # Pow's exponent may be another type; the output keeps the base's
    assert ours("Pow", [pos, np.array(2, np.int64)])[0].dtype == np.float32
    assert ours("Relu", [np.array([-2, 3], np.int32)])[0].tolist() == [0, 3]


def test_softmax_and_log_softmax_along_an_axis() -> None:
    x = normal(2, 3, 4)
    for axis in (0, 1, -1):
        got = ours("Softmax", [x], {"axis": axis})[0]
        e = np.exp(x.astype(float))
        want = e / e.sum(axis=axis, keepdims=True)
        assert np.allclose(got, want, atol=1e-6)
        log = ours("LogSoftmax", [x], {"axis": axis})[0]
        assert np.allclose(log, np.log(want), atol=1e-5)
    assert np.allclose(ours("Softmax", [x])[0].sum(axis=-1), 1, atol=1e-6)


def test_identity_and_dropout_pass_the_input_through() -> None:
    x = normal(2, 3)
    assert np.array_equal(ours("Identity", [x])[0], x)
    ratio, training = np.array(0.5, np.float32), np.array(False)
    out = ours("Dropout", [x, ratio, training])
    assert len(out) == 1 and np.array_equal(out[0], x)
    assert spec("Identity", [(2,)], dtype="bool")[0].dtype == "bool"


SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=4).map(tuple)


@settings(max_examples=60, deadline=None)
@given(SHAPES, SHAPES)
def test_broadcasting_and_matmul_shapes_match_numpy(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(BadInput, match=r"Dimensions must be equal.*op: 'Add'"):
            spec("Add", [a, b])
    else:
        assert spec("Add", [a, b])[0].shape == want
    try:
        product = np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        with pytest.raises(BadInput, match="op: 'MatMul'"):
            spec("MatMul", [a, b])
    else:
        assert spec("MatMul", [a, b])[0].shape == product


def test_flop_counts() -> None:
    assert flops("Gemm", [(8, 16), (16, 4)]) == 2 * 8 * 4 * 16
    assert flops("Gemm", [(16, 8), (4, 16)], {"transA": 1, "transB": 1}) == 2 * 8 * 4 * 16
    assert flops("Gemm", [(8, 16), (16, 4), (4,)]) == 2 * 8 * 4 * 16  # C's add not counted
    assert flops("MatMul", [(3, 8, 16), (16, 4)]) == 2 * 3 * 8 * 4 * 16
    assert flops("Relu", [(10, 10)]) == 100
    assert flops("Softmax", [(10, 10)]) == 500
    assert flops("Identity", [(10, 10)]) == flops("Dropout", [(10, 10)]) == 0


def test_errors_name_the_node_the_op_and_the_fix() -> None:
    assert load_error("""
        graph:
          - {name: a, op: zeros, shape: [2, 3]}
          - {name: b, op: zeros, shape: [2, 3]}
          - {name: c, op: Gemm, inputs: [a, b]}
        """) == (
        "g.yaml:4: Dimensions must be equal, but are 3 and 2 for 'c' (op: 'Gemm') with input "
        "shapes: [2,3], [2,3]. Fix: A' is M x K and B' is K x N; set transA or transB so the "
        "inner dimensions agree"
    )
    assert load_error("""
        graph:
          - {name: a, op: zeros, shape: [2, 3]}
          - {name: c, op: Gelu, inputs: [a], approximate: fast}
        """) == (
        "g.yaml:3: op 'c' (Gelu): approximate: 'fast' is not accepted; expected one of none, tanh"
    )
    assert (
        "Shape must be at least rank 1 but is rank 0 (input 0) for 's' (op: 'Softmax')"
        in load_error("""
        graph:
          - {name: a, op: zeros, shape: []}
          - {name: s, op: Softmax, inputs: [a]}
        """)
    )
    assert "axis 2 out of range for input with 2 dimensions for 'c' (op: 'Softmax')" in load_error("""
        graph:
          - {name: a, op: zeros, shape: [2, 3]}
          - {name: c, op: Softmax, inputs: [a], axis: 2}
        """)
    assert "Value for attr 'T' of int32" in load_error("""
        graph:
          - {name: a, op: zeros, shape: [2], dtype: int32}
          - {name: c, op: Sqrt, inputs: [a]}
        """)


@pytest.mark.parametrize("width", [1, 7, 129, 40000])
def test_softmax_in_blocks_of_rows_matches_one_pass(width: int) -> None:
    """Past `BLOCK` elements the host works in blocks of rows (odd widths halve with a tail)."""
    x = normal(3, (2 * BLOCK) // width + 3, width) * 10
    wide = x.astype(np.float64)  # float32's log of a subnormal probability is off by far more
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    want = e / e.sum(axis=-1, keepdims=True)
    assert np.allclose(ours("Softmax", [x])[0], want, rtol=1e-5, atol=1e-7)
    assert np.allclose(ours("LogSoftmax", [x])[0], np.log(want), rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=0, max_size=2).map(tuple),
    st.integers(1, 200),
    st.floats(0.1, 50.0),
    st.integers(0, 3),
)
def test_softmax_matches_a_float64_reference_masked_rows_included(
    lead: tuple[int, ...], width: int, scale: float, masked: int
) -> None:
    """Softmax along the last axis (row sums as a product with ones) against float64 numpy,
    with some entries -inf as an attention mask leaves them (never a whole row)."""
    x = normal(*lead, width) * np.float32(scale)
    if width > 1:
        x[..., :: max(2, width // max(masked, 1))][..., : min(masked, width - 1)] = -np.inf
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    want = e / e.sum(axis=-1, keepdims=True)
    got = ours("Softmax", [x])[0]
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.allclose(got, want, rtol=1e-5, atol=1e-7)


def test_softmax_shifted_by_the_tensor_maximum_keeps_every_row_precise() -> None:
    """The host shifts by the whole tensor's maximum; rows far below it (-30, -1000), rows of
    -inf, and tensors holding inf or NaN come out as the row-maximum form gives them."""
    x = normal(6, 40) * 3
    x[1] -= 30  # its terms sum below e^-16: computed again by its own maximum
    x[2] -= 1000  # every term would be 0 shifted by the tensor's maximum
    x[3] = -np.inf  # a row with no finite entry: NaN, as exp(-inf - -inf)
    x[4, ::3] = -np.inf  # a masked row
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(wide - wide.max(axis=-1, keepdims=True))
        want = e / e.sum(axis=-1, keepdims=True)
        got = ours("Softmax", [x])[0]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)  # NaNs where want has them
    for special in (np.inf, np.nan):
        y = x.copy()
        y[0, 0] = special  # not finite: the row-maximum form throughout
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(ours("Softmax", [y])[0], _softmax_by_row_max(np, y))


@pytest.mark.parametrize("size", [_ZERO_BLOCK - 1, _ZERO_BLOCK, 2 * _ZERO_BLOCK + 7])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_relu_in_blocks_against_zeros_is_numpy_s_maximum(size: int, dtype: str) -> None:
    """Large contiguous inputs go in blocks against a block of zeros: the same values (NaN
    kept), a fresh array, the input untouched; a strided view the plain way."""
    x = (normal(size) * 100).astype(dtype)
    if x.dtype.kind == "f":
        x[5] = np.nan
    before = x.copy()
    got = ours("Relu", [x.reshape(-1, 1)])[0]
    np.testing.assert_array_equal(got.reshape(-1), np.maximum(x, 0))
    np.testing.assert_array_equal(x, before)
    assert not np.shares_memory(got, x)
    view = x[::-2]
    np.testing.assert_array_equal(ours("Relu", [view])[0], np.maximum(view, 0))
