"""Machines (real through NVML, or simulated) and the GPUs a CUDA program would see on them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..errors import BadInput
from .host_memory import available_memory
from .libcuda import OrderProbe, probe_order
from .model import CudaOrder, Gpu, GpuProcess, Host, Machine, MigInstance, View, VisibleGpu
from .nvml import NvmlLoader, load_pynvml, probe
from .order import cuda_order, order_warning
from .simulated import load_machine
from .visible import Visibility, visibility, visible

__all__ = [
    "CudaOrder",
    "Gpu",
    "GpuProcess",
    "Host",
    "Machine",
    "MigInstance",
    "View",
    "Visibility",
    "VisibleGpu",
    "available_memory",
    "cuda_order",
    "discover",
    "load_machine",
    "view",
    "visibility",
    "visible",
]


def discover(
    machine_spec: str | None = None,
    nvml_loader: NvmlLoader = load_pynvml,
    source: str = "discover(machine_spec)",
    order_probe: OrderProbe = probe_order,
) -> Machine:
    """The machine to work on: the simulated one named by `machine_spec` (an empty spec is an
    error, never the real machine), else the real one. `source` (the argument, flag or
    environment variable the spec came from) is what errors name. On a real machine with two
    GPUs or more, `order_probe` asks the CUDA driver the order it numbers them in
    (`libcuda.py`)."""
    if machine_spec is not None:
        return load_machine(machine_spec, source)
    return probe(nvml_loader, order_probe)


def view(
    machine: Machine,
    env: Mapping[str, str],
    host_available: int | Callable[[], int | None] | None = available_memory,
) -> View:
    """What a process started with environment `env` (os.environ, or a dict) sees of `machine`:
    its GPUs in CUDA order (CUDA_DEVICE_ORDER: FASTEST_FIRST unless PCI_BUS_ID) after
    CUDA_VISIBLE_DEVICES, which order that is and how gpuplace knows it, warnings, and why the
    others are hidden.

    `host_available`: the bytes this host can still give the process, where a run on the CPU
    or simulated GPUs keeps its tensors (a run needing more is refused): a number, None (do not
    check), or a function that measures it (by default, this host: MemAvailable, cgroup limits,
    ulimit -v)."""
    if not isinstance(machine, Machine):
        raise BadInput(
            f"view: machine must be a Machine (what gpuplace.discover() returns), got "
            f"{type(machine).__name__}"
        )
    if not isinstance(env, Mapping):
        raise BadInput(
            f"view: env must be a mapping (os.environ, or a dict such as "
            f"{{'CUDA_VISIBLE_DEVICES': '0'}}), got {type(env).__name__} {env!r:.40}"
        )
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    ordered, order = cuda_order(machine, env.get("CUDA_DEVICE_ORDER"))
    seen = visibility(ordered, cvd)
    warnings = list(machine.warnings)
    # with no GPU visible, CUDA's numbering does not matter; a bad CUDA_DEVICE_ORDER still does
    warning = order_warning(ordered if seen.gpus else (), order, env.get("CUDA_DEVICE_ORDER"))
    if warning:
        warnings.append(warning)
    return View(
        machine=machine,
        gpus=seen.gpus,
        cuda_visible_devices=cvd,
        warnings=tuple(warnings),
        hidden=seen.reasons,
        order=order,
        host_available=host_available() if callable(host_available) else host_available,
    )
