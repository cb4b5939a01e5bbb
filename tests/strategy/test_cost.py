"""The cost model: FLOPs and bytes per op, op and copy times, device rates from the presets,
link timelines, and the allocator rounding placement mirrors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from gpuplace.devices import load_machine, view
from gpuplace.devices.presets import PRESETS
from gpuplace.errors import BadInput
from gpuplace.graph import get_op, loads
from gpuplace.graph.model import TensorSpec
from gpuplace.memory.ledger import allocation_size as ledger_rounding
from gpuplace.memory.policy import Policy, logical_gpus, parse_virtual
from gpuplace.placement.cost import (
    DEFAULT_GPU,
    DeviceModel,
    LinkModel,
    copy_time,
    device_models,
    op_bytes,
    op_flops,
    op_time,
    split_devices,
)
from gpuplace.placement.flat import allocation_size, flatten
from gpuplace.placement.links import Link, transfer
from tests.strategy.helpers import CPU0, gpu, models

GRAPH = loads(
    """
graph:
  - {name: a, op: random_normal, shape: [100, 300]}
  - {name: b, op: ones, shape: [300, 200]}
  - {name: mm, op: matmul, inputs: [a, b]}
  - {name: mt, op: matmul, inputs: [mm, mm], transpose_a: true}
  - {name: r, op: relu, inputs: [mm]}
  - {name: s, op: softmax, inputs: [mm]}
  - {name: sum, op: reduce_sum, inputs: [mm], axis: 1}
  - {name: n, op: add_n, inputs: [mm, mm, mm]}
  - {name: v, op: variable, shape: [10, 10]}
  - {name: t, op: transpose, inputs: [mm]}
"""
)
OPS = GRAPH.by_name()


def flops(name: str) -> float:
    op = OPS[name]
    return op_flops(op, tuple(OPS[r.op].outputs[r.index] for r in op.inputs))


def test_flops_per_op_type() -> None:
    assert flops("mm") == 2 * 100 * 200 * 300
    assert flops("mt") == 2 * 200 * 200 * 100  # [200,100] @ [100,200]: k = 100
    assert flops("r") == 100 * 200
    assert flops("s") == 5 * 100 * 200
    assert flops("sum") == 100 * 200  # the input's elements
    assert flops("n") == 2 * 100 * 200
    assert flops("a") == 100 * 300  # random generators: one per element
    assert flops("b") == flops("v") == flops("t") == 0


def test_an_op_types_flops_hook_decides_its_count() -> None:
    """`op_flops` asks the op type's `flops` (attrs, input specs, output specs) when it has one;
    a meta without one, or with None, leaves the table's count; flatten passes the registry's."""
    seen = []

    def count(attrs: Mapping[str, Any], ins: tuple[TensorSpec, ...],
              outs: tuple[TensorSpec, ...]) -> float:  # fmt: skip
        seen.append((dict(attrs), ins, outs))
        return 7.0 * len(ins)

    mm = OPS["mm"]
    specs = (OPS["a"].outputs[0], OPS["b"].outputs[0])
    assert op_flops(mm, specs, SimpleNamespace(flops=count)) == 14.0
    assert seen == [({"transpose_a": False, "transpose_b": False}, specs, mm.outputs)]
    assert op_flops(mm, specs, SimpleNamespace(flops=None)) == flops("mm")
    assert op_flops(mm, specs, SimpleNamespace()) == flops("mm")
    assert get_op("matmul").flops is None  # the TF ops keep the table
    assert list(flatten(GRAPH).flops) == [flops(op.name) for op in GRAPH.ops]
    hooked = flatten(GRAPH, lambda t: replace(get_op(t), flops=count) if t == "relu" else get_op(t))
    assert hooked.flops[hooked.names.index("r")] == 7.0


def test_flatten_counts_the_bytes_op_bytes_counts() -> None:
    """flatten works each op's bytes out from the output sizes it keeps (`out_bytes`): the
    same number as `op_bytes` (inputs read plus outputs written; a variable none)."""
    flat = flatten(GRAPH)
    moved = [op_bytes(op, tuple(OPS[r.op].outputs[r.index] for r in op.inputs)) for op in GRAPH.ops]
    assert list(flat.nbytes) == moved
    assert moved[flat.names.index("v")] == 0
    assert moved[flat.names.index("n")] == 4 * 100 * 200 * 4  # three inputs and one output
    assert list(flat.out_bytes) == [tuple(s.nbytes for s in op.outputs) for op in GRAPH.ops]


def test_op_time_is_a_roofline_plus_overhead() -> None:
    fast = DeviceModel(gpu(0), "GPU", 1e12, 1e11, None)
    mm, a, b = OPS["mm"], OPS["a"].outputs[0], OPS["b"].outputs[0]
    moved = (100 * 300 + 300 * 200 + 100 * 200) * 4
    assert op_time(mm, (a, b), fast) == pytest.approx(max(12e6 / 1e12, moved / 1e11) + 5e-6)
    slow_memory = DeviceModel(gpu(0), "GPU", 1e12, 1e8, None, overhead=0.0)
    assert op_time(mm, (a, b), slow_memory) == pytest.approx(moved / 1e8)
    v = OPS["v"]
    assert op_time(v, (), fast) == pytest.approx(5e-6)  # a variable moves nothing


def test_copy_time_is_latency_plus_bytes_over_bandwidth() -> None:
    assert copy_time(10**9, LinkModel(1e10, 1e-5)) == pytest.approx(0.1 + 1e-5)
    default = LinkModel()
    assert (default.bandwidth, default.latency) == (12e9, 10e-6)


def test_every_preset_has_a_bandwidth() -> None:
    assert all(p.bandwidth > 0 for p in PRESETS.values())
    assert (PRESETS["k520"].bandwidth, PRESETS["h200"].bandwidth) == (160, 4800)


def test_device_models_take_rates_from_the_presets_and_limits_from_the_policy() -> None:
    v = view(load_machine("2xK520"), {})
    gpus = logical_gpus(v.gpus, Policy())
    got = device_models(gpus, v.machine.host)
    assert [m.name for m in got] == [gpu(0), gpu(1), CPU0]
    assert (got[0].flops, got[0].bandwidth) == (2.4e12, 160e9)
    assert got[0].memory_limit == gpus[0].limit
    assert got[2].kind == "CPU" and got[2].memory_limit == v.machine.host.memory_total


def test_virtual_gpus_share_their_card() -> None:
    v = view(load_machine("1xT4"), {})
    halves = device_models(logical_gpus(v.gpus, Policy(virtual=parse_virtual("GPU:0=1GiB,1GiB"))))
    assert [m.flops for m in halves[:2]] == [8.1e12 / 2] * 2
    assert halves[0].memory_limit == 2**30


def test_an_unknown_product_gets_the_conservative_default() -> None:
    v = view(load_machine("1xK520"), {})
    [lg] = logical_gpus(v.gpus, Policy())
    card = lg.gpu._replace(gpu=lg.gpu.gpu._replace(product="Mystery GPU"))
    [model, _] = device_models([replace(lg, gpu=card)])
    assert (model.flops, model.bandwidth) == DEFAULT_GPU


def test_split_devices_orders_gpus_and_adds_a_cpu() -> None:
    gpus, cpu = split_devices(list(reversed(models(3)[:3])))
    assert [g.name for g in gpus] == [gpu(0), gpu(1), gpu(2)] and cpu.name == CPU0
    with pytest.raises(BadInput, match=r"GPU:0\.\.GPU:1"):
        split_devices([models(3)[0], models(3)[2]])


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 10**6 + 3])
def test_rounding_matches_the_ledger(n: int) -> None:
    assert allocation_size(n) == ledger_rounding(n)


def test_a_copy_uses_the_idle_time_of_both_links() -> None:
    out, into = Link(), Link()
    out.book([(1.0, 2.0)])
    into.book([(2.5, 3.0)])
    end, pieces = transfer(out, into, 0.5, 1.5)  # 0.5-1.0, 2.0-2.5, then 3.0-3.5
    assert pieces == [(0.5, 1.0), (2.0, 2.5), (3.0, 3.5)] and end == 3.5
    out.book(pieces)
    assert (out.starts, out.ends) == ([0.5, 3.0], [2.5, 3.5])  # touching blocks merge
    held = Link()  # pieces planned into `into` for the same op, not booked yet
    held.book([(0.0, 0.4)])
    end, pieces = transfer(out, into, 0.0, 0.5, held=held)
    assert pieces == [(0.4, 0.5), (3.5, 3.9)] and end == pytest.approx(3.9)
