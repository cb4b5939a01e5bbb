"""What TensorFlow's Identity rule costs the placer: chains of Identities at 10,000 and 100,000
ops, against the same chains with each Identity replaced by a Neg (same ops, same edges, the
rule never considered), measured in the same run.

The graph: a constant, then pairs (Identity of the previous op, then a Neg of it); one Neg in
three requests nothing, two request /device:GPU:1, so a third of the Identities follow their
input (`follows-input`) and the others are passed over, with a note in their reason where they
sit away from their input. The ratio is the rule's cost on a graph made of nothing else.

Run: .venv/bin/python bench/bench_identity.py
"""

from __future__ import annotations

import sys
import time

from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement import place

OUT = (TensorSpec((2,)),)


def build(n: int, middle: str) -> Graph:
    """About `n` ops: c, then (`middle` of the previous op, a Neg of it) pairs."""
    ops = [Op("c", "constant", attrs={"value": 1.0, "shape": [2]}, outputs=OUT)]
    before = "c"
    for k in range(n // 2):
        device = "/device:GPU:1" if k % 3 else ""
        ops.append(Op(f"i{k}", middle, (TensorRef(before),), outputs=OUT))
        ops.append(Op(f"m{k}", "neg", (TensorRef(f"i{k}"),), device, outputs=OUT))
        before = f"m{k}"
    return Graph(ops=tuple(ops), fetch=(TensorRef(before),))


def best(graph: Graph, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        place(graph, 2)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    smoke = "--smoke" in sys.argv  # CI size (bench/README.md)
    for n in (1_000,) if smoke else (10_000, 100_000):
        runs = 1 if smoke else 5 if n <= 10_000 else 3
        rule = best(build(n, "identity"), runs)
        plain = best(build(n, "neg"), runs)
        print(
            f"{n:>7} ops: Identity chain {rule / n * 1e6:.2f} us/op, Neg chain "
            f"{plain / n * 1e6:.2f} us/op, ratio {rule / plain:.2f}"
        )


if __name__ == "__main__":
    main()
