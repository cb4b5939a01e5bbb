"""ONNX's CNN ops (graph/onnx_ops/conv.py) against direct nested loops on tiny shapes; output
sizes as a property against ONNX's formula; errors; FLOPs."""

from __future__ import annotations

from math import ceil, floor
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.graph import get_op
from gpuplace.graph.onnx_ops.conv import _pool_window, _windows
from tests.onnx_ops.helpers import flops, load_error, ours, spec

RNG = np.random.default_rng(3)


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def loop_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
              pads: tuple[int, int, int, int], dil: tuple[int, int], group: int) -> np.ndarray:  # fmt: skip
    """2-D convolution by the definition: every output cell sums its window, one at a time."""
    n, _, h, wd = x.shape
    m, cg, kh, kw = w.shape
    top, left, bottom, right = pads
    oh = (h + top + bottom - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + left + right - (kw - 1) * dil[1] - 1) // stride[1] + 1
    out = np.zeros((n, m, oh, ow))
    for i in range(n):
        for o in range(m):
            g = o // (m // group)
            for r in range(oh):
                for q in range(ow):
                    total = 0.0 if b is None else float(b[o])
                    for ch in range(cg):
                        for u in range(kh):
                            for v in range(kw):
                                y = r * stride[0] - top + u * dil[0]
                                z = q * stride[1] - left + v * dil[1]
                                if 0 <= y < h and 0 <= z < wd:
                                    total += float(x[i, g * cg + ch, y, z]) * float(w[o, ch, u, v])
                    out[i, o, r, q] = total
    return out


@pytest.mark.parametrize(
    ("c", "m", "k", "stride", "pads", "dil", "group"),
    [
        (3, 4, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
        (4, 6, (3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),
        (4, 4, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4),  # depthwise
        (2, 6, (2, 3), (1, 2), (0, 1, 1, 0), (2, 1), 2),  # depthwise, 3 outputs per channel
        (2, 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ],
)
def test_conv_against_a_direct_loop(c: int, m: int, k: tuple[int, int], stride: tuple[int, int],
                                    pads: tuple[int, int, int, int], dil: tuple[int, int],
                                    group: int) -> None:  # fmt: skip
    x, w, b = normal(2, c, 6, 5), normal(m, c // group, *k), normal(m)
    attrs = {"strides": list(stride), "pads": list(pads), "dilations": list(dil), "group": group}
    got = ours("Conv", [x, w, b], attrs)[0]
    assert np.allclose(got, loop_conv(x, w, b, stride, pads, dil, group), atol=1e-5)
    no_bias = ours("Conv", [x, w], attrs)[0]
    assert np.allclose(no_bias, loop_conv(x, w, None, stride, pads, dil, group), atol=1e-5)


def test_conv_builds_its_columns_a_few_images_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for one image's columns, five images go one by one: same result."""
    from gpuplace.graph.onnx_ops import conv

    x, w, b = normal(5, 2, 6, 5), normal(3, 2, 3, 3), normal(3)
    monkeypatch.setattr(conv, "COLS_BYTES", 2 * 9 * 4 * 3 * 4)  # one image: C * K * L * 4 B
    got = ours("Conv", [x, w, b], {"strides": [1, 1]})[0]
    assert np.allclose(got, loop_conv(x, w, b, (1, 1), (0, 0, 0, 0), (1, 1), 1), atol=1e-5)


def test_same_padding_puts_the_odd_pad_at_the_end_or_the_start() -> None:
    x, w = normal(1, 1, 5, 5), normal(1, 1, 2, 2)
    upper = ours("Conv", [x, w], {"auto_pad": "SAME_UPPER"})[0]
    lower = ours("Conv", [x, w], {"auto_pad": "SAME_LOWER"})[0]
    assert upper.shape == lower.shape == (1, 1, 5, 5)
    assert np.allclose(upper, loop_conv(x, w, None, (1, 1), (0, 0, 1, 1), (1, 1), 1), atol=1e-5)
    assert np.allclose(lower, loop_conv(x, w, None, (1, 1), (1, 1, 0, 0), (1, 1), 1), atol=1e-5)


def test_conv_one_and_three_spatial_dimensions() -> None:
    x, w = normal(2, 3, 9), normal(4, 3, 3)
    got = ours("Conv", [x, w], {"pads": [1, 1]})[0]
    want = loop_conv(x[:, :, None], w[:, :, None], None, (1, 1), (0, 1, 0, 1), (1, 1), 1)[:, :, 0]
    assert np.allclose(got, want, atol=1e-5)
    x3, w3 = normal(1, 2, 4, 3, 3), normal(3, 2, 2, 2, 2)
    got3 = ours("Conv", [x3, w3])[0]
    want3 = np.einsum("ncdhw,mcdhw->nm", x3[:, :, 1:3, 0:2, 1:3], w3)
    assert got3.shape == (1, 3, 3, 2, 2) and np.allclose(got3[:, :, 1, 0, 1], want3, atol=1e-5)


def loop_pool(x: np.ndarray, k: int, s: int, pad: int, kind: str, include_pad: bool,
              ceil_mode: bool) -> np.ndarray:  # fmt: skip
    """1-D pooling of each row by the definition (with ONNX's ceil_mode rule)."""
    n = x.shape[-1]
    span = (n + 2 * pad - k) / s
    o = (ceil(span) if ceil_mode else floor(span)) + 1
    if ceil_mode and (o - 1) * s >= n + pad:
        o -= 1
    out = np.zeros((*x.shape[:-1], o))
    for j in range(o):
        start = j * s - pad
        cells = [t for t in range(start, start + k) if 0 <= t < n]
        values = x[..., cells]
        if kind == "max":
            out[..., j] = values.max(axis=-1)
        else:
            padded = len([t for t in range(start, start + k) if t < n + pad])
            out[..., j] = values.sum(axis=-1) / (padded if include_pad else len(cells))
    return out


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize(("k", "s", "pad"), [(3, 2, 1), (2, 2, 0), (3, 1, 0), (2, 3, 1)])
def test_pools_against_a_direct_loop(k: int, s: int, pad: int, ceil_mode: int) -> None:
    x = normal(2, 3, 8)
    attrs: dict[str, Any] = {"kernel_shape": [k], "strides": [s], "pads": [pad, pad],
                             "ceil_mode": ceil_mode}  # fmt: skip
    got = ours("MaxPool", [x], attrs)[0]
    assert np.allclose(got, loop_pool(x, k, s, pad, "max", False, bool(ceil_mode)))
    for include in (0, 1):
        got = ours("AveragePool", [x], {**attrs, "count_include_pad": include})[0]
        want = loop_pool(x, k, s, pad, "avg", bool(include), bool(ceil_mode))
        assert np.allclose(got, want, atol=1e-6), include


def test_global_pools_and_batch_norm_by_definition() -> None:
    x = normal(2, 3, 4, 5)
    assert np.allclose(ours("GlobalAveragePool", [x])[0][..., 0, 0], x.mean(axis=(2, 3)))
    assert np.array_equal(ours("GlobalMaxPool", [x])[0][..., 0, 0], x.max(axis=(2, 3)))
    scale, bias, mean, var = normal(3), normal(3), normal(3), np.abs(normal(3)) + 0.5
    got = ours("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3})[0]
    for c in range(3):
        want = (x[:, c] - mean[c]) / np.sqrt(var[c] + 1e-3) * scale[c] + bias[c]
        assert np.allclose(got[:, c], want, atol=1e-5)


def onnx_size(size: int, k: int, s: int, d: int, b: int, e: int, ceil_mode: int) -> int:
    """ONNX's output size formula (operators.md, MaxPool), written from the spec."""
    value = (size + b + e - ((k - 1) * d + 1)) / s + 1
    out = ceil(value) if ceil_mode else floor(value)
    if ceil_mode and (out - 1) * s >= size + b:
        out -= 1
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2),
       st.integers(0, 2), st.integers(0, 2), st.integers(0, 1),
       st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))  # fmt: skip
def test_output_sizes_follow_onnx(size: int, k: int, s: int, d: int, b: int, e: int, ceil_mode: int,
                                  auto_pad: str) -> None:  # fmt: skip
    attrs = {"kernel_shape": [k], "strides": [s], "dilations": [d], "auto_pad": auto_pad,
             "ceil_mode": ceil_mode, **({"pads": [b, e]} if auto_pad == "NOTSET" else {})}  # fmt: skip
    if auto_pad.startswith("SAME"):
        want = ceil(size / s)
    else:
        b, e = (b, e) if auto_pad == "NOTSET" else (0, 0)
        if size + b + e < (k - 1) * d + 1:
            with pytest.raises(BadInput, match="does not fit axis 2"):
                spec("MaxPool", [(1, 1, size)], attrs)
            return
        want = onnx_size(size, k, s, d, b, e, ceil_mode)
    assert spec("MaxPool", [(1, 1, size)], attrs)[0].shape == (1, 1, want)
    conv = {key: v for key, v in attrs.items() if key not in ("kernel_shape", "ceil_mode")}
    if not ceil_mode:
        assert spec("Conv", [(1, 2, size), (3, 2, k)], conv)[0].shape == (1, 3, want)


def test_flop_counts() -> None:
    # 2 * Cout * Hout * Wout * Cin/group * kh * kw * N
    assert flops("Conv", [(2, 4, 7, 6), (6, 2, 3, 3)], {"group": 2}) == 2 * 6 * 5 * 4 * 2 * 9 * 2
    assert flops("Conv", [(1, 3, 8, 8), (16, 3, 3, 3), (16,)], {"pads": [1, 1, 1, 1]}) == (
        2 * 16 * 8 * 8 * 3 * 9
    )
    assert flops("MaxPool", [(1, 2, 4, 4)], {"kernel_shape": [2, 2], "strides": [2, 2]}) == 8 * 4
    assert flops("GlobalAveragePool", [(2, 3, 4, 5)]) == 120
    assert flops("BatchNormalization", [(2, 3, 4), (3,), (3,), (3,), (3,)]) == 2 * 24


def test_errors_name_the_node_and_the_fix() -> None:
    assert load_error("""
        graph:
          - {name: x, op: zeros, shape: [1, 3, 8, 8]}
          - {name: w, op: zeros, shape: [4, 2, 3, 3]}
          - {name: c, op: Conv, inputs: [x, w]}
        """) == (
        "g.yaml:4: weights [4, 2, 3, 3] do not fit an input of 3 channels in 1 group(s) for 'c' "
        "(op: 'Conv') with input shapes: [1,3,8,8], [4,2,3,3]. Fix: W is M x C/group x k1 x ... "
        "with M divisible by group; here C/group = 3"
    )
    assert (
        "kernel_shape [5] does not fit 2 spatial dimensions for 'p' (op: 'MaxPool')"
        in load_error("""
        graph:
          - {name: x, op: zeros, shape: [1, 3, 8, 8]}
          - {name: p, op: MaxPool, inputs: [x], kernel_shape: [5]}
        """)
    )
    assert load_error("""
        graph:
          - {name: x, op: zeros, shape: [1, 3, 8, 8]}
          - {name: p, op: MaxPool, inputs: [x]}
        """) == (
        "g.yaml:3: op 'p' (MaxPool) needs 'kernel_shape'; MaxPool takes: auto_pad, dilations, "
        "pads, strides, kernel_shape, ceil_mode, storage_order"
    )
    assert "training_mode=1 is not supported" in load_error("""
        graph:
          - {name: x, op: zeros, shape: [1, 3, 2, 2]}
          - {name: v, op: ones, shape: [3]}
          - {name: b, op: BatchNormalization, inputs: [x, v, v, v, v], training_mode: 1}
        """)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3),
    st.data(),
    st.integers(0, 1),
    st.booleans(),
)
def test_max_pool_axis_by_axis_is_the_window_maximum(
    dims: int, data: st.DataObject, ceil_mode: int, nan: bool
) -> None:
    """MaxPool folds one spatial axis at a time: the same values as the maximum over each
    whole window (pads, dilations, ceil_mode and NaNs included), and always a fresh array."""
    sizes = data.draw(st.lists(st.integers(1, 7), min_size=dims, max_size=dims))
    kernel = [data.draw(st.integers(1, min(3, n))) for n in sizes]
    strides = data.draw(st.lists(st.integers(1, 3), min_size=dims, max_size=dims))
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel] * 2
    dilations = [data.draw(st.integers(1, 2)) if k > 1 else 1 for k in kernel]
    x = normal(2, 3, *sizes)
    if nan:
        x.flat[x.size // 2] = np.nan
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "ceil_mode": ceil_mode,
             "dilations": dilations}  # fmt: skip
    try:
        w = _pool_window("MaxPool", x, get_op("MaxPool").normalize("p", attrs))
    except BadInput:  # a window larger than its padded axis
        assume(False)
    plain = np.stack(list(_windows(np, x, w, -np.inf))).max(axis=0)  # NaN wins, as maximum's
    got = ours("MaxPool", [x], attrs)[0]
    np.testing.assert_array_equal(got, plain)
    assert not np.may_share_memory(got, x)
