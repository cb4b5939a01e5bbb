"""LayerNormalization, ReduceMean/Sum/Max and Flatten (graph/onnx_ops/norm.py) against
references written another way (Python's statistics over rows, sums of lists); reduction and
Flatten shapes as properties; errors; FLOPs."""

from __future__ import annotations

import statistics
from math import prod, sqrt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.onnx_ops.helpers import flops, load_error, ours, spec

RNG = np.random.default_rng(5)


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("axis", [-1, 1, -2])
def test_layer_norm_row_by_row(axis: int) -> None:
    x = normal(2, 3, 4)
    inner = x.shape[axis % 3 :]
    scale, bias = normal(*inner), normal(inner[-1])
    got = ours("LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": 1e-3})[0]
    rows = x.reshape(prod(x.shape[: axis % 3]), -1).astype(float)
    for i, row in enumerate(rows):
        mean, var = statistics.fmean(row), statistics.pvariance(row)
        normalised = [(v - mean) / sqrt(var + 1e-3) for v in row]
        want = np.array(normalised).reshape(inner) * scale + bias
        assert np.allclose(got.reshape(len(rows), *inner)[i], want, atol=1e-5)
    plain = ours("LayerNormalization", [x], {"axis": axis})[0]
    assert np.allclose(plain.reshape(len(rows), -1).mean(axis=1), 0, atol=1e-6)


def test_layer_norm_float16_is_computed_in_float32() -> None:
    x = (normal(3, 64) * 100).astype(np.float16)
    got = ours("LayerNormalization", [x, np.ones(64, np.float16)])[0]
    wide = x.astype(np.float64)
    want = (wide - wide.mean(-1, keepdims=True)) / np.sqrt(wide.var(-1, keepdims=True) + 1e-5)
    assert got.dtype == np.float16 and np.allclose(got, want, atol=2e-3)


def test_reductions_against_python_sums() -> None:
    x = normal(2, 3, 4)
    rows = [[[float(v) for v in r] for r in m] for m in x]
    sums = [[sum(rows[i][j][k] for j in range(3)) for k in range(4)] for i in range(2)]
    assert np.allclose(ours("ReduceSum", [x], {"axes": [1]})[0][:, 0, :], sums, atol=1e-5)
    assert np.allclose(ours("ReduceMean", [x], {"axes": [1], "keepdims": 0})[0],
                       np.array(sums) / 3, atol=1e-6)  # fmt: skip
    assert ours("ReduceMax", [x])[0].reshape(()) == max(v for m in rows for r in m for v in r)
    assert ours("ReduceSum", [x])[0].shape == (1, 1, 1)  # keepdims defaults to 1
    assert np.array_equal(ours("ReduceSum", [x], {"noop_with_empty_axes": 1})[0], x)
    assert ours("ReduceMean", [np.array([[-3, 4]], np.int64)], {"axes": [1]})[0].tolist() == [[0]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple), st.data())
def test_reduce_and_flatten_shapes_match_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    rank = len(shape)
    axes = data.draw(
        st.lists(st.integers(-rank, rank - 1), max_size=rank, unique_by=lambda a: a % rank)
    )
    keep = data.draw(st.sampled_from([0, 1]))
    want = np.sum(np.zeros(shape), axis=tuple(axes) or None, keepdims=bool(keep)).shape
    assert spec("ReduceSum", [shape], {"axes": axes, "keepdims": keep})[0].shape == want
    axis = data.draw(st.integers(-rank, rank))
    flat = spec("Flatten", [shape], {"axis": axis})[0].shape
    split = axis + rank if axis < 0 else axis  # ONNX: a negative axis counts from the end
    assert flat == (int(np.prod(shape[:split])), int(np.prod(shape[split:])))


def test_flop_counts() -> None:
    assert flops("ReduceMean", [(4, 8)], {"axes": [1]}) == 32
    assert flops("LayerNormalization", [(4, 8), (8,)]) == 8 * 32
    assert flops("Flatten", [(4, 8)]) == 0


def test_errors_name_the_node_and_the_fix() -> None:
    assert load_error("""
        graph:
          - {name: x, op: zeros, shape: [2, 3, 4]}
          - {name: s, op: ones, shape: [3]}
          - {name: n, op: LayerNormalization, inputs: [x, s]}
        """) == (
        "g.yaml:4: Scale [3] does not broadcast to the normalised dimensions [4] for 'n' (op: "
        "'LayerNormalization') with input shapes: [2,3,4], [3]. Fix: give Scale the shape of "
        "the input's dimensions from axis -1"
    )
    assert "Invalid reduction dimension 3 for input with 3 dimensions. for 'r' (op: " \
        "'ReduceSum')" in load_error("""
        graph:
          - {name: x, op: zeros, shape: [2, 3, 4]}
          - {name: r, op: ReduceSum, inputs: [x], axes: [3]}
        """)  # fmt: skip
    assert "axis 4 out of range for input with 3 dimensions for 'f' (op: 'Flatten')" in load_error("""
        graph:
          - {name: x, op: zeros, shape: [2, 3, 4]}
          - {name: f, op: Flatten, inputs: [x], axis: 4}
        """)


def test_layer_norm_in_blocks_of_rows_matches_one_pass() -> None:
    """Past `BLOCK` elements the host works in blocks of rows; Scale broadcasts over axis 1."""
    x = normal(5, 3, 4000) * 3 + 1
    scale, bias = normal(1, 4000), normal(4000)
    got = ours("LayerNormalization", [x, scale, bias], {"axis": 1})[0]
    wide = x.astype(np.float64).reshape(5, -1)
    norm = (wide - wide.mean(1, keepdims=True)) / np.sqrt(wide.var(1, keepdims=True) + 1e-5)
    want = norm.reshape(x.shape) * scale + bias
    assert np.allclose(got, want, atol=1e-4)
    assert ours("LayerNormalization", [np.zeros((2, 0), np.float32)])[0].shape == (2, 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple), st.integers(1, 300),
       st.floats(-100.0, 100.0), st.sampled_from(["float32", "float64"]))  # fmt: skip
def test_layer_norm_matches_a_float64_reference(
    lead: tuple[int, ...], width: int, offset: float, dtype: str
) -> None:
    """Row means as products with ones, against float64 numpy's mean and variance; an offset
    far from 0 checks that centring comes before the variance."""
    x = (normal(*lead, width) + np.float32(offset)).astype(dtype)
    scale, bias = normal(width).astype(dtype), normal(width).astype(dtype)
    got = ours("LayerNormalization", [x, scale, bias])[0]
    wide = x.astype(np.float64)
    centred = wide - wide.mean(-1, keepdims=True)
    want = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5) * scale + bias
    assert got.dtype == x.dtype and got.shape == x.shape
    # float32 sums of up to 300 values near 100 round by ~1e-5 of a unit variance, times a
    # scale of up to ~4: 1e-3 leaves room for any summation order (BLAS) and still fails the
    # variance as E[x^2] - E[x]^2, off by 2e-3 to 7e-3 at that offset (measured, seed 0)
    tol = 1e-3 if dtype == "float32" else 1e-9
    assert np.allclose(got, want, rtol=tol, atol=tol)
