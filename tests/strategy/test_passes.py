"""The balanced strategy tries a pass per copy weight and keeps the fastest estimated plan."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement import balanced, place
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.cost import split_devices, work_times
from gpuplace.placement.estimate import Estimate, device_index, estimate, simulate
from gpuplace.placement.flat import flatten
from gpuplace.placement.model import Decision
from gpuplace.units import MiB
from tests.strategy.helpers import LINK, models


def _random_dag(n: int = 300, size: int = 256, seed: int = 1) -> Graph:
    """`n` ops over [size, size] tensors, each reading one to three of the 32 before it."""
    rng, spec = random.Random(seed), (TensorSpec((size, size)),)
    ops = [Op(f"in{i}", "random_normal", (), outputs=spec) for i in range(8)]
    while len(ops) < n:
        picks = rng.sample(range(max(0, len(ops) - 32), len(ops)), rng.choice((1, 2, 2, 3)))
        kind = {1: "tanh", 2: "matmul", 3: "add_n"}[len(picks)]
        refs = tuple(TensorRef(ops[p].name) for p in picks)
        ops.append(Op(f"op{len(ops)}", kind, refs, outputs=spec))
    return Graph(ops=tuple(ops), fetch=(TensorRef(ops[-1].name),))


def test_the_kept_pass_is_never_slower_than_the_plain_earliest_finish_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g, devices = _random_dag(), models(8)
    kept = estimate(g, place_balanced(g, devices, LINK), devices, LINK).makespan
    monkeypatch.setattr(balanced, "WEIGHTS", (1.0,))
    plain = place_balanced(g, devices, LINK)
    assert kept <= estimate(g, plain, devices, LINK).makespan
    assert not any("counting copies" in d.reason for d in plain.decisions.values())


def test_a_pass_with_heavier_copies_says_so_in_its_reasons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(balanced, "WEIGHTS", (2.0,))
    p = place_balanced(_random_dag(), models(4), LINK)
    kinds = {d.reason for d in p.decisions.values() if d.kind == "balanced"}
    assert kinds and all("counting copies 2x" in reason for reason in kinds)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 50), st.integers(2, 4), st.sampled_from((None, 8 * MiB)),
    st.sampled_from((0.5, 1 - 1e-15, 1.0, 1 + 1e-15, 2.0)),
)  # fmt: skip
def test_tensorflow_placement_is_simulated_only_when_it_could_be_faster(
    seed: int, gpus: int, limit: int | None, factor: float
) -> None:
    # `_faster_alone` skips the simulation when the ops' seconds on TF's device already reach
    # the spread's makespan; its answer is always the simulation's: TF's estimate when it is
    # faster than the spread and fits, else None (spreads within a hair of TF's makespan too)
    case = _alone_case(_random_dag(n=40, seed=seed), gpus, limit, factor)
    assert balanced._faster_alone(*case.arguments) == case.expected


class _AloneCase(NamedTuple):
    """`_faster_alone`'s arguments for TF's placement of a graph against a spread `factor`
    times its makespan, and the answer of the rule written out (`expected`)."""

    arguments: tuple[Any, ...]  # flat, TF's device per op, models, link, times, spread
    expected: Estimate | None


def _alone_case(g: Graph, gpus: int, limit: int | None, factor: float) -> _AloneCase:
    gpu_models, cpu = split_devices(models(gpus, limit))
    ordered = [*gpu_models, cpu]
    flat = flatten(g)
    dev = device_index(place(g, gpus), flat, ordered)
    alone = simulate(flat, dev, ordered, LINK)
    spread = alone._replace(makespan=alone.makespan * factor)
    fits = all(m.memory_limit is None or alone.peak[m.name] <= m.memory_limit for m in ordered)
    times = work_times(flat.flops, flat.nbytes, ordered)
    expected = alone if alone.makespan < spread.makespan and fits else None
    return _AloneCase((flat, dev, ordered, LINK, times, spread), expected)


def _with_variables(n: int, seed: int, size: int = 256) -> Graph:
    """`_random_dag(n, size, seed)` whose tanh ops multiply by a weight variable of their own
    instead (kept to the end)."""
    ops, spec = [], (TensorSpec((size, size)),)
    for op in _random_dag(n, size, seed).ops:
        if op.type == "tanh":
            ops.append(Op(f"w_{op.name}", "variable", (), outputs=spec))
            op = Op(op.name, "matmul", (*op.inputs, TensorRef(ops[-1].name)), outputs=spec)
        ops.append(op)
    return Graph(ops=tuple(ops), fetch=(TensorRef(ops[-1].name),))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 50), st.integers(1, 3), st.integers(1, 40), st.sampled_from((0.5, 2.0)))
def test_tensorflow_placement_whose_variables_overflow_a_device_is_not_simulated(
    seed: int, gpus: int, weights: int, factor: float
) -> None:
    # TF's placement keeps every variable on GPU:0 to the end: past the limit, it cannot fit
    # (`_outlive_a_limit`), and `_faster_alone` says None without simulating it; else it
    # answers as the simulation does
    limit = weights * 256 * 256 * 4  # room for `weights` of the variables and nothing else
    case = _alone_case(_with_variables(60, seed), gpus, limit, factor)
    flat, dev = case.arguments[:2]
    held = sum(sum(flat.sizes[op]) for op, kept in enumerate(flat.resident) if kept)
    simulated = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(balanced, "simulate", lambda *args: simulated.append(1) or simulate(*args))
        assert balanced._faster_alone(*case.arguments) == case.expected
    assert held > 0 and {dev[op] for op, kept in enumerate(flat.resident) if kept} == {0}
    if held > limit:
        assert not simulated
    elif factor > 1:  # its ops' seconds leave it a chance (`busy`): simulated
        assert simulated == [1]


def _given_up(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The weights of the passes given up from now on (`_Balancer.run` returned None)."""
    given_up: list[float] = []
    run = balanced._Balancer.run

    def spy(self: balanced._Balancer, lead: Sequence[float] = ()) -> list[Decision] | None:
        out = run(self, lead)
        if out is None:
            given_up.append(self.weight)
        return out

    monkeypatch.setattr(balanced._Balancer, "run", spy)
    return given_up


@pytest.mark.pure_python  # spies _Balancer.run: a C type's method where compiled
def test_on_long_graphs_the_plain_pass_is_given_up_once_it_falls_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the passes run heaviest weight first; on a graph of _LONG ops or more, the plain pass is
    # given up at its first mark from 15% of the ops on where it is not ahead
    g, devices = _random_dag(n=600, seed=3), models(4)
    monkeypatch.setattr(balanced, "WEIGHTS", (2.0,))
    heavy = place_balanced(g, devices, LINK)
    monkeypatch.setattr(balanced, "WEIGHTS", (1.0,))
    plain = place_balanced(g, devices, LINK)
    assert estimate(g, heavy, devices, LINK).makespan < estimate(g, plain, devices, LINK).makespan
    monkeypatch.setattr(balanced, "WEIGHTS", (1.0, 2.0))
    given_up = _given_up(monkeypatch)
    assert place_balanced(g, devices, LINK).decisions == heavy.decisions  # short: both run
    assert given_up == []
    monkeypatch.setattr(balanced, "_LONG", 500)
    assert place_balanced(g, devices, LINK).decisions == heavy.decisions
    assert given_up == [1.0]


@pytest.mark.pure_python  # spies _Balancer.run: a C type's method where compiled
def test_a_plain_pass_that_leads_is_not_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # on this graph the plain pass is ahead at every mark and wins: it runs to the end and is kept
    g, devices = _random_dag(n=600, seed=0), models(8)
    monkeypatch.setattr(balanced, "WEIGHTS", (1.0,))
    plain = place_balanced(g, devices, LINK)
    monkeypatch.setattr(balanced, "WEIGHTS", (1.0, 2.0))
    monkeypatch.setattr(balanced, "_LONG", 500)
    given_up = _given_up(monkeypatch)
    assert place_balanced(g, devices, LINK).decisions == plain.decisions
    assert given_up == []


@pytest.mark.pure_python  # spies _Balancer.run: a C type's method where compiled
def test_a_tie_keeps_the_plain_pass_on_short_graphs_and_the_heavier_on_long_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a chain stays on one GPU whatever copies weigh: the passes tie at every mark
    ops = [Op("x", "random_normal", (), outputs=(TensorSpec((256, 256)),))]
    for i in range(60):
        ops.append(Op(f"t{i}", "tanh", (TensorRef(ops[-1].name),), outputs=ops[0].outputs))
    g = Graph(ops=tuple(ops), fetch=(TensorRef(ops[-1].name),))
    given_up = _given_up(monkeypatch)
    reasons = {d.reason for d in place_balanced(g, models(4), LINK).decisions.values()}
    assert reasons == {"balanced: earliest finish on GPU:0"}
    assert given_up == []
    monkeypatch.setattr(balanced, "_LONG", 61)
    reasons = {d.reason for d in place_balanced(g, models(4), LINK).decisions.values()}
    assert reasons == {"balanced: earliest finish on GPU:0 counting copies 2x"}
    assert given_up == [1.0]
