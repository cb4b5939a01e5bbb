"""`copies_and_loads`: plan's copies and per-device loads, whether `Placement.decisions` comes in
graph order (walked) or not (looked up by name), with ops on one device (no input is looked at)
or on several; against the rule written out op by op."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement.loads import DeviceLoad, PlannedCopy, copies_and_loads
from gpuplace.placement.model import Decision, Placement

DEVICES = tuple(f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(3))
OUTPUTS = ((TensorSpec((4, 4)),), (TensorSpec((2,), "int32"), TensorSpec((3, 3))), ())


def _expected(graph: Graph, placement: Placement) -> tuple[list[Any], list[Any]]:
    """The rule, one op and one input at a time."""
    device = {name: d.device for name, d in placement.decisions.items()}
    by_name = graph.by_name()
    copies: list[PlannedCopy] = []
    for op in graph.ops:
        for ref in op.inputs:
            src, dst = device[ref.op], device[op.name]
            if src != dst and (str(ref), dst) not in {(c.tensor, c.dst) for c in copies}:
                nbytes = by_name[ref.op].outputs[ref.index].nbytes
                copies.append(PlannedCopy(op.name, str(ref), src, dst, nbytes))
    loads = []
    for d in placement.devices:
        mine = [op for op in graph.ops if device[op.name] == d]
        into = [c for c in copies if c.dst == d]
        loads.append(DeviceLoad(d, len(mine), sum(s.nbytes for op in mine for s in op.outputs),
                                len(into), sum(c.nbytes for c in into)))  # fmt: skip
    return copies, loads


def _graph(n: int, seed: int, devices: int) -> Graph:
    rng = random.Random(seed)
    ops = []
    for i in range(n):
        reads = [] if i == 0 else [rng.randrange(i) for _ in range(rng.randint(1, 3))]
        refs = tuple(TensorRef(f"op{j}", rng.randrange(len(ops[j].outputs)))
                     for j in reads if ops[j].outputs)  # fmt: skip
        ops.append(Op(f"op{i}", "add", refs, outputs=OUTPUTS[rng.randrange(3) if i else 0]))
    return Graph(tuple(ops), ())


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.integers(0, 10**6), st.integers(1, 3), st.booleans())
def test_the_copies_and_loads_follow_the_rule(n: int, seed: int, devices: int,
                                             shuffled: bool) -> None:  # fmt: skip
    graph = _graph(n, seed, devices)
    rng = random.Random(seed)
    decided = {op.name: Decision(DEVICES[rng.randrange(devices)], "default", "r")
               for op in graph.ops}  # fmt: skip
    names = list(decided)
    if shuffled:  # not in graph order: looked up by name
        rng.shuffle(names)
    placement = Placement({name: decided[name] for name in names}, DEVICES)
    copies, loads = copies_and_loads(graph, placement)
    assert (copies, loads) == _expected(graph, placement)
    if devices == 1:
        assert copies == []


def test_an_input_no_op_of_the_graph_makes_is_looked_up_by_name() -> None:
    """An input naming an op the graph lacks (its producer index is -1): its device comes
    from the placement by name; on the reader's device it is no copy, elsewhere a KeyError
    (as looking its op up by name gives), never another op's device."""
    graph = Graph((Op("a", "add", outputs=OUTPUTS[0]),
                   Op("b", "add", (TensorRef("gone"), TensorRef("a")), outputs=OUTPUTS[0])), ())  # fmt: skip
    here = {"a": Decision(DEVICES[1], "default", "r"), "b": Decision(DEVICES[0], "default", "r")}
    same = Placement({**here, "gone": Decision(DEVICES[0], "default", "r")}, DEVICES)
    copies, _ = copies_and_loads(graph, same)
    assert copies == _expected(graph, same)[0]
    assert [c.tensor for c in copies] == ["a"]
    apart = Placement({**here, "gone": Decision(DEVICES[2], "default", "r")}, DEVICES)
    with pytest.raises(KeyError, match="gone"):
        copies_and_loads(graph, apart)
