"""The machine as plain data: host CPU, physical GPUs in NVML order, and what a process sees.

Two indices are named everywhere (nvitop's `CudaDevice` convention): `nvml_index` is what
nvidia-smi prints; `cuda_index` is what CUDA, TensorFlow and cupy call GPU:i after
`CUDA_VISIBLE_DEVICES` has been applied. Sizes are int bytes; `None` means the driver did not say.

The records made at every start-up are NamedTuples, not dataclasses: immutable, compared and
hashed by value all the same, but a dataclass runs its generated methods through `exec` at
import (a frozen one ~4M instructions, a NamedTuple ~1M: issue 17's start-up). Change one with
`_replace`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

Source = Literal["nvml", "simulated"]
OrderKind = Literal["FASTEST_FIRST", "PCI_BUS_ID"]
OrderSource = Literal["libcuda", "emulated", "pci-bus-id"]


class GpuProcess(NamedTuple):
    """A process holding memory on a GPU (nvidia-smi's Processes box)."""

    pid: int
    name: str
    memory: int | None
    type: str = "C"


@dataclass(frozen=True)
class MigInstance:
    """One MIG device of a MIG-enabled GPU (`MIG-<uuid>`, GPU instance / compute instance)."""

    index: int
    uuid: str
    product: str
    gpu_instance_id: int
    compute_instance_id: int
    memory_total: int | None
    memory_used: int | None


class Gpu(NamedTuple):
    """One physical GPU as NVML (or a machine file) describes it."""

    nvml_index: int
    product: str
    uuid: str
    pci_bus_id: str
    memory_total: int | None = None
    memory_used: int | None = None
    memory_free: int | None = None
    compute_capability: str | None = None
    utilization_percent: int | None = None
    temperature_celsius: int | None = None
    power_draw_watts: float | None = None
    power_limit_watts: float | None = None
    fan_percent: int | None = None
    performance_state: str | None = None  # "P0"
    persistence_mode: bool | None = None
    display_active: bool | None = None
    ecc_uncorrected: int | None = None  # volatile uncorrected ECC errors
    compute_mode: str | None = None  # "Default", "E. Process", "Prohibited"
    memory_reserved: int | None = None  # by the driver (memory info v2)
    mig_enabled: bool = False
    mig_capable: bool = False  # MIG mode can be queried (A100, H100, H200): nvidia-smi's Disabled
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    sm_count: int | None = None  # multiprocessors (deviceQuery's "Multiprocessors")
    clock_mhz: int | None = None  # deviceQuery's "GPU Max Clock rate"
    simulated: bool = False
    error: str | None = None  # set when the GPU is lost or failed its query: the row is unavailable

    @property
    def available(self) -> bool:
        return self.error is None


class Host(NamedTuple):
    """The host CPU, TensorFlow's /device:CPU:0."""

    cpu_model: str
    cores: int
    memory_total: int | None
    simulated: bool = False


class ProbedOrder(NamedTuple):
    """What the CUDA driver itself said about its FASTEST_FIRST order (`libcuda.py`): the NVML
    indices in CUDA's order, or None when it could not be asked, and one sentence saying how it
    was obtained or why not."""

    nvml_indices: tuple[int, ...] | None
    detail: str


OrderProbe = Callable[[Sequence["Gpu"]], ProbedOrder]  # NVML's GPUs -> the driver's order


class CudaOrder(NamedTuple):
    """The order CUDA numbers a process's GPUs in: `kind` is CUDA_DEVICE_ORDER's value in effect,
    `source` how gpuplace knows it (`libcuda`: asked the driver; `emulated`: the documented rule
    in `order.py`; `pci-bus-id`: sorted by bus id), `detail` one sentence on how, and
    `unasked`: why the driver of a real machine could not be asked (None when it was, or when
    the machine is simulated)."""

    kind: OrderKind
    source: OrderSource
    detail: str
    unasked: str | None = None


class Machine(NamedTuple):
    """Everything a probe found: the host, the physical GPUs in NVML (PCI) order, and versions."""

    source: Source
    host: Host
    gpus: tuple[Gpu, ...] = ()
    description: str = ""  # the --machine spec, or "NVML" for a real probe
    driver_version: str | None = None
    cuda_version: str | None = None
    no_gpu_reason: str | None = None  # why no GPU is listed (no driver, ...); None when GPUs exist
    warnings: tuple[str, ...] = ()
    probed_order: ProbedOrder | None = None  # libcuda's FASTEST_FIRST order; None: not asked

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"


class VisibleGpu(NamedTuple):
    """A GPU as a CUDA program sees it: position `cuda_index` after CUDA_VISIBLE_DEVICES."""

    cuda_index: int
    gpu: Gpu
    mig: MigInstance | None = None

    @property
    def name(self) -> str:
        return f"/device:GPU:{self.cuda_index}"

    @property
    def product(self) -> str:
        return self.mig.product if self.mig else self.gpu.product

    @property
    def uuid(self) -> str:
        return self.mig.uuid if self.mig else self.gpu.uuid

    @property
    def memory_total(self) -> int | None:
        return self.mig.memory_total if self.mig else self.gpu.memory_total

    @property
    def memory_used(self) -> int | None:
        return self.mig.memory_used if self.mig else self.gpu.memory_used

    @property
    def memory_free(self) -> int | None:
        if self.mig is None:
            return self.gpu.memory_free
        if self.mig.memory_total is None or self.mig.memory_used is None:
            return None
        return self.mig.memory_total - self.mig.memory_used


@dataclass(frozen=True)
class View:
    """What one process sees on a machine: the visible GPUs in CUDA order (`order` says which
    order and how gpuplace knows it; None for a view built by hand), plus warnings, and
    `hidden`: one sentence per cause for GPUs of the machine (or CUDA_VISIBLE_DEVICES entries)
    the process does not see (an invalid entry, a duplicate, MIG's single-device enumeration).

    `host_available`: the bytes this host could still give the process when the view was made
    (`host_memory.py`), where a run on the CPU or simulated GPUs keeps its tensors; None:
    unknown, and runs are not checked against it. A measurement, so views compare without it."""

    machine: Machine
    gpus: tuple[VisibleGpu, ...]
    cuda_visible_devices: str | None
    warnings: tuple[str, ...] = field(default=())
    hidden: tuple[str, ...] = field(default=())
    order: CudaOrder | None = field(default=None)
    host_available: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LogicalGpu:
    """A TensorFlow GPU:i: a whole visible GPU, or one virtual device carved out of it, with the
    memory the policy (`memory/policy.py`) lets it use."""

    index: int
    gpu: VisibleGpu
    limit: int  # bytes this device may hold
    reserve: int  # bytes reserved at start (0 with allow_growth)
    growth: bool

    @property
    def name(self) -> str:
        return f"/device:GPU:{self.index}"
