"""Attribute kinds of the ONNX ops (`shape.py`, `index.py`, `logic.py`).

ONNX attrs arrive from the importer (Python ints, tuples, numpy scalars and arrays) or from a
YAML spec (lists, numbers): each kind accepts both and normalises to plain Python values, int
lists to tuples (int lists and 0/1 flags are `common.py`'s INTS and FLAG). `Cast`'s `to` is
the `TensorProto` enum int or a dtype name.
"""

from __future__ import annotations

from typing import Any

from ...limits import MAX_RANK
from ..attrs import INT, MAX_DIM, Attr, AttrError, is_number
from ..model import DTYPES
from .common import INTS, choice

# TensorProto.DataType: the enum ONNX writes in Cast's `to` and in every tensor's type
ONNX_TYPES = {
    1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
}  # fmt: skip
ONNX_DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}
SUPPORTED = ", ".join(DTYPES)


def is_int(value: object) -> bool:
    """A Python or numpy integer (never a bool)."""
    return type(value) is int or (
        hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0 and value.dtype.kind in "iu"
    )


def _optional_ints(value: Any) -> tuple[int, ...] | None:
    return None if value is None else INTS.check(value)


def _bounds(value: Any) -> tuple[int, ...]:
    """Slice's starts and ends: INTS, with INT64_MIN (which exporters write for "before the
    start") taken as -INT64_MAX, which clamps the same on any axis."""
    if type(value) in (list, tuple):
        value = [-MAX_DIM if type(d) is int and d == -MAX_DIM - 1 else d for d in value]
    return INTS.check(value)  # type: ignore[no-any-return]


def _scalar(value: Any) -> Any:
    """A number (Python or numpy, or a one-element array); numpy values keep their dtype."""
    if type(value) is bool or is_number(value):
        return value
    if hasattr(value, "dtype") and getattr(value, "size", 0) == 1:
        if value.dtype.name not in DTYPES:
            raise AttrError(f"a number of a supported dtype ({SUPPORTED}), not {value.dtype.name}")
        return value.reshape(()) if value.ndim else value
    raise AttrError("a number, e.g. 0 or 1.5")


def _optional_scalar(value: Any) -> Any:
    return None if value is None else _scalar(value)


def _dtype_to(value: Any) -> str:
    """Cast's `to`: a TensorProto enum int (1 = FLOAT) or a dtype name, as a dtype name."""
    if type(value) is str and value in DTYPES:
        return value
    if is_int(value):
        found = ONNX_DTYPES.get(int(value))
        if found is not None:
            return found
        name = ONNX_TYPES.get(int(value), "an unknown type")
        raise AttrError(f"a supported type ({SUPPORTED}); {value} is {name}, which gpuplace lacks")
    raise AttrError(f"a TensorProto type number (1 = float32, 7 = int64) or one of {SUPPORTED}")


def _optional_dtype(value: Any) -> str | None:
    if value is None or (type(value) is str and value in DTYPES):
        return value
    raise AttrError(f"one of {SUPPORTED}")


def _tensor(value: Any) -> Any:
    """Constant's value: a numpy array of a supported dtype, a number or a nested list."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype.name not in DTYPES:
            raise AttrError(f"an array of a supported dtype ({SUPPORTED}), not {value.dtype.name}")
        return value
    if type(value) is bool or is_number(value) or is_int(value):
        return value
    if type(value) is list:
        try:
            array = np.asarray(value)
        except ValueError:
            array = None
        if array is not None and array.dtype.kind in "biuf" and array.ndim <= MAX_RANK:
            return value
    raise AttrError("an array, a number or a rectangular (nested) list of numbers")


_NUM_SCHEMA = {"type": ["number", "boolean"]}
OPTIONAL_INTS = Attr(_optional_ints, {"anyOf": [INTS.schema, {"type": "null"}]})
BOUNDS = Attr(_bounds, {"type": "array", "items": {"type": "integer"}})
OPTIONAL_INT = Attr(lambda v: None if v is None else INT.check(v), {"type": ["integer", "null"]})
SCALAR = Attr(_scalar, _NUM_SCHEMA)
OPTIONAL_SCALAR = Attr(_optional_scalar, {"type": ["number", "boolean", "null"]})
DTYPE_TO = Attr(_dtype_to, {"anyOf": [{"type": "integer"}, {"enum": list(DTYPES)}]})
OPTIONAL_DTYPE = Attr(_optional_dtype, {"anyOf": [{"enum": list(DTYPES)}, {"type": "null"}]})
TENSOR = Attr(_tensor, {"$ref": "#/$defs/value"})
PAD_MODE = choice("constant", "reflect", "edge")
