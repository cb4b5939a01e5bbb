"""The executor against a plain interpreter of the same rules, on random placed graphs.

The executor plans a layout, counts the ledgers up front and calls elementwise kernels directly;
the interpreter below walks the graph op by op with dicts, charging each ledger before the op
and freeing each tensor after its last reader, as TensorFlow's executor does. Both must give
bit-identical fetched values, the same copies, prints and peaks, and the same OOM (op, device,
bytes) when a limit is passed (hypothesis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import Kernel, execute
from gpuplace.execute.schedule import PlacedDevices, layout
from gpuplace.graph import get_op
from gpuplace.graph.model import Graph, Op
from gpuplace.memory.ledger import OutOfMemory, allocation_size, new_ledgers
from tests.execute.helpers import CPU, gpu, graph, kernel_table, op

DEVICES = (CPU, gpu(0), gpu(1))
BACKENDS: dict[str, Backend] = {
    CPU: NumpyBackend(CPU),
    gpu(0): NumpyBackend(gpu(0), simulated=True),
    gpu(1): NumpyBackend(gpu(1), simulated=True),
}
KERNELS: dict[str, Kernel] = {
    **kernel_table(),  # constant, variable (host values), matmul, split: lists in and out
    "add": get_op("add"),  # elementwise: called directly
    "neg": get_op("neg"),
    "tanh": get_op("tanh"),
}
Key = tuple[str, int, str]  # (op, output, device): a tensor, or its copy on another device
Outcome = tuple[dict[str, Any], list[tuple[str, ...]], dict[str, int], list[str]] | str


def interpret(g: Graph, where: Mapping[str, str], limits: Mapping[str, int | None]) -> Outcome:
    """(values, copies, peaks, printed) of a run, or the OOM it raises, as text."""
    ledgers = new_ledgers(DEVICES, limits)
    book = dict(zip(DEVICES, ledgers, strict=True))
    home: dict[str, list[Key]] = {}  # op -> where its outputs live (print: its inputs)
    size: dict[Key, int] = {}
    last: dict[Key, int] = {}
    plans = []  # per op: input keys, copies (src, dst, ref), output keys
    for step, o in enumerate(g.ops):
        device, inputs, copies = where[o.name], [], []
        for ref in o.inputs:
            key = home[ref.op][ref.index]
            if key[2] != device:
                last[key] = step
                copy = (ref.op, ref.index, device)
                if copy not in size:
                    size[copy] = size[key]
                    copies.append((key, copy, ref))
                key = copy
            last[key] = step
            inputs.append(key)
        outputs = [] if o.type == "print" else [(o.name, i, device) for i in range(len(o.outputs))]
        for key, spec in zip(outputs, o.outputs, strict=False):
            size[key] = spec.nbytes
            last[key] = step
        home[o.name] = inputs if o.type == "print" else outputs
        plans.append((inputs, copies, outputs))
    kept = {home[f.op][f.index] for f in g.fetch}
    kept |= {k for o in g.ops if o.type == "variable" for k in home[o.name]}  # not their copies
    values: dict[Key, Any] = {}
    moved: list[tuple[str, ...]] = []
    printed: list[str] = []
    for step, (o, (inputs, copies, outputs)) in enumerate(zip(g.ops, plans, strict=True)):
        charge = sum(allocation_size(size[k]) for k in [c[1] for c in copies] + outputs)
        try:
            book[where[o.name]].allocate(charge, o.name)
        except OutOfMemory as exc:
            return str(exc)
        for src, dst, ref in copies:
            values[dst] = np.array(values[src], copy=True)
            moved.append((o.name, str(ref), src[2], dst[2], str(size[src])))
        args = [values[k] for k in inputs]
        if o.type == "print":
            printed += [f"{o.attrs.get('message') or o.name + ': '}{a}" for a in args]
        else:
            results = KERNELS[o.type].compute(np, args, o.attrs)
            values.update(zip(outputs, results, strict=True))
        for key in [k for k, at in last.items() if at == step and k not in kept]:
            book[key[2]].free(allocation_size(size[key]))
            del values[key]
    fetched = {str(f): values[home[f.op][f.index]] for f in g.fetch}
    return fetched, moved, {lg.device: lg.peak for lg in ledgers}, printed


def executed(g: Graph, where: Mapping[str, str], limits: Mapping[str, int | None]) -> Outcome:
    try:
        result = execute(g, where, BACKENDS, KERNELS.__getitem__, limits=limits)
    except OutOfMemory as exc:
        return str(exc)
    moved = [(c.op, c.tensor, c.src, c.dst, str(c.nbytes)) for c in result.copies]
    return result.values, moved, result.peak_bytes, result.printed


@st.composite
def placed_graphs(draw: st.DrawFn) -> tuple[Graph, dict[str, str]]:
    """A random graph of 2x2 float32 tensors (matmul and split among them), each op on a
    random device, fetching a few of its tensors."""
    ops: list[Op] = []
    tensors: list[str] = []  # every tensor so far
    square: list[str] = []  # the 2x2 ones (split makes 1x2 halves)
    for i in range(draw(st.integers(1, 14))):
        name = f"o{i}"
        kind = draw(st.sampled_from(["constant", "variable", "add", "neg", "tanh", "matmul",
                                     "split", "print"]) if tensors else st.just("constant"))  # fmt: skip
        pick = st.sampled_from(tensors) if tensors else st.nothing()
        pick_square = st.sampled_from(square) if square else st.nothing()
        if kind in ("constant", "variable"):
            value = draw(st.lists(st.floats(-2, 2, width=32), min_size=4, max_size=4))
            ops.append(op(name, kind, value=np.reshape(value, (2, 2)).tolist()))
            square.append(name)
            tensors.append(name)
        elif kind in ("add", "matmul"):
            ops.append(op(name, kind, draw(pick_square), draw(pick_square)))
            square.append(name)
            tensors.append(name)
        elif kind == "split":
            split = {"indices_or_sections": 2}
            ops.append(op(name, kind, draw(pick_square), outputs=2, shape=(1, 2), kwargs=split))
            tensors += [f"{name}:0", f"{name}:1"]
        else:  # neg, tanh, print: any shape, kept
            source = draw(pick)
            extra = {"message": draw(st.sampled_from(["", "p: "]))} if kind == "print" else {}
            ops.append(op(name, kind, source, **extra))
            tensors.append(name)
            if source in square:
                square.append(name)
    fetch = tuple(draw(st.lists(st.sampled_from(tensors), min_size=1, max_size=3, unique=True)))
    where = {o.name: draw(st.sampled_from(DEVICES)) for o in ops}
    return graph(*ops, fetch=fetch), where


def same(a: Outcome, b: Outcome) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    values_a, values_b = a[0], b[0]
    if values_a.keys() != values_b.keys():
        return False
    for key, value in values_a.items():
        other = values_b[key]
        if value.dtype != other.dtype or value.tobytes() != other.tobytes():  # bit for bit
            return False
    return a[1:] == b[1:]


@settings(max_examples=250, deadline=None)
@given(placed_graphs(), st.lists(st.none() | st.integers(0, 8).map(lambda k: k * 256), min_size=3,
                                 max_size=3))  # fmt: skip
def test_the_executor_runs_as_the_plain_interpreter(
    placed: tuple[Graph, dict[str, str]], caps: list[int | None]
) -> None:
    g, where = placed
    limits = dict(zip(DEVICES, caps, strict=True))
    expected = interpret(g, where, limits)
    got = executed(g, where, limits)
    assert same(got, expected), (got, expected)


class _Decision:
    def __init__(self, device: str) -> None:
        self.device = device


@settings(max_examples=60, deadline=None)
@given(placed_graphs(), st.booleans())
def test_a_layout_read_from_the_decisions_is_the_layout_of_their_devices(
    case: tuple[Graph, dict[str, str]], reverse: bool
) -> None:
    """`PlacedDevices` (what `predict.placed_layout` passes: the decisions, read as asked) lays
    out the graph as the dict of each op's device does, in graph order or not."""
    g, where = case
    names = list(where)[::-1] if reverse else list(where)
    decisions = {name: _Decision(where[name]) for name in names}
    plain = layout(g, where, DEVICES, KERNELS.__getitem__)
    read = layout(g, PlacedDevices(decisions), DEVICES, KERNELS.__getitem__)
    assert repr(read.segments) == repr(plain.segments)
    assert (read.slots, read.keep, read.fetch) == (plain.slots, plain.keep, plain.fetch)
    for field in type(plain.charges).__slots__:
        assert repr(getattr(read.charges, field)) == repr(getattr(plain.charges, field))
