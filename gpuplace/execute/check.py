"""`gpuplace devices --check`: a small matmul on every visible device against a float64 reference."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..devices.model import View, VisibleGpu
from ..errors import GpuplaceError
from .backends import Backend, CupyLoader, backend_for

SIZE = 256
RTOL = 1e-4  # float32 accumulation over 256 terms stays well inside this


@dataclass(frozen=True)
class CheckResult:
    device: str
    product: str
    simulated: bool
    passed: bool
    max_rel_error: float | None
    seconds: float | None
    detail: str = ""


def _operands() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((SIZE, SIZE)).astype(np.float32)
    b = rng.standard_normal((SIZE, SIZE)).astype(np.float32)
    reference = a.astype(np.float64) @ b.astype(np.float64)
    return a, b, reference


def _run(backend: Backend, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    with backend.device():
        da, db = backend.put(a), backend.put(b)
        backend.xp.matmul(da, db)  # warm-up: kernels, handles, pools
        backend.synchronize()
        start = time.perf_counter()
        out = backend.xp.matmul(da, db)
        backend.synchronize()
        seconds = time.perf_counter() - start
        return backend.get(out), seconds


def check_device(view: View, gpu: VisibleGpu | None, cupy_loader: CupyLoader | None) -> CheckResult:
    name = gpu.name if gpu else "/device:CPU:0"
    product = gpu.product if gpu else view.machine.host.cpu_model
    simulated = gpu.gpu.simulated if gpu else view.machine.host.simulated
    if gpu is not None and not gpu.gpu.available:
        return CheckResult(
            name, product, simulated, False, None, None, f"unavailable: {gpu.gpu.error}"
        )
    a, b, reference = _operands()
    try:
        result, seconds = _run(backend_for(view.machine, gpu, cupy_loader), a, b)
    except GpuplaceError:
        raise
    except Exception as exc:  # a CUDA error on one device fails that device, not the command
        return CheckResult(
            name, product, simulated, False, None, None, f"{type(exc).__name__}: {exc}"
        )
    error = float(np.max(np.abs(result - reference)) / np.max(np.abs(reference)))
    passed = bool(np.isfinite(error) and error <= RTOL)
    detail = "" if passed else f"max relative error {error:.2e} > {RTOL:.0e}"
    return CheckResult(name, product, simulated, passed, error, seconds, detail)


def check_all(view: View, cupy_loader: CupyLoader | None = None) -> list[CheckResult]:
    """Check CPU:0 and every visible GPU, in CUDA order."""
    return [check_device(view, g, cupy_loader) for g in [None, *view.gpus]]
