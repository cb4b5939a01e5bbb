"""What the ONNX op modules share: ONNX attr kinds (ints lists as tuples, 0/1 flags, string
choices), FLOP counts per output element, and small shape-rule helpers in the loader's wording."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod
from types import ModuleType
from typing import Any

from ...limits import MAX_RANK
from ..attrs import MAX_DIM, Attr, AttrError, accepting
from ..infer import InferFn, Specs, check_dtypes, shape_error
from ..kernels import Array, ComputeFn
from ..model import FlopsFn, TensorSpec
from ..opdef import EMPTY, OpDef

MAX_INTS = 2 * MAX_RANK  # pads hold a begin and an end per spatial axis
# elements per host block: 256 KiB of float32 per temporary, a few fit L2. Against 32K (session
# 7, one run each way twice): Gelu 8x128x256 0.51 -> 0.46 ms, 16x128x3072 13.4 -> 12.0 ms,
# LayerNormalization 8x128x64 0.084 -> 0.071 ms, 16x128x768 the same (1.7 ms)
BLOCK = 1 << 16


def _ints(value: Any) -> tuple[int, ...]:
    ok = type(value) in (list, tuple) and all(type(d) is int and abs(d) <= MAX_DIM for d in value)
    if not ok:
        raise AttrError("a list of integers, e.g. [1, 1]")
    if len(value) > MAX_INTS:
        raise AttrError(f"at most {MAX_INTS} integers, got {len(value)}")
    return tuple(value)


def _flag(value: Any) -> int:
    if type(value) is bool or (type(value) is int and value in (0, 1)):
        return int(value)
    raise AttrError("0 or 1 (or false or true)")


INTS = Attr(_ints, {"type": "array", "maxItems": MAX_INTS, "items": {"type": "integer"}})
FLAG = Attr(_flag, {"anyOf": [{"type": "boolean"}, {"enum": [0, 1]}]})


def choice(*words: str) -> Attr:
    """One of `words` (ONNX's string attrs: auto_pad, approximate)."""
    expected = "one of " + ", ".join(words)
    return Attr(accepting(lambda v: type(v) is str and v in words, expected), {"enum": list(words)})


def elements(specs: Sequence[TensorSpec]) -> int:
    return sum(prod(s.shape) for s in specs)


def per_output(count: float) -> FlopsFn:
    """`count` FLOPs per output element."""

    def flops(attrs: Mapping[str, Any], ins: Specs, outs: Specs) -> float:
        return count * elements(outs)

    return flops


def per_input(attrs: Mapping[str, Any], ins: Specs, outs: Specs) -> float:
    """One FLOP per element of input 0 (reductions)."""
    return float(prod(ins[0].shape))


NO_FLOPS = per_output(0.0)
ONE_PER_OUTPUT = per_output(1.0)


def need_rank(
    name: str, tf_type: str, inputs: Specs, index: int, ok: Callable[[int], bool], want: str,
    fix: str,
) -> None:  # fmt: skip
    """Input `index` must have a rank for which `ok` holds (`want` says which)."""
    rank = len(inputs[index].shape)
    if not ok(rank):
        raise shape_error(
            f"Shape must be {want} but is rank {rank} (input {index})", name, tf_type, inputs, fix
        )


def same_dtype(name: str, tf_type: str, inputs: Specs, allowed: frozenset[str]) -> str:
    """All inputs share one dtype from `allowed` (ONNX's type constraint T); that dtype."""
    check_dtypes(name, tf_type, inputs, allowed)
    return inputs[0].dtype


def axis_in(name: str, tf_type: str, inputs: Specs, axis: int, rank: int, top: int) -> int:
    """`axis` normalised into [0, top) (ONNX's negative axes count from the end of `rank`)."""
    if -rank <= axis < top:
        return axis + rank if axis < 0 else axis
    raise shape_error(
        f"axis {axis} out of range for input with {rank} dimensions", name, tf_type, inputs,
        f"use an axis in [{-rank}, {top - 1}]",
    )  # fmt: skip


def onnx_op(
    name: str, infer_fn: InferFn, compute_fn: ComputeFn,
    attrs: Mapping[str, tuple[Attr, Any]] | None = None, min_inputs: int = 1,
    max_inputs: int | None = 1, flops: FlopsFn = ONE_PER_OUTPUT,
) -> OpDef:  # fmt: skip
    """An ONNX operator: registry name and tf_type are both the ONNX type (kernels CPU and GPU,
    no TensorFlow kernel registry behind it)."""
    return OpDef(name, name, infer_fn, compute_fn, attrs or EMPTY, min_inputs, max_inputs,
                 flops=flops)  # fmt: skip


def broadcast_shapes(
    name: str, tf_type: str, inputs: Specs, shapes: Sequence[tuple[int, ...]], what: str = ""
) -> tuple[int, ...]:
    """numpy (multidirectional) broadcasting of `shapes`, aligned on the right."""
    out: list[int] = []
    for i in range(1, max(map(len, shapes), default=0) + 1):
        dims = {s[-i] for s in shapes if i <= len(s)} - {1}
        if len(dims) > 1:
            a, b = sorted(dims)[:2]
            raise shape_error(
                f"Dimensions must be equal, but are {a} and {b}{what}", name, tf_type, inputs,
                "use equal shapes, or dimensions of 1 that broadcast (numpy's rule)",
            )  # fmt: skip
        out.append(dims.pop() if dims else 1)
    return tuple(reversed(out))


def by_rows(xp: ModuleType, x: Array, inner: int, fn: Callable[[Array], Array]) -> Array:
    """`fn` (shape-keeping, row by row: rows are x's last `inner` elements) over blocks of
    about `BLOCK` elements on the host, so that its passes stay in the CPU's cache; in one go
    on a GPU (cupy), or when x is small."""
    if xp.__name__ != "numpy" or x.size <= BLOCK or inner < 1:
        return fn(x)
    rows = xp.ascontiguousarray(x).reshape(-1, inner)
    step = max(1, BLOCK // inner)
    first = fn(rows[:step])
    out = xp.empty(rows.shape, dtype=first.dtype)
    out[:step] = first
    for start in range(step, rows.shape[0], step):
        out[start : start + step] = fn(rows[start : start + step])
    return out.reshape(x.shape)
