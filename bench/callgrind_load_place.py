"""Instructions per op of the load and of TF's placement, noise-free (valgrind's callgrind):
`python bench/callgrind_load_place.py [N] [--base DIR]`.

For each shape of bench/procs.py at N ops (default 10,000), four processes under callgrind,
each warmed up on a small spec first and ended with `os._exit` (no teardown): nothing more,
the JSON parse (`parse_json.json_unique`, the document freed), `graph.load`, and load then
`placement.place(graph, 4)`. The differences, per op: the parse, the load less the parse
(what the loader adds to it), and the placement. `--base DIR` runs DIR's gpuplace/ instead
(e.g. a revision unpacked with `git archive REV gpuplace setup.py` and built in place with
`python setup.py build_ext --inplace`), to compare. Hash seeds and OpenBLAS's threads are fixed,
so a run repeats to the instruction. Several minutes (valgrind).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from procs import SHAPES, shape_ops, write_shape

CHILD = """
import json, os, sys
from pathlib import Path
import gc
gc.disable()
from gpuplace.graph import load
from gpuplace.parse_json import json_unique
from gpuplace.placement import place
small, path, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
place(load(small), 4)
json_unique(small.read_text())
text = path.read_text()
if what == "parse":
    del text
    json_unique(path.read_text())
elif what == "load":
    graph = load(path)
elif what == "place":
    graph = load(path)
    placement = place(graph, 4)
os._exit(0)
"""


def instructions(argv: list[str], env: dict[str, str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        # cwd: not the repository's root, which `python -c` would put on sys.path before --base
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg", *argv],
            capture_output=True, text=True, env=env, check=True, cwd=tmp,
        ).stderr  # fmt: skip
    found = re.search(r"Collected : (\d+)", out)
    assert found, out
    return int(found.group(1))


def arguments() -> tuple[int, dict[str, str]]:
    """N (default 10,000) and the children's environment, fixed hash seeds and OpenBLAS
    threads (with `--base DIR`: DIR's gpuplace/); prints the header."""
    args = sys.argv[1:]
    n = int(args[0]) if args and args[0].isdigit() else 10_000
    base = args[args.index("--base") + 1] if "--base" in args[:-1] else None
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    if base:
        env["PYTHONPATH"] = base
    print(f"callgrind, instructions per op, {n:,}-op JSON specs ({base or 'this tree'})")
    return n, env


def shapes(n: int) -> Iterator[tuple[str, Path, Path]]:
    """(shape, the small spec to warm up on, the N-op JSON spec) per shape of procs.py."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = folder / "small.json"
        small.write_text('{"graph": ' + json.dumps(shape_ops("random", 300)) + "}")
        for shape in SHAPES:
            _, path = write_shape(shape, n, folder)
            yield shape, small, path


def main() -> None:
    n, env = arguments()
    for shape, small, path in shapes(n):
        got = {
            what: instructions([sys.executable, "-c", CHILD, str(small), str(path), what], env)
            for what in ("none", "parse", "load", "place")
        }
        parse, load, place = (got[w] - got[p] for w, p in
                              (("parse", "none"), ("load", "parse"), ("place", "load")))  # fmt: skip
        print(f"{shape}: parse {parse // n:,}, load less parse {load // n:,}, "
              f"place {place // n:,}")  # fmt: skip


if __name__ == "__main__":
    main()
