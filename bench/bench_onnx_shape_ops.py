"""gpuplace's ONNX shape, index and logic kernels (graph/onnx_ops/{shape,index,logic}.py, numpy)
against onnxruntime's CPU kernels, one op at a time, measured in one run.

The ops a BERT-base layer and its embeddings and masks run (batch 16, 128 tokens, 768 wide, 12
heads, a 30522-word vocabulary): gpuplace's compute (attrs checked once, as the executor does)
and a one-node onnxruntime session built with onnx.helper, where the attrs gpuplace folds are
initializers. Both on one thread, timed in CPU time, best of 7 taken in turn (bench_execute's
`best`, as bench_onnx_ops.py does). A kernel that returns a view (Transpose, Slice) is
timed with a copy to contiguous memory, as onnxruntime's output is. The ratio is gpuplace /
onnxruntime. Needs onnx and onnxruntime (the `test` extra).
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_execute import best  # noqa: E402  # bench/ is on sys.path when this script runs
from bench_onnx_ops import gpuplace_fn  # noqa: E402

SMOKE = "--smoke" in sys.argv
REPEATS = 1 if SMOKE else 7
N, T, D, H, V = (2, 8, 16, 2, 50) if SMOKE else (16, 128, 768, 12, 30522)
# attrs gpuplace folds that ONNX passes as int64 tensor inputs after the data, in ONNX's order
TENSOR_INPUTS = {"Reshape": ("shape",), "Slice": ("starts", "ends", "axes"), "Expand": ("shape",),
                 "Unsqueeze": ("axes",), "Split": ("split",), "CumSum": ("axis",)}  # fmt: skip


def cases() -> list[tuple[str, list[np.ndarray], dict[str, Any]]]:
    rng = np.random.default_rng(0)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    ids = rng.integers(0, V, (N, T)).astype(np.int64)
    heads = f(N, T, H, D // H)
    mask = rng.random((N, 1, T, T)) < 0.5
    return [
        ("Gather", [f(V, D), ids], {}),
        ("Transpose", [heads], {"perm": [0, 2, 1, 3]}),
        ("Reshape", [f(N, T, D)], {"shape": [0, 0, H, D // H]}),
        ("Slice", [f(N, T, 3 * D)], {"starts": [D], "ends": [2 * D], "axes": [2]}),
        ("Split", [f(N, T, 3 * D)], {"axis": 2, "split": [D, D, D]}),
        ("Concat", [f(N, T, D), f(N, T, D)], {"axis": -1}),
        ("Unsqueeze", [mask[:, 0, 0, :]], {"axes": [1, 2]}),
        ("Expand", [f(N, 1, 1, T)], {"shape": [N, H, T, T]}),
        ("Where", [mask, f(N, H, T, T), np.array(-1e4, np.float32)], {}),
        ("Cast", [mask], {"to": 1}),
        ("Equal", [ids, np.array(0, np.int64)], {}),
        ("CumSum", [ids], {"axis": 1}),
        ("Max", [f(N, H, T, T), np.array(-1e4, np.float32)], {}),
    ]  # fmt: skip


def contiguous_fn(
    op_type: str, inputs: list[np.ndarray], attrs: dict[str, Any]
) -> Callable[[], list[np.ndarray]]:
    """bench_onnx_ops' kernel call, its outputs made contiguous (views copied, as onnxruntime's)."""
    compute = gpuplace_fn(op_type, inputs, attrs)
    return lambda: [np.ascontiguousarray(y) for y in compute()]


def one_node_model(op_type: str, inputs: list[np.ndarray], attrs: dict[str, Any],
                   outputs: int) -> bytes:  # fmt: skip
    """The op as an ONNX model (opset 18): data inputs x0.., folded attrs as initializers."""
    from onnx import helper, numpy_helper

    folded = TENSOR_INPUTS.get(op_type, ())
    node = helper.make_node(
        op_type, [*(f"x{i}" for i in range(len(inputs))), *folded],
        [f"y{i}" for i in range(outputs)], **{k: v for k, v in attrs.items() if k not in folded},
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "bench",
        [helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for i, x in enumerate(inputs)],
        [helper.make_empty_tensor_value_info(f"y{i}") for i in range(outputs)],
        initializer=[numpy_helper.from_array(np.array(attrs[k], np.int64), k) for k in folded],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return bytes(model.SerializeToString())


def measure(
    ort: Any, op_type: str, inputs: list[np.ndarray], attrs: dict[str, Any]
) -> tuple[float, float]:
    """CPU seconds of gpuplace's kernel and of onnxruntime's, after checking they agree."""
    ours = contiguous_fn(op_type, inputs, attrs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    model = one_node_model(op_type, inputs, attrs, len(ours()))
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feed = {f"x{i}": x for i, x in enumerate(inputs)}
    for got, want in zip(ours(), session.run(None, feed), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, (op_type, got.shape)
        assert np.allclose(got, want), op_type
    a, b = best(REPEATS, ours, lambda: session.run(None, feed), clock=time.process_time)
    return a, b


def main() -> int:
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed (pip install 'gpuplace[test]'): nothing to compare")
        return 0
    rows = [(op, "x".join(map(str, xs[0].shape)), *measure(ort, op, xs, attrs))
            for op, xs, attrs in cases()]  # fmt: skip
    rows.append(("all of them", "", sum(r[2] for r in rows), sum(r[3] for r in rows)))
    print(f"one thread each, CPU time, best of {REPEATS}{' (smoke sizes)' if SMOKE else ''}")
    print(f"{'op':12} {'shape of input 0':>18} {'gpuplace':>11} {'onnxruntime':>12}  ratio")
    for op, shape, a, b in rows:
        print(
            f"{op:12} {shape:>18} {a * 1e3:8.2f} ms {b * 1e3:9.2f} ms  ratio {a / max(b, 1e-9):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
