"""Start-up of a small command: `gpuplace run` and `gpuplace plan` of a 3-op spec, whole processes,
against `python -c "import numpy, yaml"` (what any tool that reads a YAML spec into arrays pays
before doing anything), in one run: `python bench/bench_startup.py [--smoke]`.

Goal (issue 17): each at most 1.5x the floor. Medians of RUNS runs, the three commands in turn
so that drift on a shared machine hits them alike; the package is byte-compiled first (as an
installed wheel is), so that an environment with PYTHONDONTWRITEBYTECODE does not time the
compiler. `--smoke`: 3 runs, nothing compiled.
"""

from __future__ import annotations

import compileall
import statistics
import sys
import tempfile
from pathlib import Path

from procs import GPUPLACE, smoke, to_pipe

import gpuplace

TINY = """\
graph:
  - {name: a, op: constant, value: 1.0, shape: [2, 2]}
  - {name: b, op: relu, inputs: [a]}
  - {name: c, op: add, inputs: [a, b]}
"""
FLOOR = [sys.executable, "-c", "import numpy, yaml"]


def main() -> None:
    runs = 3 if smoke() else 21
    if not smoke():  # a smoke writes nothing into the source tree
        compileall.compile_dir(Path(gpuplace.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "tiny.yaml"
        spec.write_text(TINY)
        cmds = {
            "python -c 'import numpy, yaml'": FLOOR,
            "gpuplace run tiny.yaml": [*GPUPLACE, "--machine", "4xK520", "run", str(spec)],
            "gpuplace plan tiny.yaml": [*GPUPLACE, "--machine", "4xK520", "plan", str(spec)],
        }
        to_pipe(FLOOR)  # warm the file cache
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(runs):
            for name, cmd in cmds.items():
                times[name].append(to_pipe(cmd))
    floor = statistics.median(times["python -c 'import numpy, yaml'"])
    print(f"start-up, medians of {runs} (a 3-op spec, 4xK520, output to a pipe)")
    for name, spent in times.items():
        ratio = statistics.median(spent) / floor
        goal = (
            ""
            if name.startswith("python")
            else f" (goal <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'})"
        )
        print(f"{name}: {statistics.median(spent) * 1000:.1f} ms, ratio {ratio:.2f}{goal}")  # fmt: skip


if __name__ == "__main__":
    main()
