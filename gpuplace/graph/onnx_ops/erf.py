"""erf and the GELU built on it, elementwise, with xp functions only (numpy has no erf, and
cupyx/scipy must not be required).

erf(x) = x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) is 1 - 1.5e-8), clamped to
[-1, 1], the rational fit
float32 math libraries use (Eigen's `generic_fast_erf_float`, also TensorFlow's XLA): P of
degree 6 and Q of degree 4 in x^2. Being x times a ratio, it stays accurate relative to erf
near 0. Measured against `math.erf` (tests/onnx_ops/test_dense.py checks a grid over
[-6, 6] and down to 1e-30): relative error below 7e-8 computed in float64, below 4.5e-7 (a
few float32 ulps) computed in float32, which is how float32 inputs are computed; float16
inputs are computed in float32 and rounded back.

On the host the work goes in blocks of `common.BLOCK` elements, each evaluated in place, so that
the ~25 passes of the polynomials stay in the CPU's cache instead of streaming the whole
tensor through memory each time; a GPU's library (cupy) takes the tensor in one block.
"""

from __future__ import annotations

from math import pi, sqrt
from types import ModuleType

from ..kernels import Array
from .common import BLOCK

_P = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
      -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
      -2.72614225801306e-10)  # fmt: skip
_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
      -2.13374055278905e-04, -1.45660718464996e-05)  # fmt: skip
_HALF_ROOT_2 = sqrt(0.5)
_ROOT_2_OVER_PI = sqrt(2 / pi)


def _horner(xp: ModuleType, z: Array, coefficients: tuple[float, ...]) -> Array:
    out = z * coefficients[-1]
    for c in coefficients[-2:0:-1]:
        out += c
        out *= z
    out += coefficients[0]
    return out


def _erf_block(xp: ModuleType, x: Array, out: Array) -> None:
    t = xp.clip(x, -4.0, 4.0)
    z = t * t
    p = _horner(xp, z, _P)
    p /= _horner(xp, z, _Q)
    p *= t
    xp.clip(p, -1.0, 1.0, out=out)  # the fit overshoots 1 by 5e-8 near 4


def _gelu_block(xp: ModuleType, x: Array, out: Array) -> None:
    """0.5 x (1 + erf(x / sqrt 2))."""
    _erf_block(xp, x * _HALF_ROOT_2, out)
    out += 1
    out *= x
    out *= 0.5


def _gelu_tanh_block(xp: ModuleType, x: Array, out: Array) -> None:
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    inner = x * x
    inner *= 0.044715
    inner += 1
    inner *= x
    inner *= _ROOT_2_OVER_PI
    xp.tanh(inner, out=out)
    out += 1
    out *= x
    out *= 0.5


_BLOCKS = {"erf": _erf_block, "none": _gelu_block, "tanh": _gelu_tanh_block}


def elementwise(xp: ModuleType, x: Array, kind: str) -> Array:
    """erf (`kind` "erf") or GELU ("none": exact, "tanh": approximated) of `x`, in x's dtype."""
    dtype = x.dtype
    if dtype == xp.float16:
        x = x.astype(xp.float32)
    flat = xp.ascontiguousarray(x).reshape(-1)
    out = xp.empty_like(flat)
    block = _BLOCKS[kind]
    step = BLOCK if xp.__name__ == "numpy" else max(flat.size, 1)
    for start in range(0, flat.size, step):
        block(xp, flat[start : start + step], out[start : start + step])
    return out.reshape(x.shape).astype(dtype, copy=False)


def erf(xp: ModuleType, x: Array) -> Array:
    return elementwise(xp, x, "erf")
