"""How much the balanced strategy leaves on the table: local search from its placement.

The lower bounds assume free copies, so a ratio above them may be the graph's (copies it
cannot avoid) or the placer's. This bench asks the second question directly: starting from
balanced's placement, hill climbing moves one op at a time (with the generators only it
reads) to every other GPU and keeps a move when the estimated makespan drops and every device
still fits, sweeping until a sweep finds nothing or `--sweeps` is reached. It evaluates the
whole estimate per move (thousands of times balanced's own cost), so it runs on the smaller
generated graphs only. Columns: balanced / lower bound (`bal/LB`), the search's best / lower
bound (`search/LB`), balanced / the search's best (`bal/search`; 1.00: no single move improves
balanced's placement), single-op moves evaluated, and seconds spent searching.

Run: .venv/bin/python bench/bench_search.py [--sweeps 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import graphs  # bench/ is on sys.path when this script runs
from bench_strategy import LINK, machine

from gpuplace.graph.model import Graph
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.cost import DeviceModel
from gpuplace.placement.estimate import device_index, lower_bounds, simulate
from gpuplace.placement.flat import Flat, flatten

CASES: list[tuple[str, Callable[[], Graph], Sequence[int]]] = [
    ("transformer", lambda: graphs.transformer(blocks=4, heads=16, tokens=1024, dim=2048),
     (2, 4, 8)),
    ("wide layers", lambda: graphs.wide(width=16, layers=8, size=512), (4, 8)),
]  # fmt: skip


def makespan(flat: Flat, dev: list[int], models: Sequence[DeviceModel]) -> float:
    """Estimated makespan, or infinity when a device's predicted peak exceeds its limit."""
    e = simulate(flat, dev, models, LINK)
    if any(m.memory_limit is not None and e.peak[m.name] > m.memory_limit for m in models):
        return float("inf")
    return e.makespan


def climb(
    flat: Flat, dev: list[int], models: Sequence[DeviceModel], sweeps: int
) -> tuple[float, int]:
    """Hill climbing over single-op moves among the GPUs; returns (makespan, evaluations)."""
    gpus = len(models) - 1
    readers: dict[int, set[int]] = {}
    for j, reads in enumerate(flat.inputs):
        for p, _ in reads:
            readers.setdefault(p, set()).add(j)
    movable = [j for j in range(len(dev)) if not flat.generator[j] and dev[j] < gpus]
    brings = {
        j: [p for p, _ in flat.inputs[j] if flat.generator[p] and readers[p] == {j}]
        for j in movable
    }
    best, evaluations = makespan(flat, dev, models), 1
    for _ in range(sweeps):
        improved = False
        for j in movable:
            home = dev[j]
            for d in range(gpus):
                if d == dev[j]:
                    continue
                for q in (j, *brings[j]):
                    dev[q] = d
                found = makespan(flat, dev, models)
                evaluations += 1
                if found < best * (1 - 1e-9):
                    best, home, improved = found, d, True
                for q in (j, *brings[j]):
                    dev[q] = home
        if not improved:
            break
    return best, evaluations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2, help="most sweeps over the ops")
    parser.add_argument("--smoke", action="store_true",
                        help="CI size: small wide layers on 2 GPUs, one sweep")  # fmt: skip
    args = parser.parse_args()
    cases = CASES
    if args.smoke:
        cases = [("wide layers", lambda: graphs.wide(width=4, layers=2, size=128), (2,))]
        args.sweeps = 1
    print("simulated K520 GPUs, default memory policy, PCIe link 12 GB/s + 10 us")
    print(f"{'graph':12} {'ops':>5} {'GPUs':>4}  {'bal/LB':>6} {'search/LB':>9} "
          f"{'bal/search':>10} {'moves tried':>11}  search s")  # fmt: skip
    for name, build, counts in cases:
        g = build()
        flat = flatten(g)
        for n in counts:
            models = machine("K520", n)
            bound = lower_bounds(g, models, LINK).best
            dev = device_index(place_balanced(g, models, LINK), flat, models)
            start = makespan(flat, dev, models)
            began = time.perf_counter()
            found, tried = climb(flat, dev, models, args.sweeps)
            took = time.perf_counter() - began
            print(f"{name:12} {len(g.ops):5} {n:4}  {start / bound:6.2f} {found / bound:9.2f} "
                  f"{start / found:10.3f} {tried:11,}  {took:8.1f}", flush=True)  # fmt: skip
            print(f"  ratio {start / found:.3f} (balanced / the search's best)")


if __name__ == "__main__":
    main()
