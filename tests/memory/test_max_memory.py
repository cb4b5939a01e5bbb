"""`--max-memory` (Accelerate's max_memory): the forms it takes, each bad entry named, and the
caps it sets: a GPU's is exactly a per-GPU memory limit, the CPU's bounds what CPU:0 may hold."""

from __future__ import annotations

import json

import pytest

from gpuplace.errors import BadInput
from gpuplace.memory.policy import parse_max_memory
from tests.conftest import Run

GiB = 1024**3
BIG = "examples/big_model.yaml"


def test_gpus_by_tensorflow_or_accelerate_names_and_the_cpu() -> None:
    assert parse_max_memory("GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB") == (
        {0: 10 * GiB, 1: 10 * GiB},
        30 * GiB,
    )
    assert parse_max_memory("0=1GiB, /device:gpu:2 = 2GiB, cpu=512MiB") == (
        {0: GiB, 2: 2 * GiB}, 512 * 1024**2,
    )  # fmt: skip
    assert parse_max_memory("CPU=1GB") == ({}, 10**9)


@pytest.mark.parametrize(("value", "error"), [
    ("GPU:0=ten", "--max-memory GPU:0: cannot read 'ten' as a size; accepted: a number and a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 16GiB, 500MB, 1.5GiB)"),
    ("disk=1GiB", "--max-memory: cannot read 'disk=1GiB'; expected DEVICE=SIZE with DEVICE GPU:N (or N) or CPU, several separated by ',' (e.g. GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB)"),
    ("CPU:0=1GiB", "--max-memory: cannot read 'CPU:0=1GiB'; expected DEVICE=SIZE with DEVICE GPU:N (or N) or CPU, several separated by ',' (e.g. GPU:0=10GiB,GPU:1=10GiB,CPU=30GiB)"),
    ("GPU:0=1GiB,0=2GiB", "--max-memory: GPU:0 is given twice ('GPU:0=1GiB' and '0=2GiB'); give each device once"),
    ("GPU:1=0MiB", "--max-memory: 'GPU:1=0MiB': a device needs memory > 0 to hold anything; give it a size (e.g. GPU:1=10GiB), or leave it out"),
    ("GPU:4=1GiB", "--max-memory names GPU:4, but this process sees 4 GPUs (GPU:0..GPU:3)"),
    ("GPU:0=1GiB --memory-fraction 0.5", "--max-memory 'GPU:0=1GiB' conflicts with --memory-fraction: both set the GPUs' memory; give one of them"),
])  # fmt: skip
def test_a_bad_entry_is_named_with_the_fix(run: Run, value: str, error: str) -> None:
    value, *more = value.split(" ")
    result = run("--machine", "4xK520", "plan", BIG, "--max-memory", value, *more)
    assert (result.code, result.out, result.err) == (2, "", f"error: {error}\n")


def test_the_api_names_the_option() -> None:
    with pytest.raises(BadInput) as caught:
        parse_max_memory("GPU:0=1GiB,GPU:0=1GiB")
    assert str(caught.value).startswith("Options.max_memory: GPU:0 is given twice")


def _devices(run: Run, *args: str) -> list[dict[str, object]]:
    result = run("--machine", "4xK520", "plan", BIG, "--json", "--strategy", "balanced", *args)
    assert result.code == 0, result.err
    return list(json.loads(result.out)["devices"])


def test_a_gpu_s_cap_is_its_memory_limit_and_the_cpu_s_bounds_cpu_0(run: Run) -> None:
    every = ",".join(f"GPU:{i}=3GiB" for i in range(4))
    assert _devices(run, "--max-memory", every) == _devices(run, "--memory-limit", "3GiB")
    default = _devices(run)
    capped = _devices(run, "--max-memory", "GPU:1=3GiB,CPU=2GiB")
    assert [d["limit"] for d in capped] == [3770679296, 3 * GiB, 3770679296, 3770679296, 2 * GiB]
    assert all(d["fits"] for d in capped)  # balanced placed within the caps
    assert int(str(default[1]["peak_predicted"])) > 3 * GiB >= int(str(capped[1]["peak_predicted"]))
