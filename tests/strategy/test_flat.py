"""`flatten` over whole lists against each field worked out op by op from its definition (the
module docstring of placement/flat.py, `cost.op_flops` and `op_bytes`, `kernels_of`), on random
graphs with several outputs per op, prints, variables, fetches and sizes past int64; and the
messages for reads and fetches no op makes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op
from gpuplace.placement.cost import op_bytes, op_flops
from gpuplace.placement.flat import flatten
from gpuplace.placement.tf import kernels_of
from gpuplace.units import allocation_size
from tests.graph.test_loader import GENERAL_PATH

# type: (inputs, outputs)
KINDS = {
    "random_normal": (0, 1), "variable": (0, 1), "zeros": (0, 1), "matmul": (2, 1),
    "add": (2, 1), "relu": (1, 1), "print": (2, 2), "add_n": (3, 1), "split": (1, 2),
    "reduce_sum": (1, 1), "cast": (1, 1), "identity": (1, 1),
}  # fmt: skip
ATTRS: dict[str, dict[str, Any]] = {"split": {"num_split": 2}, "cast": {"dtype": "int32"}}


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    """Up to 25 ops reading outputs of the 6 ops before them; ops may share one tuple of
    outputs, as the loader's do (one per type and shape)."""
    ops: list[Op] = []
    made: dict[tuple[int, str, int], tuple[TensorSpec, ...]] = {}
    for i in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(sorted(KINDS))) if ops else "random_normal"
        arity, outputs = KINDS[kind]
        if arity and not ops:
            kind, (arity, outputs) = "variable", KINDS["variable"]
        inputs = []
        for _ in range(arity):
            p = ops[draw(st.integers(max(0, len(ops) - 6), len(ops) - 1))]
            inputs.append(TensorRef(p.name, draw(st.integers(0, len(p.outputs) - 1))))
        n = draw(st.sampled_from((2, 16, 300, 2**32, 2**58)))  # 2**58: past int64's totals
        dtype = draw(st.sampled_from(("float32", "int64", "bool")))
        specs = tuple(TensorSpec((n, 3 + k), dtype) for k in range(outputs))
        if draw(st.booleans()):  # the very tuple of an earlier op with these outputs
            specs = made.setdefault((n, dtype, outputs), specs)
        given = ATTRS.get(kind, {"shape": [n, 3]} if arity == 0 else {})
        attrs = get_op(kind).normalize(f"op{i}", given)
        ops.append(Op(f"op{i}", kind, tuple(inputs), attrs=attrs, outputs=specs))
    fetch = tuple(TensorRef(op.name, len(op.outputs) - 1) for op in ops if draw(st.booleans()))
    return Graph(tuple(ops), fetch)


def expected(graph: Graph) -> dict[str, Any]:
    """Each field of `Flat`, op by op, as the module docstring defines it."""
    ops = graph.ops
    index = {op.name: i for i, op in enumerate(ops)}
    last = len(ops) - 1
    inputs = [tuple((index[r.op], r.index) for r in op.inputs) for op in ops]
    specs = [tuple(ops[p].outputs[k] for p, k in reads) for reads in inputs]
    resident = [get_op(op.type).resident for op in ops]
    ends = [[last if resident[i] else i] * len(op.outputs) for i, op in enumerate(ops)]
    first = [-1] * len(ops)
    for j, reads in enumerate(inputs):
        for p, k in reads:
            ends[p][k] = max(ends[p][k], j)
            first[p] = j if first[p] < 0 else first[p]
    for ref in graph.fetch:
        ends[index[ref.op]][ref.index] = last
    for j in range(last, -1, -1):
        if ops[j].type == "print":
            for (p, k), end in zip(inputs[j], ends[j], strict=True):
                ends[p][k] = max(ends[p][k], end)
    out_bytes = [tuple(s.nbytes for s in op.outputs) for op in ops]
    return {
        "inputs": inputs,
        "flops": [op_flops(op, s, get_op(op.type)) for op, s in zip(ops, specs, strict=True)],
        "nbytes": [op_bytes(op, s) for op, s in zip(ops, specs, strict=True)],
        "out_bytes": out_bytes,
        "sizes": [
            () if op.type == "print" else tuple(map(allocation_size, made))
            for op, made in zip(ops, out_bytes, strict=True)
        ],
        "ends": [tuple(e) for e in ends],
        "first_reader": first,
        "resident": resident,
        "kernels": [
            kernels_of(get_op(op.type), op, s[0].dtype if s else None)
            for op, s in zip(ops, specs, strict=True)
        ],
        "is_print": [op.type == "print" for op in ops],
        "fetch": [(index[r.op], r.index) for r in graph.fetch],
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_flatten_equals_each_field_worked_out_op_by_op(graph: Graph) -> None:
    flat = flatten(graph)
    for field, values in expected(graph).items():
        got = list(getattr(flat, field))
        assert got == values, field
        assert [type(v) for v in got] == [type(v) for v in values], field  # floats stay floats
    assert flat.names == tuple(op.name for op in graph.ops)


def _graph(*ops: Op, fetch: tuple[TensorRef, ...] = ()) -> Graph:
    return Graph(tuple(ops), fetch)


X = Op("x", "random_normal", outputs=(TensorSpec((2, 2)),))


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        (_graph(X, Op("y", "relu", (TensorRef("nope"),))),
         "op 'y' reads an output no earlier op produces"),
        (_graph(X, Op("y", "relu", (TensorRef("x", 1),))),
         "op 'y' reads an output no earlier op produces"),
        (_graph(X, Op("y", "relu", (TensorRef("x", 2**70),))),
         "op 'y' reads an output no earlier op produces"),
        (_graph(Op("y", "relu", (TensorRef("x"),)), X),
         "op 'y' reads an op that comes after it: order the graph"),
        (_graph(X, Op("y", "relu", (TensorRef("y"),), outputs=X.outputs)),
         "op 'y' reads an op that comes after it: order the graph"),
        (_graph(X, fetch=(TensorRef("x", 1),)), "fetch 'x:1' names no output of the graph's ops"),
    ],
)  # fmt: skip
def test_reads_and_fetches_no_op_makes_are_refused(graph: Graph, message: str) -> None:
    with pytest.raises(BadInput) as err:
        flatten(graph)
    assert str(err.value) == message


WIRED = (
    # the loader's one-pass path: every input reads output 0
    """
    graph:
      - {name: x, op: random_normal, shape: [4, 4], seed: 1}
      - {name: y, op: relu, inputs: [x]}
      - {name: z, op: matmul, inputs: [x, y]}
    """,
    GENERAL_PATH,  # its general path: forward inputs, `name:k`, towers
)


@pytest.mark.parametrize("text", WIRED)
def test_flatten_reads_the_loaders_wiring_as_the_names_give_it(text: str) -> None:
    """flatten takes a loaded graph's reads from the loader's Wiring (no name looked up
    again): every field, and the reads' arrays, equal those worked out from the names."""
    from dataclasses import replace
    from textwrap import dedent

    import numpy as np

    from gpuplace.graph.loader import loads

    graph = loads(dedent(text), "spec.yaml")
    assert graph.wiring is not None and graph.wiring.ops is graph.ops
    wired, named = flatten(graph), flatten(replace(graph, wiring=None))
    assert wired == named and wired.ends == named.ends
    for part in ("reader", "offsets", "producer", "slot"):
        assert np.array_equal(getattr(wired.reads, part), getattr(named.reads, part))
