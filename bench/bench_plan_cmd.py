"""What `gpuplace plan` costs on a large spec: `load(path)` + `place(graph, 4)`, in-process, against
the parsers alone on the same files, all measured in one run: `python bench/bench_plan_cmd.py [N]`.

Goals (the issue, for N = 100,000 ops): YAML at most 0.5x a plain `yaml.load(f, CSafeLoader)`;
JSON (which is YAML) at most 3x `json.loads`; 10x the ops at most 12x the time (growth from N/10
to N). The spec is `bench_load.py`'s layered one (constants, a chain of add/relu/matmul/mul/sub/
tanh layers, every 10th op pinned to /gpu:0 or /cpu:0), written as YAML and as JSON into a
temporary folder. Times are best of 3, ours and the parser's alternating so that drift on a
shared machine hits both alike; a `gc.collect()` precedes each and nothing large stays alive
between them. About a minute at the default N (most of it the plain YAML parse). `--smoke`: 1,000
ops, one run (bench/README.md). bench_commands.py times the whole commands.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from bench_load import write_specs

from gpuplace.graph import load
from gpuplace.placement import place

RUNS = 3
GPUS = 4


def best(*fns: Callable[[], object]) -> list[float]:
    """Best wall time of each function, run in turn RUNS times (once under --smoke)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(1 if "--smoke" in sys.argv else RUNS):
        for fn, spent in zip(fns, times, strict=True):
            gc.collect()
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [min(spent) for spent in times]


def plan(path: Path) -> None:
    place(load(path), GPUS)


def plain_yaml(path: Path) -> None:
    with open(path) as f:
        yaml.load(f, Loader=yaml.CSafeLoader)


def plain_json(path: Path) -> None:
    with open(path) as f:
        json.loads(f.read())


def measure(yaml_path: Path, json_path: Path) -> dict[str, float]:
    """Best times of ours and the plain parser on the JSON and the YAML file."""
    ours_json, base_json = best(lambda: plan(json_path), lambda: plain_json(json_path))
    ours_yaml, base_yaml = best(lambda: plan(yaml_path), lambda: plain_yaml(yaml_path))
    return {"ours_json": ours_json, "base_json": base_json, "ours_yaml": ours_yaml,
            "base_yaml": base_yaml}  # fmt: skip


def verdict(value: float, goal: float, n: int) -> str:
    """`goal <= 3.0: met`; below 100,000 ops only the goal (it is stated for 100,000)."""
    if n < 100_000:
        return f"goal <= {goal} at 100,000 ops"
    return f"goal <= {goal}: {'met' if value <= goal else 'NOT met'}"


def main() -> None:
    args = [a for a in sys.argv[1:] if a.isdigit()]
    n = int(args[0]) if args else 1_000 if "--smoke" in sys.argv else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        big, small = write_specs(n, Path(tmp)), write_specs(n // 10, Path(tmp))
        at_tenth, at_n = measure(*small), measure(*big)
    runs = 1 if "--smoke" in sys.argv else RUNS
    print(f"load + place(graph, {GPUS}) of a {n:,}-op spec, best of {runs}; "
          f"growth from {n // 10:,} ops in brackets")  # fmt: skip
    for kind, parser, goal in (("JSON", "json.loads", 3.0), ("YAML", "yaml.load CSafeLoader", 0.5)):
        ours, base = at_n[f"ours_{kind.lower()}"], at_n[f"base_{kind.lower()}"]
        grow = ours / at_tenth[f"ours_{kind.lower()}"]
        base_grow = base / at_tenth[f"base_{kind.lower()}"]
        print(f"{kind}: ours {ours:.3f} s [{grow:.1f}x, {verdict(grow, 12, n)}], {parser} "
              f"{base:.3f} s [{base_grow:.1f}x], ratio {ours / base:.2f} ({verdict(ours / base, goal, n)})")  # fmt: skip


if __name__ == "__main__":
    main()
