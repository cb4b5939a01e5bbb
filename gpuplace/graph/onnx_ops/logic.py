"""ONNX's compare, logic and select operators (opset 13-20): Equal, Less, LessOrEqual, Greater,
GreaterOrEqual (bool out), And, Or, Xor, Not, Where (three-way broadcast), IsNaN, IsInf, Max and
Min (any number of inputs, broadcast), Clip (`min`/`max` attrs). Inputs broadcast as in numpy;
each costs one FLOP per output element (Max and Min of n inputs: n - 1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from types import ModuleType
from typing import Any

from ..infer import ANY, FLOATS, NUMERIC, InferFn, Specs, check_dtypes, shape_error
from ..kernels import ComputeFn, elementwise
from ..opdef import OpDef
from .common import FLAG, ONE_PER_OUTPUT, broadcast_shapes
from .shape import spec
from .shape_attrs import OPTIONAL_SCALAR

BOOL = frozenset({"bool"})

Attrs = Mapping[str, Any]
Array = Any


def _broadcasting(allowed: frozenset[str], out: str | None) -> InferFn:
    """Inputs of one dtype from `allowed`, broadcast; the output is `out` (None: the inputs')."""

    def infer(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
        check_dtypes(name, tf_type, inputs, allowed)
        dtype = inputs[0].dtype
        if len(inputs) == 1 or all(s.shape == inputs[0].shape for s in inputs):
            shape = inputs[0].shape
        else:
            shape = broadcast_shapes(name, tf_type, inputs, [s.shape for s in inputs])
        return spec(shape, out or dtype)

    return infer


def infer_where(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs[:1], BOOL, ("condition",))
    check_dtypes(name, tf_type, inputs[1:], ANY, ("X", "Y"))
    return spec(broadcast_shapes(name, tf_type, inputs, [s.shape for s in inputs]), inputs[1].dtype)


def where(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """`xp.where(condition, x, y)` as two copies into one buffer: y everywhere, then x where
    the condition holds. numpy's `where` with a broadcast condition (attention's causal mask,
    (8, 1, 128, 128) against (8, 4, 128, 128)) took 2.3 times as long (0.35 ms against 0.15)."""
    # the graph package imports numpy only once a kernel runs (tests/graph/test_loader.py);
    # broadcast_shapes takes shape tuples, so this serves cupy's arrays too
    from numpy import broadcast_shapes as shapes_of

    condition, x, y = inputs
    shape = shapes_of(*(a.shape for a in inputs))
    out = xp.empty(shape, dtype=xp.result_type(x, y))
    xp.copyto(out, y)
    xp.copyto(out, x, where=condition)
    return [out]


def infer_isinf(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, FLOATS, ("X",))
    return spec(inputs[0].shape, "bool")


def isinf(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x = inputs[0]
    positive, negative = attrs["detect_positive"], attrs["detect_negative"]
    if positive and negative:
        return [xp.isinf(x)]
    if positive or negative:
        return [x == (xp.inf if positive else -xp.inf)]
    return [xp.zeros(x.shape, dtype=bool)]


def reduce_n(function: str) -> ComputeFn:
    """Max or Min of any number of inputs: `xp.maximum` or `xp.minimum` folded over them."""

    def compute(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
        out = inputs[0]
        for x in inputs[1:]:
            out = getattr(xp, function)(out, x)
        return [out.copy() if out is inputs[0] else out]

    compute.__name__ = function
    return compute


def _n_minus_one(attrs: Attrs, inputs: Specs, outputs: Specs) -> float:
    return float((len(inputs) - 1) * prod(outputs[0].shape))


def infer_clip(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, NUMERIC, ("input",))
    dtype = inputs[0].dtype
    for bound in ("min", "max"):
        value = attrs.get(bound)
        if value is not None and dtype not in FLOATS and float(value) != int(value):
            raise shape_error(
                f"Clip {bound} {value} is not an integer for a {dtype} input", name, tf_type,
                inputs, "give integer bounds, or Cast the input to a float type",
            )  # fmt: skip
    return inputs[:1]


def clip(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """min first, then max (min > max gives max everywhere, as onnxruntime does)."""
    out = inputs[0]
    low, high = attrs.get("min"), attrs.get("max")
    if low is not None:
        out = xp.maximum(out, xp.asarray(low, dtype=out.dtype))
    if high is not None:
        out = xp.minimum(out, xp.asarray(high, dtype=out.dtype))
    return [out.copy() if out is inputs[0] else out]


def _op(name: str, infer_fn: InferFn, compute_fn: ComputeFn, inputs: tuple[int, int | None],
        **kw: Any) -> OpDef:  # fmt: skip
    kw.setdefault("flops", ONE_PER_OUTPUT)
    return OpDef(name, name, infer_fn, compute_fn, min_inputs=inputs[0], max_inputs=inputs[1],
                 **kw)  # fmt: skip


_COMPARABLE = NUMERIC | BOOL
OPS = (
    _op("Equal", _broadcasting(_COMPARABLE, "bool"), elementwise("equal"), (2, 2)),
    _op("Less", _broadcasting(NUMERIC, "bool"), elementwise("less"), (2, 2)),
    _op("LessOrEqual", _broadcasting(NUMERIC, "bool"), elementwise("less_equal"), (2, 2)),
    _op("Greater", _broadcasting(NUMERIC, "bool"), elementwise("greater"), (2, 2)),
    _op("GreaterOrEqual", _broadcasting(NUMERIC, "bool"), elementwise("greater_equal"), (2, 2)),
    _op("And", _broadcasting(BOOL, None), elementwise("logical_and"), (2, 2)),
    _op("Or", _broadcasting(BOOL, None), elementwise("logical_or"), (2, 2)),
    _op("Xor", _broadcasting(BOOL, None), elementwise("logical_xor"), (2, 2)),
    _op("Not", _broadcasting(BOOL, None), elementwise("logical_not"), (1, 1)),
    _op("IsNaN", infer_isinf, elementwise("isnan"), (1, 1)),
    _op("IsInf", infer_isinf, isinf, (1, 1),
        attrs={"detect_negative": (FLAG, 1), "detect_positive": (FLAG, 1)}),
    _op("Where", infer_where, where, (3, 3)),
    _op("Max", _broadcasting(NUMERIC, None), reduce_n("maximum"), (1, None), flops=_n_minus_one),
    _op("Min", _broadcasting(NUMERIC, None), reduce_n("minimum"), (1, None), flops=_n_minus_one),
    _op("Clip", infer_clip, clip, (1, 1),
        attrs={"min": (OPTIONAL_SCALAR, None), "max": (OPTIONAL_SCALAR, None)}),
)  # fmt: skip
