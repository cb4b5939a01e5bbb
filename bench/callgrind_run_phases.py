"""Instructions per op of `run`'s phases after `prepare`, noise-free (valgrind's callgrind):
`python bench/callgrind_run_phases.py [N] [--base DIR]`.

For each shape of bench/procs.py at N ops (default 10,000), one process under callgrind, warmed
up on a small spec first (imports, first calls), then on the N-op spec what `gpuplace --machine
4xK520 run SPEC --json` does: `prepare`, then `predict_memory` (the run's layout and its
charges), `execute_prepared`, `report.run.run_json` and the writing of its text
(`json_chunks`, each piece written to a binary file, as the command writes stdout); then what
`plan SPEC --json` does after its own `prepare` and `estimate_plan`: `report.plan.plan_json`
and the writing of its text. Only those six are counted, each on its own: each is called
through `functools.reduce`, the C function callgrind is told to count inside
(`--toggle-collect`) and to dump after (`--dump-after`), so each gets a dump of its own.
`--base DIR` runs DIR's gpuplace/ instead (e.g. a revision unpacked with `git archive REV
gpuplace setup.py` and built in place with `python setup.py build_ext --inplace`), to compare.
Hash seeds and OpenBLAS's threads are fixed, so a run repeats to the instruction. Minutes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from callgrind_load_place import arguments, shapes

PHASES = ("predict_memory", "execute_prepared", "run_json", "run write", "plan_json",
          "plan write")  # fmt: skip
CHILD = """
import functools, gc, os, sys
gc.disable()
import gpuplace
from gpuplace.pipeline import estimate_plan, execute_prepared, predict_memory, prepare
from gpuplace.report.plan import plan_json
from gpuplace.report.records import json_chunks
from gpuplace.report.run import run_json

view = gpuplace.view(gpuplace.discover("4xK520"), {})
out = open(os.devnull, "wb")

def write(doc):
    for chunk in json_chunks(doc):
        out.write(chunk)

def phases(path, counted):
    def call(fn):
        return functools.reduce(lambda _, f: f(), [fn], None) if counted else fn()

    prepared = prepare(path, view, gpuplace.Options(), {})
    call(lambda: predict_memory(prepared, view))
    outcome = call(lambda: execute_prepared(prepared, view))
    doc = call(lambda: run_json(view, prepared, outcome))
    call(lambda: write(doc))
    prepared = prepare(path, view, gpuplace.Options(), {}, feeds=False)
    memory, _ = predict_memory(prepared, view)
    est = estimate_plan(prepared, view)
    doc = call(lambda: plan_json(view, prepared, memory, est))
    call(lambda: write(doc))

phases(sys.argv[1], False)
phases(sys.argv[2], True)
os._exit(0)
"""


def _dump_number(path: Path) -> list[int]:
    """`cg.PID.K`'s numbers, to sort the dumps in the order callgrind wrote them."""
    return [int(s) for s in re.findall(r"\d+", path.name)]


def instructions(argv: list[str], env: dict[str, str]) -> list[int]:
    """The instructions of each dump callgrind writes (one per counted phase), in order."""
    with tempfile.TemporaryDirectory() as tmp:
        # cwd: not the repository's root, which `python -c` would put on sys.path before --base
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no",
             "--toggle-collect=functools_reduce", "--dump-after=functools_reduce",
             f"--callgrind-out-file={tmp}/cg.%p", *argv],
            capture_output=True, text=True, env=env, check=True, cwd=tmp,
        )  # fmt: skip
        dumps = sorted(Path(tmp).glob("cg.*"), key=_dump_number)
        totals = []
        for dump in dumps:
            found = re.search(r"^totals: (\d+)", dump.read_text(), re.MULTILINE)
            totals.append(int(found.group(1)) if found else 0)
    return [t for t in totals if t]


def main() -> None:
    n, env = arguments()
    for shape, small, path in shapes(n):
        got = instructions([sys.executable, "-c", CHILD, str(small), str(path)], env)
        counts = ", ".join(f"{p} {c // n:,}" for p, c in zip(PHASES, got, strict=True))
        print(f"{shape}: {counts}")


if __name__ == "__main__":
    main()
