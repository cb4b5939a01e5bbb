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
