"""Whole commands, a git revision against this working tree, in one run:
`python bench/bench_ab_commands.py [N] [--against REV] [--command run|plan] [--build] [--smoke]`.

`gpuplace --machine 4xK520 COMMAND SPEC --json > out` as whole processes on N-op JSON specs of
bench/procs.py's three shapes: the revision's gpuplace/ (unpacked with `git archive`, put first
on PYTHONPATH) and this tree's (copied there too), alternating, with `python -c 'json.load(...)'`
of the same file timed between them. Both copies are compiled to bytecode first (with
PYTHONDONTWRITEBYTECODE set, a tree without it compiles every module on every run). Best of RUNS of wall time and of CPU time
(user + system, from `wait4`: what other work on a shared machine disturbs least); each side's
ratio to json.load, and the tree's to the revision's. The two documents must be equal (the
seconds each copy took masked): the change is a speed change only. `--smoke`: 300 ops, one run.

The compiled core (gpuplace/compiled.py): the tree's copy carries its built modules (`make
build` first), and the revision's is built in the temporary folder with its own setup.py under
`--build` (a minute or more per module set); else it runs as Python. Each side says which of its
compiled modules run as Python (none built, or built before its source last changed): a side
that runs its Python source where the other runs compiled code times the build, not the change.
"""

from __future__ import annotations

import compileall
import os
import re
import runpy
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from procs import SHAPES, size, smoke, write_shape

from gpuplace.compiled import outdated

FULL = 100_000
ROOT = Path(__file__).resolve().parent.parent
JSON_LOAD = "import json, sys; json.load(open(sys.argv[1]))"
SECONDS = re.compile(rb'"seconds": [-+.e0-9]+')


def option(name: str, default: str) -> str:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args[:-1] else default


def unpack(revision: str, folder: Path, build: bool) -> Path:
    """The revision's gpuplace/ under `folder`, compiled to bytecode, and with `build` its
    compiled core built (where the revision has one: setup.py)."""
    paths = ["gpuplace"]
    if build and subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{revision}:setup.py"],
                                capture_output=True, check=False).returncode == 0:  # fmt: skip
        paths.append("setup.py")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, *paths],
                             capture_output=True, check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    if "setup.py" in paths:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder,
                       capture_output=True, check=True)  # fmt: skip
    compileall.compile_dir(folder / "gpuplace", quiet=1)
    return folder


def copy_tree(folder: Path) -> Path:
    """This tree's gpuplace/ under `folder`, compiled."""
    shutil.copytree(ROOT / "gpuplace", folder / "gpuplace", ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    compileall.compile_dir(folder / "gpuplace", quiet=1)
    return folder


def as_python(folder: Path) -> list[str]:
    """The modules of the compiled core under `folder` that run as Python: not built, or built
    before their source (or .pxd) last changed (none where the tree predates the compiled
    core)."""
    listing = folder / "gpuplace" / "compiled.py"
    if not listing.exists():
        return []
    return outdated(folder, runpy.run_path(str(listing))["COMPILED"])


def timed(cmd: list[str], out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `cmd` with stdout to `out`; it must exit 0. It runs in `out`'s
    folder: `python -m` puts its working directory first on sys.path, so from the source tree
    both sides would import the tree's gpuplace/ ahead of PYTHONPATH."""
    with open(out, "wb") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.PIPE, env=env, cwd=out.parent)
        err = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {status}: {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    n = size(FULL, 300)
    runs = 1 if smoke() else int(option("--runs", "5"))
    revision, command = option("--against", "HEAD"), option("--command", "run")
    build = "--build" in sys.argv[1:]
    print(f"{command} --json as whole processes on {n:,}-op specs, {revision} against the work "
          f"tree, best of {runs} (4xK520)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sides = {
            revision: {**os.environ, "PYTHONPATH": str(unpack(revision, folder / "base", build))},
            "tree": {**os.environ, "PYTHONPATH": str(copy_tree(folder / "tree"))},
        }
        for side, env in sides.items():
            slow = as_python(Path(env["PYTHONPATH"]))
            if slow:
                print(f"{side}: {len(slow)} compiled module(s) run as Python: {', '.join(slow)}")
        for shape in SHAPES:
            _, spec = write_shape(shape, n, folder)
            gpuplace = [sys.executable, "-m", "gpuplace", "--machine", "4xK520", command, str(spec), "--json"]  # fmt: skip
            best: dict[str, list[float]] = {}
            for _ in range(runs):
                floor = timed([sys.executable, "-c", JSON_LOAD, str(spec)], folder / "out", sides["tree"])  # fmt: skip
                spent = {"json.load": floor}
                for i, (side, env) in enumerate(sides.items()):
                    spent[side] = timed(gpuplace, folder / f"out{i}.json", env)
                for key, (wall, cpu) in spent.items():
                    old = best.get(key, [wall, cpu])
                    best[key] = [min(old[0], wall), min(old[1], cpu)]
            documents = [SECONDS.sub(b"", (folder / f"out{i}.json").read_bytes()) for i in (0, 1)]
            same = "equal" if documents[0] == documents[1] else "DIFFERENT"
            for i, what in enumerate(("wall", "CPU")):
                base, tree, floor = best[revision][i], best["tree"][i], best["json.load"][i]
                print(f"{shape} {what}: {revision} {base:.2f} s (ratio {base / floor:.2f} to "
                      f"json.load {floor:.2f} s), tree {tree:.2f} s (ratio {tree / floor:.2f}); "
                      f"tree / {revision}: ratio {tree / base:.2f}")  # fmt: skip
            print(f"{shape}: the two documents are {same}")


if __name__ == "__main__":
    main()
