"""`gpuplace devices --check`: a small matmul on every visible device against a float64 reference,
then the device's rates: float32 matmul throughput and memory bandwidth (for the cost model).

GPUPLACE_CHECK_SIZES (`matmul=256,stream=1MiB`) changes the sizes the rates time; the test suite
uses it to time small arrays. The defaults are RATE_SIZE and STREAM_BYTES."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np

from ..devices.model import View, VisibleGpu
from ..devices.rates import MeasuredRate
from ..echo import TEXT_CHARS, show
from ..errors import BadInput, GpuplaceError
from ..units import parse_count, parse_size
from .backends import Backend, CupyLoader, backend_for
from .cupy_backend import cuda_hint, load_cupy

SIZE = 256
RTOL = 1e-4  # float32 accumulation over 256 terms stays well inside this
RATE_SIZE = 2048  # the throughput matmul: 2 * 2048^3 FLOPs, 17 GFLOP
STREAM_BYTES = 64 * 2**20  # each operand of the bandwidth test, `a + b`
REPEATS = 3  # timed runs after one warm-up; the best counts
SIZES_ENV = "GPUPLACE_CHECK_SIZES"
# The largest sizes it accepts: three operands of each stay within 3 GiB (16384^2 float32 is 1 GiB)
MAX_MATMUL = 16384
MAX_STREAM = 2**30


@dataclass(frozen=True)
class RateSizes:
    """What the rates time: an n x n float32 matmul, and `a + b` on operands of `stream` bytes."""

    matmul: int = RATE_SIZE
    stream: int = STREAM_BYTES


DEFAULT_SIZES = RateSizes()
# Simulated devices compute on this host with numpy: their rates are the host's, measured once
# and at smaller sizes, so a simulated --check takes a second or two, not one test per device.
SIMULATED_SIZES = RateSizes(1024, 16 * 2**20)


def rate_sizes(value: str | None) -> RateSizes:
    """The sizes GPUPLACE_CHECK_SIZES's value asks for: `matmul=N,stream=SIZE`, either part may be
    left out; None or empty: the defaults. Raises BadInput naming the variable."""
    sizes = DEFAULT_SIZES
    expected = (
        f"expected matmul=N,stream=SIZE with N up to {MAX_MATMUL} and SIZE from 4B to 1GiB "
        "(e.g. matmul=256,stream=1MiB), or unset it"
    )
    for part in filter(None, (p.strip() for p in (value or "").split(","))):
        key, _, text = (s.strip() for s in part.partition("="))
        if key == "matmul" and 0 < (n := parse_count(text) or 0) <= MAX_MATMUL:
            sizes = replace(sizes, matmul=n)
        elif key == "stream" and 4 <= parse_size(text, f"{SIZES_ENV}: stream") <= MAX_STREAM:
            sizes = replace(sizes, stream=parse_size(text, f"{SIZES_ENV}: stream"))
        else:
            raise BadInput(f"{SIZES_ENV}: cannot read {show(part, TEXT_CHARS)}; {expected}")
    return sizes


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


def _matmul_seconds(backend: Backend, n: int) -> float:
    a = backend.put(np.ones((n, n), dtype=np.float32))
    return _best(backend, lambda: backend.xp.matmul(a, a))


def _add_seconds(backend: Backend, nbytes: int) -> float:
    x = backend.put(np.ones(nbytes // 4, dtype=np.float32))
    y = backend.put(np.ones(nbytes // 4, dtype=np.float32))
    return _best(backend, lambda: backend.xp.add(x, y))


def measure_rates(backend: Backend, sizes: RateSizes = DEFAULT_SIZES) -> tuple[float, float]:
    """(TFLOP/s of a sizes.matmul float32 matmul, GB/s of `a + b` on operands of sizes.stream
    bytes: two read, one written); each array is freed before the next test allocates."""
    with backend.device():
        matmul = _matmul_seconds(backend, sizes.matmul)
        add = _add_seconds(backend, sizes.stream)
    stream = sizes.stream // 4 * 4
    return 2.0 * sizes.matmul**3 / matmul / 1e12, 3 * stream / add / 1e9


def check_device(
    view: View,
    gpu: VisibleGpu | None,
    cupy_loader: CupyLoader | None,
    sizes: RateSizes = DEFAULT_SIZES,
    rates: tuple[float, float] | None = None,
) -> CheckResult:
    """The correctness check on one device (CPU:0 when `gpu` is None), then its rates if it
    passed (`rates`, when given, instead of measuring them: the host's, for a simulated one)."""
    result = _check(view, gpu, cupy_loader, sizes, rates)
    return replace(result, uuid=gpu.uuid) if gpu else result


def _check(
    view: View,
    gpu: VisibleGpu | None,
    cupy_loader: CupyLoader | None,
    sizes: RateSizes,
    rates: tuple[float, float] | None,
) -> CheckResult:
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
        tflops, bandwidth = rates or measure_rates(backend, sizes)
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


def check_all(
    view: View,
    cupy_loader: CupyLoader | None = None,
    sizes: RateSizes = DEFAULT_SIZES,
    on_device: Callable[[str], None] | None = None,
) -> list[CheckResult]:
    """Check CPU:0 and every visible GPU, in CUDA order (`on_device(name)` before each: the
    CLI's progress). The devices that compute on this host with numpy (a simulated host's CPU
    and simulated GPUs) share one measurement of the host's rates."""
    results: list[CheckResult] = []
    host: tuple[float, float] | None = None
    for gpu in [None, *view.gpus]:
        if on_device is not None:
            on_device(gpu.name if gpu else "/device:CPU:0")
        simulated = gpu.gpu.simulated if gpu else view.machine.host.simulated
        result = check_device(view, gpu, cupy_loader, sizes, host if simulated else None)
        if simulated and host is None and result.tflops and result.bandwidth_gbs:
            host = (result.tflops, result.bandwidth_gbs)
        results.append(result)
    return results


def measured_rates(results: list[CheckResult], today: str) -> dict[str, MeasuredRate]:
    """The rates measured on real GPUs, by UUID, to save; simulated GPUs and the CPU have none."""
    return {
        r.uuid: MeasuredRate(r.product, r.tflops, r.bandwidth_gbs, today)
        for r in results
        if r.uuid and not r.simulated and r.tflops is not None and r.bandwidth_gbs is not None
    }
