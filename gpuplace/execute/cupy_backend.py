"""The one module that uses cupy, imported lazily: real GPUs, each under its cupy.cuda.Device.

CUDA's own failures (an old driver, no device in a container, a busy exclusive-mode GPU, a missing
CUDA library) come out of cupy as its exception classes; `cuda_failure` turns them into one
RuntimeFailure that names the device and says what to do (`cuda_hint`), as nvidia-smi users expect.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ..devices.cuda_match import cuda_text, cupy_for, install_cupy
from ..errors import GpuplaceError, MissingDependency, RuntimeFailure


def load_cupy() -> ModuleType:
    """Import cupy, turning its absence into an install hint naming the extras, and a broken
    install (cupy present, its compiled core not loading) into cupy's own first line."""
    try:
        import cupy
    except ImportError as exc:
        if exc.name == "cupy":
            raise MissingDependency(
                f"running on a real GPU needs cupy: {install_cupy()}; "
                "or plan on a simulated machine with --machine"
            ) from exc
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MissingDependency(
            f"cupy is installed but does not import ({first}). Fix: keep one cupy package "
            f"(pip list | grep cupy) and reinstall it: {install_cupy()}"
        ) from exc
    module: ModuleType = cupy
    return module


_FAULT = (
    "the GPU faulted and this process's CUDA context is lost: run again; if it repeats, check "
    "the card (nvidia-smi -q -d ECC, and Xid errors in dmesg)"
)
_NO_DEVICE = (
    "CUDA sees fewer GPUs in this process than NVML lists: check CUDA_VISIBLE_DEVICES "
    "(gpuplace devices shows what it hides), the container's GPU access (docker run --gpus all) "
    "and read-write access to /dev/nvidia*"
)
_BUSY = (
    "the GPU is in Exclusive_Process or Prohibited compute mode and another process holds it "
    "(nvidia-smi's 'Compute M.' column): wait for that process, choose another GPU with "
    "CUDA_VISIBLE_DEVICES, or as root set the default mode: nvidia-smi -i N -c DEFAULT"
)
_NO_KERNEL = (
    "this cupy has no kernels for this GPU's architecture: install a cupy build that supports "
    "it (https://docs.cupy.dev/en/stable/install.html)"
)
_NOT_STARTED = (
    "CUDA could not start: check that the NVIDIA driver works (nvidia-smi runs) and that the "
    "process did not fork after using CUDA"
)
_MISMATCH = (
    "the NVIDIA kernel module and its user-space library differ in version (a driver update "
    "without a reboot): reboot, or reload the nvidia kernel modules"
)
_LIBRARY = (
    "cupy cannot find a CUDA library it needs: install them from PyPI with cupy's [ctk] extra "
    "(gpuplace[cuda12] and gpuplace[cuda13] include it: {install}), or install the CUDA Toolkit"
)
_WORKSPACE = (
    "cuBLAS could not allocate its handle or workspace, which live outside gpuplace's memory "
    "pool: leave part of the card free (a smaller memory fraction or limit, or allow growth), "
    "as TensorFlow's 'failed to create cublas handle' advice goes"
)
_CONTEXT = (
    "CUDA could not allocate memory outside the pool (its context, a library's workspace): "
    "other processes may hold the card's memory (nvidia-smi lists them); leave part of the card "
    "free (a smaller memory fraction or limit, or allow growth)"
)
_FAULTS = (
    "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
    "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED",
    "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
    "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
)  # fmt: skip
# cudaGetErrorName (runtime) and cuGetErrorName (driver) names -> what to do
HINTS = {
    **dict.fromkeys(("cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE"), _NO_DEVICE),
    **dict.fromkeys(("cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"), _NO_DEVICE),
    **dict.fromkeys(("cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE"), _BUSY),
    **dict.fromkeys(
        ("cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU"), _NO_KERNEL
    ),
    **dict.fromkeys(("cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED"), _NOT_STARTED),
    **dict.fromkeys(
        ("cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"), _MISMATCH
    ),
    **dict.fromkeys(_FAULTS, _FAULT),
    **dict.fromkeys(("CUBLAS_STATUS_NOT_INITIALIZED", "CUBLAS_STATUS_ALLOC_FAILED"), _WORKSPACE),
    **dict.fromkeys(("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"), _CONTEXT),
}
_OLD_DRIVER = (
    "cudaErrorInsufficientDriver", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
)  # fmt: skip


def _old_driver(cupy: ModuleType | None) -> str:
    """The fix for a driver older than cupy's CUDA, with both versions when cupy can tell."""
    try:
        runtime = int(cupy.cuda.runtime.runtimeGetVersion()) if cupy else 0
        driver = int(cupy.cuda.runtime.driverGetVersion()) if cupy else 0
    except Exception:  # the versions only sharpen the hint
        runtime = driver = 0
    if runtime and driver:
        return (
            f"this cupy uses CUDA {cuda_text(runtime)} but the NVIDIA driver supports CUDA "
            f"{cuda_text(driver)} at most (nvidia-smi's 'CUDA Version'): update the driver, or "
            f"{cupy_for(driver // 1000)}"
        )
    return (
        "the NVIDIA driver is older than the CUDA this cupy was built for (nvidia-smi's "
        f"'CUDA Version' is the newest it supports): update the driver, or {install_cupy()} to match it"
    )


def cuda_hint(exc: BaseException, cupy: ModuleType | None = None) -> str:
    """What to do about an error cupy raised, or '' when gpuplace cannot tell."""
    text = str(exc)
    name = text.split(":", 1)[0].strip()
    if name in _OLD_DRIVER:
        return _old_driver(cupy)
    if name in HINTS:
        return HINTS[name]
    if 'Failure finding "lib' in text or type(exc).__name__ == "DynamicLibNotFoundError":
        return _LIBRARY.format(install=install_cupy())
    return ""


def cuda_failure(exc: BaseException, what: str, cupy: ModuleType | None = None) -> RuntimeFailure:
    """`what` failed because of `exc`: one message with the error's own words and the fix."""
    text = f"{what}: {type(exc).__name__}: {exc}"
    hint = cuda_hint(exc, cupy)
    return RuntimeFailure(f"{text.rstrip('.')}. Fix: {hint}." if hint else text)


P = ParamSpec("P")
R = TypeVar("R")


def _translated(
    method: Callable[Concatenate[CupyBackend, P], R],
) -> Callable[Concatenate[CupyBackend, P], R]:
    """A backend call whose CUDA failure becomes `cuda_failure` naming the device; cupy's
    out-of-memory error passes unchanged (callers turn it into gpuplace's OOM message)."""

    @functools.wraps(method)
    def call(self: CupyBackend, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except (GpuplaceError, self.out_of_memory):
            raise
        except Exception as exc:
            raise cuda_failure(exc, f"cannot use {self.label}", self.xp) from exc

    return call


class CupyBackend:
    """cupy on one real GPU; `cuda_index` is the CUDA ordinal after CUDA_VISIBLE_DEVICES."""

    simulated = False

    def __init__(self, label: str, cuda_index: int, cupy: ModuleType) -> None:
        self.label = label
        self.cuda_index = cuda_index
        self._cupy = cupy

    @property
    def xp(self) -> ModuleType:
        return self._cupy

    def device(self) -> AbstractContextManager[Any]:
        ctx: AbstractContextManager[Any] = self.xp.cuda.Device(self.cuda_index)
        return ctx

    @_translated
    def put(self, host: np.ndarray) -> Any:
        with self.device():
            return self.xp.asarray(host)

    @_translated
    def get(self, array: Any) -> np.ndarray:
        with self.device():
            out: np.ndarray = self.xp.asnumpy(array)
            return out

    @_translated
    def synchronize(self) -> None:
        with self.device():
            self.xp.cuda.Device(self.cuda_index).synchronize()

    @_translated
    def copy_from(self, array: Any) -> Any:
        """Copy an array from another GPU onto this one directly (cupy's cross-device copy)."""
        with self.device():
            return array.copy()

    @_translated
    def set_memory_limit(self, nbytes: int | None) -> None:
        """Cap this GPU's cupy memory pool (`set_limit`), like TF's memory_limit.

        None lifts the cap (so does 0: cupy reads a zero limit as none).
        """
        with self.device():
            self.xp.get_default_memory_pool().set_limit(size=nbytes or 0)

    @_translated
    def preallocate(self, nbytes: int) -> None:
        """Hold `nbytes` in this GPU's pool (TF's up-front reservation): allocate, then return
        the block to the pool, which keeps it for later allocations."""
        with self.device():
            block = self.xp.empty((nbytes,), dtype=self.xp.uint8)
            del block

    @_translated
    def pool_bytes(self) -> int:
        """Bytes this GPU's pool holds from the device (used or cached)."""
        with self.device():
            return int(self.xp.get_default_memory_pool().total_bytes())

    @_translated
    def release_pool(self) -> None:
        """Give every cached block back to the device and lift the limit."""
        with self.device():
            pool = self.xp.get_default_memory_pool()
            pool.free_all_blocks()
            pool.set_limit(size=0)

    @property
    def out_of_memory(self) -> type[BaseException]:
        """The exception cupy raises when this GPU or its pool limit is out of memory."""
        error: type[BaseException] = self.xp.cuda.memory.OutOfMemoryError
        return error
