"""Properties over random small graphs and device requests (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import parse_device
from gpuplace.graph.model import Graph, Op
from gpuplace.placement import KINDS, Placement, PlacementError
from gpuplace.placement.candidates import Consumers
from gpuplace.placement.tf import generator_flags

from .helpers import graph, meta, op, run

REQUESTS = [
    "",
    "/device:CPU:0",
    "/device:GPU:0",
    "/device:GPU:1",
    "/device:GPU:3",
    "/device:GPU:*",
    "/job:localhost/device:GPU:0",
    "/job:localhost/replica:0/task:0/device:CPU:0",
]
TYPES = ["constant", "load", "matmul", "add_n", "print"]


@st.composite
def graphs(draw: st.DrawFn, colocate: bool) -> Graph:
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(TYPES if ops else ["constant", "load"]))
        inputs: list[str] = []
        if not meta(kind).generator:
            inputs = draw(st.lists(st.sampled_from([o.name for o in ops]), min_size=1, max_size=2))
        target = None
        if colocate and ops and draw(st.booleans()):
            target = draw(st.sampled_from([o.name for o in ops]))
        device = draw(st.sampled_from(REQUESTS))
        ops.append(op(f"op{i}", kind, *inputs, device=device, colocate_with=target))
    return graph(*ops)


def _short(device: str) -> tuple[str, int]:
    kind, index = device.rsplit("/device:", 1)[1].split(":")
    return kind, int(index)


def _check_sane(g: Graph, p: Placement) -> None:
    assert list(p.decisions) == [o.name for o in g.ops]
    assert sorted(p.log_order()) == sorted(p.decisions)
    for o in g.ops:
        decision = p.decisions[o.name]
        assert decision.device in p.devices
        assert _short(decision.device)[0] in meta(o.type).kernels
        assert decision.kind in KINDS and decision.reason


def _satisfiable(o: Op, gpus: int) -> bool:
    spec = parse_device(o.device)
    existing = [("CPU", 0)] + [("GPU", i) for i in range(gpus)]
    return any(t in meta(o.type).kernels and spec.matches(t, i) for t, i in existing)


@settings(max_examples=150, deadline=None)
@given(graphs(colocate=False), st.integers(0, 3))
def test_satisfiable_requests_are_honoured_and_others_fail(g: Graph, gpus: int) -> None:
    try:
        p = run(g, gpus)
    except PlacementError as error:
        assert error.op is not None
        assert not _satisfiable(g.by_name()[error.op], gpus)
        return
    _check_sane(g, p)
    for o in g.ops:
        assert parse_device(o.device).matches(*_short(p.decisions[o.name].device))


@settings(max_examples=150, deadline=None)
@given(graphs(colocate=True), st.integers(0, 3))
def test_soft_placement_never_raises_for_local_requests(g: Graph, gpus: int) -> None:
    p = run(g, gpus, soft=True)
    _check_sane(g, p)
    for o in g.ops:
        if _satisfiable(o, gpus) and o.colocate_with is None:
            honoured = parse_device(o.device).matches(*_short(p.decisions[o.name].device))
            assert honoured or p.decisions[o.name].kind in ("colocated", "soft-fallback")


@settings(max_examples=150, deadline=None)
@given(graphs(colocate=True), st.integers(0, 3))
def test_colocated_ops_share_a_device(g: Graph, gpus: int) -> None:
    try:
        p = run(g, gpus)
    except PlacementError:
        return
    _check_sane(g, p)
    for o in g.ops:
        if o.colocate_with is not None:
            assert p.decisions[o.name].device == p.decisions[o.colocate_with].device


@settings(max_examples=100, deadline=None)
@given(graphs(colocate=False))
def test_generator_flags_from_the_callers_lists_are_those_from_the_ops(g: Graph) -> None:
    """The placer hands generator_flags each op's type and number of inputs (`Wiring.arity`):
    the same flags as read from the ops themselves."""
    metas = {o.type: meta(o.type) for o in g.ops}
    types, arity = [o.type for o in g.ops], [len(o.inputs) for o in g.ops]
    assert generator_flags(g.ops, metas, types=types, arity=arity) == generator_flags(g.ops, metas)


@given(
    st.lists(st.lists(st.integers(-1, 5), max_size=4), min_size=1, max_size=8),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.data(),
)
def test_consumers_are_those_of_the_rule_written_out(
    inputs: list[list[int]], generator: list[bool], data: st.DataObject
) -> None:
    """Per generator: its first consumer, how many ops read it (an op reading it twice counts
    once) and the one device they all sit on (else mixed), as a plain loop over each op's set
    of inputs finds them."""
    ops = max(len(inputs), 6)
    devices = [object(), object()]  # LocalDevices are compared by identity
    assigned = [data.draw(st.sampled_from(devices)) for _ in range(ops)]
    arity = [len(ins) for ins in inputs]
    consumers = Consumers(ops)
    consumers.collect([p for ins in inputs for p in ins], arity, generator, assigned)  # type: ignore[arg-type]
    for g in range(6):
        readers = [j for j, ins in enumerate(inputs) if g in ins and generator[g]]
        assert consumers.count[g] == len(readers)
        if readers:
            assert consumers.first[g] == readers[0]
            on = {id(assigned[j]) for j in readers}
            assert consumers.mixed[g] == (len(on) > 1)
            assert consumers.one_device(g) is (None if len(on) > 1 else assigned[readers[0]])
