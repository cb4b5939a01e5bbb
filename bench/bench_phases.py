"""Where a whole command's time goes: `python bench/bench_phases.py [N] [--smoke]`.

`gpuplace --machine 4xK520 plan SPEC --json` and `run SPEC --json` on N-op JSON specs of the three
shapes of bench/procs.py, run in this process through the command line's own `main` (stdout to a
file), with the pipeline's phases timed where the command calls them: the loader, the placer,
the memory prediction, the estimate (flattening, simulation, lower bounds), the run, the JSON
document and its text. Each phase is printed in seconds and as a ratio to `json.load` of the same
file, timed in the same run; `rest` is what no phase covers (flags, the devices, pruning, checks,
writing the output). The cyclic GC is paused, as `gpuplace/__main__.py` pauses it, and what
the command made is kept past its end, as the console script keeps it (`cli/main.py:
run_console`), then freed untimed: the process a user runs never frees it. Imports are warmed
up first on a small spec, so start-up is not in these numbers: bench_commands.py times whole
processes. A phase an older tree lacks is left out (to run this file against another
revision's package). Phases nest (the estimate holds its parts);
each is timed inclusively, best of RUNS. `--smoke`: 300 ops, one run.
"""

from __future__ import annotations

import functools
import importlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

from procs import SHAPES, size, smoke, write_shape

FULL = 100_000
# (label, depth, module, function): where the commands look each one up when they call it
PHASES = (
    ("prepare", 0, "gpuplace.pipeline", "prepare"),
    ("load (parse, resolve, infer)", 1, "gpuplace.pipeline", "load"),
    ("place", 1, "gpuplace.pipeline", "place_with"),
    ("predict_memory (the run's layout)", 0, "gpuplace.pipeline", "predict_memory"),
    ("estimate_plan", 0, "gpuplace.pipeline", "estimate_plan"),
    ("flatten", 1, "gpuplace.placement.estimate", "flatten"),
    ("flatten", 1, "gpuplace.placement.flat", "flatten"),  # pipeline._flat's (estimate_plan)
    ("simulate", 1, "gpuplace.placement.estimate", "simulate"),
    ("lower_bounds", 1, "gpuplace.placement.estimate", "lower_bounds"),
    ("execute_prepared", 0, "gpuplace.pipeline", "execute_prepared"),
    ("plan_json (the document)", 0, "gpuplace.report.plan", "plan_json"),
    ("run_json (the document)", 0, "gpuplace.report.run", "run_json"),
    ("json_bytes (its text)", 0, "gpuplace.report.records", "json_bytes"),
    ("json_chunks (its text, in pieces)", 0, "gpuplace.report.records", "json_chunks"),
)


@contextmanager
def timed_phases(spent: dict[str, float]) -> Iterator[None]:
    """Wrap every phase where the commands look it up; seconds per label add up in `spent`."""
    undo: list[tuple[Any, str, Any]] = []
    for label, _, module_name, name in PHASES:
        module = importlib.import_module(module_name)
        original = getattr(module, name, None)
        if original is None:  # not in this revision
            continue
        undo.append((module, name, original))
        setattr(module, name, _timer(original, label, spent))
    try:
        yield
    finally:
        for module, name, original in reversed(undo):
            setattr(module, name, original)


def _timer(fn: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start

    return wrapper


def command(argv: list[str], out: Path) -> dict[str, float]:
    """Run the command line in this process, stdout to `out`: seconds per phase, and `total`."""
    from gpuplace.cli.context import AppContext
    from gpuplace.cli.main import main
    from gpuplace.gc_pause import gc_paused

    spent: dict[str, float] = {}
    console = AppContext(kept=[])  # as the console script's: what it printed lives on
    with open(out, "w") as f, redirect_stdout(f), timed_phases(spent), gc_paused():
        start = time.perf_counter()
        code = main(argv, console)
        spent["total"] = time.perf_counter() - start
        console.kept = None  # freed here, untimed (the console script's process just ends)
    if code != 0:
        raise SystemExit(f"gpuplace {' '.join(argv)} exited {code}")
    return spent


def json_load(path: Path) -> float:
    start = time.perf_counter()
    with open(path) as f:
        json.load(f)
    return time.perf_counter() - start


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    n = size(FULL, 300)
    runs = 1 if smoke() else 2
    print(f"phases of whole commands, in process, on {n:,}-op JSON specs, best of {runs} (4xK520)")
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp), Path(tmp) / "out"
        _, warm = write_shape("chain", 50, folder)
        for cmd in ("plan", "run"):  # imports, once
            command(["--machine", "4xK520", cmd, str(warm), "--json"], out)
        for shape in SHAPES:
            _, path = write_shape(shape, n, folder)
            floor = min(json_load(path) for _ in range(3))
            for cmd in ("plan", "run"):
                argv = ["--machine", "4xK520", cmd, str(path), "--json"]
                got = best([command(argv, out) for _ in range(runs)])
                total = got.pop("total")
                print(f"{shape} {cmd} --json: {total:.2f} s in process, json.load {floor:.3f} s, "
                      f"ratio {total / floor:.2f}")  # fmt: skip
                outer = sum(got.get(label, 0.0) for label, depth, _, _ in PHASES if depth == 0)
                for label, depth in dict((label, depth) for label, depth, _, _ in PHASES).items():
                    if label in got:
                        print(f"  {'  ' * depth}{label}: {got[label]:.3f} s, "
                              f"ratio {got[label] / floor:.2f}")  # fmt: skip
                print(f"  rest: {total - outer:.3f} s, ratio {(total - outer) / floor:.2f}")


if __name__ == "__main__":
    main()
