"""Helpers for the benchmarks that time whole commands as a user types them (not a bench itself):
spec files of three shapes, a process timed with its output going to a file, a pipe or a
pseudo-terminal, and the `--smoke` flag every `bench_*.py` takes.

Shapes (JSON and YAML, ops of [4, 4] float32 so that running them costs little):
- `chain`: `bench_load.py`'s layered chain (add/relu/matmul/mul/sub/tanh, every 10th op pinned);
- `fan`: one input read by n - 2 relus, summed by one add_n (the wide graph);
- `random`: each op reads one to three of the 64 ops before it (matmul, add_n or tanh).
"""

from __future__ import annotations

import json
import os
import pty
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from bench_load import spec_ops

SHAPES = ("chain", "fan", "random")
GPUPLACE = [sys.executable, "-m", "gpuplace"]
SMOKE_HELP = "--smoke: small sizes and one run, to check that the benchmark still runs (make test)"


def smoke(argv: Sequence[str] | None = None) -> bool:
    """Whether `--smoke` was given (the convention of every bench_*.py; see bench/README.md)."""
    return "--smoke" in (sys.argv[1:] if argv is None else argv)


def size(default: int, small: int, argv: Sequence[str] | None = None) -> int:
    """The first integer argument, else `small` under --smoke, else `default`."""
    args = [a for a in (sys.argv[1:] if argv is None else argv) if a.isdigit()]
    return int(args[0]) if args else small if smoke(argv) else default


def shape_ops(shape: str, n: int) -> list[dict[str, Any]]:
    """The ops of a spec of `n` ops in one of SHAPES."""
    if shape == "chain":
        return spec_ops(n)
    x: dict[str, Any] = {"name": "x", "op": "random_normal", "shape": [4, 4], "seed": 1}
    if shape == "fan":
        ops = [x] + [{"name": f"f{i}", "op": "relu", "inputs": ["x"]} for i in range(1, n - 1)]
        return [*ops, {"name": "out", "op": "add_n", "inputs": [o["name"] for o in ops[1:]]}]
    rng = random.Random(0)
    ops = [x]
    while len(ops) < n:
        i = len(ops)
        picks = [ops[p]["name"] for p in rng.sample(range(max(0, i - 64), i), min(rng.choice((1, 2, 2, 3)), i))]  # fmt: skip
        kind = {1: "tanh", 2: "matmul", 3: "add_n"}[len(picks)]
        ops.append({"name": f"op{i}", "op": kind, "inputs": picks})
    return ops


def write_shape(shape: str, n: int, folder: Path) -> tuple[Path, Path]:
    """The spec as YAML (one flow mapping per line) and as JSON (one op per line)."""
    ops = shape_ops(shape, n)
    yaml_path, json_path = folder / f"{shape}{n}.yaml", folder / f"{shape}{n}.json"
    plain = [", ".join(f"{k}: {json.dumps(v).replace(chr(34), '')}" for k, v in op.items()) for op in ops]  # fmt: skip
    yaml_path.write_text("graph:\n" + "".join(f"  - {{{p}}}\n" for p in plain))
    json_path.write_text('{"graph": [\n' + ",\n".join(map(json.dumps, ops)) + "\n]}\n")
    return yaml_path, json_path


def to_file(cmd: Sequence[str], out: Path) -> float:
    """Wall seconds of `cmd` with stdout written to the file `out`; it must exit 0."""
    with open(out, "wb") as f:
        return _timed(cmd, f)


def to_pipe(cmd: Sequence[str]) -> float:
    """Wall seconds of `cmd` with stdout read from a pipe to its end; it must exit 0."""
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, check=False)
    spent = time.perf_counter() - start
    _check(cmd, done.returncode, done.stderr)
    return spent


def to_terminal(cmd: Sequence[str], columns: int = 200, rows: int = 50) -> float:
    """Wall seconds of `cmd` with stdout a pseudo-terminal of `columns` x `rows`, read to its
    end as a terminal would; it must exit 0."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, env={**env, "TERM": "xterm-256color"})  # fmt: skip
    os.close(slave)
    while True:
        try:
            if not os.read(master, 1 << 16):
                break
        except OSError:  # EIO: the terminal's last writer is gone
            break
    err = proc.stderr.read() if proc.stderr else b""
    code = proc.wait()
    spent = time.perf_counter() - start
    os.close(master)
    _check(cmd, code, err)
    return spent


def _timed(cmd: Sequence[str], stdout: BinaryIO) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, check=False)
    spent = time.perf_counter() - start
    _check(cmd, done.returncode, done.stderr)
    return spent


def _check(cmd: Sequence[str], code: int, err: bytes) -> None:
    if code != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {code}: {err.decode()[-2000:]}")


def verdict(ratio: float, goal: float, n: int, full: int) -> str:
    """`goal <= 5: met`, or at a smaller size only the goal (it is stated for `full` ops)."""
    if n < full:
        return f"goal <= {goal} at {full:,} ops"
    return f"goal <= {goal}: {'met' if ratio <= goal else 'NOT met'}"
