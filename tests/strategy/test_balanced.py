"""The balanced strategy: spreads parallel work, keeps chains together, honours requests,
colocation and CPU-only kernels, stays within every memory limit, and says why."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec, get_op, loads
from gpuplace.placement import PlacementError, place
from gpuplace.placement.balanced import place_balanced
from gpuplace.placement.estimate import estimate, lower_bounds
from gpuplace.placement.model import NoFit
from gpuplace.units import MiB
from tests.strategy.helpers import LINK, models, where

BRANCHES = """
graph:
  - {name: x1, op: random_normal, shape: [1000, 1000]}
  - {name: y1, op: matmul, inputs: [x1, x1]}
  - {name: x2, op: random_normal, shape: [1000, 1000]}
  - {name: y2, op: matmul, inputs: [x2, x2]}
"""


def test_two_independent_heavy_branches_go_to_two_gpus() -> None:
    g = loads(BRANCHES)
    p = place_balanced(g, models(2), LINK)
    assert where(p) == {"x1": "GPU:0", "y1": "GPU:0", "x2": "GPU:1", "y2": "GPU:1"}
    assert p.decisions["y2"].kind == "balanced"
    assert p.decisions["y2"].reason == "balanced: earliest finish on GPU:1"
    # random ops read a shape tensor in TF, so neither TF nor the strategy defers them
    assert p.decisions["x2"] == p.decisions["y2"]
    spread = estimate(g, p, models(2), LINK).makespan
    assert spread < 0.6 * estimate(g, place(g, 2), models(2), LINK).makespan


def test_a_chain_stays_on_one_gpu_when_copies_cost_more_than_waiting() -> None:
    layers = "\n".join(
        f"  - {{name: m{i}, op: matmul, inputs: [m{i - 1}, w]}}" for i in range(1, 8)
    )
    g = loads(
        "graph:\n  - {name: w, op: variable, shape: [512, 512]}\n"
        f"  - {{name: m0, op: matmul, inputs: [w, w]}}\n{layers}\n"
    )
    p = place_balanced(g, models(4), LINK)
    assert set(where(p).values()) == {"GPU:0"}


def test_requests_colocation_and_cpu_only_ops_are_honoured() -> None:
    g = loads(
        """
graph:
  - {name: a, op: random_normal, shape: [500, 500], device: /gpu:1}
  - {name: b, op: matmul, inputs: [a, a], device: /gpu:1}
  - {name: c, op: random_normal, shape: [500, 500]}
  - {name: d, op: matmul, inputs: [c, c], colocate_with: b}
  - {name: e, op: matmul, inputs: [c, c]}
  - {name: f, op: matmul, inputs: [e, e], colocate_with: e}
  - {name: p, op: print, inputs: [f]}
  - {name: s, op: add, inputs: [p, d], device: /cpu:0}
"""
    )
    p = place_balanced(g, models(3), LINK)
    got = where(p)
    assert got["a"] == got["b"] == got["d"] == "GPU:1"
    assert got["e"] == got["f"] and got["p"] == got["s"] == "CPU:0"
    assert p.decisions["b"] == place(g, 3).decisions["b"]  # TF's decision and reason
    assert p.decisions["f"].kind == "colocated"


def test_a_partial_request_is_balanced_among_the_gpus_it_matches() -> None:
    g = loads(BRANCHES.replace("inputs: [x2, x2]}", "inputs: [x2, x2], device: /device:GPU:*}"))
    p = place_balanced(g, models(2), LINK)
    assert where(p)["y2"] == "GPU:1"
    assert p.decisions["y2"].kind == "explicit"
    assert p.decisions["y2"].reason.startswith("requested /device:GPU:*; balanced:")


def test_a_generator_requesting_gpus_stays_on_one_when_its_consumer_runs_on_the_cpu() -> None:
    """A constant under /GPU:* is free over every GPU, but it may not follow a consumer pinned
    to the CPU (an int32 MatMul has no GPU kernel) there, as TF's placer would not."""
    g = loads(
        "graph:\n"
        "  - {name: a, op: constant, value: [1, 2], shape: [1, 2], dtype: int32}\n"
        "  - {name: b, op: constant, value: [3, 4], shape: [2, 1], dtype: int32, device: /GPU:*}\n"
        "  - {name: m, op: matmul, inputs: [a, b]}\n"
    )
    p = place_balanced(g, models(2), LINK)
    assert where(p) == {"a": "CPU:0", "b": "GPU:0", "m": "CPU:0"}
    assert p.decisions["b"].reason == "requested /device:GPU:*; balanced: earliest finish on GPU:0"


def mlp(layers: int, mib: int = 16) -> Graph:
    """x, then `layers` of (a `mib` MiB weight variable, matmul): a chain."""
    side = int((mib * MiB // 4) ** 0.5)
    lines = [f"  - {{name: x, op: random_normal, shape: [8, {side}]}}"]
    h = "x"
    for i in range(layers):
        lines.append(f"  - {{name: w{i}, op: variable, shape: [{side}, {side}]}}")
        lines.append(f"  - {{name: m{i}, op: matmul, inputs: [{h}, w{i}]}}")
        h = f"m{i}"
    return loads("graph:\n" + "\n".join(lines) + "\n")


def test_weights_larger_than_one_gpu_are_spread_within_the_limits() -> None:
    g = mlp(6)  # 96 MiB of weights in a chain, 40 MiB per GPU: two weights per GPU
    devices = models(4, limit=40 * MiB)
    assert estimate(g, place(g, 4), devices, LINK).peak[devices[0].name] > 40 * MiB
    p = place_balanced(g, devices, LINK)
    e = estimate(g, p, devices, LINK)
    assert all(e.peak[d.name] <= 40 * MiB for d in devices[:4])
    assert [where(p)[f"w{i}"] for i in range(6)] == ["GPU:0"] * 2 + ["GPU:1"] * 2 + ["GPU:2"] * 2
    assert p.decisions["m2"].reason == (
        "balanced: earliest finish on GPU:1 (GPU:0 would exceed its 40MiB limit)"
    )


def test_a_graph_that_fits_nowhere_names_the_op_and_the_room_left() -> None:
    with pytest.raises(NoFit) as caught:
        place_balanced(mlp(5), models(2, limit=40 * MiB), LINK)
    text = str(caught.value)
    assert "op 'm4' (matmul) with the variable 'w4' it reads needs 16.1 MiB more" in text
    assert "GPU:0 has 8.0 MiB free of its 40.0 MiB limit, GPU:1 has 7.9 MiB free" in text
    assert caught.value.exit_code == 1 and caught.value.op == "m4"


def test_a_pinned_op_that_does_not_fit_is_refused() -> None:
    g = loads("graph:\n  - {name: v, op: variable, shape: [4096, 4096], device: /gpu:0}\n")
    with pytest.raises(
        NoFit, match=r"must stay on its device \(requested /device:GPU:0\) and needs 64.0 MiB"
    ):
        place_balanced(g, models(2, limit=40 * MiB), LINK)


def test_tensorflow_rules_and_errors_come_first() -> None:
    g = loads("graph:\n  - {name: a, op: random_normal, shape: [2], device: /gpu:5}\n")
    with pytest.raises(PlacementError) as caught:
        place_balanced(g, models(2), LINK)
    assert str(caught.value) == str(_tf_error(g))


def _tf_error(g: Graph) -> PlacementError:
    with pytest.raises(PlacementError) as caught:
        place(g, 2)
    return caught.value


def test_tensorflow_placement_is_kept_when_spreading_is_slower() -> None:
    # y1, y2: cheap ops with 64 MiB outputs; z needs both: a copy costs more than it saves
    g = loads(
        """
graph:
  - {name: a, op: random_normal, shape: [4096, 1]}
  - {name: b, op: random_normal, shape: [1, 4096]}
  - {name: y1, op: matmul, inputs: [a, b]}
  - {name: y2, op: matmul, inputs: [a, b]}
  - {name: z, op: add, inputs: [y1, y2]}
"""
    )
    p = place_balanced(g, models(2), LINK)
    assert set(where(p).values()) == {"GPU:0"}
    assert p.decisions["y2"].kind == "balanced"
    assert "spreading was estimated slower" in p.decisions["y2"].reason


# Random DAGs with random memory limits: a balanced placement never exceeds a limit, and its
# makespan is never below the lower bounds.
@st.composite
def dags(draw: st.DrawFn) -> Graph:
    n = draw(st.sampled_from((64, 256, 512)))
    ops: list[Op] = []
    for i in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(("variable", "matmul", "relu", "add"))) if ops else "variable"
        arity = {"variable": 0, "relu": 1}.get(kind, 2)
        picks = [draw(st.integers(0, len(ops) - 1)) for _ in range(arity)]
        inputs = tuple(TensorRef(ops[j].name) for j in picks)
        attrs = get_op(kind).normalize(f"o{i}", {"shape": [n, n]} if not arity else {})
        device = draw(st.sampled_from(("", "", "", "/gpu:1", "/cpu:0")))
        ops.append(Op(f"o{i}", kind, inputs, device, attrs, (TensorSpec((n, n)),)))
    return Graph(tuple(ops), (TensorRef(ops[-1].name),))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(2, 4), st.sampled_from((None, 2, 4, 12)))
def test_balanced_respects_limits_and_the_lower_bounds(
    g: Graph, gpus: int, mib: int | None
) -> None:
    devices = models(gpus, limit=None if mib is None else mib * MiB)
    try:
        p = place_balanced(g, devices, LINK)
    except NoFit:
        return
    e = estimate(g, p, devices, LINK)
    assert all(d.memory_limit is None or e.peak[d.name] <= d.memory_limit for d in devices)
    assert e.makespan >= lower_bounds(g, devices, LINK).best * (1 - 1e-12)


def test_soft_placement_and_a_machine_without_gpus() -> None:
    g = loads(BRANCHES.replace("inputs: [x1, x1]}", "inputs: [x1, x1], device: /gpu:7}"))
    p = place_balanced(g, models(2), LINK, allow_soft_placement=True)
    assert p.decisions["y1"] == place(g, 2, allow_soft_placement=True).decisions["y1"]
    assert p.decisions["y1"].kind == "soft-fallback"
    assert set(where(place_balanced(loads(BRANCHES), models(0), LINK)).values()) == {"CPU:0"}
