"""Op attributes: each kind is a checker (returns the normalised value, or raises AttrError saying
what was expected) and the JSON Schema fragment for the same rule (for `graph.schema.json`).

Values come from YAML or JSON, so integers are Python ints and `true` is a bool: a bool is never
accepted where a number is expected (YAML's `yes` would otherwise become a dimension of 1).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..limits import MAX_RANK
from ..parse import is_number_text
from .model import DTYPES

MAX_DIM = 2**63 - 1  # TensorFlow dimensions are int64
RANK_WHY = "numpy's limit; TensorFlow allows 254, but every array here is numpy's"
FLOAT64_MAX = sys.float_info.max
FLOAT_INT_BOUND = 2**1024 - 2**970  # the smallest integer that float() cannot hold
INITIALIZERS = ("zeros", "ones", "constant", "random_normal", "random_uniform")


class AttrError(ValueError):
    """A value an attribute does not accept; the message says what it expected."""


class Attr(NamedTuple):
    """One kind of attribute value: `check` normalises or raises AttrError; `schema` documents."""

    check: Callable[[Any], Any]
    schema: Mapping[str, Any]


def number_hint(value: Any) -> str:
    """For text given where a number is expected: why it is text, and the fix ("" if neither)."""
    if type(value) is not str:
        return ""
    text = value.strip()
    if text.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return "; for infinity or not-a-number write .inf, -.inf or .nan (Infinity or NaN in JSON)"
    if is_number_text(text):
        return "; it is quoted, so it is text: drop the quotes"
    return ""


def is_number(value: object) -> bool:
    """A float, or an int that float64 can hold (YAML and JSON integers have any size)."""
    return type(value) is float or (
        type(value) is int and -FLOAT_INT_BOUND < value < FLOAT_INT_BOUND
    )


def _number(value: Any) -> Any:
    if is_number(value):
        return value
    if type(value) is int:
        raise AttrError(f"a number within float64's range (up to about {FLOAT64_MAX:.1e})")
    raise AttrError("a number, e.g. 0.5")


def _int_list(value: Any, lowest: int, expected: str) -> tuple[int, ...]:
    if type(value) is list and all(type(d) is int and lowest <= d <= MAX_DIM for d in value):
        if len(value) > MAX_RANK:
            raise AttrError(f"at most {MAX_RANK} dimensions ({RANK_WHY}), got {len(value)}")
        return tuple(value)
    raise AttrError(expected)


def _shape(value: Any) -> tuple[int, ...]:
    return _int_list(value, 0, "a list of non-negative integers, e.g. [2, 3] ([] for a scalar)")


def _new_shape(value: Any) -> tuple[int, ...]:
    shape = _int_list(value, -1, "a list of integers >= 0 with at most one -1, e.g. [3, -1]")
    if shape.count(-1) > 1:
        raise AttrError("a list of integers >= 0 with at most one -1, e.g. [3, -1]")
    return shape


def _sizes(value: Any) -> tuple[int, ...]:
    sizes = _new_shape(value)
    if not sizes:
        raise AttrError("a non-empty list of sizes, e.g. [2, 1] or [2, -1]")
    return sizes


def _path(value: Any) -> str:
    if type(value) is not str or value.strip() == "":
        raise AttrError("a file path, e.g. data/x.npy")
    if "\0" in value:
        raise AttrError("a file path without a NUL character (\\0), which no file name holds")
    return value


def accepting(test: Callable[[Any], bool], expected: str) -> Callable[[Any], Any]:
    """A checker that returns the value unchanged when `test(value)` holds."""

    def check(value: Any) -> Any:
        if test(value):
            return value
        raise AttrError(expected)

    return check


def is_scalar(value: object) -> bool:
    return type(value) is int or type(value) is float or type(value) is bool


def _axes(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if type(value) is int:
        return (value,)
    if type(value) is list and all(type(a) is int for a in value):
        return tuple(value)
    raise AttrError("an integer, a list of integers, or null for all axes, e.g. 1 or [0, 1]")


def _perm(value: Any) -> tuple[int, ...]:
    if type(value) is list and all(type(a) is int for a in value):
        return tuple(value)
    raise AttrError("a list of integers, a permutation of the axes, e.g. [1, 0]")


def _value(value: Any) -> Any:
    if type(value) is list:
        nested_shape(value)
        return value
    if is_scalar(value):
        return value
    raise AttrError("a number or a (nested) list of numbers, e.g. 1.0 or [1.0, 2.0]")


def nested_shape(value: list[Any]) -> tuple[int, ...]:
    """Shape of a rectangular nested list of numbers (`[[1, 2], [3, 4]]` -> (2, 2))."""
    shape = [len(value)]
    level = value
    while level and type(level[0]) is list:
        shape.append(len(level[0]))
        level = level[0]
        if len(shape) > MAX_RANK:
            raise AttrError(f"a list nested at most {MAX_RANK} deep ({RANK_WHY})")
    _check_nested(value, shape, 0)
    return tuple(shape)


def _check_nested(value: list[Any], shape: list[int], depth: int) -> None:
    if len(value) != shape[depth]:
        raise AttrError("a rectangular (nested) list of numbers; rows have different lengths")
    if depth + 1 < len(shape):
        for row in value:
            if type(row) is not list:
                raise AttrError(
                    "a rectangular (nested) list of numbers; found a number beside a list"
                )
            _check_nested(row, shape, depth + 1)
    elif not all(is_scalar(x) for x in value):
        raise AttrError("a number or a (nested) list of numbers, e.g. [1.0, 2.0]")


def flatten(value: list[Any], depth: int) -> list[Any]:
    """The numbers of a nested list of `depth` levels, in row-major order."""
    for _ in range(depth - 1):
        value = [x for row in value for x in row]
    return value


_INT = {"type": "integer"}
_INTS = {"type": "array", "items": _INT}
_NUM = {"type": "number"}
_SCALAR = {"type": ["number", "boolean"]}
_NESTED: dict[str, Any] = {
    "anyOf": [_SCALAR, {"type": "array", "items": {"$ref": "#/$defs/value"}}]
}

SHAPE = Attr(
    _shape, {"type": "array", "maxItems": MAX_RANK, "items": {"type": "integer", "minimum": 0}}
)
NEW_SHAPE = Attr(
    _new_shape,
    {"type": "array", "maxItems": MAX_RANK, "items": {"type": "integer", "minimum": -1}},
)
SIZES = Attr(_sizes, {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": -1}})
DTYPE = Attr(
    accepting(lambda v: type(v) is str and v in DTYPES, f"one of {', '.join(DTYPES)}"),
    {"enum": list(DTYPES)},
)
NUMBER = Attr(_number, _NUM)
BOOL = Attr(accepting(lambda v: type(v) is bool, "true or false"), {"type": "boolean"})
SEED = Attr(
    accepting(lambda v: type(v) is int and 0 <= v <= MAX_DIM, "an integer >= 0, e.g. 1"),
    {"type": "integer", "minimum": 0},
)
INT = Attr(accepting(lambda v: type(v) is int, "an integer, e.g. 0 or -1"), _INT)
POSITIVE = Attr(
    accepting(lambda v: type(v) is int and 1 <= v <= MAX_DIM, "an integer >= 1, e.g. 2"),
    {"type": "integer", "minimum": 1},
)
AXES = Attr(_axes, {"anyOf": [_INT, _INTS, {"type": "null"}]})
PERM = Attr(_perm, _INTS)
TEXT = Attr(accepting(lambda v: type(v) is str, "a string"), {"type": "string"})
PATH = Attr(_path, {"type": "string", "minLength": 1})
OUT_PATH = Attr(PATH.check, PATH.schema)  # a file `save` writes: kept in bounds by writes.py
INITIALIZER = Attr(
    accepting(lambda v: type(v) is str and v in INITIALIZERS, f"one of {', '.join(INITIALIZERS)}"),
    {"enum": list(INITIALIZERS)},
)
SCALAR = Attr(accepting(is_scalar, "a number, e.g. 1.0"), _SCALAR)
VALUE = Attr(_value, {"$ref": "#/$defs/value"})
VALUE_SCHEMA = _NESTED
NUMERIC = (NUMBER, SCALAR, VALUE, INT, POSITIVE, SEED)  # kinds whose value is one number
