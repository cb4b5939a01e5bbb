"""The commands tests/test_compiled.py runs twice, compiled and as Python source: one process
each, every command in it, printing one JSON list of [argv, exit code, stdout, stderr].

`python -m tests.compiled_probe FOLDER`: FOLDER receives the random specs it plans."""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from gpuplace.cli import AppContext
from gpuplace.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
MACHINES = ("4xK520", "8xV100-16GB")


def random_spec(seed: int, ops: int = 400) -> str:
    """A YAML spec: a random DAG over [256, 256] tensors, with variables (deferred by balanced),
    prints (forwarded buffers) and fan-ins, each op reading one to four of the 32 before it."""
    rng = random.Random(seed)
    lines = ["graph:"]
    names = []
    for i in range(8):
        kind = rng.choice(("random_normal", "variable"))
        lines.append(f"  - {{name: in{i}, op: {kind}, shape: [256, 256]}}")
        names.append(f"in{i}")
    while len(names) < ops:
        picks = rng.sample(names[-32:], rng.choice((1, 2, 2, 3, 4)))
        kind = {1: rng.choice(("tanh", "print", "relu")), 2: "matmul"}.get(len(picks), "add_n")
        name = f"op{len(names)}"
        lines.append(f"  - {{name: {name}, op: {kind}, inputs: [{', '.join(picks)}]}}")
        names.append(name)
    lines.append(f"fetch: [{names[-1]}, {names[len(names) // 2]}]")
    return "\n".join(lines) + "\n"


def commands(folder: Path) -> Iterator[list[str]]:
    specs = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "examples").rglob("*.yaml"))
             if p.parent.name != "cluster"]  # fmt: skip
    for seed in range(4):
        path = folder / f"random{seed}.yaml"
        path.write_text(random_spec(seed))
        specs.append(str(path))
    for spec in specs:
        for machine in MACHINES:
            yield ["--machine", machine, "plan", spec, "--json"]
            yield ["--machine", machine, "plan", spec, "--json", "--strategy", "balanced"]
        yield ["--machine", "4xK520", "plan", spec, "--json", "--strategy", "balanced",
               "--memory-limit", "40MiB"]  # fmt: skip
    for spec in specs[:6]:
        yield ["--machine", "4xK20m", "run", spec, "--json"]
    yield ["--machine", "4xK520", "plan", "examples/onnx/mlp.onnx", "--dim", "batch=8", "--json",
           "--strategy", "balanced"]  # fmt: skip


def run(argv: list[str]) -> list[object]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, AppContext())
    return [argv, code, out.getvalue(), err.getvalue()]


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    json.dump([run(argv) for argv in commands(folder)], sys.stdout)
