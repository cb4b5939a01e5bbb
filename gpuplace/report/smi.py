"""nvidia-smi's default view (R550+ layout, 91 columns), byte for byte, from a Machine.

Format strings reconstructed from published 570.x output (reference: gpu-enumeration.md §4.1):
a line is "|" + "|".join(cells) + "|", cells 41/24/22 wide; the process box is 89 wide inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..devices.model import Gpu, GpuProcess, Machine
from ..units import MiB
from .text import NA

RULE = "+" + "-" * 89 + "+"
SPLIT = "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
GPU_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
DOUBLE = "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"
HEAD = [
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
]
PROC_HEAD = [
    "| Processes:                                                                              |",
    "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
    "|        ID   ID                                                               Usage      |",
    "|" + "=" * 89 + "|",
]


def _line(*cells: str) -> str:
    return "|" + "|".join(cells) + "|"


def _on_off(flag: bool | None) -> str:
    return NA if flag is None else ("On" if flag else "Off")


def _mib(n: int | None) -> str:
    return NA if n is None else f"{n // MiB}MiB"


def _watts(w: float | None) -> str:
    return NA if w is None else f"{round(w)}W"


def _name(name: str, width: int = 31) -> str:
    return name if len(name) < width else name[: width - 5] + " ..."


def gpu_rows(gpu: Gpu) -> list[str]:
    """The three lines of one GPU: identity, usage, MIG mode."""
    util = (
        NA if gpu.utilization_percent is None or gpu.mig_enabled else f"{gpu.utilization_percent}%"
    )
    fan = NA if gpu.fan_percent is None else f"{gpu.fan_percent}%"
    temp = NA if gpu.temperature_celsius is None else f"{gpu.temperature_celsius}C"
    ecc = (
        "On" if gpu.mig_enabled else NA if gpu.ecc_uncorrected is None else str(gpu.ecc_uncorrected)
    )
    mig = "Enabled" if gpu.mig_enabled else (NA if not gpu.mig_instances else "Disabled")
    power = f"{_watts(gpu.power_draw_watts):>5} / {_watts(gpu.power_limit_watts):>5}"
    return [
        _line(
            f" {gpu.nvml_index:>3}  {_name(gpu.product):<31}{_on_off(gpu.persistence_mode):>3} ",
            f"   {gpu.pci_bus_id:<16} {_on_off(gpu.display_active):>3} ",
            f" {ecc:>20} ",
        ),
        _line(
            f" {fan:>3}   {temp:>3}    {gpu.performance_state or NA:<2}" + power.rjust(24) + " ",
            f"{_mib(gpu.memory_used):>11} / {_mib(gpu.memory_total):>9} ",
            f"{util:>8}{gpu.compute_mode or NA:>13} ",
        ),
        _line(" " * 41, " " * 24, f" {mig:>20} "),
    ]


def _process_name(name: str) -> str:
    return name if len(name) <= 32 else "..." + name[-29:]


def process_rows(rows: Sequence[tuple[int, GpuProcess]]) -> list[str]:
    """The Processes box: one line per (nvml index, process), or nvidia-smi's empty line."""
    body = [
        "|"
        + f"  {idx:>3}   {NA:>3}  {NA:>3}{p.pid:>16}{p.type:>7}   "
        + f"{_process_name(p.name):<36}{_mib(p.memory):>10} "
        + "|"
        for idx, p in rows
    ]
    if not body:
        body = ["|  No running processes found".ljust(90) + "|"]
    return [RULE, *PROC_HEAD, *body, RULE]


def smi_text(
    machine: Machine, gpus: Sequence[Gpu], now: datetime, smi_version: str | None = None
) -> str:
    """The whole view: timestamp, header, one block per GPU, a blank line, the process box."""
    drv = machine.driver_version or NA
    header = f" NVIDIA-SMI {smi_version or drv:<23}Driver Version: {drv:<15}CUDA Version: {machine.cuda_version or NA:<9}"
    lines = [
        now.strftime("%a %b %e %H:%M:%S %Y"),
        RULE,
        "|" + header.ljust(89) + "|",
        SPLIT,
        *HEAD,
        DOUBLE,
    ]
    for gpu in gpus:
        lines += [*gpu_rows(gpu), GPU_RULE]  # nvidia-smi closes every GPU with the same rule
    if not gpus:
        lines += ["|" + " No devices were found".ljust(89) + "|", RULE]
    procs = [(g.nvml_index, p) for g in gpus for p in g.processes]
    return "\n".join([*lines, "", *process_rows(procs)])
