"""Whole commands as a user types them, against the parsers alone, in one run:
`python bench/bench_commands.py [N] [--smoke]`.

`gpuplace --machine 4xK520 plan SPEC --json > out` and `run SPEC --json > out`, each a whole
process (interpreter start-up and the output file included), on N-op JSON specs of three shapes
(chain, fan, random DAG: bench/procs.py), against `python -c 'json.load(open(SPEC))'` of the same
file (goal: ratio <= 5); and `plan` of each as YAML against
`python -c 'yaml.load(open(SPEC), yaml.CSafeLoader)'` (goal: ratio <= 0.5; one turn, the C
loader alone takes 10-30 s here). Best of RUNS, ours and the parser alternating so that drift on a shared machine hits both alike. The goals are
stated for N = 100,000 (the default; a few minutes here). `--smoke`: 500 ops, one run.

gpuplace's modules are compiled to bytecode first, as an installed package's are (pip compiles
them; json and yaml come compiled): where PYTHONDONTWRITEBYTECODE is set and the source tree
has none, every process would otherwise compile every module it imports (about 0.1 s here).
"""

from __future__ import annotations

import compileall
import sys
import tempfile
from pathlib import Path

from procs import GPUPLACE, SHAPES, size, smoke, to_file, verdict, write_shape

import gpuplace

FULL = 100_000
JSON_LOAD = "import json, sys; json.load(open(sys.argv[1]))"
YAML_LOAD = "import yaml, sys; yaml.load(open(sys.argv[1]), yaml.CSafeLoader)"


def best(cmds: list[list[str]], out: Path, runs: int) -> list[float]:
    """Best wall time of each command, run in turn `runs` times, stdout to `out`; the first (the
    parser alone, cheap) three times a turn, so that one stall on a shared machine does not
    make the baseline."""
    times: list[list[float]] = [[] for _ in cmds]
    for _ in range(runs):
        for i, (cmd, spent) in enumerate(zip(cmds, times, strict=True)):
            spent.extend(to_file(cmd, out) for _ in range(3 if i == 0 else 1))
    return [min(t) for t in times]


def main() -> None:
    n = size(FULL, 500)
    runs = 1 if smoke() else 2
    if not smoke():  # a smoke writes nothing into the source tree
        compileall.compile_dir(Path(gpuplace.__file__).parent, quiet=1)
    print(f"whole commands on {n:,}-op specs, best of {runs}, stdout to a file (4xK520)")
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp), Path(tmp) / "out"
        for shape in SHAPES:
            yaml_path, json_path = write_shape(shape, n, folder)
            base = [sys.executable, "-c", JSON_LOAD, str(json_path)]
            ours = [[*GPUPLACE, "--machine", "4xK520", cmd, str(json_path), "--json"] for cmd in ("plan", "run")]  # fmt: skip
            floor, plan, run = best([base, *ours], out, runs)
            for cmd, spent in (("plan", plan), ("run", run)):
                ratio = spent / floor
                print(f"{shape} JSON {cmd} --json: {spent:.2f} s, json.load {floor:.2f} s, "
                      f"ratio {ratio:.2f} ({verdict(ratio, 5.0, n, FULL)})")  # fmt: skip
            base = [sys.executable, "-c", YAML_LOAD, str(yaml_path)]
            cmd = [*GPUPLACE, "--machine", "4xK520", "plan", str(yaml_path), "--json"]
            floor, plan = best([base, cmd], out, 1)  # the C loader alone takes 10-30 s here
            ratio = plan / floor
            print(f"{shape} YAML plan --json: {plan:.2f} s, yaml.load CSafeLoader {floor:.2f} s, "
                  f"ratio {ratio:.2f} ({verdict(ratio, 0.5, n, FULL)})")  # fmt: skip


if __name__ == "__main__":
    main()
