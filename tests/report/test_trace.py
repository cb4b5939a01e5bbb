"""The schedule the HTML report draws (`report/html/trace.py`) is the plan's estimate: the same
makespan, busy time and copies, each device running its ops one at a time in graph order, and
memory that is never negative and is all given back at the end."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuplace
from gpuplace.pipeline import estimate_plan
from gpuplace.report.html.trace import trace

DEVICES = ("", "/gpu:0", "/gpu:1", "/gpu:2", "/cpu:0")


@st.composite
def specs(draw: st.DrawFn) -> str:
    lines = ["graph:"]
    for i in range(draw(st.integers(1, 10))):
        device = draw(st.sampled_from(DEVICES))
        where = f", device: '{device}'" if device else ""
        if i == 0 or draw(st.booleans()):
            n = draw(st.sampled_from((8, 64, 256)))
            lines.append(f"  - {{name: o{i}, op: zeros, shape: [{n}, {n}]{where}}}")
            continue
        kind = draw(st.sampled_from(("neg", "relu", "add")))
        a = draw(st.integers(0, i - 1))
        inputs = f"o{a}" if kind != "add" else f"o{a}, o{a}"
        lines.append(f"  - {{name: o{i}, op: {kind}, inputs: [{inputs}]{where}}}")
    return "\n".join(lines) + "\n"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=specs(), strategy=st.sampled_from(("tensorflow", "balanced", "round-robin")))
def test_the_trace_is_the_estimate(tmp_path: Path, spec: str, strategy: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(spec)
    view = gpuplace.view(gpuplace.discover("3xK520"), {})
    options = gpuplace.Options(strategy=strategy, allow_soft_placement=True)
    prepared = gpuplace.prepare(str(path), view, options, {})
    est = estimate_plan(prepared, view).estimate
    t = trace(prepared, view)
    assert t.makespan == est.makespan
    assert [op.label for op in t.ops] == [op.name for op in prepared.graph.ops]
    for i, device in enumerate(t.devices):
        mine = [b for b in t.ops if b.device == i]
        assert sum(b.end - b.start for b in mine) == pytest.approx(est.busy[device])
        assert all(a.end <= b.start + 1e-15 for a, b in itertools.pairwise(mine))
        arrived = [b for b in t.copies if b.device == i]
        assert (len(arrived), sum(b.nbytes for b in arrived)) == est.copies_in[device]
        assert all(0 <= b.start <= b.end <= t.makespan for b in arrived)
        in_use = [v for _, v in t.memory[i]]
        assert min(in_use) >= 0 and in_use[-1] == 0
        times = [time for time, _ in t.memory[i]]
        assert times == sorted(set(times)) and times[-1] <= t.makespan
