"""gpuplace's compiled core: the modules of its per-op passes, which the build compiles with
Cython from this very Python source (setup.py; Cython's pure Python mode: no second copy of the
code). Where the build finds no C compiler it says so and installs them as Python, which runs
the same code, slower.

`GPUPLACE_PURE_PYTHON=1` in the environment runs the Python source even where the compiled
modules are built (`pure_python`: to compare the two, or to debug in Python); `gpuplace
--version` says which runs. This module imports only the standard library: setup.py reads it
without importing gpuplace.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# The per-op passes of load, placement, estimate and run, by dotted name. Not placement.flat:
# compiled, its flattened graph held 148 more bytes per op while balanced placed a 100,000-op
# random DAG (tracemalloc: 1,578 B/op against 1,430, over issue 17's 1,536), for no time gained.
COMPILED = (
    "gpuplace.parse_json",
    "gpuplace.graph.expansion",
    "gpuplace.graph.resolve",
    "gpuplace.graph.onnx_import",
    "gpuplace.graph.onnx_graph",
    "gpuplace.graph.onnx_tensors",
    "gpuplace.graph.onnx_names",
    "gpuplace.graph.fold",
    "gpuplace.placement.arrays",
    "gpuplace.placement.cost",
    "gpuplace.placement.colocation",
    "gpuplace.placement.candidates",
    "gpuplace.placement.tf",
    "gpuplace.placement.loads",
    "gpuplace.placement.baselines",
    "gpuplace.placement.links",
    "gpuplace.placement.timeline",
    "gpuplace.placement.occupancy",
    "gpuplace.placement.balanced",
    "gpuplace.placement.estimate",
    "gpuplace.memory.fit",
    "gpuplace.memory.ledger",
    "gpuplace.execute.schedule",
    "gpuplace.execute.executor",
    "gpuplace.report.plan_records",
)
PURE_ENV = "GPUPLACE_PURE_PYTHON"


def source(name: str) -> str:
    """The source file of compiled module `name`, relative to the repository root."""
    return name.replace(".", "/") + ".py"


def pure_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether PURE_ENV asks for the Python source: any value but empty or `0`."""
    return environ.get(PURE_ENV, "0") not in ("", "0")


def outdated(root: Path, names: Sequence[str] = COMPILED) -> list[str]:
    """The compiled modules (`names`) of the tree at `root` that would run as Python or as an
    old build: none built, or built before their source (or its .pxd) last changed."""
    out = []
    for name in names:
        code = root / source(name)
        built = [p.stat().st_mtime for p in code.parent.glob(code.stem + ".*.so")]
        deps = [p.stat().st_mtime for p in (code, code.with_suffix(".pxd")) if p.exists()]
        if not built or max(built) < max(deps):
            out.append(name)
    return out


def running() -> tuple[int, int]:
    """(how many of the COMPILED modules load compiled, how many there are), without
    importing them: what `--version` reports."""
    from importlib.util import find_spec

    compiled = 0
    for name in COMPILED:
        spec = find_spec(name)
        origin = "" if spec is None else spec.origin or ""
        compiled += not origin.endswith(".py")
    return compiled, len(COMPILED)


class _SourceOnly:
    """A meta path finder that loads the COMPILED modules from their Python source."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> object:
        if name not in COMPILED or not isinstance(path, list):
            return None
        from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader

        for folder in path:
            spec = FileFinder(folder, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(name)
            if spec is not None:
                return spec
        return None


def pure_python() -> None:
    """Load the COMPILED modules from their Python source from now on (before their import)."""
    if not any(isinstance(finder, _SourceOnly) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceOnly())  # type: ignore[arg-type]
