"""Shared pieces of the memory tests: small graph specs, and a fake NVML that sees fake cupy.

`LinkedNvml` plays the driver of a "real" machine: what this process's fake cupy pools hold
on a device shows in that GPU's used memory and as this process's row, as NVML would show a
cupy process holding its pool.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.fake_cupy import FakeCupy
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, MiB

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


RAN = "The run stopped and freed everything it had allocated; nothing is left allocated."
PREDICTED = (
    "Predicted before running (plan): nothing was run or allocated; pass --force to run anyway."
)


def oom_10mib(what: str) -> str:
    """The whole error of `matmul_graph` (1024) on one GPU under --memory-limit 10MiB."""
    return (
        f"error: OOM when allocating 4.0 MiB (4194304 B) for op 'c' on {GPU0}: "
        "8.0 MiB (8388608 B) in use, 10.0 MiB (10485760 B) reserved, limit 10.0 MiB (10485760 B). "
        f"{what} Fix: give the device more memory (--memory-limit / --virtual-gpus).\n"
    )


def spec(path: Path, ops: list[dict[str, Any]], **top: Any) -> str:
    """Write a graph spec (`graph: ops`, plus `config`/`fetch`) and return its path."""
    path.write_text(yaml.safe_dump({"graph": ops, **top}, sort_keys=False), encoding="utf-8")
    return str(path)


def matmul_graph(path: Path, n: int = 1024, device: str | None = None) -> str:
    """a, b: ones [n, n] float32, c = a @ b: three tensors of 4 n^2 bytes live at c's peak."""
    where = {"device": device} if device else {}
    return spec(
        path,
        [
            {"name": "a", "op": "ones", "shape": [n, n], "dtype": "float32", **where},
            {"name": "b", "op": "ones", "shape": [n, n], "dtype": "float32", **where},
            {"name": "c", "op": "matmul", "inputs": ["a", "b"], **where},
        ],
        fetch=["c"],
    )


def small_gpus(
    count: int = 2, total: int = 1024 * MiB, cc: tuple[int, int] = (7, 5)
) -> list[FakeGpu]:
    """Small cards (so the fake cupy's preallocation stays small): 4 MiB used, none reserved."""
    return [
        FakeGpu(
            name="Tesla T4",
            uuid=f"GPU-{i}{i}{i}{i}bbbb-0000-4000-8000-00000000000{i}",
            bus_id=f"00000000:{0x3B + i:02X}:00.0",
            total=total,
            used=4 * MiB,
            reserved=0,
            cc=cc,
            limit_mw=70000,
        )
        for i in range(count)
    ]


class LinkedNvml(FakeNvml):
    """FakeNvml whose GPUs also carry what `cupy`'s pools (this process) hold on them."""

    def __init__(self, gpus: list[FakeGpu], cupy: FakeCupy) -> None:
        super().__init__(gpus, driver="570.195.03", cuda=12080)
        self.cupy = cupy

    def _held(self, handle: Any) -> int:
        index = next(i for i, g in enumerate(self.gpus) if g is handle.gpu)
        held: int = self.cupy._state.pools[index].reserved
        return held

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> Any:
        info = super().nvmlDeviceGetMemoryInfo(h, version)
        held = self._held(h)
        info.used += held
        info.free -= held
        return info

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[types.SimpleNamespace]:
        procs = super().nvmlDeviceGetComputeRunningProcesses(h)
        held = self._held(h)
        if held:
            procs.append(types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=held))
        return procs


def pool_state(cupy: Any) -> list[tuple[int, int]]:
    """(limit, bytes held) of each device's pool, read the way cupy users read them."""
    out = []
    pool = cupy.get_default_memory_pool()
    for i in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(i):
            out.append((pool.get_limit(), pool.total_bytes()))
    return out
