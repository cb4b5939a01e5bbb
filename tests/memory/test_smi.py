"""nvidia-smi's default view, byte for byte against published output (R550+ layout, 91 columns).

The published samples are quoted from gpu-enumeration.md §4 (570.195.03 on an L40S, the MIG
devices box) and from public nvidia-smi output of the same layout (long names, N/A cells).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from gpuplace.devices.model import Gpu, GpuProcess, Host, Machine, MigInstance
from gpuplace.report.smi import smi_text
from tests.fakes.fake_pynvml import MiB

NOW = datetime(2026, 2, 4, 10, 18, 32)
HOST = Host("test CPU", 1, None)

PUBLISHED_570 = """\
Wed Feb  4 10:18:32 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.195.03             Driver Version: 570.195.03     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA L40S                    Off |   00000000:25:00.0 Off |                    0 |
| N/A   44C    P0             83W /  350W |   41515MiB /  46068MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A         3330776      C   ...ma.cpp/build/bin/llama-server      41504MiB |
+-----------------------------------------------------------------------------------------+"""

L40S = Gpu(
    nvml_index=0,
    product="NVIDIA L40S",
    uuid="GPU-5a1c0000-0000-4000-8000-000000000000",
    pci_bus_id="00000000:25:00.0",
    memory_total=46068 * MiB + 123,  # nvidia-smi prints whole MiB, rounded down
    memory_used=41515 * MiB + 1000,
    memory_free=4552 * MiB,
    compute_capability="8.9",
    utilization_percent=0,
    temperature_celsius=44,
    power_draw_watts=83.21,
    power_limit_watts=350.0,
    fan_percent=None,  # a passively cooled datacenter card: NVML says NotSupported
    performance_state="P0",
    persistence_mode=False,
    display_active=False,
    ecc_uncorrected=0,
    compute_mode="Default",
    processes=(
        GpuProcess(3330776, "/home/user/src/llama.cpp/build/bin/llama-server", 41504 * MiB),
    ),
)
DRIVER = Machine("nvml", HOST, (L40S,), "NVML", driver_version="570.195.03", cuda_version="12.8")


def smi(*gpus: Gpu) -> str:
    return smi_text(DRIVER._replace(gpus=gpus), gpus, NOW)


def test_published_570_output_byte_for_byte() -> None:
    assert smi(L40S) == PUBLISHED_570


def test_every_box_line_is_91_wide() -> None:
    quiet = L40S._replace(processes=())
    text = smi(L40S, quiet._replace(nvml_index=1), _unknown(2), _mig_gpu(3, ()))
    for line in text.splitlines()[1:]:
        assert line == "" or len(line) == 91, line


def test_no_process_line() -> None:
    lines = smi(L40S._replace(processes=())).splitlines()
    assert lines[-7:] == [
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
        "|  No running processes found                                                             |",
        "+-----------------------------------------------------------------------------------------+",
    ]


def test_gpus_are_separated_and_closed_by_the_same_rule() -> None:
    second = L40S._replace(nvml_index=1, pci_bus_id="00000000:26:00.0", processes=())
    lines = smi(L40S, second).splitlines()
    rule = "+-----------------------------------------+------------------------+----------------------+"
    assert lines[8:12] == PUBLISHED_570.splitlines()[8:12]
    assert lines[11] == lines[15] == rule
    assert lines[16] == ""
    assert (
        lines[12]
        == "|   1  NVIDIA L40S                    Off |   00000000:26:00.0 Off |                    0 |"
    )


def _unknown(index: int) -> Gpu:
    """A GPU whose driver says nothing but its name and bus id."""
    return Gpu(index, "NVIDIA Thor", "GPU-t", "00000000:01:00.0")


def test_na_cells_where_the_driver_does_not_say() -> None:
    rows = smi(_unknown(0)).splitlines()[8:11]
    # Published (580.x on Thor): `| N/A   N/A  N/A             N/A  /  N/A  | Not Supported ...`
    assert rows[1].startswith("| N/A   N/A  N/A             N/A  /  N/A  |")
    assert rows == [
        "|   0  NVIDIA Thor                    N/A |   00000000:01:00.0 N/A |                  N/A |",
        "| N/A   N/A  N/A             N/A  /  N/A  |        N/A /       N/A |     N/A          N/A |",
        "|                                         |                        |                  N/A |",
    ]


def test_unknown_power_on_a_known_pstate_matches_published_vgpu_output() -> None:
    gpu = L40S._replace(product="NVIDIA L40S-24Q", power_draw_watts=None, power_limit_watts=None,
        temperature_celsius=None, memory_used=17 * MiB, memory_total=24576 * MiB,
    )  # fmt: skip
    assert smi(gpu).splitlines()[9] == (
        "| N/A   N/A    P0            N/A  /  N/A  |      17MiB /  24576MiB |      0%      Default |"
    )


@pytest.mark.parametrize(
    ("gpu", "published"),
    [
        (  # 30 characters: cut to 24 plus "..."
            L40S._replace(
                product="NVIDIA RTX 6000 Ada Generation",
                pci_bus_id="00000000:45:00.0",
                fan_percent=30,
                temperature_celsius=58,
                performance_state="P2",
                power_draw_watts=299,
                power_limit_watts=300,
                memory_used=30566 * MiB,
                utilization_percent=100,
            ),
            "|   0  NVIDIA RTX 6000 Ada Gene...    Off |   00000000:45:00.0 Off |                    0 |\n"
            "| 30%   58C    P2            299W /  300W |   30566MiB /  46068MiB |    100%      Default |",
        ),
        (  # 26 characters: shown whole; persistence On is left-aligned like Off
            L40S._replace(
                product="NVIDIA GeForce RTX 2080 Ti",
                pci_bus_id="00000000:B2:00.0",
                persistence_mode=True,
                ecc_uncorrected=None,
                fan_percent=29,
                temperature_celsius=26,
                performance_state="P8",
                power_draw_watts=23,
                power_limit_watts=250,
                memory_used=3 * MiB,
                memory_total=11264 * MiB,
            ),
            "|   0  NVIDIA GeForce RTX 2080 Ti     On  |   00000000:B2:00.0 Off |                  N/A |\n"
            "| 29%   26C    P8             23W /  250W |       3MiB /  11264MiB |      0%      Default |",
        ),
    ],
)
def test_names_and_cells_as_published(gpu: Gpu, published: str) -> None:
    assert "\n".join(smi(gpu).splitlines()[8:10]) == published


def test_long_process_names_are_cut_on_the_left() -> None:
    short = GpuProcess(7, "python train.py", None, "C+G")
    gpu = L40S._replace(processes=(short, L40S.processes[0]))
    body = smi(gpu).splitlines()[-3:-1]
    assert body == [
        "|    0   N/A  N/A               7    C+G   python train.py                            N/A |",
        "|    0   N/A  N/A         3330776      C   ...ma.cpp/build/bin/llama-server      41504MiB |",
    ]


# The MIG devices box, as 570.x prints it for an H200 with one MIG device (published output).
PUBLISHED_MIG = """\
+-----------------------------------------------------------------------------------------+
| MIG devices:                                                                            |
+------------------+----------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |
|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG |
|                  |                                  |        ECC|                       |
|==================+==================================+===========+=======================|
|  0    5   0   0  |              29MiB / 33280MiB    | 32      0 |  2   0    2    0    2 |
|                  |                 0MiB / 65535MiB  |           |                       |
+------------------+----------------------------------+-----------+-----------------------+"""


def _mig_gpu(index: int, migs: tuple[MigInstance, ...]) -> Gpu:
    return Gpu(
        index, "NVIDIA H200", f"GPU-h{index}", f"00000000:{0x2A + index:02X}:00.0",
        memory_total=143771 * MiB, memory_used=29 * MiB, utilization_percent=0,
        temperature_celsius=30, power_draw_watts=76, power_limit_watts=700,
        performance_state="P0", persistence_mode=False, display_active=False,
        compute_mode="Default", mig_enabled=True, mig_instances=migs,
    )  # fmt: skip


def _mig(index: int, gi: int, used_mib: int) -> MigInstance:
    return MigInstance(
        index, f"MIG-{gi}", "NVIDIA H200 MIG 3g.71gb", gi, 0, 33280 * MiB, used_mib * MiB
    )


def test_mig_box_between_gpu_and_process_boxes() -> None:
    lines = smi(_mig_gpu(0, (_mig(0, 5, 29),))).splitlines()
    # the parent GPU: ECC cell On, GPU-Util N/A, MIG M. Enabled (published H200 lines)
    assert (
        lines[8]
        == "|   0  NVIDIA H200                    Off |   00000000:2A:00.0 Off |                   On |"
    )
    assert lines[9].endswith("|     N/A      Default |")
    assert lines[10].endswith("|              Enabled |")
    assert lines[12] == ""
    published = PUBLISHED_MIG.splitlines()
    box = lines[13 : 13 + len(published)]
    assert box[:7] == published[:7]  # rule, title, header, double rule: byte for byte
    assert box[9] == published[9]
    # GPU/GI/CI/MIG and the memory cell as published; NVML gives gpuplace no BAR1, SM, ECC or
    # engine counts for MIG devices, so those cells read N/A
    assert box[7].split("|")[1:3] == published[7].split("|")[1:3]
    assert (
        box[7]
        == "|  0    5   0   0  |              29MiB / 33280MiB    | N/A   N/A |                   N/A |"
    )
    assert (
        box[8]
        == "|                  |                             N/A  |           |                       |"
    )
    assert lines[13 + len(published)] == ""
    assert lines[14 + len(published)].startswith("+---")
    assert lines[15 + len(published)].startswith("| Processes:")


def test_mig_box_lists_each_mig_device_of_each_mig_gpu() -> None:
    text = smi(_mig_gpu(0, (_mig(0, 1, 13), _mig(1, 2, 0))), _mig_gpu(1, (_mig(0, 1, 7),)))
    rows = [line for line in text.splitlines() if "/ 33280MiB    |" in line]
    assert [r[:20] for r in rows] == [
        "|  0    1   0   0  |",
        "|  0    2   0   1  |",
        "|  1    1   0   0  |",
    ]
    assert [r.split("|")[2].split("/")[0].strip() for r in rows] == ["13MiB", "0MiB", "7MiB"]


def test_mig_enabled_without_devices() -> None:
    lines = smi(_mig_gpu(0, ())).splitlines()
    start = lines.index(
        "| MIG devices:                                                                            |"
    )
    assert lines[start + 6 : start + 9] == [
        "|  No MIG devices found                                                                   |",
        "+-----------------------------------------------------------------------------------------+",
        "",
    ]


def test_no_mig_box_without_mig() -> None:
    assert "MIG devices" not in smi(L40S)
