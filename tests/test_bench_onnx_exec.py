"""bench/bench_onnx_exec.py: its report's lines, and how it times the runs' matmul calls.

Times, ratios and the BLAS kernel's name depend on the machine, so they are masked; what is
asserted is the report's shape (every model runs, each with its in-matmul line), and that the
matmul timing passes every call through and puts numpy back.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("onnxruntime")


def test_the_smoke_runs_every_model_and_prints_its_time_in_matmul() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_onnx_exec.py"), "--smoke"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = re.sub(r"kernels: [^;]+;", "kernels: NAME;", done.stdout)  # and the environment's
    text = re.sub(r"\d(?:[\d,.]*\d)?", "N", text)
    text = re.sub(r"\((ok|over the goal N)\)", "(VERDICT)", text)
    assert text == (
        "numpy's OpenBLAS kernels: NAME; CPU time, one thread each side\n"
        "mlp (batch=N): in matmul N ms of the run: gpuplace / matmul ratio N, matmul / onnxruntime ratio N\n"
        "mlp (batch=N): numpy by hand N ms: gpuplace / numpy ratio N, numpy / onnxruntime ratio N\n"
        "mlp (batch=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
        "cnn (batch=N): in matmul N ms of the run: gpuplace / matmul ratio N, matmul / onnxruntime ratio N\n"
        "cnn (batch=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
        "gptN_tiny (batch=N, seq=N): in matmul N ms of the run: gpuplace / matmul ratio N, "
        "matmul / onnxruntime ratio N\n"
        "gptN_tiny (batch=N, seq=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
    )  # fmt: skip


def test_in_matmul_times_the_runs_own_matmul_calls_and_puts_numpy_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the module sets BLAS thread counts
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_onnx_exec
    finally:
        sys.path.remove(str(ROOT / "bench"))

    real = np.matmul
    x = np.ones((3, 4), dtype=np.float32)
    got: list[np.ndarray] = []

    def run() -> None:
        got.append(np.matmul(x, x.T))  # the timed stand-in passes the call through

    spent = bench_onnx_exec.in_matmul(run, 3)
    assert np.matmul is real
    assert len(got) == 3 and all((g == 4.0).all() and g.shape == (3, 3) for g in got)
    assert spent >= 0.0
    assert bench_onnx_exec.in_matmul(lambda: np.add(x, x), 2) == 0.0  # no matmul: none
    row_sums = bench_onnx_exec.in_matmul(lambda: got.append(np.matmul(x, np.ones(4))), 2)
    assert row_sums == 0.0 and (got[-1] == 4.0).all()  # a product with a vector is not counted
