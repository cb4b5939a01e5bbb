"""nvidia-smi's default view (R550+ layout, 91 columns), byte for byte, from a Machine.

Format strings reconstructed from published 570.x output (reference: gpu-enumeration.md §4.1
and §4.2): a line is "|" + "|".join(cells) + "|", GPU cells 41/24/22 wide, MIG cells 18/34/11/23;
the process box is 89 wide inside. Unknown values print N/A where nvidia-smi prints them.
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
MIG_RULE = "+" + "-" * 18 + "+" + "-" * 34 + "+" + "-" * 11 + "+" + "-" * 23 + "+"
MIG_HEAD = [
    "| MIG devices:                                                                            |",
    MIG_RULE,
    "| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |",
    "|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG |",
    "|                  |                                  |        ECC|                       |",
    "|" + "=" * 18 + "+" + "=" * 34 + "+" + "=" * 11 + "+" + "=" * 23 + "|",
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
    """`83W`; unknown is `N/A` with a blank where the unit goes (`| ... N/A  /  N/A  |`)."""
    return f"{NA} " if w is None else f"{round(w)}W"


def _name(name: str) -> str:
    """Names longer than 27 characters are cut to 24 plus `...`, as nvidia-smi prints
    `NVIDIA RTX 6000 Ada Gene...` and `NVIDIA GeForce RTX 4090 ...` (published R550+ output)."""
    return name if len(name) <= 27 else name[:24] + "..."


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
    mig = "Enabled" if gpu.mig_enabled else "Disabled" if gpu.mig_capable else NA  # MIG M.
    power = f"{_watts(gpu.power_draw_watts):>5} / {_watts(gpu.power_limit_watts):>5}"
    # `    P0`, or `  N/A ` when unknown; the power column absorbs wider fan/temp/state values
    state = f"  {gpu.performance_state}" if gpu.performance_state else f"{NA} "
    left = f"{fan:>4}   {temp:>3}  {state}"
    return [
        _line(
            f" {gpu.nvml_index:>3}  {_name(gpu.product):<31}{_on_off(gpu.persistence_mode):<4}",
            f"   {gpu.pci_bus_id:<16} {_on_off(gpu.display_active):>3} ",
            f" {ecc:>20} ",
        ),
        _line(
            left + power.rjust(40 - len(left)) + " ",
            f"{_mib(gpu.memory_used):>11} / {_mib(gpu.memory_total):>9} ",
            f"{util:>8}{gpu.compute_mode or NA:>13} ",
        ),
        _line(" " * 41, " " * 24, f" {mig:>20} "),
    ]


def mig_rows(gpus: Sequence[Gpu]) -> list[str]:
    """The MIG devices box (between the GPU and process boxes) for the MIG-enabled GPUs.

    NVML gives gpuplace no BAR1, SM, ECC or engine counts for a MIG device: those read N/A.
    """
    body = []
    for gpu in gpus:
        if not gpu.mig_enabled:
            continue
        for m in gpu.mig_instances:
            ids = f" {gpu.nvml_index:>2}{m.gpu_instance_id:>5}{m.compute_instance_id:>4}{m.index:>4}  "
            memory = f"{_mib(m.memory_used):>19} / {_mib(m.memory_total):>8}    "
            body += [
                _line(ids, memory, f" {NA:<3}{NA:>6} ", f" {NA:>21} "),
                _line(" " * 18, f"{NA:>32}  ", " " * 11, " " * 23),
                MIG_RULE,
            ]
    if not body:
        body = ["|  No MIG devices found".ljust(90) + "|", RULE]
    return [RULE, *MIG_HEAD, *body]


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
    """The whole view: timestamp, header, one block per GPU, the MIG devices box when a GPU has
    MIG enabled, then the process box (each box after a blank line)."""
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
    if any(g.mig_enabled for g in gpus):
        lines += ["", *mig_rows(gpus)]
    procs = [(g.nvml_index, p) for g in gpus for p in g.processes]
    return "\n".join([*lines, "", *process_rows(procs)])
