"""bench/bench_execute.py at CI size: it runs, checks its results and prints every ratio.

Times and ratios depend on the machine, so they are masked; what is asserted is the report's
shape, and that TensorFlow's JSON line (from a stand-in interpreter here) is read and shown.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ["--sizes", "300", "--repeats", "2", "--matmul", "64"]


def bench(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_execute.py"), *args],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    masked = re.sub(r"\d(?:[\d,.]*\d)?", "N", re.sub(" +", " ", done.stdout))
    return re.sub(r"\((goal <= N): (?:NOT )?met\)", r"(\1: VERDICT)", masked)


def test_the_smoke_prints_every_ratio_and_says_tensorflow_was_skipped() -> None:
    assert bench(*SMOKE, "--no-tf") == (
        "chain of N adds on NxN floatN (best of N, CPU time):\n"
        " plain numpy loop: N us/op\n"
        " run (planned once): N us/op ratio N (goal <= N: VERDICT)\n"
        " plan alone: N us/op ratio N\n"
        " execute (plan + run): N us/op ratio N\n"
        " TFN Session.run: not measured (--no-tf)\n"
        "NxN floatN matmul (best of N):\n"
        " numpy.matmul: N ms\n"
        " execute: N ms ratio N (goal <= N: VERDICT)\n"
    )


def test_tensorflow_runs_in_the_python_the_environment_names(tmp_path: Path) -> None:
    """A stand-in for a python with tensorflow: it imports anything, and answers tf_chain.py
    with the JSON line the real script prints (the chain's value is N + 1 everywhere)."""
    line = {"version": "9.9", "build": 0.5, "first": 0.25, "run": 1e-4, "loop": 2e-4,
            "value": [[301.0, 301.0], [301.0, 301.0]]}  # fmt: skip
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho '{json.dumps(line)}'\n")
    python.chmod(0o755)
    out = bench(*SMOKE, env={"GPUPLACE_BENCH_TF_PYTHON": str(python), "PATH": "/usr/bin:/bin"})
    assert (
        " TFN Session.run (warm): N us/op ratio N (tensorflow N; its numpy loop N us/op); " in out
    )
    assert (
        " TFN build + first run: N us/op ratio N; gpuplace execute / TF build + first run N" in out
    )
    missing = {"GPUPLACE_BENCH_TF_PYTHON": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    assert " TFN Session.run: not measured (GPUPLACE_BENCH_TF_PYTHON=" in bench(*SMOKE, env=missing)
