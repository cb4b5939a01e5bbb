"""Array backends behind one small protocol; chosen explicitly per device, never by fallback.

numpy runs the CPU and simulated GPUs (so a simulated run computes real values); cupy runs real
GPUs, each under its `cupy.cuda.Device`.
Every backend says whether it is simulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from ..devices.model import LogicalGpu, Machine, VisibleGpu
from ..devices.names import full_name

CupyLoader = Callable[[], ModuleType]


class Backend(Protocol):
    """What the executor and the device check need from an array library on one device."""

    label: str
    simulated: bool

    @property
    def xp(self) -> ModuleType: ...

    def device(self) -> AbstractContextManager[Any]: ...
    def put(self, host: np.ndarray) -> Any: ...
    def get(self, array: Any) -> np.ndarray: ...
    def synchronize(self) -> None: ...


class NumpyBackend:
    """numpy on the host: the CPU device, and simulated GPUs (computed on the host, labelled)."""

    def __init__(self, label: str, simulated: bool = False) -> None:
        self.label = label
        self.simulated = simulated

    @property
    def xp(self) -> ModuleType:
        return np

    def device(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def put(self, host: np.ndarray) -> Any:
        return np.array(host, copy=True)

    def get(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        return None


def backend_for(
    machine: Machine,
    gpu: VisibleGpu | None,
    cupy_loader: CupyLoader | None = None,
    logical_index: int | None = None,
) -> Backend:
    """The backend for CPU:0 (gpu None) or a visible GPU of `machine`; `logical_index` names a
    logical GPU (TF's GPU:i under virtual devices) that runs on that card."""
    if gpu is None:
        return NumpyBackend("/device:CPU:0", simulated=machine.host.simulated)
    label = gpu.name if logical_index is None else f"/device:GPU:{logical_index}"
    if gpu.gpu.simulated:
        return NumpyBackend(label, simulated=True)
    from .cupy_backend import CupyBackend, load_cupy

    return CupyBackend(label, gpu.cuda_index, (cupy_loader or load_cupy)())


def device_backends(
    machine: Machine, logical: Sequence[LogicalGpu], cupy_loader: CupyLoader | None = None
) -> dict[str, Backend]:
    """One backend per device, by full name: numpy for CPU:0 and simulated GPUs, cupy for each
    logical GPU of a real card."""
    out: dict[str, Backend] = {full_name("CPU", 0): backend_for(machine, None)}
    for g in logical:
        out[full_name("GPU", g.index)] = backend_for(machine, g.gpu, cupy_loader, g.index)
    return out
