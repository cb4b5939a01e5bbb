"""Real-GPU tests: run only where an NVIDIA GPU, its driver and cupy are present (`make gpu-check`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

import pytest


def _gpu_reason() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi on PATH: this machine has no NVIDIA driver"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "cupy sees no CUDA device"
    except Exception as exc:  # ImportError, CUDARuntimeError without a driver
        return f"cupy unusable here: {type(exc).__name__}: {exc}"
    return None


REASON = _gpu_reason()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.gpu)
            if REASON:
                item.add_marker(pytest.mark.skip(reason=REASON))


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
    )


def cupy_view(cvd: str | None) -> list[dict[str, Any]]:
    """What cupy sees under CUDA_VISIBLE_DEVICES=cvd, from a fresh process (ground truth)."""
    code = (
        "import json, cupy\n"
        "try:\n n = cupy.cuda.runtime.getDeviceCount()\n"
        "except cupy.cuda.runtime.CUDARuntimeError:\n n = 0\n"
        "out = []\n"
        "for i in range(n):\n"
        " p = cupy.cuda.runtime.getDeviceProperties(i)\n"
        " out.append({'name': p['name'].decode(), 'total': p['totalGlobalMem'],\n"
        "  'bus': '%08X:%02X:%02X.0' % (p['pciDomainID'], p['pciBusID'], p['pciDeviceID'])})\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    import json

    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result
