"""Placement time per op at 10,000 and 100,000 ops, and how it grows (linear means ~10x).

The graph is built straight from the model (no loader): towers of two constants and a MatMul
spread over GPU:0..3 and unscoped, an AddN per 100 towers, some ops colocated. The baseline,
measured in the same run, is one plain pass over the same graph (a name index and a count of
consumers per op): its own growth shows what the machine's caches add at 100k ops, so compare
the two growth ratios, not the place growth with 10x alone.

Run: .venv/bin/python bench/bench_place.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from gpuplace.graph.model import Graph, Op, TensorRef
from gpuplace.placement import place

BOTH = frozenset({"CPU", "GPU"})


@dataclass(frozen=True)
class Meta:
    tf_type: str
    kernels: frozenset[str] = BOTH
    generator: bool = False
    resident: bool = False


METAS = {"constant": Meta("Const", generator=True), "matmul": Meta("MatMul"), "add_n": Meta("AddN")}
DEVICES = ["", "/device:GPU:0", "/device:GPU:1", "/device:GPU:*", "/device:GPU:3"]


def build(n: int) -> Graph:
    """About `n` ops: towers (Const, Const, MatMul) and an AddN over every 100 MatMuls."""
    ops: list[Op] = []
    tower: list[TensorRef] = []
    t = 0
    while len(ops) < n:
        device = DEVICES[t % len(DEVICES)]
        a, b, m = f"a{t}", f"b{t}", f"m{t}"
        ops.append(Op(a, "constant", device=device))
        ops.append(Op(b, "constant", colocate_with=a if t % 7 == 0 else None))
        ops.append(Op(m, "matmul", (TensorRef(a), TensorRef(b)), device=device))
        tower.append(TensorRef(m))
        if len(tower) == 100:
            ops.append(Op(f"sum{t}", "add_n", tuple(tower), device="/device:CPU:0"))
            tower = []
        t += 1
    return Graph(ops=tuple(ops[:n]), fetch=(TensorRef(ops[n - 1].name),))


def baseline(graph: Graph) -> None:
    """One linear pass of the kind the placer makes several of."""
    index = {op.name: i for i, op in enumerate(graph.ops)}
    count = [0] * len(graph.ops)
    for op in graph.ops:
        for ref in op.inputs:
            count[index[ref.op]] += 1


def best(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


SMOKE = "--smoke" in sys.argv  # CI size (bench/README.md)
SIZES = (1_000, 10_000) if SMOKE else (10_000, 100_000)


def main() -> None:
    place_s: dict[int, float] = {}
    base_s: dict[int, float] = {}
    for n in SIZES:
        graph = build(n)
        runs = 1 if SMOKE else 5 if n <= 10_000 else 3
        place_s[n] = best(partial(place, graph, 4, op_meta=METAS.__getitem__), runs)
        base_s[n] = best(partial(baseline, graph), runs)
        print(
            f"{n:>7} ops: place {place_s[n]:.3f} s = {place_s[n] / n * 1e6:.2f} us/op; "
            f"baseline pass {base_s[n] / n * 1e6:.3f} us/op"
        )
    small, large = SIZES
    growth = place_s[large] / place_s[small]
    base_growth = base_s[large] / base_s[small]
    print(
        f"growth {small:,} -> {large:,} ops: place {growth:.1f}x, baseline pass "
        f"{base_growth:.1f}x (linear = 10x)"
    )


if __name__ == "__main__":
    main()
