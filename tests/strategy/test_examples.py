"""The examples of the balanced strategy: the ~10 GiB MLP that TensorFlow's placement cannot fit
on four K520s, and the small MLP that runs for real under a 64 MiB limit per GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.devices import load_machine, view
from gpuplace.devices.model import LogicalGpu
from gpuplace.execute.backends import NumpyBackend
from gpuplace.execute.executor import execute
from gpuplace.execute.predict import predict
from gpuplace.graph import get_op, load
from gpuplace.memory.policy import logical_gpus as logical
from gpuplace.memory.policy import resolve_policy
from gpuplace.placement import place
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.cost import DeviceModel, device_models
from gpuplace.placement.estimate import estimate
from gpuplace.units import GiB

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def k520s(flags: dict[str, str]) -> tuple[list[LogicalGpu], list[DeviceModel]]:
    v = view(load_machine("4xK520"), {})
    gpus = logical(v.gpus, resolve_policy({}, flags, {}))
    return gpus, device_models(gpus, v.machine.host)


def test_the_big_model_fits_only_when_balanced() -> None:
    g = load(EXAMPLES / "big_model.yaml")
    gpus, devices = k520s({})
    assert 9.5 * GiB < sum(op.outputs[0].nbytes for op in g.ops if op.type == "variable")
    assert all(3.4 * GiB < (d.memory_limit or 0) < 3.6 * GiB for d in devices[:4])
    assert predict(g, place(g, 4), gpus).oom is not None  # TF: everything on GPU:0
    p = place_balanced(g, devices)
    prediction = predict(g, p, gpus)
    assert prediction.oom is None
    used = {d.device for d in p.decisions.values()}
    assert len(used) >= 3
    e = estimate(g, p, devices)
    assert {m.device: m.peak for m in prediction.memory} == e.peak  # the ledgers agree


@pytest.mark.slow  # runs examples/small_model.yaml (160 MiB of weights) for real
def test_the_small_model_runs_for_real_within_64_mib_per_gpu() -> None:
    g = load(EXAMPLES / "small_model.yaml")
    gpus, devices = k520s({"memory_limit": "64MiB"})
    assert predict(g, place(g, 4), gpus).oom is not None
    p = place_balanced(g, devices)
    placed = {name: d.device for name, d in p.decisions.items()}
    backends = {d.name: NumpyBackend(d.name) for d in devices}
    limits = {d.name: d.memory_limit for d in devices[:4]}
    ran = execute(g, placed, backends, get_op, limits=limits)
    assert len(set(placed.values())) == 4
    assert all(ran.peak_bytes[d] <= 64 * 2**20 for d in limits)
    assert ran.values["relu9"].shape == (256, 2048)
