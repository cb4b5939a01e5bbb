"""Start-up of a small command: `gpuplace run` and `gpuplace plan` of a 3-op spec (YAML and
JSON) and `gpuplace devices`, whole processes, against `python -c "import numpy, yaml"` (what
any tool that reads a YAML spec into arrays pays before doing anything), in one run:
`python bench/bench_startup.py [--runs N] [--against REV] [--smoke]`.

Goal (issue 17): each at most 1.5x the floor. Medians of RUNS runs of wall time and of CPU time
(user + system, from `wait4`: what other work on a shared machine disturbs least), the commands
in turn so that drift on a shared machine hits them alike; the package is byte-compiled first
(as an installed wheel is), so that an environment with PYTHONDONTWRITEBYTECODE does not time
the compiler. `--against REV`: the revision's gpuplace/ (unpacked with `git archive`) and this
tree's, each put first on PYTHONPATH, alternating command by command; each line then also
gives the tree's ratio to the revision's; the revision's compiled core is built there with its
own setup.py (where it has one), as the tree's is (`make build` first). `--smoke`: 3 runs,
nothing compiled, no revision.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ab_commands import copy_tree, option, unpack
from procs import GPUPLACE, smoke

import gpuplace

TINY = """\
graph:
  - {name: a, op: constant, value: 1.0, shape: [2, 2]}
  - {name: b, op: relu, inputs: [a]}
  - {name: c, op: add, inputs: [a, b]}
"""
TINY_OPS = [
    {"name": "a", "op": "constant", "value": 1.0, "shape": [2, 2]},
    {"name": "b", "op": "relu", "inputs": ["a"]},
    {"name": "c", "op": "add", "inputs": ["a", "b"]},
]
FLOOR_NAME = "python -c 'import numpy, yaml'"
FLOOR = [sys.executable, "-c", "import numpy, yaml"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `cmd`, its stdout read from a pipe to the end; it must exit 0."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        if proc.stdout:
            proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if status != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)}: status {status}: {err.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    runs = 3 if smoke() else int(option("--runs", "21"))
    revision = None if smoke() else option("--against", "")
    if not smoke():  # a smoke writes nothing into the source tree
        compileall.compile_dir(Path(gpuplace.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        yaml_spec, json_spec = folder / "tiny.yaml", folder / "tiny.json"
        yaml_spec.write_text(TINY)
        json_spec.write_text(json.dumps({"graph": TINY_OPS}))
        machine = [*GPUPLACE, "--machine", "4xK520"]
        cmds = {
            "gpuplace run tiny.yaml": [*machine, "run", str(yaml_spec)],
            "gpuplace plan tiny.yaml": [*machine, "plan", str(yaml_spec)],
            "gpuplace run tiny.json": [*machine, "run", str(json_spec)],
            "gpuplace plan tiny.json": [*machine, "plan", str(json_spec)],
            "gpuplace devices": [*machine, "devices"],
        }
        sides = {"tree": dict(os.environ)}
        if revision:
            sides = {
                revision: {
                    **os.environ,
                    "PYTHONPATH": str(unpack(revision, folder / "base", build=True)),
                },
                "tree": {**os.environ, "PYTHONPATH": str(copy_tree(folder / "tree"))},
            }
        timed(FLOOR, sides["tree"])  # warm the file cache
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(runs):
            times.setdefault((FLOOR_NAME, ""), []).append(timed(FLOOR, sides["tree"]))
            for name, cmd in cmds.items():
                for side, env in sides.items():
                    times.setdefault((name, side), []).append(timed(cmd, env))
    floor = [statistics.median(t[i] for t in times[FLOOR_NAME, ""]) for i in (0, 1)]
    print(f"start-up, medians of {runs} (a 3-op spec, 4xK520, output to a pipe); wall and CPU")
    print(f"{FLOOR_NAME}: {floor[0] * 1000:.1f} ms, CPU {floor[1] * 1000:.1f} ms, ratio 1.00")
    for name in cmds:
        for side in sides:
            wall, cpu = (statistics.median(t[i] for t in times[name, side]) for i in (0, 1))
            label = f"{name} ({side})" if revision else name
            ratio = wall / floor[0]
            goal = f"goal <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'}"
            line = (f"{label}: {wall * 1000:.1f} ms, ratio {ratio:.2f} ({goal}); "
                    f"CPU {cpu * 1000:.1f} ms, ratio {cpu / floor[1]:.2f}")  # fmt: skip
            if revision and side == "tree":
                base = [statistics.median(t[i] for t in times[name, revision]) for i in (0, 1)]
                line += f"; tree / {revision}: wall ratio {wall / base[0]:.2f}, CPU ratio {cpu / base[1]:.2f}"  # fmt: skip
            print(line)


if __name__ == "__main__":
    main()
