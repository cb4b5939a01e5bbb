"""Instructions per op of `plan`'s estimate, noise-free (valgrind's callgrind):
`python bench/callgrind_estimate.py [N] [--base DIR]`.

For each shape of bench/procs.py at N ops (default 10,000), the real command
`gpuplace --machine 4xK520 plan SPEC --json` (the command line's own `main`, after a warm-up on
a small spec) under callgrind, ended with `os._exit` at a phase boundary of
`pipeline.estimate_plan`: on entering it, after the graph is flattened, after the simulation,
and on leaving it. The differences, per op: flatten, simulate, the lower bounds (with what else
the estimate does), and the whole estimate. `--base DIR` runs DIR's gpuplace/ instead (a
revision unpacked with `git archive REV gpuplace setup.py` and built in place), to compare. Hash
seeds and OpenBLAS's threads are fixed, the cyclic GC is off: a run repeats to the instruction.
Several minutes (valgrind).
"""

from __future__ import annotations

import sys

from callgrind_load_place import arguments, instructions, shapes

CHILD = """
import gc, io, os, sys
from contextlib import redirect_stdout
gc.disable()
import gpuplace.pipeline as pipeline
import gpuplace.placement.estimate as estimate
import gpuplace.placement.flat as flat
from gpuplace.cli.main import main
small, path, stop = sys.argv[1], sys.argv[2], sys.argv[3]

def plan(spec):
    with redirect_stdout(io.StringIO()):
        main(["--machine", "4xK520", "plan", spec, "--json"])

def exit_after(module, name):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        out = inner(*args, **kwargs)
        if armed:
            os._exit(0)
        return out
    setattr(module, name, wrapper)

def exit_before(module, name):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        if armed:
            os._exit(0)
        return inner(*args, **kwargs)
    setattr(module, name, wrapper)

armed = False
if stop == "enter":
    exit_before(pipeline, "estimate_plan")
elif stop == "flatten":
    exit_after(flat, "flatten")
    exit_after(estimate, "flatten")
elif stop == "simulate":
    exit_after(estimate, "simulate")
else:
    exit_after(pipeline, "estimate_plan")
plan(small)
armed = True
plan(path)
os._exit(1)
"""

STOPS = ("enter", "flatten", "simulate", "leave")


def main() -> None:
    n, env = arguments()
    for shape, small, path in shapes(n):
        got = {
            stop: instructions([sys.executable, "-c", CHILD, str(small), str(path), stop], env)
            for stop in STOPS
        }
        parts = {
            "flatten": got["flatten"] - got["enter"],
            "simulate": got["simulate"] - got["flatten"],
            "bounds": got["leave"] - got["simulate"],
            "estimate_plan": got["leave"] - got["enter"],
        }
        print(f"{shape}: " + ", ".join(f"{k} {v / n:,.0f}" for k, v in parts.items()))


if __name__ == "__main__":
    main()
