"""`gpuplace mem` on a real GPU: TensorFlow's default reservation as NVML sees it, allow_growth,
an OOM under --memory-limit, and the memory given back when the process ends.

Each run is a fresh `python -m gpuplace` process on CUDA GPU 0 only (one preallocation per
test); NVML is read here. This pytest process may hold a CUDA context of its own (the cupy
backend tests run first in it): constant, so the differences measured here do not see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuplace.devices.model import Gpu
from gpuplace.memory.policy import min_system_memory
from tests.gpu.conftest import TIMEOUT, released, settled

pytestmark = pytest.mark.gpu

MiB = 1024**2
GiB = 1024**3
ENV = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
CONTEXT = 2 * GiB  # what a process holds besides its pool: CUDA context, cuBLAS workspace
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def graph(tmp_path: Path, n: int) -> str:
    """c = a @ b on GPU:0 with a, b = ones([n, n], float32): 3 x 4 n^2 bytes at the peak."""
    path = tmp_path / f"matmul{n}.yaml"
    path.write_text(
        "graph:\n"
        f"  - {{name: a, op: ones, shape: [{n}, {n}], device: /gpu:0}}\n"
        f"  - {{name: b, op: ones, shape: [{n}, {n}], device: /gpu:0}}\n"
        "  - {name: c, op: matmul, inputs: [a, b], device: /gpu:0}\n"
        "fetch: [c]\n",
        encoding="utf-8",
    )
    return str(path)


def gpuplace(*args: str) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Run `python -m gpuplace ARGS` on GPU 0; return its pid and the finished process."""
    env = {**os.environ, **ENV}
    env["PYTHONPATH"] = os.getcwd() + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplace", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"gpuplace {' '.join(args)} did not finish in {TIMEOUT} s")
    return proc.pid, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def mem_json(*args: str) -> tuple[int, dict[str, Any]]:
    pid, done = gpuplace("mem", *args, "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return pid, doc


def tf_limit(gpu: Gpu) -> int:
    """TF's default: free memory minus MinSystemMemory for the card's compute capability."""
    free = gpu.memory_free or 0
    cc = int((gpu.compute_capability or "0").split(".")[0])
    margin = min_system_memory(free, cc)
    return free - margin if margin < free else free


def test_default_policy_reserves_what_tensorflow_would(tmp_path: Path) -> None:
    before = settled()
    pid, doc = mem_json(graph(tmp_path, 1024))
    [policy] = doc["policies"]
    [dev] = policy["devices"]
    assert policy["policy"] == "default"
    # the process probed NVML itself a moment later: allow for a little drift in free memory
    assert abs(dev["limit"] - tf_limit(before)) <= 256 * MiB
    assert dev["limit"] - 512 < dev["reserved"] <= dev["limit"]  # the pool held the whole block
    assert dev["peak"] == 3 * 4 * 1024 * 1024
    # NVML, probed again by the process while it held the block, sees it
    [held] = doc["gpus"]
    assert held["index"] == before.nvml_index and held["simulated"] is False
    grew = held["memory_used"] - (before.memory_used or 0)
    assert dev["reserved"] <= grew <= dev["reserved"] + CONTEXT
    mine = [p for p in held["processes"] if p["pid"] == pid]
    if mine and mine[0]["memory"] is not None:  # absent in a container's PID namespace
        assert dev["reserved"] <= mine[0]["memory"] <= dev["reserved"] + CONTEXT
    assert (
        released(before.nvml_index, before.memory_used or 0) <= (before.memory_used or 0) + 64 * MiB
    )


def test_allow_growth_reserves_only_what_it_uses(tmp_path: Path) -> None:
    before = settled()
    _, doc = mem_json(graph(tmp_path, 1024), "--allow-growth")
    [dev] = doc["policies"][0]["devices"]
    assert doc["policies"][0]["policy"] == "allow_growth"
    assert 12 * MiB <= dev["reserved"] <= 64 * MiB  # cupy's pool: the run's arrays, cached
    assert abs(dev["limit"] - tf_limit(before)) <= 256 * MiB  # growth keeps TF's limit
    grew = doc["gpus"][0]["memory_used"] - (before.memory_used or 0)
    assert grew <= dev["reserved"] + CONTEXT
    assert (
        released(before.nvml_index, before.memory_used or 0) <= (before.memory_used or 0) + 64 * MiB
    )


def test_memory_limit_out_of_memory(tmp_path: Path) -> None:
    before = settled()
    spec = graph(tmp_path, 4096)  # 64 MiB per tensor: b does not fit beside a under 64 MiB
    _, done = gpuplace("mem", spec, "--memory-limit", "64MiB")
    assert (done.returncode, done.stdout) == (1, "")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr  # one message
    assert errors[0].startswith(
        f"error: OOM when allocating 64.0 MiB (67108864 B) for op 'b' on {GPU0}: "
        "64.0 MiB (67108864 B) in use, 64.0 MiB (67108864 B) reserved, limit 64.0 MiB (67108864 B). "
        "The run stopped and freed everything it had allocated; nothing is left allocated. Fix: "
    )
    _, refused = gpuplace("run", spec, "--memory-limit", "64MiB")
    assert refused.returncode == 1
    assert "Predicted before running (plan): nothing was run or allocated" in refused.stderr
    assert (
        released(before.nvml_index, before.memory_used or 0) <= (before.memory_used or 0) + 64 * MiB
    )


def test_nvidia_smi_layout_on_this_card() -> None:
    """Our view of the card against nvidia-smi's own: the same frame, the same identity row."""
    _, ours = gpuplace("mem")
    theirs = subprocess.run(["nvidia-smi", "-i", str(settled().nvml_index)], capture_output=True,
                            text=True, check=True, timeout=TIMEOUT).stdout  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    mine, smi = ours.stdout.splitlines(), theirs.splitlines()
    start = smi.index(next(line for line in smi if line.startswith("| GPU  Name")))
    assert mine[4:8] == smi[start : start + 4]  # column headers and the double rule
    assert mine[8] == smi[start + 4]  # index, name, persistence, bus id, Disp.A, ECC
    assert [i for i, c in enumerate(mine[9]) if c == "|"] == [
        i for i, c in enumerate(smi[start + 5]) if c == "|"
    ]
    driver = smi[2][smi[2].index("Driver Version:") :]
    assert mine[2].endswith(driver)
