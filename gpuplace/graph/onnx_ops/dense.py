"""ONNX's MLP math: MatMul, Gemm, the elementwise arithmetic and activations, Softmax and
LogSoftmax, Erf and Gelu, Identity and Dropout (opset 13-20).

Erf and Gelu are computed in `erf.py` (a rational fit good to a few float32 ulps).

Dropout is inference's: the output is the input, whatever `ratio` says (the ratio and
training_mode inputs are accepted and not read; a training step's random mask is not modelled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import exp, prod
from types import ModuleType
from typing import Any

from ..attrs import INT, NUMBER
from ..infer import ANY, FLOATS, NUMERIC, Specs, binary, check_dtypes, shape_error, unary
from ..kernels import Array, elementwise, identity, last_max, relu, sigmoid, softmax_along
from ..model import TensorSpec
from ..opdef import OpDef
from .common import (
    FLAG,
    NO_FLOPS,
    axis_in,
    broadcast_shapes,
    by_rows,
    choice,
    need_rank,
    onnx_op,
    per_output,
)
from .erf import elementwise as erf_elementwise
from .erf import erf

Attrs = Mapping[str, Any]


# --- shape rules -----------------------------------------------------------------------------


def _matmul(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    """numpy.matmul's rule: a 1-D operand gains a dimension that the output drops again."""
    check_dtypes(name, tf_type, inputs, NUMERIC, ("A", "B"))
    a, b = (s.shape for s in inputs)
    if not a or not b:
        raise shape_error(
            "Shape must be at least rank 1 but is rank 0", name, tf_type, inputs,
            "MatMul multiplies vectors, matrices or stacks of them; reshape the scalar",
        )  # fmt: skip
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise shape_error(
            f"Dimensions must be equal, but are {a2[-1]} and {b2[-2]}", name, tf_type, inputs,
            f"A's last dimension ({a2[-1]}) must equal B's "
            f"{'only' if len(b) == 1 else 'second to last'} dimension ({b2[-2]}); "
            "transpose one of them",
        )  # fmt: skip
    batch = broadcast_shapes(name, tf_type, inputs, (a2[:-2], b2[:-2]), " (batch dimensions)")
    out = batch + (a2[-2:-1] if len(a) > 1 else ()) + (b2[-1:] if len(b) > 1 else ())
    return (TensorSpec(out, inputs[0].dtype),)


def _matmul_flops(attrs: Attrs, ins: Specs, outs: Specs) -> float:
    """2 * (output elements) * K: a multiply and an add per term."""
    return 2.0 * _count(outs) * ins[0].shape[-1]


def _count(specs: Specs) -> int:
    n = 1
    for d in specs[0].shape:
        n *= d
    return n


def _gemm_dims(attrs: Attrs, inputs: Specs) -> tuple[int, int, int, int]:
    """(M, K of A, K of B, N) after transA / transB."""
    (m, k), (k2, n) = inputs[0].shape, inputs[1].shape
    if attrs["transA"]:
        m, k = k, m
    if attrs["transB"]:
        k2, n = n, k2
    return m, k, k2, n


def _gemm(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    """Y = alpha * A' @ B' + beta * C, A' and B' 2-D, C broadcasting to (M, N) one way."""
    check_dtypes(name, tf_type, inputs, FLOATS, ("A", "B", "C"))
    for i, s in enumerate(inputs[:2]):
        if len(s.shape) != 2:
            raise shape_error(
                f"Shape must be rank 2 but is rank {len(s.shape)} (input {'AB'[i]})", name,
                tf_type, inputs, "Gemm multiplies two matrices; use MatMul for other ranks",
            )  # fmt: skip
    m, k, k2, n = _gemm_dims(attrs, inputs)
    if k != k2:
        raise shape_error(
            f"Dimensions must be equal, but are {k} and {k2}", name, tf_type, inputs,
            "A' is M x K and B' is K x N; set transA or transB so the inner dimensions agree",
        )  # fmt: skip
    if len(inputs) == 3:
        c = inputs[2].shape
        if len(c) > 2 or any(d not in (1, full) for d, full in zip(c[::-1], (n, m), strict=False)):
            raise shape_error(
                f"C of shape [{','.join(map(str, c))}] does not broadcast to the output [{m},{n}]",
                name, tf_type, inputs, f"give C of shape [{m},{n}], [{n}], [1] or a scalar",
            )  # fmt: skip
    return (TensorSpec((m, n), inputs[0].dtype),)


def _gemm_flops(attrs: Attrs, ins: Specs, outs: Specs) -> float:
    """2 * M * N * K (the multiply-adds; the alpha, beta and C terms are not counted)."""
    m, k, _, n = _gemm_dims(attrs, ins)
    return 2.0 * m * n * k


def _pow(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    """Pow's base and exponent may differ in type (T, T1); the output is the base's."""
    for i, s in enumerate(inputs):
        if s.dtype not in NUMERIC:
            check_dtypes(name, tf_type, (s,), NUMERIC, (("X", "Y")[i],))
    shape = broadcast_shapes(name, tf_type, inputs, [s.shape for s in inputs])
    return (TensorSpec(shape, inputs[0].dtype),)


def _softmax(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
    check_dtypes(name, tf_type, inputs, FLOATS, ("input",))
    need_rank(name, tf_type, inputs, 0, lambda r: r >= 1, "at least rank 1",
              f"{tf_type} normalises along an axis; reshape the scalar to [1]")  # fmt: skip
    rank = len(inputs[0].shape)
    axis_in(name, tf_type, inputs, attrs["axis"], rank, rank)
    return inputs


def _first(allowed: frozenset[str]) -> Any:
    """The output is input 0 as it is (Identity, Dropout's later inputs are not data)."""
    one = unary(allowed)

    def infer(name: str, tf_type: str, attrs: Attrs, inputs: Specs) -> Specs:
        return one(name, tf_type, attrs, inputs[:1])

    return infer


# --- kernels ---------------------------------------------------------------------------------


def _matmul_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """A contiguous stack of matrices times one matrix (a transformer's linear layers) as one
    2-D product of all their rows; numpy's matmul multiplies a stack matrix by matrix, 3%
    slower for gpt2_tiny's 8x128x64 by 64x192 and 8x128x256 by 256x64, one thread
    (`bench/kernels_against.py --ops MatMul`)."""
    a, b = inputs
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:
        rows = a.reshape(prod(a.shape[:-1]), a.shape[-1])  # not -1: a may have no elements
        return [xp.matmul(rows, b).reshape(*a.shape[:-1], b.shape[-1])]
    return [xp.matmul(a, b)]


def _gemm_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    a, b = inputs[0], inputs[1]
    y = xp.matmul(a.T if attrs["transA"] else a, b.T if attrs["transB"] else b)
    if attrs["alpha"] != 1.0:
        y *= y.dtype.type(attrs["alpha"])
    if len(inputs) == 3 and attrs["beta"] != 0.0:
        c = inputs[2]
        y += c if attrs["beta"] == 1.0 else c * c.dtype.type(attrs["beta"])
    return [y]


def _div(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    """ONNX (and C) integer division truncates toward zero; numpy's // floors."""
    a, b = inputs
    if a.dtype.kind != "i":
        return [xp.divide(a, b)]
    q = xp.floor_divide(a, b)
    inexact = (q * b != a) & ((a < 0) != (b < 0))
    return [q + inexact.astype(q.dtype)]


def _pow_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    x, y = inputs
    return [xp.power(x, y).astype(x.dtype, copy=False)]


def _erf_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [erf(xp, inputs[0])]


def _gelu(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [erf_elementwise(xp, inputs[0], attrs["approximate"])]


def _softmax_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [_softmax_rows(xp, inputs[0], attrs["axis"], log=False)]


def _log_softmax_kernel(xp: ModuleType, inputs: Sequence[Array], attrs: Attrs) -> list[Array]:
    return [_softmax_rows(xp, inputs[0], attrs["axis"], log=True)]


def _softmax_rows(xp: ModuleType, x: Array, axis: int, log: bool) -> Array:
    """Softmax along the last axis in one go (`_softmax_last`); LogSoftmax along it in blocks
    of rows (`by_rows`); either along another axis in one go."""
    if axis not in (-1, x.ndim - 1):
        return softmax_along(xp, x, axis, log)
    if not log:
        return _softmax_last(xp, x)
    return by_rows(xp, x, x.shape[-1], lambda rows: softmax_along(xp, rows, -1, log))


def _softmax_last(xp: ModuleType, x: Array) -> Array:
    """Softmax along the last axis, its row sums one matrix-vector product with ones (BLAS):
    numpy sums a short contiguous axis row by row, several times slower. On the whole tensor:
    in 32K-element blocks of rows it was slower still (attention's 128-wide rows: 0.97 ms
    against 0.69 ms for 8x4x128x128, 7.0 ms against 6.4 ms for 16x12x128x128). On the host,
    float32 and float64 are shifted by the tensor's maximum (`_softmax_shifted`)."""
    if x.size == 0:
        return x.copy()
    if xp.__name__ == "numpy" and x.dtype.itemsize >= 4:
        found = _softmax_shifted(xp, x)
        if found is not None:
            return found
    return _softmax_by_row_max(xp, x)


def _softmax_by_row_max(xp: ModuleType, x: Array) -> Array:
    out = x - last_max(xp, x)
    xp.exp(out, out=out)  # in place: one tensor-sized temporary
    out /= xp.matmul(out, xp.ones(x.shape[-1], dtype=out.dtype))[..., None]
    return out


def _softmax_shifted(xp: ModuleType, x: Array) -> Array | None:
    """Softmax along the last axis shifted by the tensor's maximum instead of each row's (the
    result is the same: softmax is unchanged by a shift per row). One maximum over the whole
    tensor (contiguous) costs about a tenth of the row maxima (0.025 against 0.21 ms for
    8x4x128x128 float32). No term overflows (each is at most 1). A row whose terms sum below
    e^-16 (its maximum more than 16 below the tensor's) is computed again by its own maximum;
    in every other row only outputs below e^-71 (1.5e-31; in float32) can lose precision to
    subnormal terms, as outputs below e^-87 do in the row-max form. None when the maximum is
    not finite (inf or NaN), for the row-max form to handle as it does."""
    top = x.max()
    if not xp.isfinite(top):
        return None
    out = x - top
    xp.exp(out, out=out)
    sums = xp.matmul(out, xp.ones(x.shape[-1], dtype=out.dtype))
    low = sums < _LEAST_SUM
    if low.any():
        rows, inner = out.reshape(-1, x.shape[-1]), low.reshape(-1)
        rows[inner] = _softmax_by_row_max(xp, x.reshape(-1, x.shape[-1])[inner])
        sums[low] = 1
    out /= sums[..., None]
    return out


_LEAST_SUM = exp(-16.0)  # see _softmax_shifted


# --- the ops ---------------------------------------------------------------------------------


def _unary_op(name: str, allowed: frozenset[str], compute: Any, flops: float = 1.0) -> OpDef:
    return onnx_op(name, unary(allowed), compute, flops=per_output(flops))


def _binary_op(name: str, compute: Any) -> OpDef:
    return onnx_op(name, binary(NUMERIC), compute, min_inputs=2, max_inputs=2)


OPS: tuple[OpDef, ...] = (
    onnx_op("MatMul", _matmul, _matmul_kernel, min_inputs=2, max_inputs=2, flops=_matmul_flops),
    onnx_op("Gemm", _gemm, _gemm_kernel, {
        "alpha": (NUMBER, 1.0), "beta": (NUMBER, 1.0), "transA": (FLAG, 0), "transB": (FLAG, 0),
    }, min_inputs=2, max_inputs=3, flops=_gemm_flops),
    _binary_op("Add", elementwise("add")),
    _binary_op("Sub", elementwise("subtract")),
    _binary_op("Mul", elementwise("multiply")),
    _binary_op("Div", _div),
    onnx_op("Pow", _pow, _pow_kernel, min_inputs=2, max_inputs=2),
    _unary_op("Sqrt", FLOATS, elementwise("sqrt")),
    _unary_op("Neg", NUMERIC, elementwise("negative")),
    _unary_op("Exp", FLOATS, elementwise("exp")),
    _unary_op("Log", FLOATS, elementwise("log")),
    _unary_op("Tanh", FLOATS, elementwise("tanh")),
    _unary_op("Relu", NUMERIC, relu),
    _unary_op("Sigmoid", FLOATS, sigmoid),
    _unary_op("Erf", FLOATS, _erf_kernel, flops=25.0),  # erf.py's rational fit
    onnx_op("Gelu", unary(FLOATS), _gelu, {"approximate": (choice("none", "tanh"), "none")},
            flops=per_output(30.0)),
    onnx_op("Softmax", _softmax, _softmax_kernel, {"axis": (INT, -1)}, flops=per_output(5.0)),
    onnx_op("LogSoftmax", _softmax, _log_softmax_kernel, {"axis": (INT, -1)},
            flops=per_output(5.0)),
    onnx_op("Identity", _first(ANY), identity, flops=NO_FLOPS),
    onnx_op("Dropout", _first(FLOATS), identity, {"seed": (INT, None)}, max_inputs=3,
            flops=NO_FLOPS),
)  # fmt: skip
