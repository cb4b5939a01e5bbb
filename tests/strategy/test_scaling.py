"""Balanced placement does work linear in the ops on every graph shape, and `plan` reuses what
it worked out instead of flattening, placing and simulating the graph again (issue 17).

Work is counted, never timed: steps through the links' busy blocks (`link_reads`), calls of
`simulate` and `flatten`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement import balanced, estimate, flat, links
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.estimate import Judged, estimate_with_bounds, lower_bounds
from gpuplace.placement.model import Placement
from tests.strategy.helpers import models
from tests.strategy.test_links import Counted
from tests.strategy.test_passes import _random_dag

SPEC = (TensorSpec((256, 256)),)


def fan(n: int, width: int = 200) -> Graph:
    """x, then groups of `width` matmuls x @ x, each summed by an add_n; the sums summed."""
    ops = [Op("x", "random_normal", (), outputs=SPEC)]
    group: list[TensorRef] = []
    sums: list[TensorRef] = []
    while len(ops) < n - 1:
        ops.append(Op(f"m{len(ops)}", "matmul", (TensorRef("x"), TensorRef("x")), outputs=SPEC))
        group.append(TensorRef(ops[-1].name))
        if len(group) == width or len(ops) == n - 2:
            ops.append(Op(f"s{len(ops)}", "add_n", tuple(group), outputs=SPEC))
            sums.append(TensorRef(ops[-1].name))
            group = []
    ops.append(Op("out", "add_n", tuple(sums), outputs=SPEC))
    return Graph(ops=tuple(ops), fetch=(TensorRef("out"),))


def random_dag(n: int, seed: int = 3) -> Graph:
    """test_passes.py's random DAG with every other input a variable (deferred by balanced)."""
    g = _random_dag(n, seed=seed)
    sources = [replace(op, type="variable") if i % 2 and not op.inputs else op
               for i, op in enumerate(g.ops)]  # fmt: skip
    return replace(g, ops=tuple(sources))


def wide(n: int, width: int = 16) -> Graph:
    """`width` stacks of tanh; every 4th layer each stack multiplies in its neighbour's."""
    ops = [Op(f"x{i}", "random_normal", (), outputs=SPEC) for i in range(width)]
    prev = [op.name for op in ops]
    while len(ops) < n:
        mix = len(ops) // width % 4 == 3
        for i in range(width):
            inputs = (prev[i], prev[(i + 1) % width]) if mix else (prev[i],)
            refs = tuple(TensorRef(name) for name in inputs)
            ops.append(Op(f"op{len(ops)}", "matmul" if mix else "tanh", refs, outputs=SPEC))
        prev = [op.name for op in ops[-width:]]
    return Graph(ops=tuple(ops), fetch=tuple(TensorRef(name) for name in prev))


def link_reads(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> int:
    """Steps through every link's busy blocks while `graph` is placed on 8 GPUs: each block
    read by index, and each search (`_search`) as one step (its probes not counted)."""

    def counting_init(self: links.Link) -> None:
        self.starts, self.ends = Counted(), Counted()

    def one_step(real: Callable[..., int]) -> Callable[..., int]:
        def search(*args: Any) -> int:
            reads = Counted.reads
            found = real(*args)
            Counted.reads = reads + 1
            return found

        return search

    monkeypatch.setattr(links.Link, "__init__", counting_init)
    monkeypatch.setattr(links, "_search", one_step(links._search))
    before = Counted.reads
    place_balanced(graph, models(8))
    return Counted.reads - before


SHAPES: dict[str, Callable[[int], Graph]] = {
    "fan": lambda n: fan(n, width=n // 4),  # a wider fan at 4x the ops: 4 groups each time
    "random_dag": random_dag,
    "wide": wide,
}


@pytest.mark.slow
@pytest.mark.pure_python  # patches Link.__init__: a C type where compiled
@pytest.mark.parametrize("shape", SHAPES)
def test_link_work_per_op_stays_flat_as_the_graph_grows(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4x the ops: at most 1.3x the steps through the links' blocks per op. Before the walk
    jumped and skipped known-busy time (the sweep in test_links.py), the fan took 2.7x."""
    small, large = SHAPES[shape](400), SHAPES[shape](1600)
    per_small = link_reads(small, monkeypatch) / len(small.ops)
    per_large = link_reads(large, monkeypatch) / len(large.ops)
    assert per_small > 0
    assert per_large <= 1.3 * per_small, (per_small, per_large)


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count calls of `simulate` (wherever it is called from) and `flatten`."""
    calls = {"simulate": 0, "flatten": 0}
    real_simulate, real_flatten = estimate.simulate, flat.flatten

    def simulate(*args: object, **kwargs: object) -> object:
        calls["simulate"] += 1
        return real_simulate(*args, **kwargs)  # type: ignore[arg-type]

    def flatten(*args: object, **kwargs: object) -> object:
        calls["flatten"] += 1
        return real_flatten(*args, **kwargs)  # type: ignore[arg-type]

    for module in (estimate, balanced):
        monkeypatch.setattr(module, "simulate", simulate)
        monkeypatch.setattr(module, "flatten", flatten)
    return calls


@pytest.mark.parametrize("limit", [None, 40 * 2**20], ids=["roomy", "tight"])
@pytest.mark.parametrize(
    ("graph", "simulations"),
    [(random_dag(300), 2), (fan(300, width=60), 0), (wide(320), 0)],
    ids=["variables", "fan", "wide"],
)
def test_plan_reuses_the_balanced_estimate_and_gets_what_a_fresh_one_gives(
    graph: Graph, simulations: int, limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass is estimated from the run it planned on, unless a generator waited for its
    consumer (variables): then it is simulated. TF's own placement is not simulated: its ops'
    seconds on GPU:0 alone exceed the spread's makespan (`_faster_alone`)."""
    devices = models(4, limit)
    fresh_est = estimate.estimate(graph, place_balanced(graph, devices), devices)
    fresh_bounds = lower_bounds(graph, devices)
    calls = counting(monkeypatch)
    p = place_balanced(graph, devices)
    assert calls == {"simulate": simulations, "flatten": 1}
    est, bounds = estimate_with_bounds(graph, p, devices, allow_soft_placement=False)
    assert calls == {"simulate": simulations, "flatten": 1}  # nothing again
    assert (est, bounds) == (fresh_est, fresh_bounds)
    assert sum(count for count, _ in est.copies_in.values()) > 0  # spread, with copies


def test_a_judged_placement_of_another_graph_or_other_decisions_is_estimated_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g, other, devices = random_dag(200), random_dag(200, seed=4), models(4)
    p = place_balanced(g, devices)
    assert isinstance(p.judged, Judged)
    cases = [
        (other, Placement(place_balanced(other, devices).decisions, p.devices, judged=p.judged)),
        (g, Placement(dict(p.decisions), p.devices, judged=p.judged)),  # equal, not the same
    ]
    calls = counting(monkeypatch)
    for graph, placement in cases:
        est, _ = estimate_with_bounds(graph, placement, devices, allow_soft_placement=False)
        assert calls == {"simulate": 1, "flatten": 1}
        assert est == estimate.estimate(graph, placement, devices)
        calls.update(simulate=0, flatten=0)
    estimate_with_bounds(g, p, devices, allow_soft_placement=True)
    assert calls["simulate"] == 1  # placed without soft placement: TF's placement may differ


@pytest.mark.pure_python  # patches _Balancer's methods: a C type's where compiled
@pytest.mark.parametrize("shape", SHAPES)
def test_each_candidate_is_bounded_by_its_draft_s_own_bound(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_bounds` gives every candidate its draft's bound to the bit, by its shortcut (inputs
    never copied yet) and by the general way, both taken on each of these shapes."""
    real = balanced._Balancer._bounds
    ways = {"shortcut": 0, "general": 0}

    def bounds(self: Any, op: int, candidates: Any, reads: Any, tensors: Any) -> Any:
        out = real(self, op, candidates, reads, tensors)
        for bound, n, device in out:
            assert candidates[n] == device
            assert bound == self._draft(op, device, reads, tensors).bound, (op, device)
        placed = [t for t in tensors if t is not None]
        copied = any(self.timeline.sent[t[2]] for t in placed)
        ways["general" if copied or len(placed) < len(reads) else "shortcut"] += 1
        return out

    monkeypatch.setattr(balanced._Balancer, "_bounds", bounds)
    place_balanced(SHAPES[shape](300), models(4))
    assert ways["shortcut"] > 0 and ways["general"] > 0, ways


@pytest.mark.pure_python  # patches _Balancer's methods: a C type's where compiled
@pytest.mark.parametrize("limit", [None, 40 * 2**20], ids=["roomy", "tight"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_queue_bound_is_never_above_a_finish_and_changes_no_choice(
    shape: str, limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_serial` (copies queued on the inbound link) is a lower bound of every draft's planned
    finish, and skipping the drafts it rules out gives the same decisions as planning every
    draft, while it skips some of the fan's (each add_n reads copies from every other GPU).
    So does stopping a draft's plan once its copies end too late to beat the best (`_finish`'s
    limit): it stops some drafts of each of these shapes."""
    graph, devices = SHAPES[shape](300), models(4, limit)
    real_finish, real_serial = balanced._Balancer._finish, balanced._serial
    finished: list[int] = []
    bounded: list[float] = []
    stopped, exact = [0], [False]

    def finish(self: Any, draft: balanced.Draft, limit: float = math.inf) -> float:
        out, full = real_finish(self, draft, limit), real_finish(self, draft)
        finished.append(len(draft.copies))
        if len(draft.copies) > 1:
            assert real_serial(draft) <= full, (real_serial(draft), full)
        assert out == full if full < limit else limit <= out <= full, (out, full, limit)
        stopped[0] += out < full
        return full if exact[0] else out

    def serial(draft: balanced.Draft) -> float:
        bounded.append(real_serial(draft))
        return bounded[-1]

    monkeypatch.setattr(balanced._Balancer, "_finish", finish)
    monkeypatch.setattr(balanced, "_serial", serial)
    pruned = place_balanced(graph, devices)
    planned_pruned = len(finished)
    monkeypatch.setattr(balanced, "_MANY", 10**9)  # the bound never asked: every draft planned
    finished.clear()
    exact[0] = True  # and every copy of each planned
    every = place_balanced(graph, devices)
    assert pruned.decisions == every.decisions
    assert planned_pruned <= len(finished)
    if shape == "fan":
        assert bounded and planned_pruned < len(finished)
    assert stopped[0] > 0
