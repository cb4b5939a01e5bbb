"""`gpuplace run` on a real GPU: the seed guide with --verify, and multi-GPU graphs on logical GPUs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gpu.conftest import BROKEN, SKIP, gpuplace, released, settled

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "examples" / "guide"
MiB = 1024**2


@pytest.fixture(autouse=True)
def card_given_back() -> Iterator[None]:
    """Each run ends with its memory back on the card, so the next one (which checks free
    memory before it reserves) does not see the last one's reservation still held."""
    if SKIP or BROKEN:  # no usable GPU: the tests skip or fail first, nothing to watch
        yield
        return
    before = settled().memory_used or 0
    yield
    assert released(0, before) <= before + 64 * MiB


@pytest.mark.parametrize(
    ("example", "extra"),
    [
        ("01_log_placement.yaml", []),
        ("02_manual_placement.yaml", []),
        ("03_gpu2.yaml", ["--allow-soft-placement"]),
    ],
)
def test_guide_examples_verify_on_the_real_gpu(example: str, extra: list[str]) -> None:
    done = gpuplace("run", str(GUIDE / example), "--verify", "--allow-growth", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[simulated]" not in done.stdout
    assert "-> device: 0, name: NVIDIA" in done.stdout
    assert "[[22. 28.]\n [49. 64.]]" in done.stdout
    assert ": ok" in done.stdout


def test_guide_default_policy_reserves_and_runs() -> None:
    done = gpuplace("run", str(GUIDE / "01_log_placement.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    gpu = next(m for m in json.loads(done.stdout)["memory"] if "GPU:0" in m["device"])
    assert gpu["reserved"] > 2**30 and 0 <= gpu["limit"] - gpu["reserved"] < 512  # cupy's unit


def test_multi_tower_on_logical_gpus_of_one_card() -> None:
    done = gpuplace(
        "run", str(GUIDE / "04_multi_tower.yaml"), "--verify",
        "--virtual-gpus", "GPU:0=256MiB,256MiB,256MiB,256MiB",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MatMul_1: /job:localhost/replica:0/task:0/device:GPU:3" in done.stdout
    assert "/device:GPU:3 -> device: 0, name: NVIDIA" in done.stdout
    assert "[[ 44.  56.]\n [ 98. 128.]]" in done.stdout


def test_balanced_spreads_over_logical_gpus_for_real() -> None:
    done = gpuplace(
        "run", str(ROOT / "examples" / "small_model.yaml"), "--strategy", "balanced", "--verify",
        "--json", "--virtual-gpus", "GPU:0=64MiB,64MiB,64MiB,64MiB",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert all(v["ok"] for v in doc["verify"])
    assert len({p["device"] for p in doc["placement"] if "GPU" in p["device"]}) >= 3


REPLICATED = (  # a replicate block over 2 GPUs (also run on a fake card: test_logical_gpus.py)
    "graph:\n"
    "  - {name: x, op: random_normal, shape: [64, 32], seed: 1}\n"
    "  - replicate: {gpus: 2, split: [x]}\n"
    "    graph:\n"
    "      - {name: w, op: variable, shape: [32, 16], initializer: random_normal, seed: 2}\n"
    "      - {name: h, op: matmul, inputs: [x, w]}\n"
    "      - {name: y, op: tanh, inputs: [h]}\n"
)


def test_replicate_on_logical_gpus(tmp_path: Path) -> None:
    spec = tmp_path / "rep.yaml"
    spec.write_text(REPLICATED)
    done = gpuplace("run", str(spec), "--verify", "--virtual-gpus", "GPU:0=128MiB,128MiB")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify y:" in done.stdout and ": ok" in done.stdout
