"""`gpuplace devices` through the real entry point: golden text, JSON schema, smoke checks."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import jsonschema
import pynvml
import pytest

from tests.conftest import Run
from tests.fakes.fake_pynvml import FakeNvml, four_gpus

SCHEMA = json.loads(resources.files("gpuplace").joinpath("schemas/devices.schema.json").read_text())

GOLDEN_K20M = """\
Simulated machine 4xK20m (every device below is simulated)
DEVICE         CUDA  NVML  PRODUCT                             UUID                                      BUS-ID            MEMORY TOTAL  USED  FREE     CC   UTIL  TEMP  POWER
/device:CPU:0  -     -     Simulated CPU, 8 cores [simulated]  -                                         -                 64.0 GiB      -     -        -    -     -     -
/device:GPU:0  0     2     Tesla K20m [simulated]              GPU-1f49aa16-71c0-5d47-9b63-358c172fbaab  00000000:83:00.0  5120MiB       0MiB  5120MiB  3.5  0%    N/A   N/A / 225W
/device:GPU:1  1     0     Tesla K20m [simulated]              GPU-90f1b18f-f9ff-5a2c-b7b9-979cfb693417  00000000:02:00.0  5120MiB       0MiB  5120MiB  3.5  0%    N/A   N/A / 225W
CUDA_VISIBLE_DEVICES='2,0' shows 2 of the 4 GPUs of this machine (unset it to see all).
"""


def test_golden_simulated_with_cuda_visible_devices(run: Run) -> None:
    result = run("--machine", "4xK20m", "devices", env={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert (result.code, result.err) == (0, "")
    assert result.out == GOLDEN_K20M


def test_no_driver_prints_cpu_and_why_and_exits_0(run: Run) -> None:
    result = run("devices")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "This machine"
    assert lines[2].startswith("/device:CPU:0")
    assert len(lines) == 4
    assert lines[3].startswith("No GPU listed: no NVIDIA driver: the NVML library")


def test_fake_real_machine_path(run: Run) -> None:
    fake = FakeNvml(four_gpus())
    fake.gpus[3].lost = True
    result = run(
        "devices", env={"CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, nvml=fake
    )
    assert result.code == 0
    rows = result.out.splitlines()
    assert rows[0] == "This machine (NVML, driver 550.54.15, CUDA 12.4)"
    assert "unavailable: GPU is lost" in rows[3] and "[simulated]" not in result.out
    assert rows[4].split()[:4] == ["/device:GPU:1", "1", "1", "NVIDIA"]
    assert "61W / 400W" in rows[4]


def test_order_warning_goes_to_stderr(run: Run) -> None:
    result = run("devices", env={"CUDA_VISIBLE_DEVICES": "0,2"}, nvml=FakeNvml(four_gpus()))
    assert result.err.startswith("warning: the visible GPUs differ in model")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--machine", "2xA100-80GB,1xT4", "devices", "--json"], {}),
        (["--machine", "4xK520", "devices", "--json", "--check"], {"CUDA_VISIBLE_DEVICES": "1"}),
        (["devices", "--json"], {}),
    ],
)
def test_json_matches_schema(run: Run, args: list[str], env: dict[str, str]) -> None:
    result = run(*args, env=env)
    assert result.code == 0
    doc = json.loads(result.out)
    jsonschema.validate(doc, SCHEMA)
    gpus = [d for d in doc["devices"] if d["device_type"] == "GPU"]
    assert doc["machine"]["visible_gpu_count"] == len(gpus)
    assert all(isinstance(d["memory_total"], int) for d in doc["devices"] if d["memory_total"])


def test_json_of_fake_real_machine(run: Run) -> None:
    doc = json.loads(
        run("devices", "--json", env={"CUDA_VISIBLE_DEVICES": "2"}, nvml=FakeNvml(four_gpus())).out
    )
    jsonschema.validate(doc, SCHEMA)
    gpu = doc["devices"][1]
    assert (gpu["name"], gpu["cuda_index"], gpu["nvml_index"], gpu["simulated"]) == (
        "/device:GPU:0",
        0,
        2,
        False,
    )
    assert gpu["compute_capability"] == "7.5"
    assert doc["machine"]["source"] == "nvml"


def test_require_gpus(run: Run) -> None:
    ok = run("--machine", "4xK520", "devices", "--require-gpus", "4")
    short = run(
        "--machine", "4xK520", "devices", "--require-gpus", "2", env={"CUDA_VISIBLE_DEVICES": "0"}
    )
    none = run("devices", "--require-gpus", "1")
    assert ok.code == 0
    assert short.code == 1 and short.err == "error: 2 GPUs required, 1 visible\n"
    assert none.code == 1 and none.err == "error: 1 GPUs required, 0 visible\n"


def test_min_memory_names_each_small_gpu(run: Run) -> None:
    pci = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    result = run("--machine", "1xA100-80GB,2xT4", "devices", "--min-memory", "16GiB", env=pci)
    assert result.code == 1
    assert result.err == (
        "error: /device:GPU:1 (Tesla T4, nvml 1) has 15.0 GiB total, less than --min-memory 16GiB; "
        "/device:GPU:2 (Tesla T4, nvml 2) has 15.0 GiB total, less than --min-memory 16GiB\n"
    )
    assert (
        run("--machine", "1xA100-80GB,2xT4", "devices", "--min-memory", "15GB", env=pci).code == 0
    )


@pytest.mark.parametrize("size", ["16", "16 GiBs", "-1GB", "lots"])
def test_bad_size_is_usage_error(run: Run, size: str) -> None:
    result = run("--machine", "1xT4", "devices", "--min-memory", size)
    assert result.code == 2
    assert result.err.startswith(f"error: --min-memory: cannot read {size!r} as a size; accepted:")
    assert "KiB, MiB, GiB, TiB" in result.err


def test_check_passes_on_simulated_devices(run: Run) -> None:
    result = run("--machine", "2xK520", "devices", "--check")
    assert result.code == 0
    lines = result.out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Check: 256x256 float32"))
    assert lines[title].endswith("rates: 2048x2048 float32 matmul, a + b on 64 MiB arrays")
    checks = lines[title + 2 :]
    assert [line.split()[0] for line in checks] == [
        "/device:CPU:0",
        "/device:GPU:0",
        "/device:GPU:1",
    ]
    assert all(" pass " in line and " ms " in line for line in checks)
    assert all(float(line.split()[-2]) > 0 and float(line.split()[-1]) > 0 for line in checks)


def test_check_fails_a_lost_gpu(run: Run) -> None:
    fake = FakeNvml(four_gpus()[:1])
    fake.gpus[0].fail["nvmlDeviceGetUUID"] = pynvml.NVMLError_GpuIsLost
    result = run("devices", "--check", nvml=fake)
    assert result.code == 1
    assert "FAIL" in result.out
    assert result.err == "error: /device:GPU:0 failed the matmul check: unavailable: GPU is lost\n"


def test_presets_listing(run: Run) -> None:
    result = run("devices", "--presets")
    assert result.code == 0
    rows = result.out.splitlines()
    assert rows[0].split() == ["PRESET", "PRODUCT", "MEMORY", "CC", "FP32", "TFLOPS"]
    assert rows[1].split()[:5] == ["K40c", "Tesla", "K40c", "12288MiB", "3.5"]
    assert any(r.startswith("H200 ") for r in rows)


def test_devices_imports_neither_numpy_nor_cupy() -> None:
    code = (
        "import sys\nfrom gpuplace.cli import main\n"
        "rc = main(['--machine', '8xA100-80GB', 'devices', '--json'])\n"
        "bad = [m for m in ('numpy', 'cupy', 'yaml') if m in sys.modules]\n"
        "sys.exit(10 if bad or rc else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_python_dash_m_and_traceback_only_with_debug() -> None:
    cmd = [sys.executable, "-m", "gpuplace", "--machine", "0xK520", "devices"]
    plain = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    debug = subprocess.run(
        [*cmd[:3], "--debug", *cmd[3:]], capture_output=True, text=True, check=False
    )
    assert "Traceback" in debug.stderr
