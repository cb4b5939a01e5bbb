"""The order CUDA numbers GPUs in, before CUDA_VISIBLE_DEVICES picks from it.

CUDA_DEVICE_ORDER (CUDA Programming Guide, environment variables) is `FASTEST_FIRST`, the
default, or `PCI_BUS_ID`, the order nvidia-smi and NVML use. CUDA_VISIBLE_DEVICES's integer
indices count in the order in effect, so with mixed models `CUDA_VISIBLE_DEVICES=0` is the
fastest GPU, not nvidia-smi's GPU 0 (anderskm/gputil#18: "if you set CUDA_VISIBLE_DEVICES = '0'
... only the fastest GPU will be exposed"; AlexeyAB/darknet#6982, fixed by PCI_BUS_ID); UUID and
MIG entries name a device whatever the order.

FASTEST_FIRST is "a simple heuristic" NVIDIA does not publish. Where a driver is present,
gpuplace asks it (`libcuda.py`: the CUDA driver's own enumeration, in a subprocess). Elsewhere
(simulated machines, or a driver that could not be asked) it emulates the heuristic with the rule
that the public accounts agree on:

1. higher compute capability first (vllm-project/vllm#7472, on a mixed node: CUDA programs put
   "the device with the greatest compute capability as 0"; microsoft/onnxruntime#17546: an RTX
   A4000 (8.6) is CUDA's 0, the P1000 (6.1) last; the stackoverflow answer "CUDA picks the
   fastest device as device 0"; AlexeyAB/darknet#6982: a TITAN is CUDA's 0 though nvidia-smi
   lists a GTX 1080 first);
2. then more throughput: multiprocessors x max clock (the rule of CUDA's own samples,
   `helper_cuda.h` `gpuGetMaxGflopsDeviceId`, and of the accelerate-llvm-ptx library's
   `selectBestDevice`, both "compute capability, then throughput"; cores per multiprocessor are
   the same within one compute capability, so leaving them out cannot reorder it);
3. ties (identical cards) by PCI bus id, so identical cards keep nvidia-smi's order.

NVIDIA documents none of this beyond "fastest first", so which of two cards comes first when the
newer architecture is the smaller card (a T4, 7.5, beside a V100, 7.0) is the rule's guess; the
driver's answer on a real node settles it, and `tests/gpu/test_order_gpu.py` reports any card
pair the rule gets wrong.

A GPU that failed its query (lost) is numbered last: CUDA does not enumerate it. The rule is an
emulation: a real node's answer comes from its driver, and `make gpu-check` compares the two.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..echo import TEXT_CHARS, show
from .model import CudaOrder, Gpu, Machine, OrderKind
from .pci import bus_key
from .presets import find_preset

ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")  # CUDA_DEVICE_ORDER's documented values
RULE = "compute capability, then multiprocessors x clock, ties by PCI bus id"


def order_kind(cuda_device_order: str | None) -> OrderKind:
    """The order CUDA uses for a value of CUDA_DEVICE_ORDER: PCI_BUS_ID only when it says so
    exactly; unset, empty or any other value is CUDA's default, FASTEST_FIRST."""
    return "PCI_BUS_ID" if cuda_device_order == "PCI_BUS_ID" else "FASTEST_FIRST"


def _speed(gpu: Gpu) -> tuple[int, int, int]:
    """(cc major, cc minor, SMs x MHz), from the GPU, else from its preset; -1 when unknown."""
    major, minor = -1, -1
    cc = (gpu.compute_capability or "").split(".")
    if len(cc) == 2 and cc[0].isdigit() and cc[1].isdigit():
        major, minor = int(cc[0]), int(cc[1])
    preset = find_preset(gpu.product) if gpu.sm_count is None or gpu.clock_mhz is None else None
    sms = gpu.sm_count or (preset.sm_count if preset else 0)
    mhz = gpu.clock_mhz or (preset.clock_mhz if preset else 0)
    return major, minor, sms * mhz if sms and mhz else -1


def _bus(gpu: Gpu) -> int:
    key = bus_key(gpu.pci_bus_id)
    return key if key is not None else 1 << 40  # no bus id (a lost GPU): after every real one


def fastest_first_key(gpu: Gpu) -> tuple[bool, int, int, int, int, int]:
    """Sort key of the emulated FASTEST_FIRST order (see the module's rule)."""
    major, minor, throughput = _speed(gpu)
    return (not gpu.available, -major, -minor, -throughput, _bus(gpu), gpu.nvml_index)


def emulated_fastest_first(gpus: Sequence[Gpu]) -> tuple[Gpu, ...]:
    """`gpus` in the emulated FASTEST_FIRST order."""
    return tuple(sorted(gpus, key=fastest_first_key))


def pci_order(gpus: Sequence[Gpu]) -> tuple[Gpu, ...]:
    """`gpus` by PCI bus id (CUDA_DEVICE_ORDER=PCI_BUS_ID); NVML's order when a bus id is
    unknown (a lost GPU), since NVML numbers GPUs in bus order."""
    if any(bus_key(g.pci_bus_id) is None for g in gpus):
        return tuple(sorted(gpus, key=lambda g: g.nvml_index))
    return tuple(sorted(gpus, key=_bus))


def cuda_order(
    machine: Machine, cuda_device_order: str | None
) -> tuple[tuple[Gpu, ...], CudaOrder]:
    """The machine's GPUs in the order CUDA numbers them under `cuda_device_order` (the
    variable's value; None: unset), and which order that is and how gpuplace knows it."""
    gpus = machine.gpus
    if order_kind(cuda_device_order) == "PCI_BUS_ID":
        detail = "CUDA_DEVICE_ORDER=PCI_BUS_ID: by PCI bus id, as nvidia-smi numbers them"
        return pci_order(gpus), CudaOrder("PCI_BUS_ID", "pci-bus-id", detail)
    probed = machine.probed_order
    unasked = probed.detail if probed is not None else None
    if probed is not None and probed.nvml_indices is not None:
        by_index = {g.nvml_index: g for g in gpus}
        if sorted(probed.nvml_indices) == sorted(by_index):
            ordered = tuple(by_index[i] for i in probed.nvml_indices)
            return ordered, CudaOrder("FASTEST_FIRST", "libcuda", probed.detail)
        unasked = "the driver's answer does not list each GPU once"
    detail = f"emulated: {RULE}"
    if unasked is not None:
        detail += f" ({unasked})"
    return emulated_fastest_first(gpus), CudaOrder("FASTEST_FIRST", "emulated", detail, unasked)


def _mixed(gpus: Sequence[Gpu]) -> bool:
    return len({g.product for g in gpus if g.available}) > 1


def _how(order: CudaOrder) -> str:
    if order.source == "libcuda":
        return "as the CUDA driver reports"
    if order.unasked:
        return f"by gpuplace's emulation, as the CUDA driver could not be asked: {order.unasked}"
    return "by gpuplace's emulation"


def order_warning(
    ordered: Sequence[Gpu], order: CudaOrder, cuda_device_order: str | None
) -> str | None:
    """A warning when the user relies on CUDA's default order on a machine of mixed models
    (CUDA's GPU indices then follow speed, not nvidia-smi's slots), and when CUDA_DEVICE_ORDER holds
    a value CUDA does not document (CUDA then uses its default, FASTEST_FIRST)."""
    value = cuda_device_order or None  # set but empty: as unset
    mixed = _mixed(ordered)
    if value is not None and value not in ORDERS:
        text = (
            f"CUDA_DEVICE_ORDER={show(value, TEXT_CHARS)} is not a value CUDA documents "
            "(FASTEST_FIRST, the default, or PCI_BUS_ID); gpuplace assumes CUDA's default order, "
            "FASTEST_FIRST"
        )
        if mixed:
            text += ", and the GPUs differ in model, so CUDA numbers them fastest first, as shown"
        return text + "; export CUDA_DEVICE_ORDER=PCI_BUS_ID (or unset it)"
    if value is not None or not mixed:
        return None
    head = f"the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them fastest first ({_how(order)})"
    moved = next((i for i, g in enumerate(ordered) if g.nvml_index != i), None)
    if moved is None:
        return (
            f"{head}: here that is nvidia-smi's numbering too, but CUDA's indices follow speed, "
            "not slots; export CUDA_DEVICE_ORDER=PCI_BUS_ID to keep them numbered as nvidia-smi does"
        )
    gpu = ordered[moved]
    slot = next((g for g in ordered if g.nvml_index == moved), None)
    theirs = f" ({slot.product})" if slot is not None else ""
    return (
        f"{head}: CUDA's GPU {moved} is nvml {gpu.nvml_index} ({gpu.product}), not nvidia-smi's "
        f"GPU {moved}{theirs}, and CUDA_VISIBLE_DEVICES counts in CUDA's order; export "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does"
    )
