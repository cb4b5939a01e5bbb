"""The balanced strategy tries a pass per copy weight and keeps the fastest estimated plan."""

from __future__ import annotations

import random

import pytest

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement import balanced
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.estimate import estimate
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
