"""`gpuplace devices --check`: a small matmul on every visible device against a float64 reference,
then the device's rates: float32 matmul throughput and memory bandwidth (for the cost model)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np

from ..devices.model import View, VisibleGpu
from ..devices.rates import MeasuredRate
from ..errors import GpuplaceError
from .backends import Backend, CupyLoader, backend_for
from .cupy_backend import cuda_hint, load_cupy

SIZE = 256
RTOL = 1e-4  # float32 accumulation over 256 terms stays well inside this
RATE_SIZE = 2048  # the throughput matmul: 2 * 2048^3 FLOPs, 17 GFLOP
STREAM_BYTES = 64 * 2**20  # each operand of the bandwidth test, `a + b`
REPEATS = 3  # timed runs after one warm-up; the best counts


@dataclass(frozen=True)
class CheckResult:
    device: str
    product: str
    simulated: bool
    passed: bool
    max_rel_error: float | None
    seconds: float | None
    detail: str = ""
    tflops: float | None = None  # measured float32 matmul throughput
    bandwidth_gbs: float | None = None  # measured memory bandwidth, bytes read + written
    uuid: str | None = None  # the GPU's (None for the CPU), to key saved rates by
    fix: str = ""  # what to do about a CUDA failure, when gpuplace can tell


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


def _best(backend: Backend, work: Callable[[], object]) -> float:
    """Seconds of the fastest of REPEATS synchronized runs of `work`, after one warm-up."""
    work()
    backend.synchronize()
    best = math.inf
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        backend.synchronize()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def _matmul_seconds(backend: Backend) -> float:
    a = backend.put(np.ones((RATE_SIZE, RATE_SIZE), dtype=np.float32))
    return _best(backend, lambda: backend.xp.matmul(a, a))


def _add_seconds(backend: Backend) -> float:
    x = backend.put(np.ones(STREAM_BYTES // 4, dtype=np.float32))
    y = backend.put(np.ones(STREAM_BYTES // 4, dtype=np.float32))
    return _best(backend, lambda: backend.xp.add(x, y))


def measure_rates(backend: Backend) -> tuple[float, float]:
    """(TFLOP/s of a RATE_SIZE float32 matmul, GB/s of `a + b` on STREAM_BYTES operands: two
    read, one written); each array is freed before the next test allocates."""
    with backend.device():
        matmul = _matmul_seconds(backend)
        add = _add_seconds(backend)
    return 2.0 * RATE_SIZE**3 / matmul / 1e12, 3 * STREAM_BYTES / add / 1e9


def check_device(view: View, gpu: VisibleGpu | None, cupy_loader: CupyLoader | None) -> CheckResult:
    """The correctness check on one device (CPU:0 when `gpu` is None), then its rates if it passed."""
    result = _check(view, gpu, cupy_loader)
    return replace(result, uuid=gpu.uuid) if gpu else result


def _check(view: View, gpu: VisibleGpu | None, cupy_loader: CupyLoader | None) -> CheckResult:
    name = gpu.name if gpu else "/device:CPU:0"
    product = gpu.product if gpu else view.machine.host.cpu_model
    simulated = gpu.gpu.simulated if gpu else view.machine.host.simulated
    if gpu is not None and not gpu.gpu.available:
        return CheckResult(
            name, product, simulated, False, None, None, f"unavailable: {gpu.gpu.error}"
        )
    a, b, reference = _operands()
    try:
        backend = backend_for(view.machine, gpu, cupy_loader)
        result, seconds = _run(backend, a, b)
    except GpuplaceError:
        raise
    except Exception as exc:  # a CUDA error on one device fails that device, not the command
        detail, fix = f"{type(exc).__name__}: {exc}", cuda_hint(exc, _cupy(gpu, cupy_loader))
        return CheckResult(name, product, simulated, False, None, None, detail, fix=fix)
    error = float(np.max(np.abs(result - reference)) / np.max(np.abs(reference)))
    passed = bool(np.isfinite(error) and error <= RTOL)
    if not passed:
        detail = f"max relative error {error:.2e} > {RTOL:.0e}"
        return CheckResult(name, product, simulated, False, error, seconds, detail)
    try:
        tflops, bandwidth = measure_rates(backend)
    except Exception as exc:  # out of memory for the larger arrays: the check itself passed
        detail = f"rates not measured: {type(exc).__name__}: {exc}"
        return CheckResult(name, product, simulated, True, error, seconds, detail)
    return CheckResult(name, product, simulated, True, error, seconds, "", tflops, bandwidth)


def _cupy(gpu: VisibleGpu | None, cupy_loader: CupyLoader | None) -> ModuleType | None:
    """The cupy module a real GPU's check used (for the versions in a driver hint), if any."""
    if gpu is None or gpu.gpu.simulated:
        return None
    try:
        return (cupy_loader or load_cupy)()
    except Exception:  # the hint only gets sharper with it
        return None


def check_all(view: View, cupy_loader: CupyLoader | None = None) -> list[CheckResult]:
    """Check CPU:0 and every visible GPU, in CUDA order."""
    return [check_device(view, g, cupy_loader) for g in [None, *view.gpus]]


def measured_rates(results: list[CheckResult], today: str) -> dict[str, MeasuredRate]:
    """The rates measured on real GPUs, by UUID, to save; simulated GPUs and the CPU have none."""
    return {
        r.uuid: MeasuredRate(r.product, r.tflops, r.bandwidth_gbs, today)
        for r in results
        if r.uuid and not r.simulated and r.tflops is not None and r.bandwidth_gbs is not None
    }
