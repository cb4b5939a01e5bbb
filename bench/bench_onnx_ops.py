"""gpuplace's ONNX kernels (graph/onnx_ops/, numpy) against onnxruntime's CPU kernels, one op at
a time, measured in one run.

Each op runs on the same float32 inputs: gpuplace's compute (attrs checked once, as the
executor does) and a one-node onnxruntime session built with onnx.helper. Both on one thread
(OPENBLAS/OMP/MKL_NUM_THREADS=1 set before numpy loads, intra_op_num_threads=1), timed in CPU
time (`time.process_time`, so a shared machine's other processes cost nothing), best of
7 runs taken in turn. The ratio is gpuplace / onnxruntime (issue 14's goal for a whole model: <= 1.5).

Sizes are those of a ResNet stage (batch 8, 64 channels, 56x56) and of a BERT-base layer
(batch 16, 128 tokens, 768 wide, 12 heads); `--smoke` shrinks them (bench/README.md).
Needs onnx and onnxruntime (the `test` extra).
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

from gpuplace.graph import get_op  # noqa: E402

SMOKE = "--smoke" in sys.argv
REPEATS = 1 if SMOKE else 7
B, C, HW = (1, 4, 8) if SMOKE else (8, 64, 56)
N, T, D, H = (2, 8, 16, 2) if SMOKE else (16, 128, 768, 12)


def cases() -> list[tuple[str, list[np.ndarray], dict[str, Any]]]:
    rng = np.random.default_rng(0)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return [
        ("Conv", [f(B, C, HW, HW), f(C, C, 3, 3), f(C)], {"pads": [1, 1, 1, 1]}),
        ("Conv", [f(B, C, HW, HW), f(C, 1, 3, 3)], {"pads": [1, 1, 1, 1], "group": C}),
        ("MaxPool", [f(B, C, HW, HW)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("AveragePool", [f(B, C, HW, HW)], {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("GlobalAveragePool", [f(B, C, HW, HW)], {}),
        ("BatchNormalization", [f(B, C, HW, HW), f(C), f(C), f(C), np.abs(f(C)) + 0.5], {}),
        ("Relu", [f(B, C, HW, HW)], {}),
        ("Gemm", [f(N * T, D), f(D, D), f(D)], {}),
        ("MatMul", [f(N, T, D), f(D, 4 * D)], {}),
        ("MatMul", [f(N, H, T, D // H), f(N, H, D // H, T)], {}),
        ("Softmax", [f(N, H, T, T)], {}),
        ("LayerNormalization", [f(N, T, D), f(D), f(D)], {}),
        ("Erf", [f(N, T, 4 * D)], {}),
        ("Gelu", [f(N, T, 4 * D)], {}),
        ("Add", [f(N, T, D), f(D)], {}),
        ("Mul", [f(N, T, 4 * D), f(N, T, 4 * D)], {}),
        ("Div", [f(N, H, T, T), np.array(8.0, np.float32)], {}),
        ("Where", [np.tril(np.ones((T, T), bool))[None, None].repeat(N, 0), f(N, H, T, T),
                   np.array(-3.4e38, np.float32)], {}),  # GPT-2's causal mask, broadcast
        ("Tanh", [f(N, T, D)], {}),
        ("ReduceMean", [f(N, T, D)], {"axes": [-1]}),
    ]  # fmt: skip


def gpuplace_fn(
    op_type: str, inputs: list[np.ndarray], attrs: dict[str, Any]
) -> Callable[[], object]:
    op = get_op(op_type)
    checked = op.normalize("bench", attrs)
    return lambda: op.compute(np, inputs, checked)


def onnxruntime_fn(op_type: str, inputs: list[np.ndarray], attrs: dict[str, Any],
                   ort: Any) -> Callable[[], object]:  # fmt: skip
    from onnx import helper

    names = [f"x{i}" for i in range(len(inputs))]
    values = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
    ]
    onnx_attrs = dict(attrs)
    extra: list[Any] = []
    if op_type == "ReduceMean":  # opset 18: axes is an input
        from onnx import numpy_helper

        extra = [numpy_helper.from_array(np.array(onnx_attrs.pop("axes"), np.int64), "axes")]
        names_in = [*names, "axes"]
    else:
        names_in = names
    node = helper.make_node(op_type, names_in, ["y"], **onnx_attrs)
    graph = helper.make_graph([node], "bench", values, [helper.make_empty_tensor_value_info("y")],
                              initializer=extra)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    feed = dict(zip(names, inputs, strict=True))
    return lambda: session.run(None, feed)


def main() -> int:
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed (pip install 'gpuplace[test]'): nothing to compare")
        return 0
    print(f"one thread each, CPU time, best of {REPEATS}{' (smoke sizes)' if SMOKE else ''}")
    print(f"{'op':20} {'shape of input 0':>22} {'gpuplace':>11} {'onnxruntime':>12}  ratio")
    total_ours = total_ort = 0.0
    for op_type, inputs, attrs in cases():
        ours, theirs = (
            gpuplace_fn(op_type, inputs, attrs),
            onnxruntime_fn(op_type, inputs, attrs, ort),
        )
        ours(), theirs()  # warm up
        a, b = best(REPEATS, ours, theirs, clock=time.process_time)
        total_ours, total_ort = total_ours + a, total_ort + b
        shape = "x".join(map(str, inputs[0].shape))
        ratio = a / b if b else float("inf")
        print(f"{op_type:20} {shape:>22} {a * 1e3:8.2f} ms {b * 1e3:9.2f} ms  ratio {ratio:.2f}")
    print(f"{'all of them':43} {total_ours * 1e3:8.2f} ms {total_ort * 1e3:9.2f} ms  "
          f"ratio {total_ours / max(total_ort, 1e-9):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
