"""The ONNX ops' host kernels here against a git revision's, called in turn in one process.

Process against process, kernel timings on a shared machine move by 20-30% with the load; in
one process, alternating call by call, a few percent. This loads the revision's
`gpuplace/graph/kernels.py` and `graph/onnx_ops/*.py` (from `git archive REV gpuplace`) beside
this tree's, each old module wired to the old modules it imports from (its `common` and
`kernels`), and times each op's compute function both ways on the same inputs (float32,
gpt2_tiny's, the example CNN's and a ResNet stage's shapes), after checking that both give the
same outputs within float32 rounding. One thread (OPENBLAS_NUM_THREADS=1 unless set), CPU
time, best of N each; ratio = here / revision.

With --models, the example ONNX models (bench_onnx_exec.py's, same inputs) run whole through
the executor instead, run by run in turn with every ONNX op's compute function taken from the
revision or from this tree (the rest, executor included, is this tree's): the whole-model
effect of the kernels alone, free of the process-to-process noise.

Run: .venv/bin/python bench/kernels_against.py [--against main] [--ops Conv,Softmax] [--models]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from gpuplace.graph import get_op

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("common", "kernels", "erf", "conv", "dense", "norm", "logic")  # imports first


def cases() -> list[tuple[str, list[np.ndarray], dict[str, Any], int]]:
    """(op, inputs, attrs, repeats)."""
    rng = np.random.default_rng(0)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    pad = {"pads": [1, 1, 1, 1]}
    return [
        ("Relu", [f(4096, 128)], {}, 200),
        ("Relu", [f(8, 64, 56, 56)], {}, 60),
        ("Softmax", [f(8, 4, 128, 128)], {}, 100),
        ("Softmax", [f(16, 12, 128, 128)], {}, 20),
        ("MaxPool", [f(64, 16, 32, 32)], {"kernel_shape": [2, 2], "strides": [2, 2]}, 60),
        ("MaxPool", [f(8, 64, 56, 56)], {"kernel_shape": [3, 3], "strides": [2, 2], **pad}, 30),
        ("Conv", [f(64, 3, 32, 32), f(16, 3, 3, 3), f(16)], pad, 60),
        ("Conv", [f(64, 16, 16, 16), f(32, 16, 3, 3), f(32)], pad, 40),
        ("Conv", [f(8, 64, 56, 56), f(64, 64, 3, 3), f(64)], pad, 10),
        ("Conv", [f(8, 64, 56, 56), f(64, 1, 3, 3), f(64)], {**pad, "group": 64}, 10),
        ("MatMul", [f(8, 128, 64), f(64, 192)], {}, 100),
        ("MatMul", [f(8, 128, 256), f(256, 64)], {}, 100),
        ("MatMul", [f(8, 4, 128, 16), f(8, 4, 16, 128)], {}, 100),
        ("Gelu", [f(8, 128, 256)], {}, 100),
        ("Gelu", [f(16, 128, 3072)], {}, 10),
        ("LayerNormalization", [f(8, 128, 64), f(64), f(64)], {}, 200),
        ("LayerNormalization", [f(16, 128, 768), f(768), f(768)], {}, 20),
    ]  # fmt: skip


def revision_modules(rev: str, folder: Path) -> dict[str, ModuleType]:
    """The revision's kernel modules by short name, each importing the others of the revision
    where this tree's would be (names it took from this tree's `common` or `kernels` are
    pointed at the revision's), in the order of MODULES."""
    packed = subprocess.run(
        ["git", "archive", rev, "gpuplace/graph"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        tar.extractall(folder, filter="data")
    ours = {
        name: importlib.import_module(
            f"gpuplace.graph.{'' if name == 'kernels' else 'onnx_ops.'}{name}"
        )
        for name in MODULES
    }
    loaded: dict[str, ModuleType] = {}
    for name in MODULES:
        sub = "" if name == "kernels" else "onnx_ops/"
        path = folder / "gpuplace" / "graph" / f"{sub}{name}.py"
        package = "gpuplace.graph" if name == "kernels" else "gpuplace.graph.onnx_ops"
        spec = importlib.util.spec_from_file_location(f"{package}._{rev}_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        for short, mine in ours.items():  # rewire what it imported from this tree's modules
            if short not in loaded:
                continue
            names = {id(value): attr for attr, value in vars(mine).items()}
            for attr, value in list(vars(module).items()):
                if value is None or isinstance(value, (bool, str)) or _small_int(value):
                    continue  # shared by everything: says nothing of where it came from
                found = names.get(id(value))  # by identity: `import elementwise as erf_...`
                if found is not None and hasattr(loaded[short], found):
                    setattr(module, attr, getattr(loaded[short], found))
        loaded[name] = module
    return loaded


def _small_int(value: object) -> bool:
    return type(value) is int and -5 <= value <= 256  # CPython's cached ints


def best(repeats: int, *fns: Callable[[], object]) -> list[float]:
    least = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn()
            least[i] = min(least[i], time.process_time() - start)
    return least


def revision_function(old: dict[str, ModuleType], fn: Any) -> Any:
    """The revision's function of the same module and name as `fn` (None: it has none)."""
    short = getattr(fn, "__module__", "").rsplit(".", 1)[-1]
    module = old.get(short)
    return None if module is None else getattr(module, getattr(fn, "__name__", ""), None)


def models(rev: str, old: dict[str, ModuleType]) -> int:
    """The example models whole, the ONNX ops' compute functions swapped run by run."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_onnx_exec import MODELS, inputs

    import gpuplace
    from gpuplace.graph.ops import REGISTRY
    from gpuplace.pipeline import execute_prepared, prepare

    swaps = []  # (OpDef, this tree's compute, the revision's)
    for opdef in REGISTRY.values():
        before = revision_function(old, opdef.compute_fn) if opdef.onnx else None
        if before is not None and before is not opdef.compute_fn:
            swaps.append((opdef, opdef.compute_fn, before))

    def use(which: int) -> None:
        for swap in swaps:
            object.__setattr__(swap[0], "compute_fn", swap[1 + which])  # a frozen dataclass

    view = gpuplace.view(gpuplace.discover("1xK520"), {"CUDA_VISIBLE_DEVICES": ""})
    rng = np.random.default_rng(0)
    print(f"{rev}'s ONNX kernels against this tree's, whole models, run by run in one process")
    try:
        for name, dims in MODELS:
            path = ROOT / "gpuplace" / "examples" / "onnx" / f"{name}.onnx"
            options = gpuplace.Options(dims=dims, feeds=inputs(name, dims, rng))
            prepared = prepare(str(path), view, options, {})
            runs = []
            for which in (1, 0):
                use(which)
                out = execute_prepared(prepared, view).result.values
                runs.append(lambda w=which, p=prepared: (use(w), execute_prepared(p, view)))
            for key, value in out.items():
                use(1)
                theirs = execute_prepared(prepared, view).result.values[key]
                np.testing.assert_allclose(value, theirs, rtol=1e-4, atol=1e-4)
            t_there, t_here = best(60, *runs)
            shown = ", ".join(f"{k}={v}" for k, v in dims.items())
            print(
                f"{name} ({shown}): {rev} {t_there * 1e3:.3f} ms, here {t_here * 1e3:.3f} ms: "
                f"ratio {t_here / t_there:.2f}"
            )
    finally:
        use(0)
    return 0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default="main", help="a git revision (default: main)")
    parser.add_argument("--ops", default="", help="only these ops, comma-separated")
    parser.add_argument("--models", action="store_true", help="whole example models instead")
    args = parser.parse_args(argv)
    only = set(filter(None, args.ops.split(",")))
    with tempfile.TemporaryDirectory() as folder:
        old = revision_modules(args.against, Path(folder))
        if args.models:
            return models(args.against, old)
        print(f"{args.against} against this tree; one thread, CPU time, in turn in one process")
        for op_type, inputs, attrs, repeats in cases():
            if only and op_type not in only:
                continue
            op = get_op(op_type)
            checked = op.normalize("bench", attrs)
            fn = op.compute_fn
            before = revision_function(old, fn)

            def here(fn: Any = fn, checked: Any = checked, inputs: Any = inputs) -> Any:
                return fn(np, inputs, checked)

            def there(f: Any = before, checked: Any = checked, inputs: Any = inputs) -> Any:
                return f(np, inputs, checked)

            np.testing.assert_allclose(here()[0], there()[0], rtol=2e-5, atol=2e-5)
            t_here, t_there = best(repeats, there, here)[::-1]
            shape = "x".join(map(str, inputs[0].shape))
            print(
                f"{op_type:19} {shape:>14} {args.against} {t_there * 1e3:8.3f} ms, "
                f"here {t_here * 1e3:8.3f} ms: ratio {t_here / t_there:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
