"""What `--training adam` adds to `gpuplace plan`: whole commands, with and without it, in one
run: `python bench/bench_training.py [N] [--smoke]`.

`gpuplace --machine 4xK520 plan SPEC.json --json > out` against the same command with
`--training adam` (the training step sized per device, and with balanced the placement charged
for it), on two N-op specs: bench's chain (procs.py: constants and a chain of layers, no
weights: no backward pass, the cost of finding that out) and a chain of dense layers (a
variable, a matmul and a relu per layer: every op has a gradient). Under both the tensorflow and
the balanced strategy. Goal: the ratio at most 1.5 (the training model is linear in ops: one
more flatten and a few numpy passes). Best of 2 turns, the two commands alternating so that drift
on a shared machine hits both alike (bench_commands.best: the plain plan 3 times a turn). N = 100,000 by default (a few minutes here); --smoke: 500 ops.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_commands import best
from procs import GPUPLACE, size, smoke, verdict, write_shape

FULL = 100_000
GOAL = 1.5


def write_dense(n: int, folder: Path) -> Path:
    """A chain of n // 3 dense layers on [4, 4] tensors: variable, matmul, relu."""
    ops: list[dict[str, Any]] = [{"name": "x", "op": "random_normal", "shape": [4, 4], "seed": 1}]
    last = "x"
    for i in range((n - 1) // 3):
        ops += [{"name": f"w{i}", "op": "variable", "shape": [4, 4]},
                {"name": f"m{i}", "op": "matmul", "inputs": [last, f"w{i}"]},
                {"name": f"r{i}", "op": "relu", "inputs": [f"m{i}"]}]  # fmt: skip
        last = f"r{i}"
    path = folder / f"dense{n}.json"
    path.write_text('{"graph": [\n' + ",\n".join(map(json.dumps, ops)) + "\n]}\n")
    return path


def main() -> None:
    n = size(FULL, 500)
    runs = 1 if smoke() else 2
    print(
        f"plan --json with and without --training adam on {n:,}-op specs, best of {runs} (4xK520)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp), Path(tmp) / "out"
        specs = {"chain": write_shape("chain", n, folder)[1], "dense": write_dense(n, folder)}
        for name, path in specs.items():
            for strategy in ("tensorflow", "balanced"):
                plain = [*GPUPLACE, "--machine", "4xK520", "plan", str(path), "--json",
                         "--strategy", strategy]  # fmt: skip
                base, training = best([plain, [*plain, "--training", "adam"]], out, runs)
                ratio = training / base
                print(f"{name} {strategy}: plan {base:.2f} s, plan --training adam {training:.2f} s, "
                      f"ratio {ratio:.2f} ({verdict(ratio, GOAL, n, FULL)})")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
