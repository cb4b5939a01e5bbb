"""Device models with round numbers and small specs for the strategy tests."""

from __future__ import annotations

from gpuplace.devices.names import full_name
from gpuplace.placement.cost import DeviceModel, LinkModel
from gpuplace.placement.model import Placement

CPU0 = full_name("CPU", 0)
LINK = LinkModel(bandwidth=1e10, latency=1e-5)  # 10 GB/s, 10 us


def gpu(i: int) -> str:
    return full_name("GPU", i)


def models(gpus: int, limit: int | None = None) -> list[DeviceModel]:
    """`gpus` GPUs at 1 TFLOP/s and 100 GB/s (5 us per op), then a CPU at 0.5 TFLOP/s, 50 GB/s."""
    out = [DeviceModel(gpu(i), "GPU", 1e12, 1e11, limit) for i in range(gpus)]
    return [*out, DeviceModel(CPU0, "CPU", 0.5e12, 50e9, None, overhead=2e-6)]


def where(p: Placement) -> dict[str, str]:
    """op -> short device (`GPU:0`)."""
    return {name: d.device.rsplit("/device:", 1)[1] for name, d in p.decisions.items()}
