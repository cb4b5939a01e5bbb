"""`gpuplace devices` on a real GPU against nvidia-smi and cupy (ground truth)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.gpu.conftest import cupy_view, gpuplace


def smi() -> list[dict[str, str]]:
    fields = "index,name,uuid,pci.bus_id,memory.total"
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    keys = fields.split(",")
    return [
        dict(zip(keys, (c.strip() for c in line.split(",")), strict=True))
        for line in out.splitlines()
    ]


def devices_json(env: dict[str, str] | None = None) -> dict[str, Any]:
    done = gpuplace("devices", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_matches_nvidia_smi_and_cupy() -> None:
    doc = devices_json()
    gpus = [d for d in doc["devices"] if d["device_type"] == "GPU"]
    truth = smi()
    assert doc["machine"]["source"] == "nvml" and not doc["machine"]["simulated"]
    assert len(gpus) == len(truth) > 0
    by_nvml = sorted(gpus, key=lambda d: d["nvml_index"])  # nvidia-smi's order; cupy's is CUDA's
    cupy = {c["bus"].upper(): c for c in cupy_view(None)}
    for ours, theirs in zip(by_nvml, truth, strict=True):
        cp = cupy[ours["pci_bus_id"].upper()]
        assert ours["nvml_index"] == int(theirs["index"])
        assert ours["product"] == theirs["name"] == cp["name"]
        assert ours["uuid"] == theirs["uuid"]
        assert ours["pci_bus_id"].upper() == theirs["pci.bus_id"].upper() == cp["bus"].upper()
        assert ours["memory_total"] // 2**20 == int(theirs["memory.total"])
        # cupy's totalGlobalMem excludes nothing NVML counts; allow the driver's reserved sliver
        assert abs(ours["memory_total"] - cp["total"]) <= 2 * 2**30
        assert ours["simulated"] is False


def _values(uuid: str) -> list[str | None]:
    return [None, "", "0", "-1", "0,0", "0,-1", "1", "0,1", uuid[:12], uuid, "abc"]


def test_cuda_visible_devices_matches_cupy() -> None:
    uuid = smi()[0]["uuid"]
    for value in _values(uuid):
        env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
        ours = [d for d in devices_json(env)["devices"] if d["device_type"] == "GPU"]
        theirs = cupy_view(value)
        assert [d["pci_bus_id"].upper() for d in ours] == [c["bus"].upper() for c in theirs], value


def test_check_passes_on_every_device() -> None:
    done = gpuplace("devices", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert "[simulated]" not in done.stdout


@pytest.mark.parametrize("args", [["--require-gpus", "1"], ["--min-memory", "1GiB"]])
def test_smoke_checks_pass(args: list[str]) -> None:
    assert gpuplace("devices", *args).returncode == 0
