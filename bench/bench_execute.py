"""Executor overhead against plain numpy and TensorFlow 1's C++ executor, measured in one run.

1. Chains of 10,000 and 100,000 small adds (2x2 float32, the op registry's own kernels), per op
   in CPU time (`time.process_time`: a shared machine's other processes then cost nothing):
   - a plain Python loop of the same numpy calls: the baseline every ratio divides by;
   - `run` of a planned schedule: what a graph costs each time it runs once planned, as
     TensorFlow's Session.run of a built graph. Goal: <= 2x the loop;
   - `plan` alone (layout + bind: once per graph) and `execute` (plan + run: what
     `gpuplace run` does once);
   - TensorFlow 1's C++ executor on the same chain (`tf_chain.py`: graph mode, Grappler and the
     graph optimizer off, one thread), its warm Session.run against the same numpy loop timed in
     its process, and its graph build + first run. TensorFlow runs in a subprocess: the python
     GPUPLACE_BENCH_TF_PYTHON names, else the first of `python3`, `python` on PATH that imports
     tensorflow; without one the lines say so.
2. A 2048x2048 float32 matmul through `execute` (its inputs fed) against `numpy.matmul` on the
   same arrays, best of at least 15 in wall time. Goal: ratio <= 1.05.

Prints best-of-N times and ratios; exits 0. `--sizes 300 --repeats 2 --matmul 64 --no-tf` is the
smoke `make test` runs (tests/test_bench_execute.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import execute, plan, run
from gpuplace.graph import get_op
from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec
from gpuplace.memory.ledger import new_ledgers

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
BACKENDS: dict[str, Backend] = {CPU: NumpyBackend(CPU)}
TF_SCRIPT = Path(__file__).with_name("tf_chain.py")


def constant(name: str, value: np.ndarray, op_type: str = "constant") -> Op:
    """A constant op of `value` (its kernel builds a fresh array), or a fed placeholder (its
    kernel hands the fed array on, as `run --feed` does)."""
    spec = (TensorSpec(value.shape, str(value.dtype)),)
    attrs = {"value": value, "shape": value.shape, "dtype": str(value.dtype)}
    return Op(name, op_type, attrs=attrs, outputs=spec)


def chain_graph(value: np.ndarray, n: int) -> Graph:
    spec = (TensorSpec(value.shape, str(value.dtype)),)
    ops = [constant("c", value)]
    ops.append(Op("op0", "add", (TensorRef("c"), TensorRef("c")), outputs=spec))
    ops += [
        Op(f"op{i}", "add", (TensorRef(f"op{i - 1}"), TensorRef("c")), outputs=spec)
        for i in range(1, n)
    ]
    return Graph(tuple(ops), (TensorRef(f"op{n - 1}"),))


def matmul_graph(a: np.ndarray, b: np.ndarray) -> Graph:
    spec = (TensorSpec(a.shape, str(a.dtype)),)
    flags = {"transpose_a": False, "transpose_b": False}
    ops = (  # fed, so that only the matmul and the executor are timed, not copying the inputs
        constant("a", a, "placeholder"),
        constant("b", b, "placeholder"),
        Op("ab", "matmul", (TensorRef("a"), TensorRef("b")), attrs=flags, outputs=spec),
    )
    return Graph(ops, (TensorRef("ab"),))


def best(
    repeats: int, *fns: Callable[[], object], clock: Callable[[], float] = time.perf_counter
) -> list[float]:
    """Best time of each function, run in turn `repeats` times so drift hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            start = clock()
            fn()
            spent.append(clock() - start)
    return [min(spent) for spent in times]


def verdict(ratio: float, goal: float) -> str:
    return f"ratio {ratio:6.3f} (goal <= {goal}: {'met' if ratio <= goal else 'NOT met'})"


def run_graph(graph: Graph, devices: dict[str, str]) -> dict[str, np.ndarray]:
    return execute(graph, devices, BACKENDS, get_op).values


def plain_chain(c: np.ndarray, n: int) -> np.ndarray:
    x = np.add(c, c)
    for _ in range(n - 1):
        x = np.add(x, c)
    return x


def tf_python() -> tuple[str | None, str]:
    """A python that imports tensorflow (GPUPLACE_BENCH_TF_PYTHON, else python3 or python on
    PATH), or None and why not."""
    given = os.environ.get("GPUPLACE_BENCH_TF_PYTHON")
    candidates = [given] if given else [shutil.which("python3"), shutil.which("python")]
    for python in candidates:
        if python and _imports_tensorflow(python):
            return python, ""
    if given:
        return None, f"GPUPLACE_BENCH_TF_PYTHON={given} cannot import tensorflow"
    return None, "no python3 or python on PATH imports tensorflow: set GPUPLACE_BENCH_TF_PYTHON"


def _imports_tensorflow(python: str) -> bool:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        done = subprocess.run(
            [python, "-c", "import tensorflow"], env=env, capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def tf_chain(python: str, n: int, repeats: int) -> dict[str, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    args = [python, str(TF_SCRIPT), str(n), str(repeats)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_chain(n: int, repeats: int, tf: str | None, why: str) -> None:
    c = np.ones((2, 2), np.float32)
    graph = chain_graph(c, n)
    devices = {op.name: CPU for op in graph.ops}
    schedule = plan(graph, devices, BACKENDS, get_op)
    assert np.array_equal(run_graph(graph, devices)[f"op{n - 1}"], plain_chain(c, n))
    base, loop, planning, full = best(
        repeats,
        lambda: plain_chain(c, n),
        lambda: run(schedule, new_ledgers(schedule.devices, {})),
        lambda: plan(graph, devices, BACKENDS, get_op),
        lambda: run_graph(graph, devices),
        clock=time.process_time,
    )
    us = 1e6 / n
    print(f"chain of {n:,} adds on 2x2 float32 (best of {repeats}, CPU time):")
    print(f"  plain numpy loop:          {base * us:6.2f} us/op")
    print(f"  run (planned once):        {loop * us:6.2f} us/op  {verdict(loop / base, 2)}")
    print(f"  plan alone:                {planning * us:6.2f} us/op  ratio {planning / base:6.3f}")
    print(f"  execute (plan + run):      {full * us:6.2f} us/op  ratio {full / base:6.3f}")
    if tf is None:
        print(f"  TF1 Session.run:           not measured ({why})")
        return
    got = tf_chain(tf, n, repeats)
    assert np.array_equal(np.asarray(got["value"], np.float32), plain_chain(c, n))
    ratio = got["run"] / got["loop"]
    print(f"  TF1 Session.run (warm):    {got['run'] * us:6.2f} us/op  ratio {ratio:6.3f} "
          f"(tensorflow {got['version']}; its numpy loop {got['loop'] * us:.2f} us/op); "
          f"gpuplace run / TF {loop / base / ratio:.2f}")  # fmt: skip
    setup = (got["build"] + got["first"]) / got["loop"]
    print(f"  TF1 build + first run:     {(got['build'] + got['first']) * us:6.2f} us/op  ratio "
          f"{setup:6.1f}; gpuplace execute / TF build + first run {full / base / setup:.3f}")  # fmt: skip


def bench_matmul(size: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    graph = matmul_graph(a, b)
    devices = {op.name: CPU for op in graph.ops}
    assert np.allclose(run_graph(graph, devices)["ab"], np.matmul(a, b), rtol=1e-4, atol=1e-3)
    repeats = max(repeats, 15)  # wall time (BLAS threads spin: CPU time would count that)
    base, ours = best(repeats, lambda: np.matmul(a, b), lambda: run_graph(graph, devices))
    print(f"{size}x{size} float32 matmul (best of {repeats}):")
    print(f"  numpy.matmul:              {base * 1e3:8.1f} ms")
    print(f"  execute:                   {ours * 1e3:8.1f} ms  {verdict(ours / base, 1.05)}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="chain lengths, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--matmul", type=int, default=2048, help="matmul side")
    parser.add_argument("--no-tf", action="store_true", help="skip TensorFlow")
    parser.add_argument("--smoke", action="store_true",
                        help="CI size: 1,000-op chain, 256 matmul, 2 repeats, no TensorFlow")  # fmt: skip
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.matmul, args.repeats, args.no_tf = "1000", 256, 2, True
    tf, why = (None, "--no-tf") if args.no_tf else tf_python()
    for n in (int(s) for s in args.sizes.split(",")):
        bench_chain(n, args.repeats, tf, why)
    bench_matmul(args.matmul, args.repeats)


if __name__ == "__main__":
    main(sys.argv[1:])
