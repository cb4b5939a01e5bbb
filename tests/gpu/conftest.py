"""Real-GPU tests: run only where an NVIDIA GPU, its driver and cupy are present (`make gpu-check`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gpuplace.devices.model import Gpu

MiB = 1024**2
TIMEOUT = 120  # seconds for one gpuplace process: a hung CUDA or NVML call fails one test only


def _gpu_state() -> tuple[str | None, str | None]:
    """(why to skip, why to fail): no driver skips the suite; a driver that cupy cannot use
    (no cupy, a CUDA older than cupy's, no device in the container) fails every test, since
    that is what this suite is here to catch on a GPU node."""
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi on PATH: this machine has no NVIDIA driver", None
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "nvidia-smi is here but cupy sees no CUDA device"
    except Exception as exc:  # ImportError, CUDARuntimeError
        return None, f"nvidia-smi is here but cupy is unusable: {type(exc).__name__}: {exc}"
    return None, None


SKIP, BROKEN = _gpu_state()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.gpu)
            if SKIP:
                item.add_marker(pytest.mark.skip(reason=SKIP))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if BROKEN and "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
        pytest.fail(BROKEN, pytrace=False)


def gpuplace(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m gpuplace ARGS` from the source tree in a fresh process."""
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.getcwd() + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "gpuplace", *args],
        capture_output=True,
        text=True,
        env=full,
        check=False,
        timeout=TIMEOUT,
    )


def card(nvml_index: int = 0) -> Gpu:
    """GPU `nvml_index` as NVML reports it now (read in this process: no CUDA context here)."""
    from gpuplace.devices.nvml import probe

    return probe().gpus[nvml_index]


def settled(nvml_index: int = 0) -> Gpu:
    """The card once two NVML readings 0.25 s apart agree within 16 MiB (an ended process's
    memory is being given back), or after 5 s."""
    now = card(nvml_index)
    for _ in range(20):
        time.sleep(0.25)
        later = card(nvml_index)
        if abs((later.memory_used or 0) - (now.memory_used or 0)) <= 16 * MiB:
            return later
        now = later
    return now


def released(nvml_index: int, used_before: int) -> int:
    """NVML's used memory once the driver has taken back an ended process's memory."""
    used = card(nvml_index).memory_used or 0
    for _ in range(40):  # the driver frees an ended process's memory shortly after it exits
        if used <= used_before + 64 * MiB:
            break
        time.sleep(0.25)
        used = card(nvml_index).memory_used or 0
    return used


def cupy_view(cvd: str | None, order: str | bool | None = False) -> list[dict[str, Any]]:
    """What cupy sees under CUDA_VISIBLE_DEVICES=cvd, from a fresh process (ground truth), in
    CUDA's order: CUDA_DEVICE_ORDER=`order` (None: unset; False: as this process has it)."""
    code = (
        "import json, cupy\n"
        "try:\n n = cupy.cuda.runtime.getDeviceCount()\n"
        "except cupy.cuda.runtime.CUDARuntimeError:\n n = 0\n"
        "out = []\n"
        "for i in range(n):\n"
        " p = cupy.cuda.runtime.getDeviceProperties(i)\n"
        " name = p['name'].decode() if isinstance(p['name'], bytes) else p['name']\n"
        " out.append({'name': name, 'total': p['totalGlobalMem'],\n"
        "  'bus': '%08X:%02X:%02X.0' % (p['pciDomainID'], p['pciBusID'], p['pciDeviceID'])})\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    if order is not False:
        env.pop("CUDA_DEVICE_ORDER", None)
        if isinstance(order, str):
            env["CUDA_DEVICE_ORDER"] = order
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    import json

    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result
