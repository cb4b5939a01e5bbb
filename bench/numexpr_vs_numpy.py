"""numexpr against numpy on the elementwise work of an ONNX transformer (onnx-fuse, session 7).

The question: would numexpr (one fused pass per expression, no temporaries) run GELU and
plain float32 arithmetic faster than gpuplace's numpy kernels, as a fast path of the numpy
backend? numexpr is not a dependency: this script is the measurement behind not adding it
(docs/benchmarks.md, "onnx-fuse, session 7"); it needs `pip install numexpr` and says so
without it. One thread each (numexpr's set to 1; numpy's ufuncs use one), CPU time, best of
30, float32 8x128x256 (gpt2_tiny's GELU input). numexpr's float32 arithmetic stays float32
only with float32 operands: its constants are passed as one-element float32 arrays, and its
clamps are `where` (its minimum and maximum compute in float64).

Run: .venv/bin/python bench/numexpr_vs_numpy.py
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

os.environ.setdefault("NUMEXPR_NUM_THREADS", "1")

import numpy as np

from gpuplace.graph.onnx_ops import erf


def best(fn: Callable[[], object], repeats: int = 30) -> float:
    least = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        least = min(least, time.process_time() - start)
    return least


def horner(prefix: str, count: int, z: str) -> str:
    """The polynomial with coefficients `prefix`0..count-1 in `z`, as Horner's nested text."""
    text = f"{prefix}{count - 1}"
    for i in range(count - 2, -1, -1):
        text = f"({text})*{z}+{prefix}{i}"
    return text


def main() -> int:
    try:
        import numexpr as ne
    except ImportError:
        print("numexpr is not installed (pip install numexpr): nothing to compare")
        return 0
    ne.set_num_threads(1)
    x = np.random.default_rng(0).standard_normal((8, 128, 256)).astype(np.float32) * 3
    y = x.copy()

    def one(value: float) -> np.ndarray:
        return np.full(1, value, np.float32)

    names = {f"p{i}": one(c) for i, c in enumerate(erf._P)}
    names |= {f"q{i}": one(c) for i, c in enumerate(erf._Q)}
    names |= {"h": one(erf._HALF_ROOT_2), "four": one(4), "one": one(1), "half": one(0.5)}
    names |= {"x": x, "y": y}
    t = "where(x*h > four, four, where(x*h < -four, -four, x*h))"
    ratio = f"({horner('p', 7, 'zz')})/({horner('q', 5, 'zz')})"

    def gelu_given_t_z() -> np.ndarray:
        """GELU with t = clamp(x / sqrt 2) and z = t * t made by numpy first (numexpr does no
        common subexpressions), the rest one numexpr pass (no clamp of erf to [-1, 1])."""
        tt = np.clip(x * erf._HALF_ROOT_2, -4.0, 4.0)
        zz = tt * tt
        return ne.evaluate(f"half*x*(one+tt*{ratio})", local_dict={**names, "tt": tt, "zz": zz})

    whole = ratio.replace("zz", f"(({t})*({t}))")
    fit = f"({t})*{whole}"
    gelu = f"half*x*(one+where({fit} > one, one, where({fit} < -one, -one, {fit})))"
    ours = erf.elementwise(np, x, "none")
    for got in (ne.evaluate(gelu, local_dict=names), gelu_given_t_z()):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ours, rtol=1e-5, atol=1e-5)
    rows = [
        ("x + y", lambda: x + y, lambda: ne.evaluate("x + y", local_dict=names)),
        ("exp(x)", lambda: np.exp(x), lambda: ne.evaluate("exp(x)", local_dict=names)),
        ("GELU, one expression", lambda: erf.elementwise(np, x, "none"),
         lambda: ne.evaluate(gelu, local_dict=names)),
        ("GELU, t and z given", lambda: erf.elementwise(np, x, "none"), gelu_given_t_z),
    ]  # fmt: skip
    print(
        f"numexpr {ne.__version__} (VML: {ne.use_vml}, threads: {ne.get_num_threads()}), "
        f"numpy {np.__version__}; float32 8x128x256, CPU time, best of 30"
    )
    for name, plain, fused in rows:
        a, b = best(plain), best(fused)
        print(f"{name:22} numpy {a * 1e3:.3f} ms, numexpr {b * 1e3:.3f} ms: ratio {b / a:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
