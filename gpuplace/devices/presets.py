"""GPU presets for simulated machines: the seeds' cards (K40c, K20m, K520) and current ones.

Memory is the total nvidia-smi reports for the card where it differs from the label (H200: 143771
MiB); `tflops` is the dense float32 peak and `bandwidth` the memory bandwidth in GB/s (both feed
the balanced strategy's cost model, `placement/cost.py`); `bus_ids` are the PCI buses the seed
documents show for these cards, so the guide's examples print the guide's log.

`sm_count` and `clock_mhz` are what CUDA's device properties say (`multiProcessorCount`, and
`clockRate` as deviceQuery's "GPU Max Clock rate"): they rank GPUs of one compute capability in
CUDA's emulated FASTEST_FIRST order (`order.py`). Sources: deviceQuery output published for the
K40c (15 SMs, 745 MHz), K20m (13, 706) and GRID K520 (8, 797); NVIDIA's architecture whitepapers
and datasheets for the T4 (40 SMs, 1590 MHz boost), V100 SXM2 (80, 1530), A100 SXM4 (108, 1410),
H100 SXM5 (132, 1980) and H200 (132, 1980).
"""

from __future__ import annotations

from typing import NamedTuple

from ..units import GiB, MiB


class Preset(NamedTuple):
    key: str
    product: str
    memory: int
    compute_capability: str
    power_limit_watts: float
    tflops: float
    bandwidth: float  # memory bandwidth, GB/s (the card's HBM/GDDR peak)
    bus_ids: tuple[str, ...] = ()
    mig: bool = False  # supports MIG (nvidia-smi shows MIG M. Disabled when off)
    sm_count: int = 0  # multiprocessors
    clock_mhz: int = 0  # the GPU's max clock


PRESETS: dict[str, Preset] = {
    p.key.lower(): p
    for p in (
        # key, product, memory, cc, watts, tflops, GB/s, seed buses, MIG, SMs, max clock MHz
        Preset("K40c", "Tesla K40c", 12 * GiB, "3.5", 235, 4.3, 288, ("05",), False, 15, 745),
        Preset("K20m", "Tesla K20m", 5 * GiB, "3.5", 225, 3.5, 208, ("02", "03", "83", "84"), False, 13, 706),
        Preset("K520", "GRID K520", 4 * GiB, "3.0", 125, 2.4, 160, ("03", "04", "05", "06"), False, 8, 797),
        Preset("T4", "Tesla T4", 15360 * MiB, "7.5", 70, 8.1, 320, (), False, 40, 1590),
        Preset("V100-16GB", "Tesla V100-SXM2-16GB", 16160 * MiB, "7.0", 300, 15.7, 900, (), False, 80, 1530),
        Preset("V100-32GB", "Tesla V100-SXM2-32GB", 32510 * MiB, "7.0", 300, 15.7, 900, (), False, 80, 1530),
        Preset("A100-40GB", "NVIDIA A100-SXM4-40GB", 40960 * MiB, "8.0", 400, 19.5, 1555, (), True, 108, 1410),
        Preset("A100-80GB", "NVIDIA A100-SXM4-80GB", 81920 * MiB, "8.0", 400, 19.5, 2039, (), True, 108, 1410),
        Preset("H100-80GB", "NVIDIA H100 80GB HBM3", 81559 * MiB, "9.0", 700, 67.0, 3350, (), True, 132, 1980),
        Preset("H200", "NVIDIA H200", 143771 * MiB, "9.0", 700, 67.0, 4800, (), True, 132, 1980),
    )
}  # fmt: skip


def find_preset(name: str) -> Preset | None:
    """The preset called `name` (case-insensitive), or one whose product name is `name`."""
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    return next((p for p in PRESETS.values() if p.product.lower() == key), None)
