"""`estimate` by hand on a 3-op graph, the lower bounds, round-robin, and the memory model
checked against the executor's ledgers on random placed graphs."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import full_name
from gpuplace.errors import BadInput
from gpuplace.execute.backends import NumpyBackend
from gpuplace.execute.executor import execute
from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op, loads
from gpuplace.placement import place
from gpuplace.placement.cost import LinkModel
from gpuplace.placement.estimate import (
    device_index,
    devices_of,
    estimate,
    lower_bounds,
    round_robin,
)
from gpuplace.placement.flat import flatten
from gpuplace.placement.model import Decision, Placement
from tests.strategy.helpers import CPU0, LINK, gpu, models, where

# a, b: 1e6 elements (4 MB) each; c = a @ b: 2e9 FLOPs. a and b are placeholders, generators
# in TF's sense (random ops are not: they read a shape tensor), written at 100 GB/s.
THREE = """
graph:
  - {name: a, op: placeholder, shape: [1000, 1000], device: /gpu:0}
  - {name: b, op: placeholder, shape: [1000, 1000], device: /gpu:1}
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
    cp, work, stages = lower_bounds(g, models(2))
    gen, mm = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6
    assert cp == pytest.approx(gen + mm)
    assert work == pytest.approx(
        mm / 2
    )  # a and b may follow c anywhere, the CPU included: not counted
    assert stages == pytest.approx(mm)  # c alone: the generators may run at any time


def test_lower_bounds_count_pinned_ops_on_their_device() -> None:
    cp, work, _ = lower_bounds(loads(THREE), models(2))
    gen, mm = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6
    assert (cp, work) == pytest.approx((gen + mm, (2 * gen + mm) / 2))


# x feeds a; four branches read a; s sums them; t adds a back (a residual edge over the stage).
# Each matmul is 2e9 FLOPs (2.005 ms on a test GPU); s moves 20 MB, t 12 MB (0.205, 0.125 ms).
STAGES = """
graph:
  - {name: x, op: placeholder, shape: [1000, 1000]}
  - {name: a, op: matmul, inputs: [x, x]}
  - {name: b0, op: matmul, inputs: [a, x]}
  - {name: b1, op: matmul, inputs: [a, x]}
  - {name: b2, op: matmul, inputs: [a, x]}
  - {name: b3, op: matmul, inputs: [a, x]}
  - {name: s, op: add_n, inputs: [b0, b1, b2, b3]}
  - {name: t, op: add, inputs: [a, s]}
"""


def test_stage_bound_by_hand() -> None:
    """Cuts a, s and t split the graph. On 2 GPUs the branches between a and s share the GPUs
    and one of them waits for a copy of a (fan-out); on 4, s must take their outputs one at a
    time or run them itself (fan-in). Both beat the critical path and the work bound."""
    x, mm, s, t = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6, 20e6 / 1e11 + 5e-6, 12e6 / 1e11 + 5e-6
    c = 1e-5 + 4e6 / 1e10  # a copy of one 4 MB tensor
    b = lower_bounds(loads(STAGES), models(2), LINK)
    assert b.critical_path == pytest.approx(x + 2 * mm + s + t)
    assert b.work == pytest.approx((5 * mm + s + t) / 2)  # x may go to the CPU: not counted
    assert b.stages == pytest.approx(mm + (4 * mm + c) / 2 + s + t)
    assert b.best == b.stages > max(b.critical_path, b.work)
    fan_in = mm + mm * 3 * c / (mm + c)  # one branch on s's GPU, 3 copies, split fractionally
    b4 = lower_bounds(loads(STAGES), models(4), LINK)
    assert b4.stages == pytest.approx(mm + fan_in + s + t)
    assert b4.best == b4.stages > max(b4.critical_path, b4.work)
    assert lower_bounds(loads(STAGES), models(4), LinkModel(1e30, 0)).stages == pytest.approx(
        2 * mm + s + t
    )  # free copies: only the branches' critical path and work / 4 remain


def test_stage_bound_without_cuts_is_zero_and_never_the_best() -> None:
    two = "graph:\n" + "".join(
        f"  - {{name: {n}, op: random_normal, shape: [100, 100]}}\n"
        f"  - {{name: {n}2, op: relu, inputs: [{n}]}}\n"
        for n in "pq"
    )
    b = lower_bounds(loads(two), models(2))
    assert b.stages == 0 and b.best == max(b.critical_path, b.work) > 0


@st.composite
def small_graphs(draw: st.DrawFn) -> Graph:
    """Up to 7 ops, no requests: small enough to try every placement on 2 GPUs."""
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 7))):
        kind = (
            draw(st.sampled_from(("variable", "matmul", "relu", "add", "add_n")))
            if ops
            else ("variable")
        )
        arity = {"variable": 0, "relu": 1, "add_n": 3}.get(kind, 2)
        inputs = tuple(TensorRef(ops[draw(st.integers(0, len(ops) - 1))].name)
                       for _ in range(arity))  # fmt: skip
        n = 64 * draw(st.integers(1, 4)) if not ops else 0
        size = ops[0].outputs[0].shape if ops else (n, n)
        attrs = get_op(kind).normalize(f"o{i}", {"shape": list(size)} if not arity else {})
        ops.append(Op(f"o{i}", kind, inputs, attrs=attrs, outputs=(TensorSpec(size),)))
    return Graph(tuple(ops), (TensorRef(ops[-1].name),))


@settings(
    max_examples=int(os.environ.get("BOUND_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(small_graphs())
def test_no_placement_beats_the_lower_bounds(g: Graph) -> None:
    """Every placement of every op on GPU:0, GPU:1 or the CPU is estimated at or above the
    tightest bound: the stage bound leaves out nothing a placement could gain."""
    devices = models(2)
    bound = lower_bounds(g, devices, LINK).best
    names = [op.name for op in g.ops]
    choices = [(gpu(0), gpu(1), CPU0) if op.type == "variable" else (gpu(0), gpu(1))
               for op in g.ops]  # fmt: skip
    best = min(
        estimate(g, Placement({n: Decision(d, "explicit", "") for n, d in zip(names, pick,
                                                                                  strict=True)},
                              ()), devices, LINK).makespan
        for pick in itertools.product(*choices)
    )  # fmt: skip
    assert best >= bound * (1 - 1e-12)


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


def test_a_placement_of_another_graph_or_machine_is_refused_in_words() -> None:
    """`device_index` (and `devices_of`, on decisions already in graph order) refuse a
    placement that lacks an op of the graph or names a device the models lack."""
    g = loads(THREE)
    flat, p = flatten(g), place(g, 2)
    assert device_index(p, flat, models(2)) == devices_of(p.in_order(flat.names), models(2))
    assert device_index(p, flat, models(2)) == [0, 1, 0]
    lacking = Placement({"a": p.decisions["a"]}, p.devices)
    with pytest.raises(BadInput, match="device or op the models lack: 'b'"):
        device_index(lacking, flat, models(2))
    other = Decision(full_name("GPU", 5), "explicit", "")
    moved = Placement({**p.decisions, "c": other}, p.devices)
    with pytest.raises(BadInput, match=r"device or op the models lack: .*GPU:5"):
        device_index(moved, flat, models(2))
    with pytest.raises(BadInput, match=r"device or op the models lack: .*GPU:5"):
        devices_of([other], models(2))
