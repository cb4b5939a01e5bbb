"""`gpuplace devices --json --machine 8xA100-80GB` wall time vs the import floor, in one run.

The floor is `python -c "import click, rich.table, rich.console, pynvml"`: what any CLI built on
these libraries pays before doing anything. Goal: ratio <= 1.3. Prints medians and the ratio.
`--smoke`: medians of 3, once (bench/README.md).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 3 if "--smoke" in sys.argv else 15
FLOOR = [sys.executable, "-c", "import click, rich.table, rich.console, pynvml"]
DEVICES = [sys.executable, "-m", "gpuplace", "--machine", "8xA100-80GB", "devices", "--json"]


def median_seconds(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    median_seconds(FLOOR)  # warm the file cache
    floor, ours = [], []
    for _ in range(1 if "--smoke" in sys.argv else 3):  # interleave so noise hits both alike
        floor.append(median_seconds(FLOOR))
        ours.append(median_seconds(DEVICES))
    f, o = min(floor), min(ours)
    print(f"import floor (click, rich, pynvml): {f * 1000:.1f} ms")
    print(f"gpuplace devices --json --machine 8xA100-80GB: {o * 1000:.1f} ms")
    print(f"ratio: {o / f:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
