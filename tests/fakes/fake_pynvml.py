"""A fake `pynvml` module with the real module's call shapes and the real NVMLError_* classes.

Scenarios are built from FakeGpu records; any NVML function can be made to raise for one GPU
(`fail={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}`), a GPU can be lost, the
driver can lack memory info v2, and init can fail as it does on a machine without a driver.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

MiB = 1024**2


@dataclass
class FakeMig:
    uuid: str
    name: str
    gi: int
    ci: int
    total: int
    used: int


@dataclass
class FakeGpu:
    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:07:00.0"
    total: int = 81920 * MiB
    used: int = 4 * MiB
    reserved: int = 500 * MiB
    cc: tuple[int, int] = (8, 0)
    util: int = 3
    temp: int = 34
    power_mw: int = 61000
    limit_mw: int = 400000
    fan: int | None = None  # None: NotSupported, as on datacenter GPUs
    pstate: int = 0
    persistence: int = 1
    display: int = 0
    ecc: int = 0
    compute_mode: int = 0
    mig_capable: bool = False  # MIG mode queryable with no instances: [0, 0]
    lost: bool = False
    fail: dict[str, type[Exception]] = field(default_factory=dict)
    migs: list[FakeMig] = field(default_factory=list)
    processes: list[tuple[int, int | None]] = field(default_factory=list)


@dataclass
class _Handle:
    gpu: FakeGpu
    mig: FakeMig | None = None


def _struct(**kw: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


class FakeNvml(types.ModuleType):
    """Module-like object: `loader=lambda: FakeNvml([...])` stands in for `import pynvml`."""

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        init_error: type[Exception] | None = None,
        memory_v2: bool = True,
        driver: str = "550.54.15",
        cuda: int = 12040,
    ) -> None:
        super().__init__("pynvml")
        for name in dir(real):
            if name.startswith(("NVMLError", "NVML_", "nvmlMemory_")):
                setattr(self, name, getattr(real, name))
        self.gpus = gpus or []
        self.init_error = init_error
        self.memory_v2 = memory_v2
        self.driver = driver
        self.cuda = cuda
        self.init_calls = 0
        self.shutdown_calls = 0

    def _check(self, handle: _Handle, fn: str) -> FakeGpu:
        gpu = handle.gpu
        if gpu.lost:
            raise real.NVMLError_GpuIsLost()
        if fn in gpu.fail:
            raise gpu.fail[fn]()
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()
        self.init_calls += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not 0 <= index < len(self.gpus):
            raise real.NVMLError_InvalidArgument()
        gpu = self.gpus[index]
        if "nvmlDeviceGetHandleByIndex" in gpu.fail:
            raise gpu.fail["nvmlDeviceGetHandleByIndex"]()
        return _Handle(gpu)

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        gpu = self._check(h, "nvmlDeviceGetName")
        return h.mig.name if h.mig else gpu.name

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        gpu = self._check(h, "nvmlDeviceGetUUID")
        return h.mig.uuid if h.mig else gpu.uuid

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> types.SimpleNamespace:
        return _struct(busId=self._check(h, "nvmlDeviceGetPciInfo").bus_id)

    def nvmlDeviceGetMemoryInfo(self, h: _Handle, version: int | None = None) -> Any:
        gpu = self._check(h, "nvmlDeviceGetMemoryInfo")
        total, used = (h.mig.total, h.mig.used) if h.mig else (gpu.total, gpu.used)
        if version is not None:
            if not self.memory_v2:
                raise real.NVMLError_FunctionNotFound()
            free = total - used - gpu.reserved
            return _struct(
                version=version, total=total, reserved=gpu.reserved, free=free, used=used
            )
        return _struct(total=total, free=total - used - gpu.reserved, used=used + gpu.reserved)

    def nvmlDeviceGetCudaComputeCapability(self, h: _Handle) -> tuple[int, int]:
        return self._check(h, "nvmlDeviceGetCudaComputeCapability").cc

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> types.SimpleNamespace:
        return _struct(gpu=self._check(h, "nvmlDeviceGetUtilizationRates").util, memory=0)

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        assert sensor == real.NVML_TEMPERATURE_GPU
        return self._check(h, "nvmlDeviceGetTemperature").temp

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetFanSpeed(self, h: _Handle) -> int:
        fan = self._check(h, "nvmlDeviceGetFanSpeed").fan
        if fan is None:
            raise real.NVMLError_NotSupported()
        return fan

    def nvmlDeviceGetPerformanceState(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetPerformanceState").pstate

    def nvmlDeviceGetPersistenceMode(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetPersistenceMode").persistence

    def nvmlDeviceGetDisplayActive(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetDisplayActive").display

    def nvmlDeviceGetTotalEccErrors(self, h: _Handle, error_type: int, counter: int) -> int:
        assert (error_type, counter) == (
            real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            real.NVML_VOLATILE_ECC,
        )
        return self._check(h, "nvmlDeviceGetTotalEccErrors").ecc

    def nvmlDeviceGetComputeMode(self, h: _Handle) -> int:
        return self._check(h, "nvmlDeviceGetComputeMode").compute_mode

    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:
        gpu = self._check(h, "nvmlDeviceGetMigMode")
        if gpu.migs:
            return [real.NVML_DEVICE_MIG_ENABLE, real.NVML_DEVICE_MIG_ENABLE]
        if gpu.mig_capable:
            return [0, 0]
        raise real.NVMLError_NotSupported()

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:
        return 7 if self._check(h, "nvmlDeviceGetMaxMigDeviceCount").migs else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, j: int) -> _Handle:
        gpu = self._check(h, "nvmlDeviceGetMigDeviceHandleByIndex")
        if j >= len(gpu.migs):
            raise real.NVMLError_NotFound()
        return _Handle(gpu, gpu.migs[j])

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:
        assert h.mig is not None
        return h.mig.gi

    def nvmlDeviceGetComputeInstanceId(self, h: _Handle) -> int:
        assert h.mig is not None
        return h.mig.ci

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[types.SimpleNamespace]:
        gpu = self._check(h, "nvmlDeviceGetComputeRunningProcesses")
        return [_struct(pid=pid, usedGpuMemory=mem) for pid, mem in gpu.processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: _Handle) -> list[types.SimpleNamespace]:
        self._check(h, "nvmlDeviceGetGraphicsRunningProcesses")
        return []


def four_gpus() -> list[FakeGpu]:
    """A 4-GPU node as NVML (PCI order) reports it: two A100-80GB, then two T4s."""
    a100 = dict(name="NVIDIA A100-SXM4-80GB", total=81920 * MiB, cc=(8, 0))
    t4 = dict(name="Tesla T4", total=15360 * MiB, cc=(7, 5), limit_mw=70000)
    specs: list[dict[str, Any]] = [a100, a100, t4, t4]
    return [
        FakeGpu(
            uuid=f"GPU-{i}{i}{i}{i}aaaa-0000-4000-8000-00000000000{i}",
            bus_id=f"00000000:{0x07 + 0x10 * i:02X}:00.0",
            **spec,
        )
        for i, spec in enumerate(specs)
    ]
