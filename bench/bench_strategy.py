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

Then the scaling run (issue 17): `plan --strategy balanced`'s placement of the four shapes of
`graphs.sized` (chain, fan, random DAG, transformer) at 1,000, 10,000 and 100,000 ops (and
1,000,000 with --million) on 8 simulated K520s, each size in a fresh process: seconds per op
(CPU time of the process, which other work on a shared machine disturbs less than wall time),
growth per 10x the ops, bytes per op (the process's peak RSS during placement over its RSS
before, per op; with --traced, also tracemalloc's peak per op in a second run, which the goal
is judged by then), and as the baseline measured in the same process TensorFlow's placement of
the same graph (`place`): balanced/TF per op, and TF's own growth. Goals: growth <= 12x per 10x,
100,000 ops <= 5 s, <= 1.5 KB per op.

Run: .venv/bin/python bench/bench_strategy.py [--machine K520] [--scaling-only] [--million]
     [--traced] [--sizes N ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
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


def _rss() -> int:
    """The process's resident bytes now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def one(shape: str, n: int, preset: str, traced: bool) -> dict[str, float]:
    """Place `graphs.sized(shape, n)` with TF's rules, then balanced (in this process); with
    `traced`, balanced once more under tracemalloc for the peak of what Python allocates."""
    devices = machine(preset, 8)
    g = graphs.sized(shape, n)
    start = time.process_time()
    place(g, 8)
    tf = time.process_time() - start
    before = _rss()
    start = time.process_time()
    place_balanced(g, devices)
    balanced = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    out = {"ops": len(g.ops), "tf": tf, "balanced": balanced, "bytes": max(peak - before, 0)}
    if traced:
        tracemalloc.start()
        place_balanced(g, devices)
        out["traced"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return out


def scaling(preset: str, sizes: list[int], traced: bool = False) -> None:
    print(f"\nbalanced placement on 8 simulated {preset}s vs TF's placement of the same graph "
          "(CPU s; growth per 10x ops)")  # fmt: skip
    head = ("shape", "ops", "balanced s", "us/op", "growth", "TF us/op", "TF growth", "bal/TF",
            "RSS B/op", "traced")  # fmt: skip
    print("{:12} {:>9} {:>10} {:>7} {:>6} {:>8} {:>9} {:>6} {:>8} {:>7}".format(*head))
    worst, worst_tf, slowest, heaviest = 0.0, 0.0, 0.0, 0.0
    for shape in graphs.SHAPES:
        before: dict[str, float] | None = None
        for n in sizes:
            command = [sys.executable, __file__, "--one", shape, str(n), "--machine", preset]
            command += ["--traced"] if traced else []
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            r = json.loads(done.stdout)
            ops, per = r["ops"], r["bytes"] / r["ops"]
            traced_per = f"{r['traced'] / ops:7.0f}" if "traced" in r else "      -"
            grow = tf_grow = ""
            if before is not None:
                g = r["balanced"] / before["balanced"]
                grow, tf_grow = f"{g:5.1f}x", f"{r['tf'] / before['tf']:5.1f}x"
                worst, worst_tf = max(worst, g), max(worst_tf, r["tf"] / before["tf"])
            if 90_000 <= ops <= 110_000:  # the 100,000-op goal (not a bigger run scaled down)
                slowest = max(slowest, r["balanced"] * 100_000 / ops)
            if ops >= 90_000:
                heaviest = max(heaviest, r.get("traced", r["bytes"]) / ops)
            print(f"{shape:12} {ops:9,} {r['balanced']:10.2f} {r['balanced'] / ops * 1e6:7.1f} "
                  f"{grow:>6} {r['tf'] / ops * 1e6:8.2f} {tf_grow:>9} "
                  f"{r['balanced'] / r['tf']:6.0f} {per:8.0f} {traced_per}", flush=True)  # fmt: skip
            before = r
    print(
        f"worst growth: {worst:.1f}x per 10x ops (goal <= 12x: {'met' if worst <= 12 else 'NOT met'})"
    )
    if worst_tf:
        print(
            f"TF's own placement in the same processes, worst growth: {worst_tf:.1f}x per 10x ops"
        )
    if slowest:
        print(f"slowest 100,000 ops: {slowest:.2f} s (goal <= 5 s: {'met' if slowest <= 5 else 'NOT met'}); "
              f"most bytes per op ({'traced' if traced else 'RSS'}): {heaviest:.0f} (goal <= 1,536: {'met' if heaviest <= 1536 else 'NOT met'})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", default="K520", help="GPU preset of the simulated cards")
    parser.add_argument("--scaling-only", action="store_true", help="only the scaling run")
    parser.add_argument("--million", action="store_true", help="scale up to 1,000,000 ops")
    parser.add_argument("--sizes", type=int, nargs="+", help="the scaling run's sizes")
    parser.add_argument(
        "--traced",
        action="store_true",
        help="bytes per op: also tracemalloc's peak (a second, slower run)",
    )
    parser.add_argument("--one", nargs=2, metavar=("SHAPE", "OPS"), help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true",
                        help="CI size: the scaling run alone, at 200 and 2,000 ops")  # fmt: skip
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.machine, args.traced)))
        return
    print(f"simulated {args.machine} GPUs, default memory policy, PCIe link 12 GB/s + 10 us")
    if not args.scaling_only and not args.smoke:
        quality(args.machine)
        speed(args.machine)
    sizes = args.sizes or [1_000, 10_000, 100_000, *([1_000_000] if args.million else [])]
    sizes = [200, 2_000] if args.smoke else sizes
    scaling(args.machine, sizes, args.traced)


if __name__ == "__main__":
    main()
