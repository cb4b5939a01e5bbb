"""Pinned plans: the balanced placement and its estimate of three small graphs, exactly as
942415d made them (before the placer and the estimate shared one slot model, and since), so
that no refactor changes them unnoticed. Where a change moves them on purpose, re-pin; to see
what moved, run bench/diff_placement.py --against the last commit that passed."""

from __future__ import annotations

import random

import pytest

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.estimate import estimate
from tests.strategy.helpers import LINK, models

KIB = 1024


def _dag(seed: int, n: int = 40) -> Graph:
    """`n` ops over [64, 64] tensors (16 KiB): variables and random sources, then tanh, print,
    matmul and add_n, each reading one to three of the 12 ops before it; two fetches."""
    rng, spec = random.Random(seed), (TensorSpec((64, 64)),)
    ops = [Op(f"in{i}", rng.choice(("random_normal", "variable")), (), outputs=spec)
           for i in range(6)]  # fmt: skip
    while len(ops) < n:
        picks = rng.sample(range(max(0, len(ops) - 12), len(ops)), rng.choice((1, 2, 2, 3)))
        kind = {1: rng.choice(("tanh", "tanh", "print")), 2: "matmul", 3: "add_n"}[len(picks)]
        refs = tuple(TensorRef(ops[p].name) for p in picks)
        ops.append(Op(f"op{len(ops)}", kind, refs, outputs=spec))
    return Graph(ops=tuple(ops), fetch=(TensorRef(ops[-1].name), TensorRef(ops[n // 2].name)))


# seed, GPUs, limit per GPU, each op's device (GPU index, c: CPU), makespan, peaks, copies in
PINNED = [
    (1, 3, None, "0122022221cc22121211212c2c2121c021221110", 0.00016175910400000005,
     [64, 96, 144, 32], [2, 8, 9, 5]),
    (3, 4, 80 * KIB, "011223123010120223c1c00320c32c02032c2022", 0.00019526412799999993,
     [80, 80, 80, 64, 48], [8, 3, 9, 7, 3]),
    (4, 3, 96 * KIB, "011202000101122c0210110202200021c2120020", 0.00017724947200000005,
     [96, 96, 96, 16], [8, 6, 10, 2]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("seed", "gpus", "limit", "where", "makespan", "peaks", "copies"),
    PINNED,
    ids=[f"seed {case[0]} on {case[1]} GPUs" for case in PINNED],
)
def test_balanced_plans_and_estimates_stay_pinned(
    seed: int, gpus: int, limit: int | None, where: str, makespan: float, peaks: list[int],
    copies: list[int],
) -> None:  # fmt: skip
    g, devices = _dag(seed), models(gpus, limit)
    p = place_balanced(g, devices, LINK)
    placed = "".join(d.device[-1] if "GPU" in d.device else "c" for d in p.decisions.values())
    assert placed == where
    if limit is not None:  # the memory filter moved some ops
        assert any("would exceed" in d.reason for d in p.decisions.values())
    e = estimate(g, p, devices, LINK)
    assert e.makespan == pytest.approx(makespan, rel=1e-12)
    assert [e.peak[m.name] for m in devices] == [k * KIB for k in peaks]
    assert [e.copies_in[m.name][0] for m in devices] == copies
