"""Shape and dtype inference, run at load time so that shape errors surface before anything runs.

Messages use TensorFlow's shape-function wording (`common_shape_fns.cc`), e.g.
"Dimensions must be equal, but are 3 and 2 for 'c' (op: 'MatMul') with input shapes: [2,3], [2,3]."
and then say how to fix it. Each function is `(op name, TF type, attrs, input specs) -> outputs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod
from typing import Any

from ..echo import sample
from ..errors import BadInput
from .model import DTYPES, TensorSpec

Specs = tuple[TensorSpec, ...]
InferFn = Callable[[str, str, Mapping[str, Any], Specs], Specs]

FLOATS = frozenset({"float16", "float32", "float64"})
INTS = frozenset({"int32", "int64"})
NUMERIC = FLOATS | INTS
ANY = frozenset(DTYPES)


def fmt(shape: Sequence[int]) -> str:
    """A shape as TensorFlow prints it: `[2,3]`, `[]` for a scalar."""
    return "[" + ",".join(map(str, shape)) + "]"


def shape_error(lead: str, name: str, tf_type: str, inputs: Specs, fix: str) -> BadInput:
    shapes = sample([fmt(s.shape) for s in inputs])
    return BadInput(
        f"{lead} for '{name}' (op: '{tf_type}') with input shapes: {shapes}. Fix: {fix}"
    )


def check_dtypes(
    name: str, tf_type: str, inputs: Specs, allowed: frozenset[str], args: Sequence[str] = ()
) -> None:
    """All inputs share one dtype from `allowed` (TensorFlow's type attr `T`)."""
    first = inputs[0].dtype
    if first not in allowed:
        accepted = ", ".join(d for d in DTYPES if d in allowed)
        raise BadInput(
            f"Value for attr 'T' of {first} is not in the list of allowed values: {accepted} "
            f"for '{name}' (op: '{tf_type}'). Fix: cast the input first (op: cast, dtype: "
            f"{'float32' if 'float32' in allowed else sorted(allowed)[0]})"
        )
    for i, other in enumerate(inputs):
        if other.dtype != first:
            arg = args[i] if args else f"inputs[{i}]"
            arg0 = args[0] if args else "inputs[0]"
            raise BadInput(
                f"Input '{arg}' of '{tf_type}' Op has type {other.dtype} that does not match "
                f"type {first} of argument '{arg0}' for '{name}'. Fix: cast one of them "
                f"(op: cast, dtype: {first})"
            )


def _axis(name: str, tf_type: str, inputs: Specs, axis: int, rank: int, what: str) -> int:
    if -rank <= axis < rank:
        return axis % rank
    raise shape_error(
        f"{what} {axis} out of range for input with {rank} dimensions",
        name,
        tf_type,
        inputs,
        f"use an axis in [{-rank}, {rank - 1}]" if rank else "the input is a scalar; reshape it",
    )


def from_attrs(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    """Generators: the output is what `shape` and `dtype` say."""
    return (TensorSpec(attrs["shape"], attrs["dtype"]),)


def opaque(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    """An imported ONNX op gpuplace has no kernel for: the outputs ONNX's shape inference gave."""
    outs = attrs.get("outputs")
    if type(outs) is not tuple or not all(type(o) is TensorSpec for o in outs):
        raise BadInput(
            f"op '{name}' (Opaque): stands for an ONNX op gpuplace cannot run; only the ONNX "
            "importer makes it (gpuplace plan model.onnx)"
        )
    return outs


def unary(allowed: frozenset[str]) -> InferFn:
    """Elementwise one-input ops: same shape and dtype as the input."""

    def infer(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
        if inputs[0].dtype not in allowed:
            check_dtypes(name, tf_type, inputs, allowed, ("x",))
        return inputs

    return infer


def softmax(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, FLOATS, ("logits",))
    if not inputs[0].shape:
        raise shape_error(
            "Shape must be at least rank 1 but is rank 0",
            name,
            tf_type,
            inputs,
            "softmax normalises along the last axis; give it a vector or a matrix",
        )
    return inputs


def cast(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    return (TensorSpec(inputs[0].shape, attrs["dtype"]),)


def broadcast(name: str, tf_type: str, inputs: Specs) -> tuple[int, ...]:
    """numpy/TensorFlow broadcasting of two shapes, aligned on the right."""
    a, b = inputs[0].shape, inputs[1].shape
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            raise shape_error(
                f"Dimensions must be equal, but are {da} and {db}",
                name,
                tf_type,
                inputs,
                "elementwise ops need equal shapes, or dimensions of 1 that broadcast",
            )
        out.append(db if da == 1 else da)
    return tuple(reversed(out))


def binary(allowed: frozenset[str], int_result: str | None = None) -> InferFn:
    """Broadcasting elementwise ops (add, sub, mul, div); `int_result` is div's float64 for ints."""

    def infer(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
        a, b = inputs
        if a.dtype != b.dtype or a.dtype not in allowed:
            check_dtypes(name, tf_type, inputs, allowed, ("x", "y"))
        dtype = int_result if int_result and a.dtype in INTS else a.dtype
        if a.shape == b.shape and dtype == a.dtype:
            return (a,)
        return (TensorSpec(broadcast(name, tf_type, inputs), dtype),)

    return infer


def matmul(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    a, b = inputs
    for s in inputs:
        if len(s.shape) != 2:
            raise shape_error(
                f"Shape must be rank 2 but is rank {len(s.shape)}",
                name,
                tf_type,
                inputs,
                "matmul multiplies two matrices; reshape the inputs to 2 dimensions",
            )
    check_dtypes(name, tf_type, inputs, NUMERIC, ("a", "b"))
    m, k = reversed(a.shape) if attrs["transpose_a"] else a.shape
    k2, n = reversed(b.shape) if attrs["transpose_b"] else b.shape
    if k != k2:
        raise shape_error(
            f"Dimensions must be equal, but are {k} and {k2}",
            name,
            tf_type,
            inputs,
            f"the first input has {k} columns and the second {k2} rows; "
            "use inputs whose inner dimensions agree, or set transpose_a or transpose_b",
        )
    return (TensorSpec((m, n), a.dtype),)


def add_n(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, NUMERIC)
    first = inputs[0].shape
    for other in inputs:
        if other.shape == first:
            continue
        if len(other.shape) != len(first):
            lead = f"Shapes must be equal rank, but are {len(first)} and {len(other.shape)}"
        else:
            d = next(i for i, (x, y) in enumerate(zip(first, other.shape, strict=True)) if x != y)
            lead = (
                f"Dimension {d} in both shapes must be equal, but are {first[d]} and "
                f"{other.shape[d]}. Shapes are {fmt(first)} and {fmt(other.shape)}"
            )
        raise shape_error(
            f"{lead}. From merging shape 0 with other shapes.",
            name,
            tf_type,
            inputs,
            "add_n sums tensors of one shape (no broadcasting); make the shapes equal",
        )
    return inputs[:1]


def reduce(kind: str) -> InferFn:
    """reduce_sum, reduce_mean, reduce_max: `axis` (null for all) and `keepdims`."""

    def infer(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
        check_dtypes(name, tf_type, inputs, NUMERIC, ("input",))
        shape = inputs[0].shape
        rank = len(shape)
        given = attrs.get("axis")  # None (absent): every axis
        axes = set(range(rank)) if given is None else set()
        for axis in given or ():
            if not -rank <= axis < rank:
                raise shape_error(
                    f"Invalid reduction dimension {axis} for input with {rank} dimensions.",
                    name,
                    tf_type,
                    inputs,
                    f"axis must be in [{-rank}, {rank - 1}]" if rank else "omit axis for a scalar",
                )
            if axis % rank in axes:
                raise shape_error(
                    f"Invalid reduction arguments: Axes contains duplicate dimension: {axis % rank}",
                    name,
                    tf_type,
                    inputs,
                    f"give each axis once ({list(given or ())} names axis {axis % rank} twice)",
                )
            axes.add(axis % rank)
        if kind == "max" and any(shape[a] == 0 for a in axes):
            raise shape_error(
                "Cannot reduce_max over an empty dimension", name, tf_type, inputs,
                "reduce over dimensions of size >= 1",
            )  # fmt: skip
        if kind == "mean" and inputs[0].dtype in INTS and any(shape[a] == 0 for a in axes):
            raise shape_error(
                "Integer division by zero: the mean of an empty dimension", name, tf_type, inputs,
                "reduce over dimensions of size >= 1, or cast to a float dtype first (the mean of "
                "nothing is then nan)",
            )  # fmt: skip
        keep = attrs["keepdims"]
        out = tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)
        return (TensorSpec(out, inputs[0].dtype),)

    return infer


def transpose(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    shape = inputs[0].shape
    perm = attrs.get("perm")
    if perm is None:
        return (TensorSpec(shape[::-1], inputs[0].dtype),)
    fix = f"perm lists each axis 0..{len(shape) - 1} once, e.g. {list(range(len(shape)))[::-1]}"
    if len(perm) != len(shape):
        raise shape_error(
            f"transpose expects a vector of size {len(shape)}. But input(1) is a vector of "
            f"size {len(perm)}",
            name,
            tf_type,
            inputs,
            fix,
        )
    for axis in range(len(shape)):
        if axis not in perm:
            raise shape_error(
                f"{axis} is missing from 'perm' argument.", name, tf_type, inputs, fix
            )
    return (TensorSpec(tuple(shape[p] for p in perm), inputs[0].dtype),)


def reshape(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    target = attrs["shape"]
    total = prod(inputs[0].shape)
    known = prod(d for d in target if d != -1)
    out = target
    if -1 in target and known and total % known == 0:
        out = tuple(total // known if d == -1 else d for d in target)
    if prod(out) != total or -1 in out:
        raise shape_error(
            f"Cannot reshape a tensor with {total} elements to shape {fmt(target)} "
            f"({known} elements)",
            name,
            tf_type,
            inputs,
            f"the new shape must hold exactly {total} elements (use -1 for one dimension)",
        )
    return (TensorSpec(out, inputs[0].dtype),)


def concat(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, ANY)
    first = inputs[0].shape
    rank = len(first)
    axis = _axis(name, tf_type, inputs, attrs["axis"], rank, "Concatenating dimension")
    for other in inputs:
        bad = len(other.shape) != rank or any(
            x != y for i, (x, y) in enumerate(zip(first, other.shape, strict=True)) if i != axis
        )
        if bad:
            raise shape_error(
                f"Dimensions of inputs should match: shape[0] = {fmt(first)} vs. "
                f"{fmt(other.shape)}",
                name,
                tf_type,
                inputs,
                f"inputs must agree in every dimension but the axis ({axis})",
            )
    out = (*first[:axis], sum(s.shape[axis] for s in inputs), *first[axis + 1 :])
    return (TensorSpec(out, inputs[0].dtype),)


def split(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    x = inputs[0]
    axis = _axis(name, tf_type, inputs, attrs["axis"], len(x.shape), "Split dimension")
    size = x.shape[axis]
    if "num_split" in attrs:
        n = attrs["num_split"]
        if size % n:
            raise shape_error(
                f"Dimension size must be evenly divisible by {n} but is {size}",
                name,
                tf_type,
                inputs,
                f"choose num_split dividing {size}, or give sizes",
            )
        sizes = (size // n,) * n
    else:
        sizes = split_sizes(attrs["sizes"], size)
        if sizes is None:
            raise shape_error(
                f"Determined shape must either match input shape along split_dim exactly if "
                f"fully specified, or be less than the size of the input along split_dim if not "
                f"fully specified.  Got: {sum(d for d in attrs['sizes'] if d != -1)}",
                name,
                tf_type,
                inputs,
                f"sizes must add up to {size} (one may be -1)",
            )
    return tuple(TensorSpec((*x.shape[:axis], s, *x.shape[axis + 1 :]), x.dtype) for s in sizes)


def split_sizes(sizes: Sequence[int], total: int) -> tuple[int, ...] | None:
    """`sizes` with its -1 resolved so that they add up to `total`, or None if impossible."""
    known = sum(d for d in sizes if d != -1)
    rest = total - known
    if rest < 0 or (-1 not in sizes and rest):
        return None
    return tuple(rest if d == -1 else d for d in sizes)


def no_outputs(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    return ()


def batch_rows(total: int, parts: int, index: int) -> tuple[int, int]:
    """Keras' `get_slice`: rows [start, stop) of part `index`; the last part takes the rest."""
    step = total // parts
    start = step * index
    return start, total if index == parts - 1 else start + step


def batch_slice(name: str, tf_type: str, attrs: Mapping[str, Any], inputs: Specs) -> Specs:
    """One replica's share of a batch along axis 0 (Keras multi_gpu_model's slicing)."""
    shape, parts, index = inputs[0].shape, attrs["parts"], attrs["index"]
    if not shape:
        raise shape_error(
            "Cannot split a scalar into replicas", name, tf_type, inputs,
            "split only inputs with a batch dimension (axis 0)",
        )  # fmt: skip
    if shape[0] < parts:
        raise shape_error(
            f"A batch of {shape[0]} is smaller than the {parts} replicas", name, tf_type, inputs,
            f"use a batch of at least {parts} samples, or fewer GPUs",
        )  # fmt: skip
    if not 0 <= index < parts:
        raise shape_error(
            f"index {index} is not one of the {parts} parts", name, tf_type, inputs,
            f"index must be in [0, {parts - 1}]",
        )  # fmt: skip
    start, stop = batch_rows(shape[0], parts, index)
    return (TensorSpec((stop - start, *shape[1:]), inputs[0].dtype),)
