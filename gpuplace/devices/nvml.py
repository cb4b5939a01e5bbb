"""The one module that talks to NVML (nvidia-ml-py's `pynvml`), imported lazily.

Error policy (gpustat and nvitop): at init, LibraryNotFound / DriverNotLoaded /
LibRmVersionMismatch mean "no GPU listed, and here is why"; a GPU that is lost or fails while
getting its handle or identity becomes a row marked unavailable while the others still print;
NotSupported / NoPermission / FunctionNotFound on one field make that field N/A. Memory comes
from memory info v2 (what nvidia-smi shows as used) with a fallback to v1 on old drivers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from ..errors import MissingDependency
from .cuda_match import cuda_text
from .host import probe_host
from .model import Gpu, GpuProcess, Machine, MigInstance, OrderProbe, ProbedOrder

T = TypeVar("T")
NvmlLoader = Callable[[], ModuleType]

INIT_REASONS = {
    "NVMLError_LibraryNotFound": (
        "no NVIDIA driver: the NVML library (libnvidia-ml.so.1) was not found. Install the NVIDIA "
        "driver, or plan for hardware you do not have with --machine (e.g. --machine 4xK520)"
    ),
    "NVMLError_DriverNotLoaded": (
        "the NVIDIA kernel driver is not loaded (NVML: Driver Not Loaded). Load it "
        "(`sudo modprobe nvidia`) or check that the container was started with GPU access"
    ),
    "NVMLError_LibRmVersionMismatch": (
        "the NVIDIA driver library and kernel module versions differ (the driver was upgraded "
        "without a reboot). Reboot, or reload the nvidia kernel modules"
    ),
    "NVMLError_NoPermission": "no permission to open the NVIDIA devices (/dev/nvidia*)",
}
COMPUTE_MODES = {0: "Default", 1: "E. Thread", 2: "Prohibited", 3: "E. Process"}
_FIELD_NA = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")
_GPU_DOWN = {"NVMLError_GpuIsLost": "GPU is lost", "NVMLError_Unknown": "Unknown Error"}


def load_pynvml() -> ModuleType:
    """Import nvidia-ml-py's `pynvml` (only here), turning ImportError into an install hint."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise MissingDependency(
            "nvidia-ml-py is not installed: pip install nvidia-ml-py "
            "(never the deprecated 'pynvml' package)"
        ) from exc
    module: ModuleType = pynvml
    return module


class _GpuDown(Exception):
    """Raised inside one GPU's query when the GPU itself failed (lost, unknown error)."""


def _error_name(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        if cls.__name__.startswith("NVMLError_"):
            return cls.__name__
    return type(exc).__name__


class _Query:
    """Per-GPU field reader: N/A for unsupported fields, _GpuDown when the GPU fails."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml

    def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        try:
            return fn(*args, **kwargs)
        except self.nvml.NVMLError as exc:
            name = _error_name(exc)
            if name in _FIELD_NA:
                return None
            raise _GpuDown(_GPU_DOWN.get(name, str(exc))) from exc

    def memory(self, handle: Any) -> Any:
        """Memory info v2 (used excludes driver-reserved memory); v1 on older drivers."""
        nvml = self.nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except nvml.NVMLError as exc:
                if _error_name(exc) != "NVMLError_FunctionNotFound":
                    return self(_raise, exc)
            except TypeError:  # an old binding without the version keyword
                pass
        return self(nvml.nvmlDeviceGetMemoryInfo, handle)


def _raise(exc: BaseException) -> None:
    raise exc


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def probe(loader: NvmlLoader = load_pynvml, order_probe: OrderProbe | None = None) -> Machine:
    """Query every GPU NVML knows, in NVML order (CUDA_VISIBLE_DEVICES is applied later), and,
    with two GPUs or more, ask `order_probe` the order CUDA numbers them in (None: do not ask)."""
    host = probe_host()
    nvml = loader()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        reason = INIT_REASONS.get(_error_name(exc), f"NVML failed to initialise: {exc}")
        return Machine(source="nvml", host=host, description="NVML", no_gpu_reason=reason)
    try:
        query = _Query(nvml)
        driver = _safe(query, nvml.nvmlSystemGetDriverVersion)
        cuda = _safe(query, nvml.nvmlSystemGetCudaDriverVersion)
        count = nvml.nvmlDeviceGetCount()
        gpus = tuple(_probe_gpu(nvml, query, i) for i in range(count))
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    probed = None
    if order_probe is not None and len(gpus) > 1:
        probed = order_probe(gpus)
    elif len(gpus) > 1:
        probed = ProbedOrder(None, "the CUDA driver was not asked")
    return Machine(
        source="nvml",
        host=host,
        gpus=gpus,
        description="NVML",
        driver_version=_text(driver) if driver is not None else None,
        cuda_version=cuda_text(cuda) if isinstance(cuda, int) else None,
        no_gpu_reason=None if gpus else "NVML reports no GPU on this machine",
        probed_order=probed,
    )


def _safe(query: _Query, fn: Callable[[], T]) -> T | None:
    try:
        return query(fn)
    except _GpuDown:
        return None


def _probe_gpu(nvml: ModuleType, q: _Query, index: int) -> Gpu:
    try:
        handle = q(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            raise _GpuDown("no handle")
        return _read_gpu(nvml, q, index, handle)
    except _GpuDown as down:
        return Gpu(nvml_index=index, product="N/A", uuid="N/A", pci_bus_id="N/A", error=str(down))


def _read_gpu(nvml: ModuleType, q: _Query, index: int, handle: Any) -> Gpu:
    pci = q(nvml.nvmlDeviceGetPciInfo, handle)
    mem = q.memory(handle)
    cc = q(nvml.nvmlDeviceGetCudaComputeCapability, handle)
    util = q(nvml.nvmlDeviceGetUtilizationRates, handle)
    power = q(nvml.nvmlDeviceGetPowerUsage, handle)
    limit = q(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    mig_mode = q(nvml.nvmlDeviceGetMigMode, handle)
    pstate = q(nvml.nvmlDeviceGetPerformanceState, handle)
    persistence = q(nvml.nvmlDeviceGetPersistenceMode, handle)
    display = q(nvml.nvmlDeviceGetDisplayActive, handle)
    mig_enabled = mig_mode is not None and mig_mode[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
    return Gpu(
        nvml_index=index,
        product=_text(q(nvml.nvmlDeviceGetName, handle) or "N/A"),
        uuid=_text(q(nvml.nvmlDeviceGetUUID, handle) or "N/A"),
        pci_bus_id=_text(pci.busId) if pci is not None else "N/A",
        memory_total=mem.total if mem is not None else None,
        memory_used=mem.used if mem is not None else None,
        memory_free=mem.free if mem is not None else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        utilization_percent=util.gpu if util is not None else None,
        temperature_celsius=q(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        power_draw_watts=power / 1000 if power is not None else None,
        power_limit_watts=limit / 1000 if limit is not None else None,
        fan_percent=q(nvml.nvmlDeviceGetFanSpeed, handle),
        performance_state=f"P{pstate}" if pstate is not None else None,
        persistence_mode=bool(persistence) if persistence is not None else None,
        display_active=bool(display) if display is not None else None,
        ecc_uncorrected=q(
            nvml.nvmlDeviceGetTotalEccErrors,
            handle,
            nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nvml.NVML_VOLATILE_ECC,
        ),
        compute_mode=_compute_mode(q(nvml.nvmlDeviceGetComputeMode, handle)),
        memory_reserved=getattr(mem, "reserved", None),
        mig_enabled=mig_enabled,
        mig_capable=mig_mode is not None,
        mig_instances=_mig_instances(nvml, q, handle) if mig_enabled else (),
        processes=_processes(nvml, q, handle),
    )


def _compute_mode(mode: int | None) -> str | None:
    return None if mode is None else COMPUTE_MODES.get(mode, str(mode))


def _mig_instances(nvml: ModuleType, q: _Query, handle: Any) -> tuple[MigInstance, ...]:
    out = []
    for j in range(q(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
        except nvml.NVMLError:
            break
        mem = q.memory(mig)
        out.append(
            MigInstance(
                index=j,
                uuid=_text(q(nvml.nvmlDeviceGetUUID, mig) or "N/A"),
                product=_text(q(nvml.nvmlDeviceGetName, mig) or "N/A"),
                gpu_instance_id=q(nvml.nvmlDeviceGetGpuInstanceId, mig) or 0,
                compute_instance_id=q(nvml.nvmlDeviceGetComputeInstanceId, mig) or 0,
                memory_total=mem.total if mem is not None else None,
                memory_used=mem.used if mem is not None else None,
            )
        )
    return tuple(out)


def _processes(nvml: ModuleType, q: _Query, handle: Any) -> tuple[GpuProcess, ...]:
    """Compute and graphics processes merged by PID into C, G or C+G (nvidia-smi's Type)."""
    merged: dict[int, GpuProcess] = {}
    for kind, fn_name in (
        ("C", "nvmlDeviceGetComputeRunningProcesses"),
        ("G", "nvmlDeviceGetGraphicsRunningProcesses"),
    ):
        try:
            procs = q(getattr(nvml, fn_name), handle) or []
        except _GpuDown:
            procs = []
        except Exception:  # NVMLLibraryMismatchError is not an NVMLError (struct saga)
            procs = []
        for p in procs:
            memory = p.usedGpuMemory if isinstance(p.usedGpuMemory, int) else None
            old = merged.get(p.pid)
            ptype = kind if old is None or old.type == kind else "C+G"
            merged[p.pid] = GpuProcess(p.pid, _process_name(p.pid), memory, ptype)
    return tuple(merged.values())


def _process_name(pid: int) -> str:
    """The command of `pid` from /proc (host PIDs may be absent inside a container)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read().split(b"\0")[0]
        return _text(raw) or "N/A"
    except OSError:
        return "N/A"
