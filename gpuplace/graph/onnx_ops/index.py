"""ONNX's indexing and value-making operators (opset 13-20): Gather, GatherND, CumSum, TopK, and
the host-built Constant, ConstantOfShape and Range (no inputs here: the importer folds them
away when their inputs are known; a YAML spec may write them). Negative indices count from the
end; an index out of range fails the run (RuntimeFailure) naming the op type and the axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import isfinite, log2, prod
from types import ModuleType
from typing import Any

from ...errors import RuntimeFailure
from ..attrs import INT, MAX_DIM, AttrError
from ..infer import INTS as INDEX_TYPES
from ..infer import NUMERIC, Specs, check_dtypes, fmt, shape_error
from ..opdef import REQUIRED, OpDef
from .common import FLAG, INTS, NO_FLOPS, ONE_PER_OUTPUT, axis_in
from .shape import ranked, spec
from .shape_attrs import OPTIONAL_DTYPE, OPTIONAL_SCALAR, SCALAR, TENSOR

Attrs = Mapping[str, Any]
Array = Any


def _np() -> ModuleType:
    import numpy

    return numpy


def infer_gather(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    data, indices = inputs
    check_dtypes(name, tf_type, inputs[1:], INDEX_TYPES, ("indices",))
    axis = axis_in(name, tf_type, inputs, attrs["axis"], len(data.shape), len(data.shape))
    out = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :])
    return ranked(name, tf_type, inputs, out, data.dtype)


def _in_range(xp: ModuleType, indices: Array, dims: Any, op: str, where: str) -> Array:
    """`indices` with negatives counted from the end of `dims`; RuntimeFailure for any outside."""
    fixed = xp.where(indices < 0, indices + dims, indices)
    if fixed.size and bool(((fixed < 0) | (fixed >= dims)).any()):
        raise RuntimeFailure(
            f"{op}: an index is out of range for {where}; indices must lie in [-size, size)"
        )
    return fixed


def gather(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    data, indices = inputs
    axis = attrs["axis"] % data.ndim
    size = data.shape[axis]
    fixed = _in_range(xp, indices, size, "Gather", f"axis {axis} of size {size}")
    return [xp.take(data, fixed, axis=axis)]


def infer_gather_nd(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    data, indices = inputs
    check_dtypes(name, tf_type, inputs[1:], frozenset({"int64"}), ("indices",))
    b, r, q = attrs["batch_dims"], len(data.shape), len(indices.shape)
    depth = indices.shape[-1] if q else 0
    problem = ""
    if q < 1 or not 0 <= b < min(q, r):
        problem = f"batch_dims {b} needs data and indices of rank above it"
    elif not 1 <= depth <= r - b:
        problem = f"the last dimension of indices is {depth}, not in [1, {r - b}]"
    elif data.shape[:b] != indices.shape[:b]:
        problem = f"the first {b} dimensions differ: {fmt(data.shape)} and {fmt(indices.shape)}"
    if problem:
        raise shape_error(
            f"GatherND cannot index: {problem}", name, tf_type, inputs,
            "indices[..., :] picks entries along data's leading axes after batch_dims",
        )  # fmt: skip
    out = (*indices.shape[:-1], *data.shape[b + depth :])
    return ranked(name, tf_type, inputs, out, data.dtype)


def gather_nd(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    data, indices = inputs
    b, depth = attrs["batch_dims"], indices.shape[-1]
    batch = prod(data.shape[:b])
    flat = xp.reshape(data, (batch, *data.shape[b:]))
    picks = xp.reshape(indices, (batch, prod(indices.shape[b:-1]), depth))
    dims = xp.asarray(data.shape[b : b + depth], dtype=xp.int64)
    picks = _in_range(xp, picks, dims, "GatherND", f"data of shape {fmt(data.shape)}")
    rows = xp.reshape(xp.arange(batch), (batch, 1))
    key = (rows, *[picks[..., j] for j in range(depth)])
    found = flat[key]
    return [xp.reshape(found, (*indices.shape[:-1], *data.shape[b + depth :]))]


def infer_cumsum(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, NUMERIC, ("x",))
    axis_in(name, tf_type, inputs, attrs["axis"], len(inputs[0].shape), len(inputs[0].shape))
    return inputs


def cumsum(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    axis = attrs["axis"] % x.ndim
    if attrs["reverse"]:
        x = xp.flip(x, axis)
    out = xp.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs["exclusive"]:
        head, first = [slice(None)] * x.ndim, [slice(None)] * x.ndim
        head[axis], first[axis] = slice(0, -1), slice(0, 1)
        out = xp.concatenate([xp.zeros_like(out[tuple(first)]), out[tuple(head)]], axis=axis)
    return [xp.flip(out, axis) if attrs["reverse"] else out]


def infer_topk(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    x = inputs[0]
    check_dtypes(name, tf_type, inputs, NUMERIC, ("X",))
    axis = axis_in(name, tf_type, inputs, attrs["axis"], len(x.shape), len(x.shape))
    if not 0 <= attrs["K"] <= x.shape[axis]:
        raise shape_error(
            f"K {attrs['K']} is not in [0, {x.shape[axis]}] (axis {axis})", name, tf_type, inputs,
            f"ask for at most {x.shape[axis]} entries",
        )  # fmt: skip
    shape = (*x.shape[:axis], attrs["K"], *x.shape[axis + 1 :])
    return (*spec(shape, x.dtype), *spec(shape, "int64"))


def topk(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """The K largest (or smallest) along `axis`, sorted; among equal values the lower index
    comes first, as in onnxruntime."""
    x = inputs[0]
    axis = attrs["axis"] % x.ndim
    order = xp.argsort(-x if attrs["largest"] else x, axis=axis, kind="stable")
    picked = xp.take(order, xp.arange(attrs["K"]), axis=axis)
    return [xp.take_along_axis(x, picked, axis=axis), picked.astype(xp.int64)]


def _topk_flops(attrs: Attrs, inputs: Specs, outputs: Specs) -> float:
    """A sort along the axis: n log2 n compares per row."""
    size = inputs[0].shape[attrs["axis"] % len(inputs[0].shape)]
    return float(prod(inputs[0].shape)) * max(1.0, log2(max(size, 1)))


def value_dtype(value: Any, given: str | None) -> str:
    """The dtype of a Constant's or ConstantOfShape's value: `dtype` when given, else a numpy
    value's own, else bool for booleans, int64 for integers and float32 for other numbers."""
    if given is not None:
        return given
    if hasattr(value, "dtype"):
        return str(value.dtype.name)
    if type(value) is int:
        return "int64"
    flat = _np().asarray(value)
    return {"b": "bool", "i": "int64"}.get(flat.dtype.kind, "float32")


def constant_value(attrs: Attrs) -> Array:
    return _np().array(attrs["value"], dtype=value_dtype(attrs["value"], attrs.get("dtype")))


def infer_constant(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    value = attrs["value"]
    shape = value.shape if hasattr(value, "shape") else _np().shape(value)
    return spec(shape, value_dtype(value, attrs.get("dtype")))


def constant(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [constant_value(attrs)]


def infer_constant_of_shape(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    if any(d < 0 for d in attrs["input"]):
        raise shape_error(
            f"ConstantOfShape input {fmt(attrs['input'])} holds a negative dimension", name,
            tf_type, inputs, "give dimensions >= 0",
        )  # fmt: skip
    value = attrs.get("value", 0.0)
    return ranked(name, tf_type, inputs, attrs["input"], value_dtype(value, attrs.get("dtype")))


def constant_of_shape(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    value = attrs.get("value", 0.0)
    return [_np().full(attrs["input"], value, dtype=value_dtype(value, attrs.get("dtype")))]


def range_length(attrs: Attrs) -> int:
    """ONNX's max(ceil((limit - start) / delta), 0); exact for integers. At most MAX_DIM
    (`_check_range` refuses more)."""
    start, limit, delta = (_item(attrs[a]) for a in ("start", "limit", "delta"))
    if type(start) is int and type(limit) is int and type(delta) is int:
        return min(max(0, -((start - limit) // delta)), MAX_DIM + 1)
    return int(min(max(0.0, -((start - limit) // delta)), MAX_DIM + 1))


def _item(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def range_dtype(attrs: Attrs) -> str:
    values = [attrs[a] for a in ("start", "limit", "delta")]
    return value_dtype(next((v for v in values if hasattr(v, "dtype")), sum(map(_item, values))),
                       attrs.get("dtype"))  # fmt: skip


def _check_range(attrs: dict[str, Any]) -> None:
    values = [_item(attrs[a]) for a in ("start", "limit", "delta")]
    if not all(isfinite(v) for v in values):
        raise AttrError("start, limit and delta must be finite numbers")
    if values[2] == 0:
        raise AttrError("delta is 0; give a step other than 0")
    dtype = range_dtype(attrs)
    if dtype in INDEX_TYPES:
        info = _np().iinfo(dtype)
        if not all(info.min <= v <= info.max for v in values):
            raise AttrError(f"start, limit and delta must fit {dtype}, in [{info.min}, {info.max}]")
    if range_length(attrs) > MAX_DIM:
        raise AttrError(f"{values[0]} to {values[1]} by {values[2]} is more than {MAX_DIM} values")


def infer_range(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    return spec((range_length(attrs),), range_dtype(attrs))


def range_(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    np = _np()
    dtype = range_dtype(attrs)
    start, delta = (
        np.asarray(_item(attrs["start"]), dtype),
        np.asarray(_item(attrs["delta"]), dtype),
    )
    return [(start + np.arange(range_length(attrs), dtype=dtype) * delta).astype(dtype)]


def _host(name: str, infer_fn: Any, compute_fn: Any, attrs: dict[str, Any], **kw: Any) -> OpDef:
    """An op with no inputs here whose value is built on the host."""
    return OpDef(name, name, infer_fn, compute_fn, attrs, generator=True, flops=NO_FLOPS, **kw)


OPS = (
    OpDef("Gather", "Gather", infer_gather, gather, {"axis": (INT, 0)}, 2, 2,
          flops=NO_FLOPS),
    OpDef("GatherND", "GatherND", infer_gather_nd, gather_nd, {"batch_dims": (INT, 0)}, 2, 2,
          flops=NO_FLOPS),
    OpDef("CumSum", "CumSum", infer_cumsum, cumsum,
          {"axis": (INT, REQUIRED), "exclusive": (FLAG, 0), "reverse": (FLAG, 0)}, 1, 1,
          flops=ONE_PER_OUTPUT),
    OpDef("TopK", "TopK", infer_topk, topk,
          {"K": (INT, REQUIRED), "axis": (INT, -1), "largest": (FLAG, 1),
           "sorted": (FLAG, 1)}, 1, 1, outputs=2, flops=_topk_flops),
    _host("Constant", infer_constant, constant,
          {"value": (TENSOR, REQUIRED), "dtype": (OPTIONAL_DTYPE, None)}),
    _host("ConstantOfShape", infer_constant_of_shape, constant_of_shape,
          {"input": (INTS, REQUIRED), "value": (OPTIONAL_SCALAR, None),
           "dtype": (OPTIONAL_DTYPE, None)}),
    _host("Range", infer_range, range_,
          {"start": (SCALAR, REQUIRED), "limit": (SCALAR, REQUIRED), "delta": (SCALAR, REQUIRED),
           "dtype": (OPTIONAL_DTYPE, None)}, check=_check_range),
)  # fmt: skip
