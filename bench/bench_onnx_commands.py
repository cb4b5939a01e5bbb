"""Running an imported ONNX model as whole commands: `gpuplace run MODEL --dim ... --feed
NAME=FILE.npy --json > out` against a `python -c` that runs the same model with onnxruntime on
the same .npy inputs and writes its outputs as JSON (`json.dumps` of the lists; gpuplace's
`--json` document holds the values too) (issue 14; bench_onnx_exec.py times the runs
in-process, this times what a user types: start-up, imports, import of the model, placement,
the run and the output). One thread each side (OPENBLAS_NUM_THREADS=1 and ORT's threads 1),
best wall time of N runs taken in turn, stdout to a file; ratio = gpuplace / onnxruntime.

Run: .venv/bin/python bench/bench_onnx_commands.py [--smoke]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_commands import best  # bench/ is on sys.path when this script runs
from bench_onnx_exec import MODELS, ROOT, inputs
from procs import GPUPLACE, smoke

ORT = """\
import json, sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = so.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
feeds = {a.split("=", 1)[0]: np.load(a.split("=", 1)[1]) for a in sys.argv[2:]}
names = [o.name for o in s.get_outputs()]
print(json.dumps(dict(zip(names, (out.tolist() for out in s.run(None, feeds))))))
"""


def main() -> None:
    runs = 1 if smoke() else 5
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # the children inherit it: one thread each side
    print(f"whole commands, best of {runs}, stdout to a file, one thread each side")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, dims in MODELS:
            model = ROOT / "gpuplace" / "examples" / "onnx" / f"{name}.onnx"
            fed = []
            for key, value in inputs(name, dims, rng).items():
                np.save(folder / f"{key}.npy", value)
                fed.append(f"{key}={folder / key}.npy")
            bound = [a for k, v in dims.items() for a in ("--dim", f"{k}={v}")]
            feeds = [a for f in fed for a in ("--feed", f)]
            ours = [*GPUPLACE, "--machine", "1xK520", "run", str(model), *bound, *feeds, "--json"]
            theirs = [sys.executable, "-c", ORT, str(model), *fed]
            t_ort, t_ours = best([theirs, ours], folder / "out", runs)
            shown = ", ".join(f"{k}={v}" for k, v in dims.items())
            print(
                f"{name} ({shown}): onnxruntime {t_ort:.3f} s, gpuplace run --json {t_ours:.3f} s:"
                f" ratio {t_ours / t_ort:.2f}"
            )


if __name__ == "__main__":
    main()
