"""ONNX's data-movement operators (opset 13-20): Shape, Reshape, Transpose, Concat, Split, Slice,
Squeeze, Unsqueeze, Expand, Tile, Pad and Cast. Inputs that ONNX passes as tensors but that fix
the output shape (Reshape's `shape`, Slice's `starts`, ...) are attrs named after the input.
None does arithmetic (no FLOPs) but Cast (one per element)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from types import ModuleType
from typing import Any

from ...limits import MAX_RANK
from .. import infer as inf
from .. import kernels as k
from ..attrs import INT, RANK_WHY, AttrError
from ..infer import Specs, fmt, shape_error
from ..model import TensorSpec
from ..opdef import REQUIRED, OpDef
from .common import FLAG, INTS, NO_FLOPS, ONE_PER_OUTPUT, axis_in, broadcast_shapes
from .shape_attrs import BOUNDS, DTYPE_TO, OPTIONAL_INT, OPTIONAL_INTS, OPTIONAL_SCALAR, PAD_MODE

Attrs = Mapping[str, Any]
Array = Any
INT64_MAX = 2**63 - 1


def spec(shape: Sequence[int], dtype: str) -> Specs:
    """One output of this shape and dtype."""
    return (TensorSpec(tuple(shape), dtype),)


def ranked(name: str, tf_type: str, inputs: Specs, shape: Sequence[int], dtype: str) -> Specs:
    """`spec(shape, dtype)` for a shape the op builds from its attrs and inputs, refused past
    numpy's MAX_RANK dimensions (an array of more cannot exist)."""
    if len(shape) > MAX_RANK:
        raise shape_error(
            f"The output would have {len(shape)} dimensions", name, tf_type, inputs,
            f"arrays have at most {MAX_RANK} ({RANK_WHY})",
        )  # fmt: skip
    return spec(shape, dtype)


def axes_in(
    name: str, tf_type: str, inputs: Specs, axes: Sequence[int], rank: int, what: str = "axes"
) -> tuple[int, ...]:
    """Each of `axes` made non-negative; the op's error for one out of range or given twice."""
    out = tuple(axis_in(name, tf_type, inputs, a, rank, rank) for a in axes)
    if len(set(out)) != len(out):
        twice = next(a for a in out if out.count(a) > 1)
        raise shape_error(
            f"{what} {list(axes)} name axis {twice} twice", name, tf_type, inputs,
            "give each axis once",
        )  # fmt: skip
    return out


def _clamp(value: int, low: int, high: int) -> int:
    """`value` in [low, high]; `high` where the range is empty (a negative step on an empty axis)."""
    return min(max(value, low), high)


def shape_range(rank: int, attrs: Attrs) -> tuple[int, int]:
    """Shape's [start, end): negative counts from the end, both clamped to [0, rank]."""
    start, end = attrs["start"], attrs.get("end")
    start = _clamp(start + rank if start < 0 else start, 0, rank)
    end = rank if end is None else _clamp(end + rank if end < 0 else end, 0, rank)
    return start, max(start, end)


def infer_shape(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    start, end = shape_range(len(inputs[0].shape), attrs)
    return spec((end - start,), "int64")


def shape(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    start, end = shape_range(inputs[0].ndim, attrs)
    return [xp.asarray(inputs[0].shape[start:end], dtype=xp.int64)]


def reshape_to(
    given: Sequence[int], target: Sequence[int], allowzero: int
) -> tuple[int, ...] | str:
    """Reshape's output shape: 0 copies the input's dimension at that index (unless
    `allowzero`), one -1 takes what is left; or what is wrong, as text."""
    if any(d < -1 for d in target) or list(target).count(-1) > 1:
        return "shape holds integers >= -1, at most one of them -1"
    if allowzero and 0 in target and -1 in target:
        return "with allowzero, shape cannot hold both 0 and -1"
    out = list(target)
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(given):
                return (
                    f"shape[{i}] is 0 (copy the input's dimension) but the input has {len(given)}"
                )
            out[i] = given[i]
    total = prod(given)
    if -1 in out:
        known = prod(d for d in out if d != -1)
        if known == 0 or total % known:
            return f"{total} elements do not divide into {fmt(out)}"
        out[out.index(-1)] = total // known
    if prod(out) != total:
        return f"{total} elements do not fill {fmt(out)} ({prod(out)} elements)"
    return tuple(out)


def infer_reshape(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    out = reshape_to(inputs[0].shape, attrs["shape"], attrs["allowzero"])
    if isinstance(out, str):
        raise shape_error(
            f"Cannot reshape to {fmt(attrs['shape'])}: {out}", name, tf_type, inputs,
            "give a shape with as many elements as the input (0 copies a dimension, -1 infers one)",
        )  # fmt: skip
    return ranked(name, tf_type, inputs, out, inputs[0].dtype)


def reshape(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    return [xp.reshape(x, reshape_to(x.shape, attrs["shape"], attrs["allowzero"]))]


def split_sizes(
    name: str, tf_type: str, inputs: Specs, attrs: Attrs
) -> tuple[int, tuple[int, ...]]:
    """Split's axis and the size of each part: `split`, or `num_outputs` parts of ceil(d / n)
    with a smaller last one."""
    rank = len(inputs[0].shape)
    axis = axis_in(name, tf_type, inputs, attrs["axis"], rank, rank)
    size = inputs[0].shape[axis]
    given = attrs.get("split")
    if given is None:
        n = attrs["num_outputs"]
        chunk = -(-size // n)
        given = (chunk,) * (n - 1) + (size - chunk * (n - 1),)
        if given[-1] < 0:
            raise shape_error(
                f"Cannot split dimension {axis} of size {size} into {n} parts of {chunk}",
                name, tf_type, inputs, f"give split sizes adding up to {size}",
            )  # fmt: skip
    elif any(d < 0 for d in given) or sum(given) != size:
        raise shape_error(
            f"split {list(given)} does not add up to dimension {axis} of size {size}",
            name, tf_type, inputs, f"give non-negative sizes adding up to {size}",
        )  # fmt: skip
    return axis, given


def infer_split(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    x = inputs[0]
    axis, sizes = split_sizes(name, tf_type, inputs, attrs)
    return tuple(spec((*x.shape[:axis], s, *x.shape[axis + 1 :]), x.dtype)[0] for s in sizes)


def split(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    axis, sizes = split_sizes("", "Split", (spec(x.shape, "float32")), attrs)
    cuts, at = [], 0
    for size in sizes[:-1]:
        at += size
        cuts.append(at)
    return list(xp.split(x, cuts, axis=axis))


def _split_outputs(attrs: Attrs) -> int:
    given = attrs.get("split")
    return len(given) if given is not None else int(attrs["num_outputs"])


def _check_split(attrs: dict[str, Any]) -> None:
    if (attrs.get("split") is None) == (attrs.get("num_outputs") is None):
        raise AttrError("give exactly one of split (the sizes) and num_outputs")
    if attrs.get("num_outputs") is not None and attrs["num_outputs"] < 1:
        raise AttrError(f"num_outputs is {attrs['num_outputs']}; give at least 1")
    if attrs.get("split") == ():
        raise AttrError("split is empty; give at least one size")


def slice_bounds(
    name: str, tf_type: str, inputs: Specs, attrs: Attrs
) -> list[tuple[int, int, int, int]]:
    """Slice's (axis, start, end, step) per sliced axis, clamped as ONNX says: negative starts
    and ends count from the end; then for a positive step both are clamped to [0, d], for a
    negative one start to [0, d - 1] and end to [-1, d - 1]. An end of INT64_MAX with a negative
    step runs to the start of the axis, as in onnxruntime (exporters write INT64_MAX for "to the
    end" whatever the direction), where the ONNX text would give nothing."""
    dims = inputs[0].shape
    starts, ends = attrs["starts"], attrs["ends"]
    axes = attrs.get("axes") or tuple(range(len(starts)))
    steps = attrs.get("steps") or (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise shape_error(
            f"starts, ends, axes and steps have {len(starts)}, {len(ends)}, {len(axes)} and "
            f"{len(steps)} entries", name, tf_type, inputs, "give one entry per sliced axis in each",
        )  # fmt: skip
    out = []
    for axis, start, end, step in zip(axes_in(name, tf_type, inputs, axes, len(dims)), starts,
                                      ends, steps, strict=True):  # fmt: skip
        if step == 0:
            raise shape_error("Slice step cannot be 0", name, tf_type, inputs, "give steps != 0")
        d = dims[axis]
        if step < 0 and end == INT64_MAX:
            end = -1 - d
        start, end = start + d if start < 0 else start, end + d if end < 0 else end
        if step > 0:
            start, end = _clamp(start, 0, d), _clamp(end, 0, d)
        else:
            start, end = _clamp(start, 0, d - 1), _clamp(end, -1, d - 1)
        out.append((axis, start, end, step))
    return out


def infer_slice(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dims = list(inputs[0].shape)
    for axis, start, end, step in slice_bounds(name, tf_type, inputs, attrs):
        dims[axis] = max(0, -(-(end - start) // step))
    return spec(dims, inputs[0].dtype)


def slice_(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    index = [slice(None)] * x.ndim
    for axis, start, end, step in slice_bounds("", "Slice", spec(x.shape, "float32"), attrs):
        index[axis] = slice(start, None if end < 0 else end, step)
    return [x[tuple(index)]]


def infer_squeeze(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dims = inputs[0].shape
    given = attrs.get("axes")
    if given is None:
        return spec([d for d in dims if d != 1], inputs[0].dtype)
    axes = axes_in(name, tf_type, inputs, given, len(dims))
    for a in axes:
        if dims[a] != 1:
            raise shape_error(
                f"Cannot squeeze axis {a} of size {dims[a]}", name, tf_type, inputs,
                "squeeze only axes of size 1",
            )  # fmt: skip
    return spec([d for i, d in enumerate(dims) if i not in axes], inputs[0].dtype)


def unsqueezed(name: str, tf_type: str, inputs: Specs, attrs: Attrs) -> tuple[int, ...]:
    dims = inputs[0].shape
    rank = len(dims) + len(attrs["axes"])
    axes = set(axes_in(name, tf_type, inputs, attrs["axes"], rank))
    rest = iter(dims)
    return tuple(1 if i in axes else next(rest) for i in range(rank))


def infer_unsqueeze(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    return ranked(name, tf_type, inputs, unsqueezed(name, tf_type, inputs, attrs), inputs[0].dtype)


def to_shape_of(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs, infer_fn: Any) -> Array:
    """The input reshaped to what the op's shape rule says (Squeeze, Unsqueeze)."""
    x = inputs[0]
    return xp.reshape(x, infer_fn("", "", attrs, spec(x.shape, "float32"))[0].shape)


def squeeze(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [to_shape_of(xp, inputs, attrs, infer_squeeze)]


def unsqueeze(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [to_shape_of(xp, inputs, attrs, infer_unsqueeze)]


def infer_expand(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    target = attrs["shape"]
    if any(d < 0 for d in target):
        raise shape_error(
            f"Expand shape {fmt(target)} holds a negative dimension", name, tf_type, inputs,
            "give dimensions >= 0 (1 keeps the input's)",
        )  # fmt: skip
    out = broadcast_shapes(name, tf_type, inputs, (inputs[0].shape, target))
    return ranked(name, tf_type, inputs, out, inputs[0].dtype)


def expand(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    out = infer_expand("", "Expand", attrs, spec(x.shape, "float32"))[0].shape
    return [xp.broadcast_to(x, out).copy()]


def infer_tile(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    dims, repeats = inputs[0].shape, attrs["repeats"]
    if len(repeats) != len(dims) or any(r < 0 for r in repeats):
        raise shape_error(
            f"Tile repeats {list(repeats)} for an input of rank {len(dims)}", name, tf_type,
            inputs, f"give {len(dims)} repeats >= 0, one per dimension",
        )  # fmt: skip
    return spec([d * r for d, r in zip(dims, repeats, strict=True)], inputs[0].dtype)


def tile(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [xp.tile(inputs[0], attrs["repeats"])]


def pad_widths(name: str, tf_type: str, inputs: Specs, attrs: Attrs) -> list[tuple[int, int]]:
    """(before, after) per dimension: `pads` holds all befores then all afters, for `axes`."""
    dims = inputs[0].shape
    given = attrs.get("axes")
    axes = axes_in(name, tf_type, inputs, tuple(range(len(dims))) if given is None else given,
                   len(dims))  # fmt: skip
    pads = attrs["pads"]
    if len(pads) != 2 * len(axes):
        raise shape_error(
            f"pads has {len(pads)} entries for {len(axes)} axes", name, tf_type, inputs,
            f"give {2 * len(axes)}: every axis's start, then every axis's end",
        )  # fmt: skip
    widths = [(0, 0)] * len(dims)
    for i, a in enumerate(axes):
        before, after = pads[i], pads[i + len(axes)]
        widths[a] = (before, after)
        kept = dims[a] + min(before, 0) + min(after, 0)  # what cropping leaves
        grows = max(before, 0) + max(after, 0) > 0
        mode = attrs["mode"]
        if (
            kept < 0
            or (mode != "constant" and grows and kept < 1)
            or (mode == "reflect" and max(before, after) >= kept > 0)
        ):
            raise shape_error(
                f"Cannot pad axis {a} of size {dims[a]} by ({before}, {after}) in mode {mode}",
                name, tf_type, inputs,
                "crop at most the whole axis; edge and reflect need a value to repeat, and "
                "reflect pads less than the axis' size",
            )  # fmt: skip
    return widths


def infer_pad(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    widths = pad_widths(name, tf_type, inputs, attrs)
    dims = [d + b + e for d, (b, e) in zip(inputs[0].shape, widths, strict=True)]
    return spec(dims, inputs[0].dtype)


def pad(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    widths = pad_widths("", "Pad", spec(x.shape, "float32"), attrs)
    crop = tuple(slice(max(0, -b), d - max(0, -e)) for d, (b, e) in zip(x.shape, widths,
                                                                         strict=True))  # fmt: skip
    grow = [(max(0, b), max(0, e)) for b, e in widths]
    if not any(b or e for b, e in grow):  # a crop, or nothing (a 0-d input: xp.pad refuses)
        return [x[crop].copy()]
    if attrs["mode"] != "constant":
        return [xp.pad(x[crop], grow, mode=attrs["mode"])]
    value = attrs.get("constant_value")
    fill = 0 if value is None else value.item() if hasattr(value, "item") else value
    return [xp.pad(x[crop], grow, mode="constant", constant_values=fill)]


def infer_cast(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    return spec(inputs[0].shape, attrs["to"])


def cast(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [inputs[0].astype(attrs["to"])]


def _one(
    name: str, infer_fn: inf.InferFn, compute_fn: k.ComputeFn, attrs: dict[str, Any],
    **kw: Any,
) -> OpDef:  # fmt: skip
    """An ONNX op of one data input (more where `max_inputs` says)."""
    kw.setdefault("max_inputs", 1)
    kw.setdefault("flops", NO_FLOPS)
    return OpDef(name, name, infer_fn, compute_fn, attrs, min_inputs=1, **kw)


OPS = (
    _one("Shape", infer_shape, shape, {"start": (INT, 0), "end": (OPTIONAL_INT, None)}),
    _one("Reshape", infer_reshape, reshape, {"shape": (INTS, REQUIRED), "allowzero": (FLAG, 0)}),
    _one("Transpose", inf.transpose, k.transpose, {"perm": (OPTIONAL_INTS, None)}),
    _one("Concat", inf.concat, k.concat, {"axis": (INT, REQUIRED)}, max_inputs=None),
    _one("Split", infer_split, split,
         {"axis": (INT, 0), "split": (OPTIONAL_INTS, None), "num_outputs": (OPTIONAL_INT, None)},
         outputs=_split_outputs, check=_check_split),
    _one("Slice", infer_slice, slice_,
         {"starts": (BOUNDS, REQUIRED), "ends": (BOUNDS, REQUIRED), "axes": (OPTIONAL_INTS, None),
          "steps": (OPTIONAL_INTS, None)}),
    _one("Squeeze", infer_squeeze, squeeze, {"axes": (OPTIONAL_INTS, None)}),
    _one("Unsqueeze", infer_unsqueeze, unsqueeze, {"axes": (INTS, REQUIRED)}),
    _one("Expand", infer_expand, expand, {"shape": (INTS, REQUIRED)}),
    _one("Tile", infer_tile, tile, {"repeats": (INTS, REQUIRED)}),
    _one("Pad", infer_pad, pad,
         {"pads": (INTS, REQUIRED), "mode": (PAD_MODE, "constant"),
          "constant_value": (OPTIONAL_SCALAR, None), "axes": (OPTIONAL_INTS, None)}),
    _one("Cast", infer_cast, cast, {"to": (DTYPE_TO, REQUIRED), "saturate": (FLAG, 1)},
         flops=ONE_PER_OUTPUT),
)  # fmt: skip
