"""The layout (`schedule.layout`, which reads each input by its producer's number: the loader's
wiring) against its rule written out plainly with names (hypothesis): an input is the output of
the last op of that name before it, copied once per (tensor, device), a print op forwards its
inputs. Graphs whose names repeat, read ops not made yet or outputs they lack, and leave out
`save` ops (a run without side effects) included: the same steps, copies, charges and frees,
or the same error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.execute.backends import NumpyBackend
from gpuplace.execute.schedule import PlacedDevices, bind, layout, step_inputs
from gpuplace.graph import get_op
from gpuplace.graph.model import Graph, Op, wiring
from gpuplace.memory.ledger import allocation_size
from tests.execute.helpers import CPU, gpu, kernel_table, op, ref

DEVICES = (CPU, gpu(0))
KERNELS = {**kernel_table(), "add": get_op("add"), "save": get_op("save")}


def plain(g: Graph, where: Mapping[str, str], effects: bool) -> Any:
    """Per step (device, op, inputs, outputs, bytes, copies, frees), the fetched slots and the
    kept ones, by names; or the BadInput text."""
    home: dict[str, list[int]] = {}  # op name -> its outputs' slots (a print: its inputs')
    device_of: list[int] = []  # per slot
    size: list[int] = []
    last: list[int] = []
    copied: dict[tuple[str, int, int], int] = {}
    keep: set[int] = set()
    steps = []
    ops = [o for o in g.ops if effects or o.type != "save"]
    for step, o in enumerate(ops):
        device = DEVICES.index(where[o.name])
        inputs, copies = [], []
        for r in o.inputs:
            try:
                slot = home[r.op][r.index]
            except (KeyError, IndexError):
                return f"op '{o.name}' reads '{r}', which no earlier op produces"
            if device_of[slot] != device:
                last[slot] = step
                key = (r.op, r.index, device)
                if key not in copied:
                    copied[key] = len(size)
                    device_of.append(device)
                    size.append(size[slot])
                    last.append(step)
                    copies.append((slot, copied[key], str(r)))
                slot = copied[key]
            last[slot] = step
            inputs.append(slot)
        if o.type == "print":
            outputs: list[int] = []
            home[o.name] = inputs
        else:
            outputs = list(range(len(size), len(size) + len(o.outputs)))
            for spec in o.outputs:
                device_of.append(device)
                size.append(allocation_size(spec.nbytes))
                last.append(step)
            home[o.name] = outputs
            if o.type == "variable":
                keep.update(outputs)
        alloc = sum(size[c[1]] for c in copies) + sum(size[s] for s in outputs)
        steps.append([device, o.name, tuple(inputs), tuple(outputs), alloc, copies])
    fetched = []
    for f in g.fetch:
        try:
            slot = home[f.op][f.index]
        except (KeyError, IndexError):
            return f"fetch '{f}' names no output of the graph's ops"
        keep.add(slot)
        fetched.append((str(f), slot))
    for step, s in enumerate(steps):
        s.append(tuple(slot for slot, at in enumerate(last) if at == step and slot not in keep))
    return [tuple(s) for s in steps], fetched, sorted(keep)


def laid_out(g: Graph, where: Mapping[str, str], effects: bool, decided: bool) -> Any:
    """What `plain` gives, read from the layout (bound, so that its frees are filled in)."""
    # the decisions of the ops in graph order (a layout reads them in step where it can)
    decisions = {o.name: _Decision(where[o.name]) for o in g.ops}
    devices = PlacedDevices(decisions) if decided else where
    try:
        laid = layout(g, devices, DEVICES, KERNELS.__getitem__, effects=effects)
    except BadInput as exc:
        return str(exc)
    schedule = bind(laid, {d: NumpyBackend(d, simulated=d != CPU) for d in DEVICES})
    alloc = laid.charges.step_bytes
    steps = []
    for s in schedule.segments:
        for i, step in enumerate(s.steps):
            _, _, _, first, count, frees, copies, o = step
            moved = [(c.src, c.dst, c.record[1]) for c in copies]
            outputs = tuple(range(first, first + count))
            charged = int(alloc[s.start + i])
            steps.append((s.device, o.name, step_inputs(step), outputs, charged, moved,
                          tuple(frees)))  # fmt: skip
    return steps, [(f, slot) for f, slot, _ in laid.fetch], sorted(laid.keep)


class _Decision:
    def __init__(self, device: str) -> None:
        self.device = device


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Graph, dict[str, str]]:
    """Ops named from a small pool (names may repeat), reading any name of the pool (made
    before, later, or never) and outputs that may not exist."""
    pool = [f"o{i}" for i in range(draw(st.integers(2, 8)))]
    names = st.sampled_from(pool)
    reads = st.builds(lambda n, i: f"{n}:{i}" if i else n, names, st.sampled_from([0, 0, 0, 1]))
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, 10))):
        name = draw(names)
        kind = draw(st.sampled_from(["constant", "variable", "add", "matmul", "split", "print",
                                     "save"]))  # fmt: skip
        if kind in ("constant", "variable"):
            ops.append(op(name, kind, value=[[1.0, 2.0], [3.0, 4.0]]))
        elif kind in ("add", "matmul"):
            ops.append(op(name, kind, draw(reads), draw(reads)))
        elif kind == "split":
            ops.append(op(name, kind, draw(reads), outputs=2, shape=(1, 2)))
        else:
            ops.append(op(name, kind, *draw(st.lists(reads, max_size=3)), outputs=0))
    fetch = tuple(ref(f) for f in draw(st.lists(reads, min_size=1, max_size=2)))
    where = {n: draw(st.sampled_from(DEVICES)) for n in pool}
    return Graph(tuple(ops), fetch), where


@settings(max_examples=300, deadline=None)
@given(graphs(), st.booleans(), st.booleans(), st.booleans())
def test_the_layout_follows_its_rule_by_names(
    case: tuple[Graph, dict[str, str]], effects: bool, wired: bool, decided: bool
) -> None:
    g, where = case
    if wired:  # the loader's wiring, as a spec's graph carries it
        wiring(g)
    assert laid_out(g, where, effects, decided) == plain(g, where, effects)
