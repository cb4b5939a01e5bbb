"""The executor on numpy backends: values, copies and their sharing, the schedule, memory, errors."""

from __future__ import annotations

import re
import warnings
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gpuplace.errors import BadInput, RuntimeFailure
from gpuplace.execute.backends import Backend, NumpyBackend
from gpuplace.execute.executor import Schedule, execute, plan, run
from gpuplace.execute.schedule import step_inputs
from gpuplace.graph.model import Graph
from gpuplace.memory.ledger import OutOfMemory, new_ledgers
from tests.execute.helpers import CPU, Apply, gpu, graph, kernel_table, op

GPU0, GPU1 = gpu(0), gpu(1)
BACKENDS: dict[str, Backend] = {
    CPU: NumpyBackend(CPU),
    GPU0: NumpyBackend(GPU0, simulated=True),
    GPU1: NumpyBackend(GPU1, simulated=True),
}
A = [[1.0, 2.0], [3.0, 4.0]]


def placed(g: Graph, **where: str) -> dict[str, str]:
    """Every op on the CPU unless named: placed(g, b=GPU0)."""
    return {o.name: where.get(o.name, CPU) for o in g.ops}


def run_graph(g: Graph, limits: Mapping[str, int | None] | None = None, **where: str) -> Any:
    return execute(g, placed(g, **where), BACKENDS, kernel_table().__getitem__, limits=limits)


def copies_of(result: Any) -> list[tuple[str, str, str, str, int]]:
    return [(c.op, c.tensor, c.src, c.dst, c.nbytes) for c in result.copies]


def test_values_are_numpy_results_on_the_host() -> None:
    g = graph(
        op("a", "constant", value=A),
        op("b", "constant", value=[[0.5, 0.0], [0.0, 2.0]]),
        op("c", "matmul", "a", "b"),
        fetch=("c", "a"),
    )
    result = run_graph(g)
    np.testing.assert_array_equal(result.values["c"], np.array(A) @ [[0.5, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(result.values["a"], A)
    assert isinstance(result.values["c"], np.ndarray)
    assert result.copies == [] and result.printed == []


def steps_of(schedule: Schedule) -> list[tuple[Any, ...]]:
    """Per step, in run order: (device, op, inputs, outputs, alloc, (src, dst) copies, frees)."""
    table = []
    alloc = schedule.layout.charges.step_bytes
    for s in schedule.segments:
        for i, step in enumerate(s.steps):
            _, _, _, first, count, frees, copies, o = step
            inputs = step_inputs(step)
            outputs = tuple(range(first, first + count))
            moved = [(c.src, c.dst) for c in copies]
            charged = int(alloc[s.start + i])
            table.append((s.device, o.name, inputs, outputs, charged, moved, tuple(frees)))
    return table


def round_trip() -> Graph:
    return graph(
        op("a", "constant", value=A),
        op("b", "negative", "a"),
        op("c", "add", "b", "a"),
        fetch=("c",),
    )


def test_schedule_of_a_round_trip_through_a_gpu() -> None:
    """Slots, copies, bytes and frees, as literal data (dask's test_start_state style)."""
    g = round_trip()
    schedule = plan(g, placed(g, b=GPU0), BACKENDS, kernel_table().__getitem__)
    assert schedule.devices == (CPU, GPU0, GPU1)
    assert [(s.device, [st[7].name for st in s.steps]) for s in schedule.segments] == [
        (0, ["a"]),
        (1, ["b"]),
        (0, ["c"]),
    ]
    # slots: 0 a, 1 a copied to GPU:0, 2 b, 3 b copied to the CPU, 4 c
    assert steps_of(schedule) == [
        (0, "a", (), (0,), 256, [], ()),
        (1, "b", (1,), (2,), 512, [(0, 1)], (1,)),
        (0, "c", (3, 0), (4,), 512, [(2, 3)], (0, 2, 3)),
    ]
    assert (schedule.slots, schedule.keep, schedule.fetch) == (5, {4}, (("c", 4, 0),))


def test_a_placement_in_any_order_plans_the_same_schedule() -> None:
    """A placement in graph order is read in step; any other is looked up op by op."""
    g = round_trip()
    in_order = placed(g, b=GPU0)
    others = [dict(reversed(in_order.items())), {**in_order, "unused": GPU1}]
    expected = steps_of(plan(g, in_order, BACKENDS, kernel_table().__getitem__))
    for devices in others:
        assert steps_of(plan(g, devices, BACKENDS, kernel_table().__getitem__)) == expected


def test_every_transfer_is_recorded_and_one_copy_serves_a_device() -> None:
    g = graph(
        op("a", "constant", value=A),
        op("b", "add", "a", "a"),
        op("c", "negative", "a"),
        op("d", "negative", "a"),
        op("e", "add", "b", "c"),
        fetch=("d", "e"),
    )
    result = run_graph(g, b=GPU0, c=GPU0, d=GPU1)
    assert copies_of(result) == [
        ("b", "a", CPU, GPU0, 16),  # b and c on GPU:0 share it, as TF's Send/Recv
        ("d", "a", CPU, GPU1, 16),
        ("e", "b", GPU0, CPU, 16),
        ("e", "c", GPU0, CPU, 16),
    ]
    assert all(c.seconds >= 0 for c in result.copies)
    np.testing.assert_array_equal(result.values["e"], np.array(A))  # 2a - a
    np.testing.assert_array_equal(result.values["d"], -np.array(A))


def test_outputs_of_a_multi_output_op_are_named_op_colon_index() -> None:
    g = graph(
        op("a", "constant", shape=(4,), value=[1.0, 2.0, 3.0, 4.0]),
        op("s", "split", "a", shape=(2,), outputs=2, kwargs={"indices_or_sections": 2}),
        op("t", "negative", "s:1", shape=(2,)),
        fetch=("s", "t"),
    )
    result = run_graph(g, t=GPU0)
    assert copies_of(result) == [("t", "s:1", CPU, GPU0, 8)]
    np.testing.assert_array_equal(result.values["s"], [1.0, 2.0])
    np.testing.assert_array_equal(result.values["t"], [-3.0, -4.0])


def reduction(first: str = "constant") -> Graph:
    """a: 1000 float32 (4000 B, 4096 charged), s = sum(a) and t = s + s: scalars (256 each)."""
    return graph(
        op("a", first, shape=(1000,), value=np.arange(1000.0)),
        op("s", "sum", "a", shape=()),
        op("t", "add", "s", "s", shape=()),
        fetch=("t",),
    )


def test_each_tensor_is_freed_after_its_last_consumer() -> None:
    # a alone 4096; s runs: 4096 + 256 = 4352 (peak); a freed; t runs: 256 + 256
    result = run_graph(reduction())
    assert result.peak_bytes == {CPU: 4352, GPU0: 0, GPU1: 0}
    assert result.values["t"] == 2 * sum(range(1000))


def test_resident_tensors_stay_until_the_end() -> None:
    g = reduction(first="variable")
    # a is a variable: t runs with a, s and t live: 4096 + 256 + 256
    assert run_graph(g).peak_bytes[CPU] == 4608
    schedule = plan(g, placed(g), BACKENDS, kernel_table().__getitem__)
    assert schedule.keep == {0, 2}  # the variable a, and the fetched t


def test_fetched_tensors_stay_until_the_end() -> None:
    result = run_graph(graph(*reduction().ops, fetch=("t", "a")))
    assert result.peak_bytes[CPU] == 4608
    np.testing.assert_array_equal(result.values["a"], np.arange(1000.0))


def test_print_records_a_line_and_forwards_its_input() -> None:
    g = graph(
        op("a", "constant", shape=(2,), value=[1.0, 2.0]),
        op("p", "print", "a", shape=(2,)),
        op("b", "add", "p", "p", shape=(2,)),
        fetch=("b", "p"),
    )
    result = run_graph(g, p=GPU0, b=GPU0)
    assert result.printed == ["p: [1. 2.]"]
    assert copies_of(result) == [("p", "a", CPU, GPU0, 8)]
    np.testing.assert_array_equal(result.values["b"], [2.0, 4.0])
    np.testing.assert_array_equal(result.values["p"], [1.0, 2.0])
    assert result.peak_bytes[GPU0] == 512  # the copy of a and b: print allocates nothing


def test_print_writes_its_message_then_the_value_as_tf_print_does() -> None:
    g = graph(
        op("a", "constant", shape=(2,), value=[1.0, 2.0]),
        op("p", "print", "a", shape=(2,), message="a is "),
        op("q", "print", "p", shape=(2,), message=""),
        fetch=("q",),
    )
    assert run_graph(g).printed == ["a is [1. 2.]", "q: [1. 2.]"]


class Saving:
    """A `save` kernel that records each call instead of writing a file."""

    host_value = False

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        self.calls.append(inputs[0])
        return []


def test_a_run_without_effects_skips_saves_and_prints_nothing() -> None:
    """--verify's reference run: the same values, no file written, no print text."""
    g = graph(
        op("a", "constant", shape=(2,), value=[1.0, 2.0]),
        op("p", "print", "a", shape=(2,)),
        op("b", "add", "p", "p", shape=(2,)),
        op("s", "save", "b", outputs=0),
        fetch=("b",),
    )
    table = {**kernel_table(), "save": Saving()}
    saving = table["save"]
    assert isinstance(saving, Saving)
    loud = execute(g, placed(g), BACKENDS, table.__getitem__)
    assert loud.printed == ["p: [1. 2.]"] and len(saving.calls) == 1
    quiet = execute(g, placed(g, p=GPU0, b=GPU0), BACKENDS, table.__getitem__, effects=False)
    assert quiet.printed == [] and len(saving.calls) == 1
    np.testing.assert_array_equal(quiet.values["b"], [2.0, 4.0])
    assert copies_of(quiet) == [("p", "a", CPU, GPU0, 8)]  # the print still forwards a


class Tracking(NumpyBackend):
    """A numpy backend whose device context is logged, with the kernel calls made inside it."""

    def __init__(self, label: str, log: list[tuple[str, str]]) -> None:
        super().__init__(label, simulated=True)
        self.log = log

    @contextmanager
    def device(self) -> Iterator[None]:
        self.log.append(("enter", self.label))
        try:
            yield
        finally:
            self.log.append(("exit", self.label))


class Logged:
    host_value = False

    def __init__(self, log: list[tuple[str, str]]) -> None:
        self.log = log

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        self.log.append(("run", attrs["tag"]))
        return [xp.negative(inputs[0])]


def test_every_op_runs_inside_its_device_context() -> None:
    log: list[tuple[str, str]] = []
    backends: dict[str, Backend] = {name: Tracking(name, log) for name in (CPU, GPU0)}
    kernels = {**kernel_table(), "negative": Logged(log)}
    g = graph(
        op("a", "constant", value=A),
        op("b", "negative", "a"),
        op("c", "negative", "b"),
        op("d", "negative", "c"),
        fetch=("d",),
    )
    execute(g, placed(g, b=GPU0, c=GPU0), backends, kernels.__getitem__)
    assert log == [
        ("enter", CPU),
        ("exit", CPU),
        ("enter", GPU0),
        ("run", "b"),
        ("run", "c"),
        ("exit", GPU0),
        ("enter", CPU),
        ("run", "d"),
        ("exit", CPU),
    ]


class Remembering:
    """Wraps a kernel, keeping a weak reference to every array it makes."""

    def __init__(self, kernel: Any, refs: list[weakref.ref[Any]]) -> None:
        self.kernel, self.refs, self.host_value = kernel, refs, kernel.host_value

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        results = self.kernel.compute(xp, inputs, attrs)
        self.refs.extend(weakref.ref(r) for r in results)
        return list(results)


def test_out_of_memory_names_everything_and_leaves_nothing_allocated() -> None:
    refs: list[weakref.ref[Any]] = []
    kernels = {k: Remembering(v, refs) for k, v in kernel_table().items()}
    g = reduction()
    schedule = plan(g, placed(g), BACKENDS, kernels.__getitem__)
    ledgers = new_ledgers(schedule.devices, {CPU: 4200})
    with pytest.raises(OutOfMemory) as caught:
        run(schedule, ledgers)
    assert str(caught.value) == (
        f"OOM when allocating 256 B for op 's' on {CPU}: 4.0 KiB (4096 B) in use, "
        "limit 4.1 KiB (4200 B). The run stopped and freed everything it had allocated; "
        "nothing is left allocated. Fix: raise that device's memory limit, or place some ops "
        "on another device."
    )
    assert (caught.value.op, caught.value.requested, caught.value.in_use) == ("s", 256, 4096)
    assert caught.value.exit_code == 1
    assert [(ledger.in_use, ledger.peak) for ledger in ledgers] == [(0, 4096), (0, 0), (0, 0)]
    assert refs and all(r() is None for r in refs)


def test_a_limit_that_fits_is_not_an_error() -> None:
    assert run_graph(reduction(), limits={CPU: 4352}).peak_bytes[CPU] == 4352


class Broken:
    host_value = False

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        raise ZeroDivisionError("boom")


def test_a_failing_kernel_is_a_runtime_failure_naming_op_and_device() -> None:
    kernels = {**kernel_table(), "negative": Broken()}
    g = graph(op("a", "constant", value=A), op("b", "negative", "a"), fetch=("b",))
    with pytest.raises(RuntimeFailure, match=f"^op 'b' failed on {GPU0}: ZeroDivisionError: boom$"):
        execute(g, placed(g, b=GPU0), BACKENDS, kernels.__getitem__)


def test_a_kernel_returning_the_wrong_number_of_values_is_named() -> None:
    g = graph(
        op("a", "constant", shape=(4,), value=[1.0, 2.0, 3.0, 4.0]),
        op("s", "split", "a", shape=(1,), outputs=3, kwargs={"indices_or_sections": 2}),
        fetch=("s",),
    )
    with pytest.raises(RuntimeFailure, match="kernel of op 's' returned 2 values for 3 outputs"):
        run_graph(g)


class TwoValues:
    host_value = False

    def compute(self, xp: ModuleType, inputs: list[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return [inputs[0], inputs[0]]


@pytest.mark.parametrize("inputs", [("a",), ("a", "a"), ("a", "a", "a")])
def test_a_kernel_returning_two_values_for_its_one_output_is_named(inputs: tuple[str, ...]) -> None:
    kernels = {**kernel_table(), "negative": TwoValues()}
    g = graph(op("a", "constant", value=A), op("b", "negative", *inputs), fetch=("b",))
    with pytest.raises(
        RuntimeFailure, match=r"^the kernel of op 'b' returned 2 values for 1 outputs$"
    ):
        execute(g, placed(g, b=GPU0), BACKENDS, kernels.__getitem__)


def test_float_errors_give_inf_and_nan_without_numpy_warnings() -> None:
    # TensorFlow's kernels return inf and nan silently; numpy would warn with our source lines
    kernels = {**kernel_table(), "log": Apply("log"), "divide": Apply("divide")}
    g = graph(
        op("a", "constant", value=[[0.0, -1.0], [1.0, 0.0]]),
        op("l", "log", "a"),
        op("d", "divide", "a", "a"),
        fetch=("l", "d"),
    )
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = execute(g, placed(g, d=GPU0), BACKENDS, kernels.__getitem__)
    assert str(result.values["l"].tolist()) == "[[-inf, nan], [0.0, -inf]]"
    assert str(result.values["d"].tolist()) == "[[nan, 1.0], [1.0, nan]]"
    assert np.geterr() == before  # only the run ignores them


@pytest.mark.parametrize(
    ("g", "devices", "limits", "message"),
    [
        (graph(op("a", "constant", value=A), fetch=("a",)), {}, {}, "op 'a' has no device"),
        (
            graph(op("a", "constant", value=A), fetch=("a",)),
            {"a": gpu(7)},
            {},
            f"op 'a' is placed on {gpu(7)}, which has no backend",
        ),
        (
            graph(op("b", "negative", "x:1"), fetch=("b",)),
            {"b": CPU},
            {},
            "op 'b' reads 'x:1', which no earlier op produces",
        ),
        (
            graph(op("a", "constant", value=A), fetch=("a:1",)),
            {"a": CPU},
            {},
            "fetch 'a:1' names no output",
        ),
        (
            graph(op("a", "constant", value=A), fetch=("a",)),
            {"a": CPU},
            {gpu(7): 1},
            f"memory limit given for {gpu(7)}, which this run has no backend for",
        ),
    ],
)
def test_inputs_the_executor_cannot_run_are_bad_input(
    g: Graph, devices: dict[str, str], limits: dict[str, int], message: str
) -> None:
    with pytest.raises(BadInput, match=re.escape(message)):
        execute(g, devices, BACKENDS, kernel_table().__getitem__, limits=limits)
