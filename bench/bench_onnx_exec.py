"""Executing an imported ONNX model on the CPU: gpuplace's run against onnxruntime's (issue 14).

For each example model (gpuplace/examples/onnx/, made by tools/make_onnx_examples.py) with its
batch bound: the same random input fed to `gpuplace` (the Python API: `prepare` with the feeds,
then `execute_prepared` on this machine's CPU, everything on CPU:0) and to an onnxruntime
InferenceSession on its CPU provider, both on one thread (OPENBLAS_NUM_THREADS=1 and the same
for the other BLAS libraries numpy may use, set before numpy loads unless already set; ORT's
intra- and inter-op threads 1: on a shared 2-core machine more threads measure the neighbours),
best of N process CPU time (warm: each side runs once before timing),
the outputs checked to agree (float32 tolerance) before anything is timed. Printed: both times
and `ratio` = gpuplace / onnxruntime. Goal: <= 1.5 on the MLP, the CNN and the transformer.
For the MLP also the same Gemm and Relu written by hand in numpy (`numpy`), which splits the
ratio into what the executor adds (gpuplace / numpy) and what numpy's BLAS costs against
onnxruntime's own kernels (numpy / onnxruntime).
For every model also `in matmul`: the CPU time gpuplace's run spends inside numpy.matmul on
matrices (its MatMul and Gemm, Conv's products; the least over N runs): the floor numpy's
BLAS sets at these shapes, whatever the executor and the other kernels do. The first line
names the OpenBLAS kernel numpy's BLAS picked for this CPU, and says so when the environment
chose it (OPENBLAS_CORETYPE overrides OpenBLAS's own choice: this machine's environment sets
Haswell, where OpenBLAS would pick its SkylakeX kernels).
A model gpuplace cannot run yet (an op without a kernel) is reported as skipped, with why.

Run: .venv/bin/python bench/bench_onnx_exec.py [--smoke]
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from bench_execute import best  # noqa: E402  (bench/ is on sys.path when this script runs)

ROOT = Path(__file__).resolve().parent.parent
SMOKE = "--smoke" in sys.argv
REPEATS = 2 if SMOKE else 15
GOAL = 1.5

# model, dims, inputs: name -> (shape from dims, dtype, high for integers)
MODELS = [
    ("mlp", {"batch": 64 if SMOKE else 4096}),
    ("cnn", {"batch": 4 if SMOKE else 64}),
    ("gpt2_tiny", {"batch": 2 if SMOKE else 8, "seq": 16 if SMOKE else 128}),
]


def inputs(name: str, dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    if name == "mlp":
        return {"x": rng.standard_normal((dims["batch"], 32), dtype=np.float32)}
    if name == "cnn":
        return {"x": rng.standard_normal((dims["batch"], 3, 32, 32), dtype=np.float32)}
    shape = (dims["batch"], dims["seq"])
    return {
        "input_ids": rng.integers(0, 256, shape, dtype=np.int64),
        "attention_mask": np.ones(shape, dtype=np.int64),
    }


def by_hand(path: Path, x: np.ndarray) -> Callable[[], object]:
    """The MLP's Gemm (transB=1) + bias and Relu layers as plain numpy calls."""
    import onnx
    from onnx import numpy_helper

    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    layers = [(weights[f"model.layers.{i}.fc.weight"], weights[f"model.layers.{i}.fc.bias"])
              for i in range(3)]  # fmt: skip
    head = (weights["head.weight"], weights["head.bias"])

    def run() -> np.ndarray:
        h = x
        for w, b in layers:
            h = np.maximum(h @ w.T + b, 0)
        return h @ head[0].T + head[1]

    return run


def openblas_core() -> str:
    """The kernel family numpy's OpenBLAS chose (scipy-openblas wheels), or "unknown"."""
    here = os.path.dirname(np.__file__)
    for lib in glob.glob(os.path.join(here, os.pardir, "numpy.libs", "libscipy_openblas*")):
        try:
            corename = ctypes.CDLL(lib).scipy_openblas_get_corename64_
        except (OSError, AttributeError):
            continue
        corename.restype = ctypes.c_char_p
        return str(corename().decode())
    return "unknown"


def in_matmul(run: Callable[[], object], repeats: int) -> float:
    """The CPU time one run of `run` spends inside np.matmul multiplying matrices (the kernels
    look xp.matmul up per call; a product with a vector, a row sum, is not counted), the least
    over `repeats` runs: the same calls on the same arrays, each just made by the op before
    it, as the run has them."""
    real, spent = np.matmul, [0.0]

    def timed(a: np.ndarray, b: np.ndarray, *args: object, **kwargs: object) -> object:
        if a.ndim < 2 or b.ndim < 2:  # a row sum (Softmax, LayerNormalization), not a product
            return real(a, b, *args, **kwargs)  # type: ignore[call-overload]
        start = time.process_time()
        try:
            return real(a, b, *args, **kwargs)  # type: ignore[call-overload]
        finally:
            spent[0] += time.process_time() - start

    least = float("inf")
    np.matmul = timed  # type: ignore[assignment]
    try:
        for _ in range(repeats):
            spent[0] = 0.0
            run()
            least = min(least, spent[0])
    finally:
        np.matmul = real
    return least


def main() -> int:
    import onnxruntime as ort

    import gpuplace
    from gpuplace.errors import GpuplaceError
    from gpuplace.pipeline import execute_prepared, prepare

    # CUDA_VISIBLE_DEVICES empty: the process sees no GPU, so CPU:0 runs everything
    view = gpuplace.view(gpuplace.discover("1xK520"), {"CUDA_VISIBLE_DEVICES": ""})
    rng = np.random.default_rng(0)
    forced = os.environ.get("OPENBLAS_CORETYPE")
    chosen = f" (OPENBLAS_CORETYPE={forced} in the environment)" if forced is not None else ""
    print(f"numpy's OpenBLAS kernels: {openblas_core()}{chosen}; CPU time, one thread each side")
    for name, dims in MODELS:
        path = ROOT / "gpuplace" / "examples" / "onnx" / f"{name}.onnx"
        feeds = inputs(name, dims, rng)
        shown = ", ".join(f"{k}={v}" for k, v in dims.items())
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        options = gpuplace.Options(dims=dims, feeds=feeds)
        try:
            prepared = prepare(str(path), view, options, {})
            ours = execute_prepared(prepare(str(path), view, options, {}), view)
        except GpuplaceError as exc:
            print(f"{name} ({shown}): skipped: gpuplace cannot run it yet: {str(exc)[:160]}")
            continue
        theirs = session.run(None, feeds)[0]
        got = next(iter(ours.result.values.values()))
        np.testing.assert_allclose(got, theirs, rtol=1e-4, atol=1e-4)

        run_gpuplace = partial(execute_prepared, prepared, view)
        run_ort = partial(session.run, None, feeds)
        hand = [by_hand(path, feeds["x"])] if name == "mlp" else []
        for warm in (run_gpuplace, run_ort, *hand):
            warm()
        t_ours, t_ort, *t_hand = best(
            REPEATS, run_gpuplace, run_ort, *hand, clock=time.process_time
        )
        t_blas = in_matmul(run_gpuplace, REPEATS)
        print(
            f"{name} ({shown}): in matmul {t_blas * 1e3:.3f} ms of the run: gpuplace / matmul "
            f"ratio {t_ours / t_blas:.2f}, matmul / onnxruntime ratio {t_blas / t_ort:.2f}"
        )
        for t_np in t_hand:
            print(
                f"{name} ({shown}): numpy by hand {t_np * 1e3:.3f} ms: gpuplace / numpy ratio "
                f"{t_ours / t_np:.2f}, numpy / onnxruntime ratio {t_np / t_ort:.2f}"
            )
        ratio = t_ours / t_ort
        mark = "ok" if ratio <= GOAL else f"over the goal {GOAL}"
        print(
            f"{name} ({shown}): gpuplace {t_ours * 1e3:.3f} ms, onnxruntime {t_ort * 1e3:.3f} ms "
            f"(best of {REPEATS}): ratio {ratio:.2f} ({mark})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
