"""`gpuplace --machine 1xT4,2xA100-80GB devices` under CUDA_VISIBLE_DEVICES unset, 0, 1,0 and 2,
with CUDA_DEVICE_ORDER unset (CUDA's FASTEST_FIRST: the A100s are GPUs 0 and 1, the T4 is 2) and
PCI_BUS_ID (nvidia-smi's numbering: the T4 is 0). Golden text, stdout and stderr."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import Run

SCHEMA = json.loads(resources.files("gpuplace").joinpath("schemas/devices.schema.json").read_text())

WARNING = (
    "warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them "
    "fastest first (by gpuplace's emulation): CUDA's GPU 0 is nvml 1 (NVIDIA A100-SXM4-80GB), not "
    "nvidia-smi's GPU 0 (Tesla T4), and CUDA_VISIBLE_DEVICES counts in CUDA's order; export "
    "CUDA_DEVICE_ORDER=PCI_BUS_ID to number them as nvidia-smi does\n"
)
DEFAULT_UNSET = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     1     NVIDIA A100-SXM4-80GB [simulated]   GPU-4d305c44-8ec8-5ee0-9870-9d44f5a5be52  00000000:20:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
/device:GPU:1  1     2     NVIDIA A100-SXM4-80GB [simulated]   GPU-9fab5696-89d7-5c20-a5e6-6193d1e0a498  00000000:30:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
/device:GPU:2  2     0     Tesla T4 [simulated]                GPU-2d033ed6-9e5b-5ab1-8922-d1cced011509  00000000:10:00.0  15360MiB      0MiB  15360MiB  7.5  0%    N/A   N/A / 70W
"""
DEFAULT_0 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     1     NVIDIA A100-SXM4-80GB [simulated]   GPU-4d305c44-8ec8-5ee0-9870-9d44f5a5be52  00000000:20:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
CUDA_VISIBLE_DEVICES='0' shows 1 of the 3 GPUs of this machine (unset it to see all).
"""
DEFAULT_1_0 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     2     NVIDIA A100-SXM4-80GB [simulated]   GPU-9fab5696-89d7-5c20-a5e6-6193d1e0a498  00000000:30:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
/device:GPU:1  1     1     NVIDIA A100-SXM4-80GB [simulated]   GPU-4d305c44-8ec8-5ee0-9870-9d44f5a5be52  00000000:20:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
CUDA_VISIBLE_DEVICES='1,0' shows 2 of the 3 GPUs of this machine (unset it to see all).
"""
DEFAULT_2 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     0     Tesla T4 [simulated]                GPU-2d033ed6-9e5b-5ab1-8922-d1cced011509  00000000:10:00.0  15360MiB      0MiB  15360MiB  7.5  0%    N/A   N/A / 70W
CUDA_VISIBLE_DEVICES='2' shows 1 of the 3 GPUs of this machine (unset it to see all).
"""
PCI_UNSET = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     0     Tesla T4 [simulated]                GPU-2d033ed6-9e5b-5ab1-8922-d1cced011509  00000000:10:00.0  15360MiB      0MiB  15360MiB  7.5  0%    N/A   N/A / 70W
/device:GPU:1  1     1     NVIDIA A100-SXM4-80GB [simulated]   GPU-4d305c44-8ec8-5ee0-9870-9d44f5a5be52  00000000:20:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
/device:GPU:2  2     2     NVIDIA A100-SXM4-80GB [simulated]   GPU-9fab5696-89d7-5c20-a5e6-6193d1e0a498  00000000:30:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
"""
PCI_0 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     0     Tesla T4 [simulated]                GPU-2d033ed6-9e5b-5ab1-8922-d1cced011509  00000000:10:00.0  15360MiB      0MiB  15360MiB  7.5  0%    N/A   N/A / 70W
CUDA_VISIBLE_DEVICES='0' shows 1 of the 3 GPUs of this machine (unset it to see all).
"""
PCI_1_0 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     1     NVIDIA A100-SXM4-80GB [simulated]   GPU-4d305c44-8ec8-5ee0-9870-9d44f5a5be52  00000000:20:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
/device:GPU:1  1     0     Tesla T4 [simulated]                GPU-2d033ed6-9e5b-5ab1-8922-d1cced011509  00000000:10:00.0  15360MiB      0MiB  15360MiB  7.5  0%    N/A   N/A / 70W
CUDA_VISIBLE_DEVICES='1,0' shows 2 of the 3 GPUs of this machine (unset it to see all).
"""
PCI_2 = """\
Simulated machine 1xT4,2xA100-80GB (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE      CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 65536MiB      -     -         -    -     -     -
/device:GPU:0  0     2     NVIDIA A100-SXM4-80GB [simulated]   GPU-9fab5696-89d7-5c20-a5e6-6193d1e0a498  00000000:30:00.0  81920MiB      0MiB  81920MiB  8.0  0%    N/A   N/A / 400W
CUDA_VISIBLE_DEVICES='2' shows 1 of the 3 GPUs of this machine (unset it to see all).
"""
CASES = [
    (None, None, DEFAULT_UNSET, WARNING),
    (None, "0", DEFAULT_0, WARNING),
    (None, "1,0", DEFAULT_1_0, WARNING),
    (None, "2", DEFAULT_2, WARNING),
    ("PCI_BUS_ID", None, PCI_UNSET, ""),
    ("PCI_BUS_ID", "0", PCI_0, ""),
    ("PCI_BUS_ID", "1,0", PCI_1_0, ""),
    ("PCI_BUS_ID", "2", PCI_2, ""),
]


@pytest.mark.parametrize(("order", "cvd", "out", "err"), CASES)
def test_golden_order(run: Run, order: str | None, cvd: str | None, out: str, err: str) -> None:
    env = {"CUDA_DEVICE_ORDER": order} if order else {}
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    result = run("--machine", "1xT4,2xA100-80GB", "devices", env=env)
    assert result.code == 0
    assert (result.out, result.err) == (out, err)


@pytest.mark.parametrize(
    ("order", "kind", "source"),
    [(None, "FASTEST_FIRST", "emulated"), ("PCI_BUS_ID", "PCI_BUS_ID", "pci-bus-id")],
)
def test_json_says_which_order_and_how(run: Run, order: str | None, kind: str, source: str) -> None:
    env = {"CUDA_DEVICE_ORDER": order} if order else {}
    doc = json.loads(run("--machine", "1xT4,2xA100-80GB", "devices", "--json", env=env).out)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["machine"]["order"]["kind"], doc["machine"]["order"]["source"]) == (kind, source)
    gpus = doc["devices"][1:]
    expected = [1, 2, 0] if order is None else [0, 1, 2]
    assert [(d["cuda_index"], d["nvml_index"]) for d in gpus] == list(enumerate(expected))
    assert doc["machine"]["warnings"] == ([WARNING.removeprefix("warning: ").rstrip()] if order is None else [])  # fmt: skip


MACHINE = """\
name: two-cards
gpus:
  - {name: Card A, memory: 8GiB, compute_capability: "8.6", sm_count: 28, clock_mhz: 1777}
  - {name: Card B, memory: 8GiB, compute_capability: "8.6", sm_count: 82, clock_mhz: 1695}
"""


def test_a_machine_file_gives_the_speed_of_its_own_cards(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(MACHINE)
    doc = json.loads(run("--machine", str(path), "devices", "--json").out)
    assert [(d["product"], d["nvml_index"]) for d in doc["devices"][1:]] == [("Card B", 1), ("Card A", 0)]  # fmt: skip
    path.write_text(MACHINE.replace("sm_count: 28", "sm_count: 0"))
    result = run("--machine", str(path), "devices")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: {path}: gpus[0].sm_count: expected a whole number from 1 to 1000000, got 0\n"
    )


def test_the_smoke_check_on_mixed_models_warns_about_the_order(run: Run) -> None:
    """docs/devices.md: `gpuplace --machine 2xA100-80GB,1xT4 devices --require-gpus 4
    --min-memory 40GiB` (mixed models in fastest-first order already: the warning says so;
    tests/test_docs.py compares the whole output with the doc)."""
    result = run(
        "--machine", "2xA100-80GB,1xT4", "devices", "--require-gpus", "4", "--min-memory", "40GiB"
    )
    assert result.code == 1
    warning, _error = result.err.splitlines()
    assert warning == (
        "warning: the GPUs differ in model and CUDA_DEVICE_ORDER is unset, so CUDA numbers them "
        "fastest first (by gpuplace's emulation): here that is nvidia-smi's numbering too, but "
        "CUDA's indices follow speed, not slots; export CUDA_DEVICE_ORDER=PCI_BUS_ID to keep them "
        "numbered as nvidia-smi does"
    )
