"""`gpuplace devices --json --machine 8xA100-80GB` wall time vs the import floor, in one run.

The floor is `python -c "import click, rich.table, rich.console, pynvml"`: what any CLI built on
these libraries pays before doing anything. Goal: ratio <= 1.3. Prints medians and the ratio,
for a simulated machine and for this machine (`gpuplace devices --json`: on a machine without a
driver NVML fails at init and the CUDA driver is never asked its GPU order; with two GPUs or more
it is, in a child process: `devices/libcuda.py`).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 15
FLOOR = [sys.executable, "-c", "import click, rich.table, rich.console, pynvml"]
DEVICES = [sys.executable, "-m", "gpuplace", "--machine", "8xA100-80GB", "devices", "--json"]
HERE = [sys.executable, "-m", "gpuplace", "devices", "--json"]


def median_seconds(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    median_seconds(FLOOR)  # warm the file cache
    floor, ours, here = [], [], []
    for _ in range(3):  # interleave so noise hits all alike
        floor.append(median_seconds(FLOOR))
        ours.append(median_seconds(DEVICES))
        here.append(median_seconds(HERE))
    f, o, h = min(floor), min(ours), min(here)
    print(f"import floor (click, rich, pynvml): {f * 1000:.1f} ms")
    print(f"gpuplace devices --json --machine 8xA100-80GB: {o * 1000:.1f} ms")
    print(f"ratio: {o / f:.2f} (goal <= 1.3)")
    print(f"gpuplace devices --json (this machine): {h * 1000:.1f} ms")
    print(f"ratio: {h / f:.2f} (goal <= 1.3 without a driver)")


if __name__ == "__main__":
    main()
