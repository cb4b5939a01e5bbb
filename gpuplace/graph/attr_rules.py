"""Rules across one op's attrs, run after each attr is checked on its own: a constant's values
against its shape and dtype, split's num_split-or-sizes, a variable's initializer and its
parameters, a `.npy` file's header for load. Each raises AttrError or completes the attrs.
"""

from __future__ import annotations

from math import isfinite, prod
from typing import Any

from ..echo import clip_middle, show
from .attrs import FLOAT64_MAX, AttrError, flatten, is_number, nested_shape
from .infer import FLOATS
from .model import DTYPES
from .npy import NpyError, read_header

_INT_RANGE = {"int32": 2**31, "int64": 2**63}
_INIT_PARAMS = {
    "zeros": (),
    "ones": (),
    "constant": ("value",),
    "random_normal": ("mean", "stddev"),
    "random_uniform": ("minval", "maxval"),
}
_PARAM_DEFAULTS = {"mean": 0.0, "stddev": 1.0, "minval": 0.0, "maxval": 1.0}


def _check_numbers(values: list[Any], dtype: str) -> None:
    """Booleans only for dtype bool and numbers only for the others (TensorFlow refuses
    `tf.constant(True, tf.float32)`); integers within an int dtype's range."""
    kinds = set(map(type, values))
    if dtype == "bool":
        if kinds - {bool}:
            x = next(x for x in values if type(x) is not bool)
            raise AttrError(
                f"value {x!r} does not fit dtype bool; give true or false, or a numeric dtype"
            )
        return
    if bool in kinds:
        flag = next(x for x in values if type(x) is bool)
        raise AttrError(
            f"value {str(flag).lower()} is a boolean, which does not fit dtype {dtype}; "
            "give numbers, or dtype: bool"
        )
    bound = _INT_RANGE.get(dtype)
    if bound is None:
        if int in kinds:
            for x in values:
                if not is_number(x):
                    raise AttrError(
                        f"value {show(x)} is beyond the range of float64 (about "
                        f"{FLOAT64_MAX:.1e}); give a smaller number"
                    )
        return
    for x in values:
        if (type(x) is float and not x.is_integer()) or not -bound <= x < bound:
            raise AttrError(
                f"value {x!r} does not fit dtype {dtype}; give integers in "
                f"[{-bound}, {bound - 1}], or a float dtype"
            )


def check_constant(attrs: dict[str, Any]) -> None:
    """constant and fill: a value list must fill the shape exactly (one value fills any shape);
    without `shape`, a list's nesting is the shape. The list is stored flat."""
    value, dtype = attrs["value"], attrs["dtype"]
    if type(value) is not list:
        attrs.setdefault("shape", ())
        _check_numbers([value], dtype)
        return
    nested = nested_shape(value)
    flat = flatten(value, len(nested))
    shape = attrs.setdefault("shape", nested)
    if prod(shape) != len(flat) and len(flat) != 1:
        raise AttrError(
            f"value has {len(flat)} elements but shape {list(shape)} holds {prod(shape)}; "
            f"give {prod(shape)} values, or one value to fill the shape"
        )
    _check_numbers(flat, dtype)
    attrs["value"] = flat if len(flat) == prod(shape) else flat[0]


def check_random(attrs: dict[str, Any]) -> None:
    """random_uniform, random_normal: float dtypes, minval < maxval, stddev >= 0."""
    if attrs["dtype"] not in FLOATS:
        raise AttrError(
            f"dtype {attrs['dtype']} is not accepted for random values; use float16, float32 "
            "or float64 (cast afterwards for integers)"
        )
    for param in ("minval", "maxval", "mean", "stddev"):
        if param in attrs and not isfinite(attrs[param]):
            raise AttrError(f"{param} must be a finite number, got {attrs[param]}")
    if "minval" in attrs and not attrs["minval"] < attrs["maxval"]:
        raise AttrError(f"minval ({attrs['minval']}) must be less than maxval ({attrs['maxval']})")
    if attrs.get("stddev", 0) < 0:
        raise AttrError(f"stddev must be >= 0, got {attrs['stddev']}")


def check_split(attrs: dict[str, Any]) -> None:
    if ("num_split" in attrs) == ("sizes" in attrs):
        raise AttrError(
            "give exactly one of num_split (equal parts, e.g. 2) or sizes (e.g. [2, -1])"
        )


def check_variable(attrs: dict[str, Any]) -> None:
    """The initializer's parameters sit beside it; others are refused, defaults filled in."""
    init = attrs["initializer"]
    takes = _INIT_PARAMS[init]
    for param in ("value", *_PARAM_DEFAULTS):
        if param in attrs and param not in takes:
            raise AttrError(
                f"'{param}' does not apply to initializer {init}, which takes "
                f"{', '.join(takes) or 'no parameters'}"
            )
    if init == "constant":
        if "value" not in attrs:
            raise AttrError("initializer constant needs 'value' (a number or a list)")
        check_constant(attrs)
    elif init.startswith("random"):
        for param in takes:
            attrs.setdefault(param, _PARAM_DEFAULTS[param])
        check_random(attrs)


def check_load(attrs: dict[str, Any]) -> None:
    """Shape and dtype from the `.npy` header alone, checked against the file (`npy.py`); the
    data is read at run time."""
    path = attrs["path"]
    try:
        header = read_header(path)
    except NpyError as err:
        raise AttrError(
            f"cannot read {clip_middle(path)!r} as a .npy file ({err}); point path at a file written by "
            "numpy.save (a relative path starts at the spec's folder)"
        ) from None
    dtype = header.dtype
    if dtype.name not in DTYPES:
        raise AttrError(
            f"{clip_middle(path)!r} holds {dtype}, which is not supported; accepted: {', '.join(DTYPES)} "
            "(save it with .astype('float32'))"
        )
    attrs["shape"], attrs["dtype"] = header.shape, dtype.name
