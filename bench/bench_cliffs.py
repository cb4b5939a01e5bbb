"""Cliffs: inputs whose size once made gpuplace quadratic, each timed at n and 4n (linear means
~4x; quadratic, ~16x). Each case runs the command line in process, as `gpuplace` would, on a
simulated machine, output discarded.

- add_n over n inputs (one constant read n times, and n constants read once): the planner
  built each step's input and free tuples by `+=` (29-52 s at 100,000 on the issue's machine);
- `--replicate all` over n logical GPUs (`--virtual-gpus GPU:0=1MiB,...`), for run and plan,
  tensorflow and balanced: the placer matched every pinned op against every device, the walker
  every replica against every slice, the plan's bound built every op's device list, and the
  balanced placer kept a devices x steps matrix (57 s for run at 5,000; plan at 20,000 ran out
  of 3 GB in 300 s).

Goal: every growth ratio <= 6x for 4x the size. Run: .venv/bin/python bench/bench_cliffs.py
`--smoke`: each case at a 50th of its size (bench/README.md).
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gpuplace.cli import AppContext, main

GOAL = 6.0


def _gpuplace(*args: str) -> Callable[[], None]:
    """A call of the command line that must succeed (its output discarded)."""

    def call() -> None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args), AppContext(env={}, is_terminal=False))
        if code != 0:
            raise SystemExit(
                f"gpuplace {' '.join(a[:40] for a in args)}: exit {code}\n{err.getvalue()}"
            )

    return call


def add_n(folder: Path, n: int, distinct: bool) -> Callable[[], None]:
    names = [f"c{i}" if distinct else "c" for i in range(n)]
    consts = [
        f"  - {{name: {x}, op: constant, value: 1.0, shape: [1]}}" for x in dict.fromkeys(names)
    ]
    spec = folder / f"add_n_{n}_{distinct}.yaml"
    spec.write_text(
        "\n".join(["graph:", *consts, f"  - {{name: s, op: add_n, inputs: [{', '.join(names)}]}}"])
    )
    return _gpuplace("--machine", "1xK520", "run", str(spec))


def replicate(folder: Path, n: int, command: str, strategy: str) -> Callable[[], None]:
    spec = folder / f"replicate_{n}.yaml"
    spec.write_text(
        f"graph:\n  - {{name: x, op: placeholder, shape: [{n}, 4]}}\n  - {{name: y, op: relu, inputs: [x]}}\n"
    )
    feed = folder / f"x_{n}.npy"
    np.save(feed, np.ones((n, 4), np.float32))
    args = [
        "--virtual-gpus",
        "GPU:0=" + ",".join(["1MiB"] * n),
        "--replicate",
        "all",
        "--strategy",
        strategy,
    ]
    if command == "run":
        args += ["--feed", f"x={feed}"]
    return _gpuplace("--machine", "1xA100-80GB", command, str(spec), *args)


def seconds(call: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main_() -> None:
    cases: list[tuple[str, Callable[[Path, int], Callable[[], None]], int]] = [
        ("add_n, one input read n times", lambda f, n: add_n(f, n, False), 25_000),
        ("add_n, n inputs", lambda f, n: add_n(f, n, True), 10_000),
        (
            "run --replicate all, tensorflow",
            lambda f, n: replicate(f, n, "run", "tensorflow"),
            2_500,
        ),
        (
            "plan --replicate all, tensorflow",
            lambda f, n: replicate(f, n, "plan", "tensorflow"),
            2_500,
        ),
        ("plan --replicate all, balanced", lambda f, n: replicate(f, n, "plan", "balanced"), 2_500),
    ]
    worst = 0.0
    scale = 50 if "--smoke" in sys.argv else 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, make, size in cases:
            n = size // scale
            small, large = seconds(make(folder, n)), seconds(make(folder, 4 * n))
            ratio = large / small
            worst = max(worst, ratio)
            print(
                f"{label}: n={n:,} {small:.2f} s, 4n={4 * n:,} {large:.2f} s, growth {ratio:.1f}x"
            )
    print(
        f"worst growth for 4x the size: {worst:.1f}x (goal <= {GOAL:.0f}x"
        + (" at the full sizes)" if scale > 1 else f"): {'met' if worst <= GOAL else 'NOT met'}")
    )


if __name__ == "__main__":
    main_()
