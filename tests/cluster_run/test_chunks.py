"""Chunking a graph placed across tasks (no Dask): the stage rule as a property over random DAGs
and task assignments, and the chunks of the guide's multi-tower graph on two tasks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.devices.cluster import TaskName, full_device
from gpuplace.execute.chunks import split, stages
from gpuplace.graph.model import Graph, Op, TensorRef, TensorSpec

T0, T1 = TaskName("worker", 0), TaskName("worker", 1)
OUT = (TensorSpec((2,)),)


def _graph(edges: list[list[int]], fetch: list[int]) -> Graph:
    ops = tuple(
        Op(f"op{i}", "add_n", tuple(TensorRef(f"op{j}") for j in inputs), outputs=OUT)
        for i, inputs in enumerate(edges)
    )
    return Graph(ops, tuple(TensorRef(f"op{i}") for i in fetch))


@st.composite
def placed(draw: st.DrawFn) -> tuple[Graph, dict[str, str]]:
    n = draw(st.integers(1, 30))
    edges = [
        sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)
    ]
    fetch = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    tasks = [TaskName("worker", draw(st.integers(0, 2))) for _ in range(n)]
    local = [draw(st.sampled_from(["CPU:0", "GPU:0", "GPU:1"])) for _ in range(n)]
    devices = {f"op{i}": full_device(tasks[i], local[i]) for i in range(n)}
    return _graph(edges, fetch), devices


@settings(max_examples=150, deadline=None)
@given(placed())
def test_chunks_cover_each_op_once_and_only_cross_task_edges_raise_the_stage(
    case: tuple[Graph, dict[str, str]],
) -> None:
    graph, devices = case
    chunks = split(graph, devices)
    owner = {name: c.index for c in chunks for name in c.ops}
    assert sorted(owner) == sorted(op.name for op in graph.ops)  # each op in exactly one chunk
    assert sum(len(c.ops) for c in chunks) == len(graph.ops)
    assert [(c.stage, c.task) for c in chunks] == sorted({(c.stage, c.task) for c in chunks})
    for chunk in chunks:
        assert chunk.index == chunks.index(chunk)
        assert all(devices[n].startswith(f"{chunk.task}/") for n in chunk.ops)
    read_elsewhere = set()
    for op in graph.ops:
        for ref in op.inputs:
            src, dst = chunks[owner[ref.op]], chunks[owner[op.name]]
            if src.task != dst.task:  # a cross-task edge goes to a strictly higher stage
                assert src.stage < dst.stage
            else:
                assert src.stage <= dst.stage
            if src is not dst:  # the chunk graph's edges all go forward: it is acyclic
                assert src.index < dst.index
                read_elsewhere.add(ref)
                local = devices[op.name].rsplit("/device:", 1)[1]
                assert any(i.tensor == ref and i.device == local and i.source == src.index
                           for i in dst.imports)  # fmt: skip
    exported = {ref for c in chunks for ref in c.exports}
    assert exported == read_elsewhere | set(graph.fetch)  # exports: cross-chunk reads + fetches
    for chunk in chunks:  # one import per (tensor, device that reads it)
        keys = [(i.tensor, i.device) for i in chunk.imports]
        assert len(keys) == len(set(keys))


def test_the_multi_tower_graph_on_two_tasks_is_three_chunks() -> None:
    graph = _graph([[], [0], [], [2], [1, 3]], [4])
    devices = {"op0": full_device(T0, "GPU:0"), "op1": full_device(T0, "GPU:0"),
               "op2": full_device(T1, "GPU:0"), "op3": full_device(T1, "GPU:0"),
               "op4": full_device(T0, "CPU:0")}  # fmt: skip
    chunks = split(graph, devices)
    assert [(c.task, c.stage, c.ops) for c in chunks] == [
        (T0, 0, ("op0", "op1")),
        (T1, 0, ("op2", "op3")),
        (T0, 1, ("op4",)),
    ]
    assert [c.exports for c in chunks] == [
        (TensorRef("op1"),),
        (TensorRef("op3"),),
        (TensorRef("op4"),),
    ]
    assert [(i.tensor.op, i.source, i.device) for i in chunks[2].imports] == [
        ("op1", 0, "CPU:0"),
        ("op3", 1, "CPU:0"),
    ]
    tasks = {n: T0 if d.startswith(str(T0)) else T1 for n, d in devices.items()}
    assert stages(graph, tasks) == {"op0": 0, "op1": 0, "op2": 0, "op3": 0, "op4": 1}


def test_a_ping_pong_chain_is_one_chunk_per_op() -> None:
    graph = _graph([[], [0], [1], [2]], [3])
    devices = {f"op{i}": full_device(T0 if i % 2 == 0 else T1, "CPU:0") for i in range(4)}
    assert [(c.task.task, c.stage) for c in split(graph, devices)] == [
        (0, 0),
        (1, 1),
        (0, 2),
        (1, 3),
    ]
