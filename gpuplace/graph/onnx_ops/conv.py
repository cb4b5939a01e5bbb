"""ONNX's CNN ops: Conv (N-D, groups, dilations, pads or auto_pad), MaxPool and AveragePool
(ceil_mode, count_include_pad, dilations), GlobalAveragePool, GlobalMaxPool and the inference
form of BatchNormalization (opset 13-20).

Windows are taken as strided views of the padded input, one per kernel offset (`_windows`):
Conv stacks them into columns and multiplies (im2col + one batched xp.matmul per group; the
columns, kernel-size times the input, are built for a few images at a time), the
pools fold them with xp.maximum or a sum. AveragePool's divisor is the same sum taken over a
mask of ones: ones over the input only (count_include_pad=0), or over the input and its pads
(=1), never over the cells that ceil_mode's last window reaches past the pads, as onnxruntime.
MaxPool's second output (Indices) is not supported; nor is a BatchNormalization in training mode.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import product
from math import prod
from types import ModuleType
from typing import Any, NamedTuple

from ..attrs import INT, NUMBER, POSITIVE
from ..infer import FLOATS, Specs, shape_error
from ..kernels import Array
from ..model import TensorSpec
from ..opdef import REQUIRED, OpDef
from .common import (
    FLAG,
    INTS,
    choice,
    elements,
    need_rank,
    onnx_op,
    per_input,
    per_output,
    same_dtype,
)

Attrs = Mapping[str, Any]
COLS_BYTES = 64 << 20  # Conv's im2col columns at most this (but one image's) at a time
# B in the product from this many columns per group. Against main's kernel (a stack of the
# windows, B added after), in one process in turn (session 7): with B in the product always,
# 64x3x32x32 -> 16 (27 columns) took 0.87 of the time, 64x16x16x16 -> 32 (144) 0.95,
# 8x64x56x56 -> 64 (576) 0.98, but a depthwise 8x64x56x56 (9 columns) 1.04-1.06; with B
# added after it below 16 columns, that one 0.97-1.07 (noise), the others 0.92-1.03
_BIAS_ROWS = 16
AUTO_PAD = choice("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


class Window(NamedTuple):
    """Where a kernel's windows fall along each spatial axis."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    out: tuple[int, ...]
    begin: tuple[int, ...]  # pads before
    end: tuple[int, ...]  # pads after


def window(name: str, tf_type: str, inputs: Specs, attrs: Attrs, kernel: tuple[int, ...]) -> Window:
    """Output sizes and pads, as ONNX's shape inference works them out."""
    spatial = inputs[0].shape[2:]
    n = len(spatial)

    def ints(attr: str, default: tuple[int, ...], size: int, least: int) -> tuple[int, ...]:
        given = attrs.get(attr)
        value = default if given is None else given
        if len(value) != size or any(v < least for v in value):
            raise shape_error(
                f"{attr} {list(value)} does not fit {n} spatial dimensions", name, tf_type,
                inputs, f"give {size} integers >= {least}",
            )  # fmt: skip
        return tuple(value)

    if len(kernel) != n or any(k < 1 for k in kernel):
        raise shape_error(
            f"kernel_shape {list(kernel)} does not fit {n} spatial dimensions", name, tf_type,
            inputs, f"give {n} kernel sizes >= 1 (the input is N x C x {n} spatial dimensions)",
        )  # fmt: skip
    strides = ints("strides", (1,) * n, n, 1)
    dilations = ints("dilations", (1,) * n, n, 1)
    pads = ints("pads", (0,) * (2 * n), 2 * n, 0)
    auto, ceil = attrs["auto_pad"], attrs.get("ceil_mode", 0)
    out, begin, end = [], [], []
    for i, size in enumerate(spatial):
        reach = (kernel[i] - 1) * dilations[i] + 1
        s = strides[i]
        if auto.startswith("SAME"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + reach - size)
            b = total // 2 if auto == "SAME_UPPER" else total - total // 2
            out.append(o)
            begin.append(b)
            end.append(total - b)
            continue
        b, e = (0, 0) if auto == "VALID" else (pads[i], pads[i + n])
        span = size + b + e - reach
        if span < 0:
            raise shape_error(
                f"a window of {reach} does not fit axis {i + 2} of size {size} padded to "
                f"{size + b + e}", name, tf_type, inputs,
                "use a smaller kernel or dilation, or pad the input",
            )  # fmt: skip
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and (o - 1) * s >= size + b:  # the last window must start inside the input
            o -= 1
        out.append(o)
        begin.append(b)
        end.append(e)
    return Window(kernel, strides, dilations, tuple(out), tuple(begin), tuple(end))


def _padded(xp: ModuleType, x: Array, w: Window, fill: float) -> Array:
    """x with its pads, and the cells past them that ceil_mode's last window reaches, holding
    `fill` (x itself when there are none)."""
    widths = [(0, 0), (0, 0)]
    for i, size in enumerate(x.shape[2:]):
        need = (w.out[i] - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1
        widths.append((w.begin[i], max(w.end[i], need - size - w.begin[i])))
    if any(a or b for a, b in widths):
        x = xp.pad(x, widths, constant_values=fill)
    return x


def _along(w: Window, axis: int, offset: int) -> slice:
    """Where the windows' cells at `offset` along spatial axis `axis` fall in the padded input."""
    start = offset * w.dilations[axis]
    return slice(start, start + (w.out[axis] - 1) * w.strides[axis] + 1, w.strides[axis])


def _windows(xp: ModuleType, x: Array, w: Window, fill: float) -> Iterator[Array]:
    """For each kernel offset (row-major), the (N, C, *out) view of the input it multiplies;
    pads, and the cells past them that ceil_mode's last window reaches, hold `fill`."""
    x = _padded(xp, x, w, fill)
    for offset in product(*(range(k) for k in w.kernel)):
        index = (slice(None), slice(None), *(_along(w, i, j) for i, j in enumerate(offset)))
        yield x[index]


# --- Conv ------------------------------------------------------------------------------------


def _conv_window(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Window:
    need_rank(name, tf_type, inputs, 0, lambda r: r >= 3, "at least rank 3",
              "Conv takes N x C x D1 x ... (a batch of channels-first images)")  # fmt: skip
    x, w = inputs[0].shape, inputs[1].shape
    group = attrs["group"]
    if len(w) != len(x) or x[1] != w[1] * group or w[0] % group:
        raise shape_error(
            f"weights {list(w)} do not fit an input of {x[1]} channels in {group} group(s)",
            name, tf_type, inputs, f"W is M x C/group x k1 x ... with M divisible by group; "
            f"here C/group = {x[1] / group:g}",
        )  # fmt: skip
    given = attrs.get("kernel_shape")
    if given is not None and tuple(given) != w[2:]:
        raise shape_error(
            f"kernel_shape {list(given)} is not the weights' {list(w[2:])}", name, tf_type,
            inputs, "leave kernel_shape out (the weights give it) or make them agree",
        )  # fmt: skip
    if len(inputs) == 3 and inputs[2].shape != (w[0],):
        raise shape_error(
            f"the bias B must be a vector of the {w[0]} output channels", name, tf_type, inputs,
            f"give B of shape [{w[0]}]",
        )  # fmt: skip
    return window(name, tf_type, inputs, attrs, w[2:])


def _conv(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dtype = same_dtype(name, tf_type, inputs, FLOATS)
    w = _conv_window(name, tf_type, attrs, inputs)
    return (TensorSpec((inputs[0].shape[0], inputs[1].shape[0], *w.out), dtype),)


def _conv_flops(attrs: Attrs, ins: Specs, outs: Specs) -> float:
    """2 * N * M * (output pixels) * C/group * (kernel elements); the bias add not counted."""
    w = ins[1].shape
    return 2.0 * prod(outs[0].shape) * w[1] * prod(w[2:])


def _conv_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """im2col + one batched matmul per group, for as many images at a time as keep the
    columns within `COLS_BYTES` (at least one image). With `_BIAS_ROWS` columns per group or
    more, the bias B rides in the product: each group's columns end in a row of ones and its
    weights in a column of B, which saves a pass over the output; with fewer (a depthwise
    3x3 has 9) the extra row costs the product more than the pass (see `_BIAS_ROWS`)."""
    x, weights = inputs[0], inputs[1]
    specs = tuple(TensorSpec(tuple(a.shape), a.dtype.name) for a in inputs)
    w = _conv_window("", "Conv", attrs, specs)
    n, c, m, g = x.shape[0], x.shape[1], weights.shape[0], attrs["group"]
    k, rows = prod(w.kernel), (c // g) * prod(w.kernel)
    biased = len(inputs) == 3 and rows >= _BIAS_ROWS
    per_image = (c * k + g * biased) * prod(w.out) * x.dtype.itemsize
    step = max(1, COLS_BYTES // max(per_image, 1))
    grouped = weights.reshape(g, m // g, rows)
    if biased:
        bias = inputs[2].reshape(g, m // g, 1).astype(grouped.dtype, copy=False)
        grouped = xp.concatenate([grouped, bias], axis=2)

    def products(images: Array) -> Array:
        count = len(images)
        cols = xp.empty((count, g, rows + biased, *w.out), dtype=x.dtype)
        for offset, view in enumerate(_windows(xp, images, w, 0.0)):  # row (channel, offset)
            cols[:, :, offset:rows:k] = view.reshape(count, g, c // g, *w.out)
        if biased:
            cols[:, :, rows] = 1
        cols = cols.reshape(count, g, rows + biased, prod(w.out))
        return xp.matmul(grouped, cols).reshape(count, m, *w.out)

    if step >= n:  # one block: the matmul's own output is the result, not copied
        y = products(x)
    else:
        y = xp.empty((n, m, *w.out), dtype=x.dtype)
        for start in range(0, n, step):
            y[start : start + step] = products(x[start : start + step])
    if len(inputs) == 3 and not biased:
        y += inputs[2].reshape(m, *(1,) * len(w.out))
    return [y]


# --- pools -----------------------------------------------------------------------------------


def _pool(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dtype = same_dtype(name, tf_type, inputs, FLOATS)
    need_rank(name, tf_type, inputs, 0, lambda r: r >= 3, "at least rank 3",
              f"{tf_type} takes N x C x D1 x ... (channels first)")  # fmt: skip
    w = window(name, tf_type, inputs, attrs, tuple(attrs["kernel_shape"]))
    return (TensorSpec((*inputs[0].shape[:2], *w.out), dtype),)


def _pool_flops(attrs: Attrs, ins: Specs, outs: Specs) -> float:
    """One per window element per output element."""
    return float(prod(attrs["kernel_shape"]) * elements(outs))


def _pool_window(tf_type: str, x: Array, attrs: Attrs) -> Window:
    spec = (TensorSpec(tuple(x.shape), x.dtype.name),)
    return window("", tf_type, spec, attrs, tuple(attrs["kernel_shape"]))


def _max_pool(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """The window's maximum one spatial axis at a time (a maximum over a box is the maximum
    over each axis in turn), the first axis first: its windows' rows are contiguous, and it
    shrinks the input before the last axis's strided windows: k + k passes for a k x k
    window instead of k * k (8x64x56x56 in 3x3 windows of stride 2: 1.86 -> 1.32-1.47 ms;
    64x16x32x32 in 2x2 windows: 0.39 -> 0.35 ms)."""
    x = inputs[0]
    w = _pool_window("MaxPool", x, attrs)
    out = _padded(xp, x, w, -float("inf"))
    for axis, size in enumerate(w.kernel):
        index: list[Any] = [slice(None)] * out.ndim
        views = []
        for offset in range(size):
            index[axis + 2] = _along(w, axis, offset)
            views.append(out[tuple(index)])
        out = xp.maximum(views[0], views[1]) if size > 1 else views[0]
        for view in views[2:]:
            xp.maximum(out, view, out=out)
    return [out.copy() if xp.may_share_memory(out, x) else out]


def _average_pool(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    w = _pool_window("AveragePool", x, attrs)
    mask = xp.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if attrs["count_include_pad"]:  # the pads count, the cells past them do not
        widths = [(0, 0), (0, 0), *zip(w.begin, w.end, strict=True)]
        mask = xp.pad(mask, widths, constant_values=1)
        x = xp.pad(x, widths, constant_values=0)
        w = Window(w.kernel, w.strides, w.dilations, w.out, (0,) * len(w.out), (0,) * len(w.out))
    total, count = _sum(_windows(xp, x, w, 0.0)), _sum(_windows(xp, mask, w, 0.0))
    return [total / count]


def _sum(views: Iterator[Array]) -> Array:
    out = next(views).copy()
    for view in views:
        out += view
    return out


def _global(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dtype = same_dtype(name, tf_type, inputs, FLOATS)
    need_rank(name, tf_type, inputs, 0, lambda r: r >= 3, "at least rank 3",
              f"{tf_type} takes N x C x D1 x ... (channels first)")  # fmt: skip
    shape = inputs[0].shape
    return (TensorSpec((*shape[:2], *(1,) * (len(shape) - 2)), dtype),)


def _global_kernel(kind: str) -> Any:
    def compute(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
        x = inputs[0]
        return [getattr(xp, kind)(x, axis=tuple(range(2, x.ndim)), keepdims=True)]

    return compute


# --- BatchNormalization ----------------------------------------------------------------------


def _batch_norm(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dtype = same_dtype(name, tf_type, inputs, FLOATS)
    need_rank(name, tf_type, inputs, 0, lambda r: r >= 2, "at least rank 2",
              "BatchNormalization takes N x C x ... (channels first)")  # fmt: skip
    if attrs["training_mode"]:
        raise shape_error(
            "training_mode=1 is not supported (the batch statistics of a training step)", name,
            tf_type, inputs, "export the model for inference (training_mode=0)",
        )  # fmt: skip
    c = inputs[0].shape[1]
    for i, s in enumerate(inputs[1:], 1):
        if s.shape != (c,):
            what = ("scale", "B", "input_mean", "input_var")[i - 1]
            raise shape_error(
                f"{what} must be a vector of the {c} channels", name, tf_type, inputs,
                f"give {what} of shape [{c}]",
            )  # fmt: skip
    return (TensorSpec(inputs[0].shape, dtype),)


def _batch_norm_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """(x - mean) / sqrt(var + epsilon) * scale + B, folded per channel into x * a + b."""
    x, scale, bias, mean, var = inputs
    a = scale / xp.sqrt(var + x.dtype.type(attrs["epsilon"]))
    b = bias - mean * a
    shape = (-1, *(1,) * (x.ndim - 2))
    y = x * a.reshape(shape)
    y += b.reshape(shape)
    return [y]


_WINDOW = {
    "auto_pad": (AUTO_PAD, "NOTSET"), "dilations": (INTS, None), "pads": (INTS, None),
    "strides": (INTS, None),
}  # fmt: skip
_POOL = {**_WINDOW, "kernel_shape": (INTS, REQUIRED), "ceil_mode": (FLAG, 0)}

OPS: tuple[OpDef, ...] = (
    onnx_op("Conv", _conv, _conv_kernel,
            {**_WINDOW, "group": (POSITIVE, 1), "kernel_shape": (INTS, None)},
            min_inputs=2, max_inputs=3, flops=_conv_flops),
    onnx_op("MaxPool", _pool, _max_pool, {**_POOL, "storage_order": (INT, 0)},
            flops=_pool_flops),
    onnx_op("AveragePool", _pool, _average_pool, {**_POOL, "count_include_pad": (FLAG, 0)},
            flops=_pool_flops),
    onnx_op("GlobalAveragePool", _global, _global_kernel("mean"), flops=per_input),
    onnx_op("GlobalMaxPool", _global, _global_kernel("max"), flops=per_input),
    onnx_op("BatchNormalization", _batch_norm, _batch_norm_kernel,
            {"epsilon": (NUMBER, 1e-5), "momentum": (NUMBER, 0.9), "training_mode": (FLAG, 0)},
            min_inputs=5, max_inputs=5, flops=per_output(2.0)),
)  # fmt: skip
