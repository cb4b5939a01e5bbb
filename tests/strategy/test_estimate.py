"""`estimate` by hand on a 3-op graph, the lower bounds, round-robin, and the memory model
checked against the executor's ledgers on random placed graphs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import full_name
from gpuplace.execute.backends import NumpyBackend
from gpuplace.execute.executor import execute
from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op, loads
from gpuplace.placement import place
from gpuplace.placement.estimate import estimate, lower_bounds, round_robin
from gpuplace.placement.model import Decision, Placement
from tests.strategy.helpers import CPU0, LINK, gpu, models, where

# a, b: 1e6 elements (4 MB) each; c = a @ b: 2e9 FLOPs.
THREE = """
graph:
  - {name: a, op: random_normal, shape: [1000, 1000], device: /gpu:0}
  - {name: b, op: random_normal, shape: [1000, 1000], device: /gpu:1}
  - {name: c, op: matmul, inputs: [a, b], device: /gpu:0}
"""


def test_estimate_of_three_ops_by_hand() -> None:
    g = loads(THREE)
    e = estimate(g, place(g, 2), models(2), LINK)
    gen = 4e6 / 1e11 + 5e-6  # a, b: bound by 4 MB written at 100 GB/s, plus the launch
    copy = 1e-5 + 4e6 / 1e10  # b to GPU:0
    mm = 2e9 / 1e12 + 5e-6  # c: bound by FLOPs
    assert e.makespan == pytest.approx(gen + copy + mm)
    assert e.busy == pytest.approx({gpu(0): gen + mm, gpu(1): gen, CPU0: 0.0})
    # GPU:0 holds a, the copy of b and c at c's step; GPU:1 holds b until it is copied
    assert e.peak == {gpu(0): 12_000_000, gpu(1): 4_000_000, CPU0: 0}
    assert e.copies_in[gpu(0)] == (1, 4_000_000) and e.copies_out[gpu(1)] == (1, 4_000_000)
    assert e.copies_in[gpu(1)] == (0, 0)


def test_lower_bounds_by_hand() -> None:
    g = loads(THREE.replace(", device: /gpu:0", "").replace(", device: /gpu:1", ""))
    cp, work = lower_bounds(g, models(2))
    gen, mm = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6
    assert cp == pytest.approx(gen + mm)
    assert work == pytest.approx(
        mm / 2
    )  # a and b may follow c anywhere, the CPU included: not counted


def test_lower_bounds_count_pinned_ops_on_their_device() -> None:
    cp, work = lower_bounds(loads(THREE), models(2))
    gen, mm = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6
    assert (cp, work) == pytest.approx((gen + mm, (2 * gen + mm) / 2))


def test_round_robin_takes_turns_and_keeps_requests() -> None:
    g = loads(
        """
graph:
  - {name: a, op: constant, value: 1.0, shape: [2]}
  - {name: b, op: constant, value: 1.0, shape: [2], device: /gpu:2}
  - {name: c, op: add, inputs: [a, b]}
  - {name: d, op: add, inputs: [c, c], colocate_with: a}
  - {name: e, op: print, inputs: [d]}
  - {name: f, op: neg, inputs: [d]}
"""
    )
    p = round_robin(g, 3)
    assert where(p) == {"a": "GPU:0", "b": "GPU:2", "c": "GPU:1", "d": "GPU:0", "e": "CPU:0",
                        "f": "GPU:2"}  # fmt: skip
    assert p.decisions["c"].kind == "round-robin" and p.decisions["d"].kind == "colocated"
    assert p.decisions["b"].kind == "explicit"


# Random small graphs, randomly placed: the estimate's peaks are the executor's, exactly.
TYPES = ("random_normal", "variable", "matmul", "add", "relu", "print", "neg")


@st.composite
def placed_graphs(draw: st.DrawFn) -> tuple[Graph, dict[str, str]]:
    n = draw(st.sampled_from((2, 3, 17)))
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(TYPES)) if ops else "random_normal"
        arity = (
            0 if kind in ("random_normal", "variable") else 2 if kind in ("matmul", "add") else 1
        )
        inputs = tuple(
            TensorRef(ops[draw(st.integers(0, len(ops) - 1))].name) for _ in range(arity)
        )
        given = {"shape": [n, n]} if arity == 0 else {}
        attrs = get_op(kind).normalize(f"op{i}", given)
        ops.append(Op(f"op{i}", kind, inputs, attrs=attrs, outputs=(TensorSpec((n, n)),)))
    fetch = tuple(TensorRef(op.name) for op in ops if draw(st.booleans()))
    devices = [CPU0, gpu(0), gpu(1)]
    placed = {op.name: CPU0 if op.type == "print" else draw(st.sampled_from(devices)) for op in ops}
    return Graph(tuple(ops), fetch), placed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_graphs())
def test_peaks_equal_the_executor_ledgers(case: tuple[Graph, dict[str, str]]) -> None:
    graph, placed = case
    placement = Placement({k: Decision(v, "explicit", "") for k, v in placed.items()}, ())
    backends = {d: NumpyBackend(d) for d in (CPU0, gpu(0), gpu(1))}
    kernels = {op.type: get_op(op.type) for op in graph.ops}
    ran = execute(graph, placed, backends, kernels.__getitem__)
    e = estimate(graph, placement, models(2), LINK)
    assert e.peak == {d: ran.peak_bytes[d] for d in backends}
    copies_in = {d: sum(1 for c in ran.copies if c.dst == d) for d in backends}
    assert {d: e.copies_in[d][0] for d in backends} == copies_in


def test_estimate_names_every_device_of_the_models() -> None:
    g = loads(THREE)
    e = estimate(g, place(g, 2), models(4), LINK)
    assert set(e.peak) == {full_name("GPU", i) for i in range(4)} | {CPU0}
