"""Buffer forwarding: a direct elementwise call writes into an input that dies at it, on the host,
only when nothing else can see that buffer (schedule.forward, executor._Run.segment)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import Kernel, execute, plan, run
from gpuplace.execute.schedule import (
    BINARY,
    BINARY_INTO_X,
    BINARY_INTO_Y,
    FORWARD_BYTES,
    UNARY,
    UNARY_INTO,
    Schedule,
)
from gpuplace.graph.model import Graph
from gpuplace.memory.ledger import new_ledgers
from tests.execute.helpers import CPU, Apply, Constant, graph, op

BACKENDS: dict[str, Backend] = {CPU: NumpyBackend(CPU)}
BIG = (FORWARD_BYTES // 4 // 256, 256)  # float32: exactly the least size forwarded
SMALL = (2, 2)


@dataclass
class Direct:
    """An elementwise kernel the executor calls directly (`xp_function`), as the registry's."""

    xp_function: str
    host_value: bool = False

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [getattr(xp, self.xp_function)(*inputs)]


@dataclass
class Held:
    """A host value the caller still holds (as a fed array is): the same object every run."""

    value: np.ndarray
    host_value: bool = True

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [self.value]


def kernels(held: np.ndarray | None = None) -> dict[str, Kernel]:
    table: dict[str, Kernel] = {
        "constant": Constant(),
        "variable": Constant(),
        "add": Direct("add"),
        "subtract": Direct("subtract"),
        "negative": Direct("negative"),
        "transpose": Apply("transpose"),
    }
    if held is not None:
        table["feed"] = Held(held)
    return table


def matrix(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def schedule_of(g: Graph, table: dict[str, Kernel]) -> Schedule:
    return plan(g, {o.name: CPU for o in g.ops}, BACKENDS, table.__getitem__)


def kinds(schedule: Schedule) -> dict[str, int]:
    """Each op's kind of call on the host (UNARY_INTO: writes into its input x, ...)."""
    table = schedule.tables[0]
    return {s[7].name: table[s[0]][0] for seg in schedule.segments for s in seg.steps}


def run_it(g: Graph, table: dict[str, Kernel]) -> dict[str, np.ndarray]:
    schedule = schedule_of(g, table)
    return run(schedule, new_ledgers(schedule.devices, {})).values


def test_a_dying_input_of_the_same_shape_lends_its_buffer() -> None:
    a, b = matrix(BIG, 0), matrix(BIG, 1)
    g = graph(
        op("a", "constant", shape=BIG, value=a),
        op("b", "constant", shape=BIG, value=b),
        op("v", "variable", shape=BIG, value=b),
        op("n", "negative", "a", shape=BIG),  # a dies here: into x
        op("d", "subtract", "v", "n", shape=BIG),  # v is resident, n dies: into y
        op("e", "add", "d", "b", shape=BIG),  # both die: into the one made first (b, y)
        op("f", "subtract", "e", "v", shape=BIG),  # e dies: into x
        fetch=("f",),
    )
    schedule = schedule_of(g, kernels())
    assert kinds(schedule) == {
        "a": 0, "b": 0, "v": 0, "n": UNARY_INTO, "d": BINARY_INTO_Y, "e": BINARY_INTO_Y,
        "f": BINARY_INTO_X,
    }  # fmt: skip
    values = run(schedule, new_ledgers(schedule.devices, {})).values
    np.testing.assert_array_equal(values["f"], ((b - -a) + b) - b)


def test_forwarding_writes_into_the_dying_buffer_itself() -> None:
    """The fetched result is in the constant's own buffer, negated in place twice (its address
    is recorded, not the array: holding it would stop the forwarding)."""
    made: list[int] = []

    @dataclass
    class Recorded:
        host_value: bool = True

        def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
            value = np.array(attrs["value"], dtype=np.float32)
            made.append(value.__array_interface__["data"][0])
            return [value]

    a = matrix(BIG, 2)
    table = {**kernels(), "constant": Recorded()}
    g = graph(
        op("a", "constant", shape=BIG, value=a),
        op("n", "negative", "a", shape=BIG),
        op("m", "negative", "n", shape=BIG),
        fetch=("m",),
    )
    got = run_it(g, table)["m"]
    np.testing.assert_array_equal(got, a)
    assert got.__array_interface__["data"][0] == made[0]


def test_small_tensors_are_not_forwarded() -> None:
    g = graph(
        op("a", "constant", shape=SMALL, value=np.ones(SMALL)),
        op("n", "negative", "a", shape=SMALL),
        op("s", "add", "n", "n", shape=SMALL),
        fetch=("s",),
    )
    found = kinds(schedule_of(g, kernels()))
    assert (found["n"], found["s"]) == (UNARY, BINARY)
    np.testing.assert_array_equal(run_it(g, kernels())["s"], -2 * np.ones(SMALL))


def test_inputs_that_live_on_or_change_shape_are_not_forwarded() -> None:
    a = matrix(BIG, 3)
    row = matrix((1, BIG[1]), 4)
    g = graph(
        op("a", "constant", shape=BIG, value=a),
        op("r", "constant", shape=(1, BIG[1]), value=row),
        op("n", "negative", "a", shape=BIG),  # a is fetched: kept
        op("s", "add", "r", "n", shape=BIG),  # r broadcasts: only n (y) can lend
        fetch=("a", "s"),
    )
    schedule = schedule_of(g, kernels())
    assert kinds(schedule)["n"] == UNARY and kinds(schedule)["s"] == BINARY_INTO_Y
    values = run(schedule, new_ledgers(schedule.devices, {})).values
    np.testing.assert_array_equal(values["a"], a)
    np.testing.assert_array_equal(values["s"], row - a)


def test_a_buffer_someone_else_holds_is_never_written() -> None:
    """A fed array the caller holds, and an array another live value views (a transpose), die
    at a forwarding call: the run checks before writing and makes a fresh buffer instead."""
    side = int(np.sqrt(FORWARD_BYTES // 4))
    square = (side, side)
    fed = matrix(square, 5)
    before = fed.copy()
    c = matrix(square, 6)
    g = graph(
        op("f", "feed", shape=square),
        op("n", "negative", "f", shape=square),  # f dies here, but the caller holds it
        op("c", "constant", shape=square, value=c),
        op("t", "transpose", "c", shape=square),  # a view of c, read below
        op("m", "negative", "c", shape=square),  # c dies here, but t still sees it
        op("s", "add", "t", "m", shape=square),
        op("u", "add", "s", "n", shape=square),
        fetch=("u",),
    )
    table = kernels(held=fed)
    assert kinds(schedule_of(g, table))["n"] == UNARY_INTO  # planned; refused when it runs
    got = run_it(g, table)["u"]
    np.testing.assert_array_equal(fed, before)
    np.testing.assert_array_equal(got, (c.T - c) - before)


def test_a_view_of_another_buffer_is_never_written() -> None:
    """A view dies at a forwarding call (a transpose of a variable): writing into it would
    change the variable, so the run makes a fresh buffer."""
    side = int(np.sqrt(FORWARD_BYTES // 4))
    square = (side, side)
    w = matrix(square, 10)
    g = graph(
        op("w", "variable", shape=square, value=w),
        op("t", "transpose", "w", shape=square),
        op("n", "negative", "t", shape=square),  # t dies here: planned into x
        op("s", "add", "n", "w", shape=square),
        fetch=("s", "w"),
    )
    assert kinds(schedule_of(g, kernels()))["n"] == UNARY_INTO
    values = run_it(g, kernels())
    np.testing.assert_array_equal(values["w"], w)
    np.testing.assert_array_equal(values["s"], w - w.T)


def test_the_ledger_charges_what_it_charged_before_forwarding() -> None:
    """Forwarding does not change what a run charges: the peak is a fresh buffer per output."""
    a = matrix(BIG, 7)
    g = graph(
        op("a", "constant", shape=BIG, value=a),
        op("n", "negative", "a", shape=BIG),
        op("m", "negative", "n", shape=BIG),
        fetch=("m",),
    )
    result = execute(g, {o.name: CPU for o in g.ops}, BACKENDS, kernels().__getitem__)
    assert result.peak_bytes[CPU] == 2 * a.nbytes  # input and output, as without forwarding


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["negative", "add", "subtract"]),
                          st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=8))  # fmt: skip
def test_any_chain_gives_numpy_s_values(program: list[tuple[str, int, int]]) -> None:
    """Random elementwise programs over two constants: each op reads any two earlier values,
    so inputs die anywhere, some twice in one call; the run equals plain numpy."""
    shape = (FORWARD_BYTES // 4 // 64, 64)
    x, y = matrix(shape, 8), matrix(shape, 9)
    ops = [op("x", "constant", shape=shape, value=x), op("y", "constant", shape=shape, value=y)]
    want = [x, y]
    for i, (kind, p, q) in enumerate(program):
        a, b = p % len(want), q % len(want)
        names = (ops[a].name,) if kind == "negative" else (ops[a].name, ops[b].name)
        ops.append(op(f"o{i}", kind, *names, shape=shape))
        want.append(getattr(np, kind)(*(want[a],) if kind == "negative" else (want[a], want[b])))
    got = run_it(graph(*ops, fetch=(ops[-1].name,)), kernels())
    np.testing.assert_array_equal(got[ops[-1].name], want[-1])
