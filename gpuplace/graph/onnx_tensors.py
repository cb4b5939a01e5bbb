"""The tensors of an ONNX model as numpy: initializers (a view of their raw bytes, checked
against their declared shape first), attributes, Constant nodes, and ONNX's element types as
gpuplace's dtypes (others are refused naming the tensor). Takes the `onnx` module as an
argument: `onnx_import.py` alone imports it."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from math import prod
from types import ModuleType
from typing import Any

from ..errors import BadInput
from .model import DTYPES
from .onnx_ops.shape_attrs import ONNX_DTYPES, ONNX_TYPES

STRIP_BYTES = 1 << 12  # initializers past this go to ONNX's shape inference without their bytes


def onnx_dtype(elem_type: int, what: str, source: str) -> str:
    """gpuplace's dtype for ONNX's element type `elem_type`; BadInput naming `what` else."""
    dtype = ONNX_DTYPES.get(elem_type)
    if dtype is None:
        kind = ONNX_TYPES.get(elem_type, f"element type {elem_type}").lower()
        raise BadInput(
            f"{source}: {what} is {kind}, which gpuplace does not support; it takes "
            f"{', '.join(DTYPES)} (cast the tensor in the model)"
        )
    return dtype


def read_initializers(onnx: ModuleType, graph: Any, source: str) -> dict[str, Any]:
    """Each initializer's array by name: a view of its raw bytes (no copy) where it has them;
    the bytes of a large one are then dropped from `graph` (shape inference needs its dims).
    A model holds tens of thousands of them: each is read field by field once, its dtype
    looked up per element type, its array made in one call."""
    import numpy as np

    helper = onnx.numpy_helper
    known: dict[str, Any] = {}
    little = sys.byteorder == "little"
    dtypes: dict[int, tuple[str, Any, int]] = {}  # element type -> dtype, numpy's, item size
    for t in graph.initializer:
        name = t.name
        if t.data_location == 1:  # EXTERNAL
            raise BadInput(
                f"{source}: initializer {name!r} keeps its data in an external file, which "
                "gpuplace does not read; save the model with its weights inside (onnx.save(..., "
                "save_as_external_data=False)) or give a model under 2 GiB"
            )
        elem = t.data_type
        found = dtypes.get(elem)
        if found is None:
            dtype = onnx_dtype(elem, f"initializer {name!r}", source)
            found = dtypes[elem] = (dtype, np.dtype(dtype), DTYPES[dtype])
        dtype, numpy_dtype, size = found
        shape = tuple(t.dims)
        count = prod(shape)
        if shape and min(shape) < 0:
            raise BadInput(f"{source}: initializer {name!r} has a negative dim: {list(shape)}")
        raw = t.raw_data
        have = len(raw) // size if raw else _field_count(t)
        if have != count or (raw and len(raw) % size):
            raise BadInput(
                f"{source}: initializer {name!r} declares shape {list(shape)} ({count:,} "
                f"elements) but holds {have:,}; the file is corrupt, export it again"
            )
        try:
            # ONNX stores raw data little-endian: a read-only view of it, else onnx's reader
            value = np.ndarray(shape, numpy_dtype, raw) if raw and little else helper.to_array(t)
        except (ValueError, TypeError) as err:
            raise BadInput(f"{source}: initializer {name!r} cannot be read: {err}") from None
        known[name] = value
        if len(raw) > STRIP_BYTES:  # shape inference reads its dims, not its bytes
            t.ClearField("raw_data")
    return known


# AttributeProto.type of the plain attributes, read here without onnx.helper: INT, FLOAT, INTS
# and FLOATS (what `get_attribute_value` returns for them, one call less per attribute)
_INT, _FLOAT, _INTS, _FLOATS = 2, 1, 7, 6


def attr_value(onnx: ModuleType, a: Any, source: str) -> Any:
    """An AttributeProto's value: ints and floats as Python's, strings decoded, a tensor as
    numpy."""
    kind = a.type
    if kind <= _INT and kind and not a.ref_attr_name:  # the most common: one int or float
        return a.i if kind == _INT else a.f
    if kind in (_INTS, _FLOATS) and not a.ref_attr_name:
        return list(a.ints) if kind == _INTS else list(a.floats)
    value = onnx.helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if kind == onnx.AttributeProto.TENSOR:
        onnx_dtype(value.data_type, f"attribute {a.name!r}", source)
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    return value


def constant_value(onnx: ModuleType, node: Any, label: str, source: str) -> Any:
    """The value of a Constant node, as numpy."""
    import numpy as np

    for a in node.attribute:
        value = attr_value(onnx, a, source)
        if a.name == "value":
            return value
        if a.name in ("value_float", "value_floats"):
            return np.asarray(value, dtype=np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.asarray(value, dtype=np.int64)
    raise BadInput(f"{source}: node {label!r} (Constant): no value attribute gpuplace reads")


class _DtypeNames(dict[Any, str]):
    """numpy dtype -> gpuplace's dtype name, filled on first use (numpy is imported lazily)."""

    def get(self, key: Any, default: Any = None) -> Any:
        if not self:
            import numpy as np

            self.update({np.dtype(n): n for n in DTYPES})
        return super().get(key, default)


_DTYPE_NAMES = _DtypeNames()


def dtype_of(value: Any, tensor: str, source: str) -> str:
    name: str | None = _DTYPE_NAMES.get(value.dtype)  # a dict lookup: dtype.name is slow
    if name is None:
        raise BadInput(
            f"{source}: tensor {tensor!r} is {value.dtype}, which gpuplace does not support"
        )
    return name


def weight_module(name: str) -> str:
    """A PyTorch parameter's module (`encoder.layer.0.attn.query.weight` -> `...attn.query`)."""
    if "/" in name or "." not in name:
        return ""
    return name.rpartition(".")[0]


def _field_count(t: Any) -> int:
    fields: Iterable[Any] = (
        t.float_data,
        t.int32_data,
        t.int64_data,
        t.double_data,
        t.uint64_data,
        t.string_data,
    )
    return max((len(f) for f in fields), default=0)
