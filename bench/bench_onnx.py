"""Import + plan of a large ONNX model vs ONNX's own load + shape inference of the same file:
`python bench/bench_onnx.py [N]`.

Writes, into a temporary folder, a model of N nodes as `torch.onnx.export` writes an MLP stack:
per layer `/layers.i/fc/MatMul` (a 16x16 initializer), `/layers.i/fc/Add` (a bias), `/layers.i/
act/Relu` and a `Mul` by a per-layer scale, a symbolic `batch` dim. Then prints the best-of-runs
wall times of gpuplace's `prepare` (read, import, shape checks against ONNX's inference,
TensorFlow's placement on a simulated 4xK520) plus `estimate_plan`, against `onnx.load` +
`onnx.shape_inference.infer_shapes` on the same file (goal at N = 100,000: ratio <= 2; the
import runs ONNX's shape inference itself, so the ratio cannot go below 1). `--smoke`: 1,000
nodes, one run each (bench/README.md).

Then the same as whole commands a user types, each a fresh process with its output written to a
file: `gpuplace plan MODEL --dim batch=8` (the table) and with `--json`, against `python -c` of
`onnx.load` + `infer_shapes` (start-up and imports included on both sides).

`--in-process`: the first block only. `--cpu`: its times are CPU times (`time.process_time`),
steadier than wall times on a shared machine (for an A/B of two checkouts, run it under each
one's `PYTHONPATH`, alternating).
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from bench_commands import best as best_commands
from bench_load import best  # bench/ is on sys.path when this script runs
from onnx import TensorProto, helper, numpy_helper
from procs import GPUPLACE

from gpuplace import Options
from gpuplace.devices import load_machine, view
from gpuplace.graph import load
from gpuplace.pipeline import estimate_plan, prepare

WIDTH = 16
ONNX_ALONE = "import sys, onnx; onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1]))"


def write_model(nodes: int, folder: Path) -> Path:
    layers = max(1, nodes // 4)
    rng = np.random.default_rng(0)
    made, inits, prev = [], [], "x"
    for i in range(layers):
        p = f"/layers.{i}"
        w, b, s = f"layers.{i}.fc.weight", f"layers.{i}.fc.bias", f"layers.{i}.scale"
        inits += [
            numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32), w),
            numpy_helper.from_array(np.zeros(WIDTH, np.float32), b),
            numpy_helper.from_array(np.ones(1, np.float32), s),
        ]
        made += [
            helper.make_node("MatMul", [prev, w], [f"{p}/mm"], name=f"{p}/fc/MatMul"),
            helper.make_node("Add", [f"{p}/mm", b], [f"{p}/add"], name=f"{p}/fc/Add"),
            helper.make_node("Relu", [f"{p}/add"], [f"{p}/relu"], name=f"{p}/act/Relu"),
            helper.make_node("Mul", [f"{p}/relu", s], [f"{p}/out"], name=f"{p}/Mul"),
        ]
        prev = f"{p}/out"
    graph = helper.make_graph(
        made, "stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", WIDTH])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["batch", WIDTH])],
        inits,
    )  # fmt: skip
    path = folder / f"stack{nodes}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main() -> None:
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    nodes = 1_000 if smoke else int(args[0]) if args else 100_000
    runs = 1 if smoke else 3
    timer = best_cpu if "--cpu" in sys.argv else best
    seen = view(load_machine("4xK520"), {})
    options = Options(dims={"batch": 8})

    def ours(path: Path) -> None:
        estimate_plan(prepare(path, seen, options, {}, feeds=False), seen)

    def imported(path: Path) -> None:
        load(path, dims={"batch": 8})

    def onnx_alone(path: Path) -> None:
        onnx.shape_inference.infer_shapes(onnx.load(path))

    with tempfile.TemporaryDirectory() as folder:
        path = write_model(nodes, Path(folder))
        size = path.stat().st_size
        base = timer(lambda: onnx_alone(path), runs)
        mine = timer(lambda: ours(path), runs)
        alone = timer(lambda: imported(path), runs)
        plan = [*GPUPLACE, "--machine", "4xK520", "plan", str(path), "--dim", "batch=8"]
        commands = [[sys.executable, "-c", ONNX_ALONE, str(path)], plan, [*plan, "--json"]]
        if "--in-process" not in sys.argv:
            whole = best_commands(commands, Path(folder) / "out", runs)
    print(f"ONNX model: {nodes:,} nodes, {size / 2**20:.1f} MiB; best of {runs}")
    print("in process" + (", CPU time:" if timer is best_cpu else ":"))
    print(f"onnx.load + infer_shapes  {base:8.3f} s")
    print(f"gpuplace import           {alone:8.3f} s   ratio: {alone / base:.2f}")
    print(f"gpuplace import + plan    {mine:8.3f} s   ratio: {mine / base:.2f} (goal <= 2)")
    if "--in-process" in sys.argv:
        return
    print("whole commands, stdout to a file:")
    print(f"python -c onnx.load + infer_shapes  {whole[0]:8.3f} s")
    for label, spent in (
        ("gpuplace plan MODEL", whole[1]),
        ("gpuplace plan MODEL --json", whole[2]),
    ):
        print(f"{label:<35} {spent:8.3f} s   ratio: {spent / whole[0]:.2f} (goal <= 2)")


def best_cpu(fn: Callable[[], object], runs: int) -> float:
    """`bench_load.best` in CPU time."""
    return min(cpu_time(fn) for _ in range(runs))


def cpu_time(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


if __name__ == "__main__":
    main()
