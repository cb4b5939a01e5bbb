"""bench/bench_onnx_exec.py: its report's lines, and its "matmuls alone" replay.

Times, ratios and the BLAS kernel's name depend on the machine, so they are masked; what is
asserted is the report's shape (every model runs, each with its matmuls-alone line), and that
the replay makes the very matmul calls the recorded run made (shapes, dtypes, layouts).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("onnxruntime")


def test_the_smoke_runs_every_model_and_prints_the_matmuls_floor() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_onnx_exec.py"), "--smoke"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = re.sub(r"kernels: \S+;", "kernels: NAME;", done.stdout)
    text = re.sub(r"\d(?:[\d,.]*\d)?", "N", text)
    text = re.sub(r"\((ok|over the goal N)\)", "(VERDICT)", text)
    assert text == (
        "numpy's OpenBLAS kernels: NAME; CPU time, one thread each side\n"
        "mlp (batch=N): matmuls alone N ms: gpuplace / matmuls ratio N, matmuls / onnxruntime ratio N\n"
        "mlp (batch=N): numpy by hand N ms: gpuplace / numpy ratio N, numpy / onnxruntime ratio N\n"
        "mlp (batch=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
        "cnn (batch=N): matmuls alone N ms: gpuplace / matmuls ratio N, matmuls / onnxruntime ratio N\n"
        "cnn (batch=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
        "gptN_tiny (batch=N, seq=N): matmuls alone N ms: gpuplace / matmuls ratio N, "
        "matmuls / onnxruntime ratio N\n"
        "gptN_tiny (batch=N, seq=N): gpuplace N ms, onnxruntime N ms (best of N): ratio N (VERDICT)\n"
    )  # fmt: skip


def test_the_replay_makes_the_recorded_calls_on_arrays_of_the_same_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_onnx_exec

    seen: list[tuple[object, ...]] = []
    real = np.matmul

    def counting(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        seen.append(
            (a.shape, a.dtype, a.flags.f_contiguous, b.shape, b.dtype, b.flags.f_contiguous)
        )
        return real(a, b)

    monkeypatch.setattr(np, "matmul", counting)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    stack = rng.standard_normal((2, 3, 6))

    def run() -> None:
        h = np.matmul(x, w.T)  # a transposed operand: an F-ordered view
        np.matmul(np.matmul(h, w), stack)

    replay = bench_onnx_exec.matmuls_of(run)
    recorded = list(seen)
    assert len(recorded) == 3 and recorded[0][5]  # w.T is F-contiguous
    seen.clear()
    replay()
    assert seen == recorded
    assert np.matmul is counting  # put back after recording
