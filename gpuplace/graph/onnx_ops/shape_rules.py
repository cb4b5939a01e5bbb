"""What the shape, index and logic ops share: axis and dtype checks in the words of the other
shape rules (`infer.shape_error`), numpy's broadcasting over any number of shapes, and the FLOP
counts (none for data movement, one per output element for compares and selects)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

from ...errors import BadInput
from ..infer import Specs, fmt, shape_error
from ..model import DTYPES, TensorSpec

ALL = frozenset(DTYPES)
FLOATS = frozenset({"float16", "float32", "float64"})
INTS = frozenset({"int32", "int64"})
NUMBERS = FLOATS | INTS
BOOL = frozenset({"bool"})


def axis_in(
    name: str, tf_type: str, inputs: Specs, axis: int, rank: int, what: str = "axis"
) -> int:
    """`axis` in [-rank, rank) as a non-negative axis, else the op's error."""
    if -rank <= axis < rank:
        return axis % rank
    fix = f"use an axis in [{-rank}, {rank - 1}]" if rank else "the input is a scalar; reshape it"
    raise shape_error(
        f"{what} {axis} out of range for input with {rank} dimensions", name, tf_type, inputs, fix
    )


def axes_in(
    name: str, tf_type: str, inputs: Specs, axes: Sequence[int], rank: int, what: str = "axes"
) -> tuple[int, ...]:
    """Each of `axes` made non-negative; the op's error for one out of range or given twice."""
    out = tuple(axis_in(name, tf_type, inputs, a, rank, what[:-1] if what[-1] == "s" else what)
                for a in axes)  # fmt: skip
    if len(set(out)) != len(out):
        twice = next(a for a in out if out.count(a) > 1)
        raise shape_error(
            f"{what} {list(axes)} name axis {twice} twice", name, tf_type, inputs,
            "give each axis once",
        )  # fmt: skip
    return out


def dtypes(
    name: str, tf_type: str, inputs: Specs, allowed: frozenset[str], which: Sequence[int] = ()
) -> str:
    """The one dtype of the inputs numbered `which` (default: all), from `allowed` (ONNX's
    type constraint `T`); BadInput naming the op, the input and the fix otherwise."""
    picked = [inputs[i] for i in which] if which else list(inputs)
    numbers = list(which) or list(range(len(inputs)))
    first = picked[0].dtype
    if first not in allowed:
        accepted = ", ".join(d for d in DTYPES if d in allowed)
        raise BadInput(
            f"'{name}' (op: '{tf_type}'): input {numbers[0]} is {first}; {tf_type} takes "
            f"{accepted}. Fix: insert a Cast to {sorted(allowed)[-1] if 'float32' not in allowed else 'float32'}"
        )
    for i, spec in zip(numbers, picked, strict=True):
        if spec.dtype != first:
            raise BadInput(
                f"'{name}' (op: '{tf_type}'): input {i} is {spec.dtype} but input {numbers[0]} "
                f"is {first}; {tf_type} takes one type. Fix: insert a Cast to {first}"
            )
    return first


def broadcast(
    name: str, tf_type: str, inputs: Specs, shapes: Sequence[Sequence[int]]
) -> tuple[int, ...]:
    """numpy's (and ONNX's multidirectional) broadcast of `shapes`, aligned on the right."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, rank - len(shape)):
            if d != out[i] and d != 1 and out[i] != 1:
                raise shape_error(
                    f"Shapes {' and '.join(fmt(s) for s in shapes)} do not broadcast: "
                    f"dimension {i} is {out[i]} and {d}",
                    name, tf_type, inputs,
                    "give dimensions that are equal or 1 (they broadcast as in numpy)",
                )  # fmt: skip
            if out[i] == 1:
                out[i] = d
    return tuple(out)


def no_flops(attrs: Mapping[str, Any], inputs: Specs, outputs: Specs) -> float:
    """Data movement (reshape, slice, gather, ...): no arithmetic."""
    return 0.0


def per_output(attrs: Mapping[str, Any], inputs: Specs, outputs: Specs) -> float:
    """One operation per element of output 0 (a compare, a select, a running sum)."""
    return float(prod(outputs[0].shape)) if outputs else 0.0


def spec(shape: Sequence[int], dtype: str) -> Specs:
    return (TensorSpec(tuple(shape), dtype),)
