"""Towers, balanced and replicate on logical GPUs carved out of one "real" card: fake NVML
and fake cupy, the path a GPU node takes (`tests/gpu/test_run_gpu.py` runs the same on a real
card). Every op runs in the card's cupy pool and `--verify` checks it against the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.fakes.fake_cupy import make_fake_cupy
from tests.fakes.fake_pynvml import MiB
from tests.gpu.test_run_gpu import REPLICATED
from tests.memory.helpers import LinkedNvml, small_gpus

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "examples" / "guide"


def one_card(run: Run, *args: str) -> tuple[int, str, str, list[tuple[int, int]]]:
    """Run on one 1 GiB card; also return each cupy pool's (limit, bytes held) afterwards."""
    cupy = make_fake_cupy(1, 1024 * MiB)
    nvml = LinkedNvml(small_gpus(1), cupy)
    result = run(*args, nvml=nvml, cupy_loader=lambda: cupy)
    pool = cupy.get_default_memory_pool()
    with cupy.cuda.Device(0):
        held = [(pool.get_limit(), pool.total_bytes())]
    return result.code, result.out, result.err, held


def test_multi_tower_on_four_logical_gpus_of_one_card(run: Run) -> None:
    code, out, err, held = one_card(
        run, "run", str(GUIDE / "04_multi_tower.yaml"), "--verify",
        "--virtual-gpus", "GPU:0=64MiB,64MiB,64MiB,64MiB",
    )  # fmt: skip
    assert (code, err) == (0, ""), out
    assert "MatMul_1: /job:localhost/replica:0/task:0/device:GPU:3\n" in out
    assert "/device:GPU:3 -> device: 0, name: Tesla T4" in out
    assert "[simulated]" not in out
    assert "[[ 44.  56.]\n [ 98. 128.]]" in out and ": ok" in out
    assert held == [(0, 0)]  # the card's pool is released and its limit lifted


@pytest.mark.slow  # runs examples/small_model.yaml (160 MiB of weights) for real
def test_balanced_spreads_over_logical_gpus_of_one_card(run: Run) -> None:
    code, out, err, held = one_card(
        run, "run", str(ROOT / "examples" / "small_model.yaml"), "--strategy", "balanced",
        "--verify", "--json", "--virtual-gpus", "GPU:0=64MiB,64MiB,64MiB,64MiB",
    )  # fmt: skip
    assert (code, err) == (0, ""), out
    doc = json.loads(out)
    assert doc["verify"] and all(v["ok"] for v in doc["verify"])
    used = {p["device"] for p in doc["placement"] if "GPU" in p["device"]}
    assert len(used) >= 3
    assert held == [(0, 0)]


def test_replicate_on_two_logical_gpus_of_one_card(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "rep.yaml"
    spec.write_text(REPLICATED)
    code, out, err, held = one_card(
        run,
        "run",
        str(spec),
        "--verify",
        "--log-placement",
        "--virtual-gpus",
        "GPU:0=128MiB,128MiB",
    )
    assert (code, err) == (0, ""), out
    assert "replica_1/h: /job:localhost/replica:0/task:0/device:GPU:1\n" in out
    assert "verify y:" in out and ": ok" in out
    assert held == [(0, 0)]
