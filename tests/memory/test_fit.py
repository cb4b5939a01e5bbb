"""`memory/fit.py: check_fits`: a tensor is refused only on a device smaller than it, whatever
the other devices' limits (the check skips the lookups when no tensor passes the smallest)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.errors import RuntimeFailure
from gpuplace.graph.model import Graph, Op, TensorSpec
from gpuplace.memory.fit import check_fits
from gpuplace.placement.model import Decision, Placement

CPU, GPU = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:GPU:0"  # fmt: skip


def placed(sizes: list[tuple[int, str]]) -> tuple[Graph, Placement]:
    """One op per (float32 elements, device), each with one output of that many elements."""
    ops = tuple(Op(f"op{i}", "ones", outputs=(TensorSpec((n,)),)) for i, (n, _) in enumerate(sizes))
    decisions = {op.name: Decision(d, "default", "") for op, (_, d) in zip(ops, sizes, strict=True)}
    return Graph(ops, ()), Placement(decisions, (GPU, CPU))


@given(
    st.lists(st.tuples(st.integers(0, 64), st.sampled_from([CPU, GPU])), max_size=6),
    st.integers(0, 256),
    st.sampled_from([None, 128, 1024]),
)
def test_refused_exactly_when_some_tensor_is_larger_than_its_own_device(
    sizes: list[tuple[int, str]], gpu_limit: int, cpu_limit: int | None
) -> None:
    limits = {CPU: cpu_limit, GPU: gpu_limit}
    first = next(
        (i for i, (n, d) in enumerate(sizes) if (limit := limits[d]) is not None and 4 * n > limit),
        None,
    )
    graph, placement = placed(sizes)
    if first is None:
        check_fits(graph, placement, limits)
        return
    with pytest.raises(
        RuntimeFailure, match=rf"^op 'op{first}' \(ones\) outputs a \[{sizes[first][0]}\]"
    ):
        check_fits(graph, placement, limits)


def test_a_tensor_past_the_gpu_limit_fits_on_the_cpu() -> None:
    graph, placement = placed([(1000, CPU), (10, GPU)])
    check_fits(graph, placement, {CPU: 1 << 20, GPU: 64})
    graph, placement = placed([(10, CPU), (1000, GPU)])
    with pytest.raises(RuntimeFailure, match=r"larger than all 64 B .*GPU:0 may use"):
        check_fits(graph, placement, {CPU: 1 << 20, GPU: 64})


@given(
    st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=8),
    st.lists(st.integers(0, 64), min_size=4, max_size=4),
    st.integers(0, 256),
)
def test_shared_specs_are_checked_as_the_plain_rule_checks_them(
    outputs: list[list[int]], elements: list[int], limit: int
) -> None:
    """Ops whose outputs are the same few spec objects (as the loader shares equal specs), in
    any order: refused exactly when some output, sized one by one, is larger than the limit."""
    pool = [TensorSpec((n,)) for n in elements]  # distinct objects, some of them equal
    ops = tuple(
        Op(f"op{i}", "ones", outputs=tuple(pool[k] for k in picks))
        for i, picks in enumerate(outputs)
    )
    graph = Graph(ops, ())
    placement = Placement({op.name: Decision(GPU, "default", "") for op in ops}, (GPU, CPU))
    too_large = any(spec.nbytes > limit for op in ops for spec in op.outputs)
    if not too_large:
        check_fits(graph, placement, {CPU: None, GPU: limit})
        return
    with pytest.raises(RuntimeFailure, match="larger than all"):
        check_fits(graph, placement, {CPU: None, GPU: limit})
