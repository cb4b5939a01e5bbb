"""Fakes of the CUDA driver's answer about its GPU order (`gpuplace/devices/libcuda.py`).

`FakeLibcuda` stands where `ctypes.CDLL("libcuda.so.1")` does in `_libcuda_child.py`: the same
calls, writing through the same ctypes pointers and buffers, returning CUresult codes. The probe
fakes stand where `AppContext.order_probe` does: `no_libcuda` is what a machine without the
driver library answers, `driver_order([2, 0, 1])` a driver that numbers NVML's GPUs 2, 0, 1.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace.devices.model import Gpu, ProbedOrder

NOT_FOUND = "libcuda.so.1 (the CUDA driver library) was not found"


@dataclass
class FakeLibcuda:
    """A CUDA driver with `devices` [(bus id, 16 UUID bytes)] in its order."""

    devices: list[tuple[str, bytes]]
    init_result: int = 0
    fail: dict[str, int] = field(default_factory=dict)  # call name -> CUresult it returns
    has_v2: bool = True

    def _result(self, name: str) -> int:
        return self.fail.get(name, 0)

    def cuInit(self, flags: int) -> int:
        assert flags == 0
        return self.init_result

    def cuDeviceGetCount(self, count: Any) -> int:
        count._obj.value = len(self.devices)
        return self._result("cuDeviceGetCount")

    def cuDeviceGet(self, device: Any, ordinal: int) -> int:
        device._obj.value = ordinal
        return self._result("cuDeviceGet")

    def cuDeviceGetPCIBusId(self, buf: Any, length: int, device: ctypes.c_int) -> int:
        buf.value = self.devices[device.value][0].encode()[: length - 1]
        return self._result("cuDeviceGetPCIBusId")

    def cuDeviceGetUuid(self, buf: Any, device: ctypes.c_int) -> int:
        buf.raw = self.devices[device.value][1]
        return self._result("cuDeviceGetUuid")

    def __getattr__(self, name: str) -> Any:
        if name == "cuDeviceGetUuid_v2" and self.has_v2:
            return self.cuDeviceGetUuid
        raise AttributeError(name)  # as ctypes.CDLL does for a symbol the library lacks


def uuid_bytes(uuid: str) -> bytes:
    """The 16 bytes of `GPU-xxxxxxxx-...` (what cuDeviceGetUuid writes)."""
    return bytes.fromhex(uuid.split("-", 1)[1].replace("-", ""))


def no_libcuda(gpus: Sequence[Gpu]) -> ProbedOrder:
    """A machine with NVML but without the CUDA driver library (what CI sees)."""
    return ProbedOrder(None, NOT_FOUND)


def driver_order(indices: Sequence[int]) -> Callable[[Sequence[Gpu]], ProbedOrder]:
    """A probe whose driver numbers NVML's GPUs `indices` in that order."""

    def probe(gpus: Sequence[Gpu]) -> ProbedOrder:
        return ProbedOrder(tuple(indices), "asked the CUDA driver (fake)")

    return probe
