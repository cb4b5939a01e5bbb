"""Work that grows linearly with the input: a replica per logical GPU (`--replicate all` over
n GPUs) makes n pinned ops on n devices, and no stage may look at every device for every op.
Counted in operations, not seconds (bench/bench_cliffs.py times the same cases)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuplace
from gpuplace.devices.names import DeviceSpec
from gpuplace.placement import baselines
from gpuplace.placement.occupancy import Occupancy
from tests.conftest import write_spec

N = 400  # logical GPUs and replicas: n * n is 160,000, far above the bounds below


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Calls of DeviceSpec.matches (placer, free groups), and the op times the lower bound works
    out (`times_on`: the ops of each array it is given)."""
    calls = {"matches": 0, "work_time": 0}

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name] += 1
            return real(*args)

        return call

    monkeypatch.setattr(DeviceSpec, "matches", counting("matches", DeviceSpec.matches))
    real = baselines.times_on

    def times_on(flops: Any, nbytes: Any, device: Any) -> Any:
        calls["work_time"] += len(flops)
        return real(flops, nbytes, device)

    monkeypatch.setattr(baselines, "times_on", times_on)
    yield calls


def _prepared(tmp_path: Path, strategy: str) -> tuple[gpuplace.pipeline.Prepared, Any]:
    spec = write_spec(tmp_path, (
        f"graph:\n  - {{name: x, op: placeholder, shape: [{N}, 4]}}\n"
        "  - {name: y, op: relu, inputs: [x]}\n"
    ))  # fmt: skip
    seen = gpuplace.view(gpuplace.discover("1xA100-80GB"), {})
    virtual = "GPU:0=" + ",".join(["1MiB"] * N)
    feeds = {"x": np.ones((N, 4), np.float32)}
    options = gpuplace.Options(
        virtual_gpus=virtual, replicate="all", strategy=strategy, feeds=feeds
    )
    return gpuplace.prepare(spec, seen, options, {}), seen


@pytest.mark.parametrize("strategy", ["tensorflow", "balanced"])
def test_a_replica_per_gpu_is_placed_and_bounded_in_linear_work(
    tmp_path: Path, counted: dict[str, int], strategy: str
) -> None:
    prepared, seen = _prepared(tmp_path, strategy)
    assert len(prepared.logical) == N
    assert len(prepared.graph.ops) == 2 * N + 2  # x, a slice and a relu per replica, the merge
    gpuplace.estimate_plan(prepared, seen)
    assert counted["matches"] <= 20 * N  # was about N * N: every pinned op against every device
    assert counted["work_time"] <= 10 * N  # was about N * N: every free op against every GPU


def test_balanced_keeps_no_row_of_steps_for_a_device_far_below_its_limit() -> None:
    occupancy = Occupancy([2**20] * 1000, steps=100_000)
    for d in range(1000):
        occupancy.add(d, d, 99_999, 256)
        assert occupancy.fits(d, d, d, 99_999, 0, 256)
    assert all(row is None for row in occupancy.rows)  # a 1000 x 100,000 matrix was 800 MB
    occupancy.add(0, 5, 10, 2**20 - 256)  # now full at steps 5..10: the check must look
    assert not occupancy.fits(0, 7, 7, 7, 0, 256) and occupancy.fits(0, 11, 11, 20, 0, 256)
    assert occupancy.rows[0] is not None and occupancy.room(0, 0, 4) == 2**20 - 256
