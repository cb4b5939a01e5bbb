"""Executor overhead against plain numpy, both measured in the same run.

1. A chain of 100,000 small adds through `execute` (planning included) against a plain Python
   loop of the same numpy adds, then planning alone and the run loop alone (a schedule planned
   once). Goal: ratio <= 10 for `execute`; the other two lines show where its time goes.
2. A 2048x2048 float32 matmul through `execute` against `numpy.matmul` on the same arrays.
   Goal: ratio <= 1.05.
Prints best-of-N times and ratios; exits 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import Kernel, execute, plan, run
from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec
from gpuplace.memory.ledger import new_ledgers

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
CHAIN = 100_000
REPEATS = 7


class Constant:
    host_value = True

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [attrs["value"]]


class Binary:
    host_value = False

    def __init__(self, name: str) -> None:
        self.name = name

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [getattr(xp, self.name)(inputs[0], inputs[1])]


KERNELS: dict[str, Kernel] = {
    "constant": Constant(),
    "add": Binary("add"),
    "matmul": Binary("matmul"),
}
BACKENDS: dict[str, Backend] = {CPU: NumpyBackend(CPU)}


def chain_graph(value: np.ndarray, n: int) -> Graph:
    spec = (TensorSpec(value.shape, str(value.dtype)),)
    ops = [Op("c", "constant", attrs={"value": value}, outputs=spec)]
    ops.append(Op("op0", "add", (TensorRef("c"), TensorRef("c")), outputs=spec))
    ops += [
        Op(f"op{i}", "add", (TensorRef(f"op{i - 1}"), TensorRef("c")), outputs=spec)
        for i in range(1, n)
    ]
    return Graph(tuple(ops), (TensorRef(f"op{n - 1}"),))


def matmul_graph(a: np.ndarray, b: np.ndarray) -> Graph:
    spec = (TensorSpec(a.shape, str(a.dtype)),)
    ops = (
        Op("a", "constant", attrs={"value": a}, outputs=spec),
        Op("b", "constant", attrs={"value": b}, outputs=spec),
        Op("ab", "matmul", (TensorRef("a"), TensorRef("b")), outputs=spec),
    )
    return Graph(ops, (TensorRef("ab"),))


def best(*fns: Callable[[], object]) -> list[float]:
    """Best time of each function, run in turn REPEATS times so drift hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(REPEATS):
        for fn, spent in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [min(spent) for spent in times]


def verdict(ratio: float, goal: float) -> str:
    return f"ratio {ratio:6.3f} (goal <= {goal}: {'met' if ratio <= goal else 'NOT met'})"


def run_graph(graph: Graph, devices: dict[str, str]) -> dict[str, np.ndarray]:
    return execute(graph, devices, BACKENDS, KERNELS.__getitem__).values


def plain_chain(c: np.ndarray) -> np.ndarray:
    x = np.add(c, c)
    for _ in range(CHAIN - 1):
        x = np.add(x, c)
    return x


def bench_chain() -> None:
    c = np.ones((2, 2), np.float32)
    graph = chain_graph(c, CHAIN)
    devices = {op.name: CPU for op in graph.ops}
    schedule = plan(graph, devices, BACKENDS, KERNELS.__getitem__)
    assert np.array_equal(run_graph(graph, devices)[f"op{CHAIN - 1}"], plain_chain(c))
    base, full, planning, loop = best(
        lambda: plain_chain(c),
        lambda: run_graph(graph, devices),
        lambda: plan(graph, devices, BACKENDS, KERNELS.__getitem__),
        lambda: run(schedule, new_ledgers(schedule.devices, {})),
    )
    us = 1e6 / CHAIN
    print(f"chain of {CHAIN:,} adds on 2x2 float32 (best of {REPEATS}):")
    print(f"  plain numpy loop:        {base * us:6.2f} us/op")
    print(f"  execute (plan + run):    {full * us:6.2f} us/op  {verdict(full / base, 10)}")
    print(f"  plan alone:              {planning * us:6.2f} us/op  ratio {planning / base:6.3f}")
    print(f"  run loop alone:          {loop * us:6.2f} us/op  ratio {loop / base:6.3f}")


def bench_matmul() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 2048), dtype=np.float32)
    graph = matmul_graph(a, b)
    devices = {op.name: CPU for op in graph.ops}
    assert np.allclose(run_graph(graph, devices)["ab"], np.matmul(a, b), rtol=1e-4, atol=1e-3)
    base, ours = best(lambda: np.matmul(a, b), lambda: run_graph(graph, devices))
    print(f"2048x2048 float32 matmul (best of {REPEATS}):")
    print(f"  numpy.matmul:            {base * 1e3:8.1f} ms")
    print(f"  execute:                 {ours * 1e3:8.1f} ms  {verdict(ours / base, 1.05)}")


if __name__ == "__main__":
    bench_chain()
    bench_matmul()
