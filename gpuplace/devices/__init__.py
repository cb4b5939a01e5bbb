"""Machines (real through NVML, or simulated) and the GPUs a CUDA program would see on them."""

from __future__ import annotations

from collections.abc import Mapping

from .model import Gpu, GpuProcess, Host, Machine, MigInstance, View, VisibleGpu
from .nvml import NvmlLoader, load_pynvml, probe
from .simulated import load_machine
from .visible import order_warning, visible

__all__ = [
    "Gpu",
    "GpuProcess",
    "Host",
    "Machine",
    "MigInstance",
    "View",
    "VisibleGpu",
    "discover",
    "load_machine",
    "view",
    "visible",
]


def discover(machine_spec: str | None = None, nvml_loader: NvmlLoader = load_pynvml) -> Machine:
    """The machine to work on: the simulated one named by `machine_spec`, else the real one."""
    if machine_spec:
        return load_machine(machine_spec)
    return probe(nvml_loader)


def view(machine: Machine, env: Mapping[str, str]) -> View:
    """What a process started with environment `env` sees of `machine`."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    gpus = tuple(visible(machine.gpus, cvd))
    warnings = list(machine.warnings)
    warning = order_warning(gpus, env.get("CUDA_DEVICE_ORDER"))
    if warning:
        warnings.append(warning)
    return View(machine=machine, gpus=gpus, cuda_visible_devices=cvd, warnings=tuple(warnings))
