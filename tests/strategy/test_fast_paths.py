"""The estimate's fast paths against the plain ones they replace, to the last bit, on random
placed graphs: the replay over lists (`estimate._replay`) against `Timeline`, the lower bounds'
cuts over numpy arrays against the pure-Python walk, and their fastest times against
`work_time`."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op
from gpuplace.placement import baselines
from gpuplace.placement.cost import LinkModel, work_time
from gpuplace.placement.estimate import _replay, simulate_on_timeline
from gpuplace.placement.flat import flatten
from tests.strategy.helpers import models

TYPES = ("random_normal", "variable", "matmul", "add", "relu", "print", "neg", "add_n")
LINKS = (LinkModel(1e10, 1e-5), LinkModel(1e9, 0.0), LinkModel(1e12, 1e-3))


@st.composite
def placed_flats(draw: st.DrawFn) -> tuple[Graph, list[int]]:
    """Up to 30 ops of mixed sizes (prints forward what they read, variables stay, random
    fetches), each on one of 3 GPUs or the CPU (device index 3)."""
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(TYPES)) if ops else "random_normal"
        arity = {"random_normal": 0, "variable": 0, "matmul": 2, "add": 2, "add_n": 3}.get(kind, 1)
        inputs = tuple(TensorRef(ops[draw(st.integers(max(0, len(ops) - 6), len(ops) - 1))].name)
                       for _ in range(arity))  # fmt: skip
        n = draw(st.sampled_from((2, 16, 300, 2**31))) if arity == 0 else 0  # 2**31: past int64
        shape = (n, n) if arity == 0 else ops[0].outputs[0].shape
        attrs = get_op(kind).normalize(f"op{i}", {"shape": list(shape)} if arity == 0 else {})
        ops.append(Op(f"op{i}", kind, inputs, attrs=attrs, outputs=(TensorSpec(shape),)))
    fetch = tuple(TensorRef(op.name) for op in ops if draw(st.booleans()))
    dev = [draw(st.integers(0, 3)) for _ in ops]
    return Graph(tuple(ops), fetch), dev


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats(), st.sampled_from(LINKS))
def test_replay_equals_the_timeline(case: tuple[Graph, list[int]], link: LinkModel) -> None:
    graph, dev = case
    flat, devices = flatten(graph), models(3)
    assert _replay(flat, dev, devices, link) == simulate_on_timeline(flat, dev, devices, link)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats())
def test_cuts_over_arrays_equal_the_walk(case: tuple[Graph, list[int]]) -> None:
    flat = flatten(case[0])
    w = [1.0] * len(flat.names)
    stages = baselines._Stages(flat, w, [1] * len(w), 2, LinkModel())
    keep = [not g for g in flat.generator]
    assert baselines._cuts(flat.reads, keep) == stages.cuts()  # below NUMPY_OPS: the walk


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed_flats())
def test_fastest_times_are_work_time(case: tuple[Graph, list[int]]) -> None:
    flat, devices = flatten(case[0]), models(3)
    choices = [devices[:1], devices[1:3], devices, devices[3:]]
    pick = [i % len(choices) for i in range(len(flat.names))]
    w, where = baselines._fastest(flat, choices, pick)
    assert w == [
        min(work_time(f, b, m) for m in choices[k])
        for f, b, k in zip(flat.flops, flat.nbytes, pick, strict=True)
    ]
    assert where == [(1, 1, 0, 2)[k] for k in pick]
