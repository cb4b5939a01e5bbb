"""Every benchmark still runs: `bench/bench_*.py --smoke` (small sizes, one run; the convention is
in bench/README.md), found by itself, must exit 0 and print its ratios. No timing is judged."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench"
BENCHES = sorted(p.name for p in BENCH.glob("bench_*.py"))
RATIO = re.compile(r"\b(ratio|growth):?\s+[0-9]")


def test_the_benchmarks_are_found() -> None:
    assert {"bench_commands.py", "bench_startup.py", "bench_terminal.py"} <= set(BENCHES)


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHES)
def test_a_benchmark_runs_small_and_prints_its_ratios(name: str, tmp_path: Path) -> None:
    path = BENCH / name
    if "--smoke" not in path.read_text():
        pytest.skip(f"{name} takes no --smoke (bench/README.md)")
    done = subprocess.run(
        [sys.executable, str(path), "--smoke"],
        cwd=tmp_path,  # nothing may land in the working folder
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert RATIO.search(done.stdout), done.stdout
    assert list(tmp_path.iterdir()) == []
