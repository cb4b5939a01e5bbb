"""gpuplace's GPU order against the CUDA driver's and cupy's on a real node (`make gpu-check`),
under CUDA_DEVICE_ORDER unset (FASTEST_FIRST) and PCI_BUS_ID, each in a fresh process.

The driver's answer comes from `_libcuda_child.py` run directly with the environment under test,
so the driver itself applies CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES; gpuplace applies
CUDA_VISIBLE_DEVICES on its own (`visible.py`) on top of the order it asked the driver for with
the variable unset. cupy's is `cupy.cuda.runtime.getDeviceProperties` (pciBusID) per device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from gpuplace.devices.libcuda import CHILD
from gpuplace.devices.pci import bus_key
from tests.gpu.conftest import TIMEOUT, cupy_view

ORDERS = [None, "PCI_BUS_ID"]


def _env(order: str | None, cvd: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES")}  # fmt: skip
    if order is not None:
        env["CUDA_DEVICE_ORDER"] = order
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    return env


def driver(order: str | None, cvd: str | None) -> list[int | None]:
    """The bus ids (as numbers) the CUDA driver enumerates, in its order."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(CHILD)], env=_env(order, cvd), capture_output=True,
        text=True, timeout=TIMEOUT, check=True,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(done.stdout)
    if "error" in doc:
        assert "CUDA_ERROR_NO_DEVICE" in doc["error"] or "INVALID_DEVICE" in doc["error"], doc
        return []
    return [bus_key(d["bus"]) for d in doc["devices"]]


def ours(order: str | None, cvd: str | None) -> tuple[list[int | None], dict[str, Any]]:
    env = _env(order, cvd)
    env["PYTHONPATH"] = os.getcwd() + os.pathsep + env.get("PYTHONPATH", "")  # this source tree
    done = subprocess.run(
        [sys.executable, "-m", "gpuplace", "devices", "--json"], env=env,
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return [bus_key(d["pci_bus_id"]) for d in doc["devices"][1:]], doc


def cupy(order: str | None, cvd: str | None) -> list[int | None]:
    return [bus_key(c["bus"]) for c in cupy_view(cvd, order)]


def _values() -> list[str | None]:
    count = len(ours("PCI_BUS_ID", None)[0])
    values: list[str | None] = [None, "0", str(count - 1)]
    if count > 1:
        values += ["1,0", ",".join(str(i) for i in reversed(range(count)))]
    return values


@pytest.mark.parametrize("order", ORDERS, ids=["unset", "PCI_BUS_ID"])
def test_order_matches_the_driver_and_cupy(order: str | None) -> None:
    for cvd in _values():
        buses, _ = ours(order, cvd)
        assert buses == driver(order, cvd), (order, cvd)
        assert buses == cupy(order, cvd), (order, cvd)


def test_devices_json_says_the_driver_gave_the_order() -> None:
    _, doc = ours(None, None)
    count = doc["machine"]["gpu_count"]
    source = doc["machine"]["order"]["source"]
    assert source == ("libcuda" if count > 1 else "emulated"), doc["machine"]["order"]
    assert ours("PCI_BUS_ID", None)[1]["machine"]["order"]["source"] == "pci-bus-id"


def test_the_emulated_rule_agrees_with_the_driver() -> None:
    """Where they differ, the emulation (used on simulated machines) is wrong for these cards."""
    from gpuplace.devices.libcuda import probe_order
    from gpuplace.devices.nvml import probe
    from gpuplace.devices.order import emulated_fastest_first

    gpus = probe().gpus
    asked = probe_order(gpus)
    assert asked.nvml_indices is not None, asked.detail
    emulated = tuple(g.nvml_index for g in emulated_fastest_first(gpus))
    products = {g.nvml_index: g.product for g in gpus}
    assert emulated == asked.nvml_indices, (
        f"driver: {[products[i] for i in asked.nvml_indices]}, "
        f"emulated: {[products[i] for i in emulated]}"
    )
