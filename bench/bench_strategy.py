"""Placement quality and speed of the strategies on generated graphs (`bench/graphs.py`).

For each graph on 2, 4 and 8 simulated GPUs (K520 by default, TensorFlow's default memory
policy: ~3.5 GiB usable each; PCIe link 12 GB/s, 10 us), the estimated makespan of TensorFlow's
placement (everything on GPU:0), round-robin and balanced, each divided by the lower bound LB =
max(critical path, work / GPUs, stage by stage) of the same graph and GPUs (`lower_bounds`);
bal/LB2 divides balanced by the first two only, the bound the issue named. `!` marks a
placement whose estimated peak exceeds a device's limit (it would run out of memory). Then the
balanced
placement time for 10,000 ops on 8 GPUs, and its growth to 100,000 ops (linear is ~10x; the
plain pass of bench_place.py, measured here too, shows what the machine's caches add).

Run: .venv/bin/python bench/bench_strategy.py [--machine K520]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import graphs  # bench/ is on sys.path when this script runs
from bench_place import baseline, best

from gpuplace.devices import load_machine, view
from gpuplace.graph.model import Graph
from gpuplace.memory.policy import Policy, logical_gpus
from gpuplace.placement import place
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.cost import DeviceModel, LinkModel, device_models
from gpuplace.placement.estimate import Estimate, estimate, lower_bounds, round_robin
from gpuplace.placement.model import Placement

LINK = LinkModel()
GRAPHS: list[tuple[str, Callable[[], Graph]]] = [
    ("deep chain", lambda: graphs.chain(layers=200, batch=512, width=1024)),
    ("wide layers", lambda: graphs.wide(width=64, layers=16, size=512)),
    ("transformer", lambda: graphs.transformer(blocks=4, heads=16, tokens=1024, dim=2048)),
    ("random DAG", lambda: graphs.random_dag(n=10_000, size=1024)),
]


def machine(preset: str, gpus: int) -> list[DeviceModel]:
    """The device models of `gpus` simulated cards under TensorFlow's default memory policy."""
    v = view(load_machine(f"{gpus}x{preset}"), {})
    return device_models(logical_gpus(v.gpus, Policy()), v.machine.host)


def ratio(graph: Graph, placement: Placement, devices: list[DeviceModel], bound: float) -> str:
    e: Estimate = estimate(graph, placement, devices, LINK)
    fits = all(d.memory_limit is None or e.peak[d.name] <= d.memory_limit for d in devices)
    return f"{e.makespan / bound:5.2f}{' ' if fits else '!'}"


def timed(fn: Callable[[], Placement]) -> tuple[Placement, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def quality(preset: str) -> None:
    head = ("graph", "ops", "GPUs", "TF/LB", "RR/LB", "bal/LB", "bal/LB2", "place s")
    print("{:12} {:>6} {:>4}  {:>6} {:>6} {:>6} {:>7}  {}".format(*head))
    for name, build in GRAPHS:
        g = build()
        for n in (2, 4, 8):
            devices = machine(preset, n)
            bounds = lower_bounds(g, devices, LINK)
            balanced, seconds = timed(partial(place_balanced, g, devices, LINK))
            cells = [ratio(g, p, devices, bounds.best) for p in (place(g, n), round_robin(g, n))]
            cells.append(ratio(g, balanced, devices, bounds.best))
            two = max(bounds.critical_path, bounds.work)
            cells.append(" " + ratio(g, balanced, devices, two))
            print(f"{name:12} {len(g.ops):6} {n:4}  {' '.join(cells)}  {seconds:7.2f}", flush=True)


def speed(preset: str) -> None:
    devices = machine(preset, 8)
    took, plain = {}, {}
    for n, runs in ((10_000, 3), (100_000, 1)):
        g = graphs.random_dag(n=n, size=1024)
        took[n] = best(partial(place_balanced, g, devices, LINK), runs)
        plain[n] = best(partial(baseline, g), 3)
        print(
            f"balanced, {n:,} ops on 8 GPUs: {took[n]:.2f} s (plain pass {plain[n] * 1e3:.1f} ms)"
        )
    print(
        f"growth 10k -> 100k: balanced {took[100_000] / took[10_000]:.1f}x, "
        f"plain pass {plain[100_000] / plain[10_000]:.1f}x (linear: ~10x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", default="K520", help="GPU preset of the simulated cards")
    args = parser.parse_args()
    print(f"simulated {args.machine} GPUs, default memory policy, PCIe link 12 GB/s + 10 us")
    quality(args.machine)
    speed(args.machine)


if __name__ == "__main__":
    main()
