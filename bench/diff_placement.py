"""Differential check for refactors of placement/: plans and estimates here vs a git revision.

Every graph of `bench/graphs.py` (the sizes bench_strategy.py uses, the defaults, a fan and the
scaling run's shapes at 2,000 ops), every spec of examples/ and a few small random DAGs, on
simulated machines with roomy and tight memory limits, placed by TensorFlow's rules,
round-robin and balanced (its kept pass and each pass of `WEIGHTS` alone). Each op's device,
kind and reason, the estimate (makespan, busy, peak, copies), what `plan` judges each
placement by (`estimate_with_bounds`) and the lower bounds must be equal, floats bit for bit;
a NoFit must say the same. The revision's gpuplace/ is unpacked into a temporary folder and
each tree runs in its own process, so nothing is shared but the JSON each prints.

Run: .venv/bin/python bench/diff_placement.py [--against 942415d]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# (label, preset, GPUs, limit as a fraction of TF's peak on GPU:0; None: the default policy)
MACHINES = [
    ("4xK520", "K520", 4, None),
    ("8xV100-16GB", "V100-16GB", 8, None),
    ("2xA100-80GB at 0.6 TF peak", "A100-80GB", 2, 0.6),
    ("4xK520 at 0.3 TF peak", "K520", 4, 0.3),
    ("8xV100-16GB at 0.2 TF peak", "V100-16GB", 8, 0.2),
]


def _graphs() -> Iterator[tuple[str, Any]]:
    """(name, Graph) of every graph compared."""
    import graphs
    from bench_strategy import GRAPHS

    from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, load

    for name, build in GRAPHS:
        yield f"{name} (bench_strategy)", build()
    for fn in (graphs.chain, graphs.wide, graphs.transformer, graphs.random_dag):
        yield f"{fn.__name__} (defaults)", fn()
    yield "fan (3,000 ops, groups of 500)", graphs.fan(3000, width=500)
    for shape in graphs.SHAPES:
        yield f"{shape} (sized, 2,000 ops)", graphs.sized(shape, 2000)
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        if path.parent.name != "cluster":  # specs for tasks across hosts: test_cluster_plan.py
            yield str(path.relative_to(ROOT)), load(path)
    for seed in range(6):  # small random DAGs: many ops share steps, limits bite often
        rng, spec = random.Random(seed), (TensorSpec((256, 256)),)
        ops = [Op(f"in{i}", rng.choice(("random_normal", "variable")), (), outputs=spec)
               for i in range(8)]  # fmt: skip
        while len(ops) < 300:
            picks = rng.sample(range(max(0, len(ops) - 32), len(ops)), rng.choice((1, 2, 2, 3)))
            kind = {1: rng.choice(("tanh", "print")), 2: "matmul", 3: "add_n"}[len(picks)]
            refs = tuple(TensorRef(ops[p].name) for p in picks[: 1 if kind == "print" else 3])
            ops.append(Op(f"op{len(ops)}", kind, refs, outputs=spec))
        fetch = (TensorRef(ops[-1].name), TensorRef(ops[len(ops) // 2].name))
        yield f"random 300 seed {seed}", Graph(ops=tuple(ops), fetch=fetch)


def _placed(place: Callable[[], Any], graph: Any, devices: Any) -> dict[str, Any]:
    """A strategy's decisions and estimate, or its error's text; and what `plan` judges it by
    (`estimate_with_bounds`, which may reuse what the strategy worked out)."""
    from gpuplace.errors import RuntimeFailure
    from gpuplace.placement.estimate import estimate, estimate_with_bounds

    try:
        p = place()
    except RuntimeFailure as err:
        return {"error": f"{type(err).__name__}: {err}"}
    e = estimate(graph, p, devices)
    planned, bounds = estimate_with_bounds(graph, p, devices, allow_soft_placement=False)
    return {"ops": {n: [d.device, d.kind, d.reason] for n, d in p.decisions.items()},
            "estimate": _fields(e), "plan": [_fields(planned), *bounds]}  # fmt: skip


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields by name: a dataclass's, or a NamedTuple's (Estimate and DeviceModel
    are NamedTuples since start-up stopped exec'ing dataclass methods; older revisions')."""
    return dataclasses.asdict(record) if dataclasses.is_dataclass(record) else record._asdict()


def _replaced(record: Any, **changes: Any) -> Any:
    """`record` with `changes`, a dataclass or a NamedTuple (see `_fields`)."""
    if dataclasses.is_dataclass(record):
        return dataclasses.replace(record, **changes)
    return record._replace(**changes)


def _devices(preset: str, gpus: int, fraction: float | None, graph: Any) -> list[Any]:
    from bench_strategy import machine

    from gpuplace.placement import place
    from gpuplace.placement.estimate import estimate

    devices = machine(preset, gpus)
    if fraction is None:
        return devices
    roomy = [_replaced(d, memory_limit=None) for d in devices]
    peak = estimate(graph, place(graph, gpus), roomy).peak[devices[0].name]
    limit = int(peak * fraction)
    return [_replaced(d, memory_limit=limit) if d.kind == "GPU" else d for d in devices]


def dump() -> dict[str, Any]:
    """Every case's results, in this process's gpuplace."""
    from gpuplace.errors import RuntimeFailure
    from gpuplace.placement import balanced, place
    from gpuplace.placement.baselines import lower_bounds, round_robin

    out: dict[str, Any] = {}
    weights = balanced.WEIGHTS
    for name, graph in _graphs():
        for label, preset, gpus, fraction in MACHINES:
            case = out[f"{name} on {label}"] = {}
            try:
                devices = _devices(preset, gpus, fraction, graph)
            except RuntimeFailure as err:  # TF's rules refuse the graph on this machine
                case["tf"] = {"error": f"{type(err).__name__}: {err}"}
                continue
            case["bounds"] = list(lower_bounds(graph, devices))
            case["tf"] = _placed(lambda: place(graph, gpus), graph, devices)  # noqa: B023
            case["round-robin"] = _placed(lambda: round_robin(graph, gpus), graph, devices)  # noqa: B023
            for kept in (weights, *((w,) for w in weights)):
                balanced.WEIGHTS = kept
                run = lambda: balanced.place_balanced(graph, devices)  # noqa: B023, E731
                case[f"balanced {kept}"] = _placed(run, graph, devices)
            balanced.WEIGHTS = weights
            print(f"{name} on {label}", file=sys.stderr, flush=True)
    return out


def _run(tree: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT / 'bench'}"}
    cmd = [sys.executable, __file__, "--dump"]
    done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
    where, _, text = done.stdout.partition("\n")
    print(f"  gpuplace from {where}")
    result: dict[str, Any] = json.loads(text)
    return result


def _unpack(rev: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gpuplace"],
                             check=True, capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def compare(old: dict[str, Any], new: dict[str, Any]) -> int:
    """Print the counts and every difference; the number of cases that differ."""
    differ = placements = ops = errors = bounds = 0
    for case, results in old.items():
        for strategy, result in results.items():
            if new.get(case, {}).get(strategy) != result:
                differ += 1
                print(f"DIFFERS: {case}, {strategy}")
            elif strategy == "bounds":
                bounds += 1
            elif "ops" in result:
                placements += 1
                ops += len(result["ops"])
            else:
                errors += 1
    graphs = len({case.split(" on ")[0] for case in old})
    print(f"{graphs} graphs x {len(MACHINES)} machines = {len(old)} cases; equal: {placements} "
          f"placements ({ops} op decisions) with their estimates, {errors} errors (NoFit, TF's "
          f"refusals), {bounds} lower bounds; {differ} differ")  # fmt: skip
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="942415d", help="git revision to compare with")
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        import gpuplace

        print(Path(gpuplace.__file__).parent)
        json.dump(dump(), sys.stdout)
        return
    with tempfile.TemporaryDirectory() as tmp:
        _unpack(args.against, Path(tmp))
        print(f"{args.against}:")
        old = _run(Path(tmp))
    print("this tree:")
    sys.exit(1 if compare(old, _run(ROOT)) else 0)


if __name__ == "__main__":
    main()
