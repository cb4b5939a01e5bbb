"""What `gpuplace run` prints: TensorFlow's device mapping and placement log, the results as numpy
prints them, and `run --json`. Pure: strings and dicts, no printing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..devices.cluster import Cluster, TaskName, full_device
from ..devices.model import LogicalGpu, View
from ..graph.model import Graph
from ..placement.model import Placement
from .cluster import cluster_line as cluster_line
from .lines import SIM
from .plan_records import placement_fragment
from .records import (
    FiniteDict,
    copy_records,
    device_mapping_records,
    json_values,
    machine_record,
    memory_records,
    placed_ops,
    rate_records,
)
from .schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from ..results import Outcome, Prepared


def tf_bus_id(bus_id: str) -> str:
    """TensorFlow prints a 4-digit PCI domain: NVML's 00000000:05:00.0 is 0000:05:00.0."""
    domain, _, rest = bus_id.partition(":")
    return (
        f"{int(domain, 16):04x}:{rest}"
        if rest and domain.strip("0123456789abcdefABCDEF") == ""
        else bus_id
    )


def device_mapping(logical: Sequence[LogicalGpu]) -> str:
    """TensorFlow's `Device mapping:` block (direct_session.cc), one line per (logical) GPU;
    `device:` is the CUDA ordinal of the card, which logical GPUs share."""
    if not logical:
        return "Device mapping: no known devices."
    lines = ["Device mapping:"]
    lines += (_mapping_line(f"/job:localhost/replica:0/task:0/device:GPU:{lg.index}", lg)
              for lg in logical)  # fmt: skip
    return "\n".join(lines)


def _mapping_line(name: str, lg: LogicalGpu) -> str:
    g = lg.gpu
    cc = f", compute capability: {g.gpu.compute_capability}" if g.gpu.compute_capability else ""
    return (
        f"{name} -> device: {g.cuda_index}, name: {g.product}, pci bus id: "
        f"{tf_bus_id(g.gpu.pci_bus_id)}{cc}" + (SIM if g.gpu.simulated else "")
    )


def cluster_mapping(cluster: Cluster, task_logical: Mapping[TaskName, Sequence[LogicalGpu]]) -> str:
    """Across hosts: the `Cluster:` line, then one `Device mapping:` block gathering what each
    task's server logs as it creates its devices (TF logs them one by one, per worker), each
    GPU by its full name."""
    lines = [cluster_line(cluster)]
    gpus = [(full_device(t.name, f"GPU:{lg.index}"), lg)
            for t in cluster.tasks for lg in task_logical.get(t.name, ())]  # fmt: skip
    if not gpus:
        return "\n".join([*lines, "Device mapping: no known devices."])
    return "\n".join([*lines, "Device mapping:", *(_mapping_line(n, lg) for n, lg in gpus)])


def placement_log(graph: Graph, placement: Placement, log_format: str = "guide") -> str:
    """The placement log in `log_format` (`LOG_FORMATS`).

    `guide`: one `name: /job:localhost/replica:0/task:0/device:GPU:0` line per op, in graph
    order, as the "Using GPUs" guide shows it. `tensorflow`: the lines TensorFlow 2.x's placer
    prints to stdout (`placer.cc` `LogDeviceAssignment`: `name: (MatMul): device`), in the
    order it assigns the ops (non-generators first, then the generators it deferred; the
    `balanced` and `round-robin` strategies, which TF does not have, keep graph order).
    """
    if log_format == "guide":
        return "\n".join(f"{op.name}: {placement.decisions[op.name].device}" for op in graph.ops)
    from ..graph.ops import get_op
    from ..placement.tf import tf_type_of

    by_name = graph.by_name()
    lines = []
    for name in placement.log_order():
        op = by_name[name]
        tf_type = tf_type_of(get_op(op.type), op)
        lines.append(f"{name}: ({tf_type}): {placement.decisions[name].device}")
    return "\n".join(lines)


def results_text(values: Mapping[str, np.ndarray]) -> str:
    """Each fetch under its name, the value as numpy prints it (`[[22. 28.]\\n [49. 64.]]`)."""
    return "\n".join(f"{name}:\n{value}" for name, value in values.items())


def _mapping_records(prepared: Prepared) -> list[dict[str, Any]]:
    """The device mapping's records: every task's GPUs, by full name, on a cluster."""
    if prepared.cluster is None:
        return device_mapping_records(prepared.logical)
    by_task = prepared.task_logical
    return [r for t in prepared.cluster.tasks
            for r in device_mapping_records(by_task.get(t.name, ()), str(t.name))]  # fmt: skip


def run_json(view: View, prepared: Prepared, outcome: Outcome) -> dict[str, Any]:
    """`gpuplace run --json`: the device mapping, placement with reasons (what --log-placement and
    --explain print), results (shape, dtype, value), copies, memory, the strategy and the rates'
    sources, and `pruned`: the ops the fetches do not need, which did not run."""
    result = outcome.result
    dtypes: dict[np.dtype[Any], str] = {}  # str(dtype) is numpy's Python code: once per dtype
    values = json_values(list(result.values.values()))  # lists, or a 0-d array's scalar
    return {
        "schema_version": SCHEMA_VERSION,
        "machine": machine_record(view),
        "strategy": prepared.strategy,
        "rates": rate_records(prepared),
        "device_mapping": _mapping_records(prepared),
        "placement": placement_fragment(*placed_ops(prepared), prepared.pruned),
        "pruned": list(prepared.pruned),
        "results": FiniteDict(
            {  # each value made finite by json_values: no walk
                name: {
                    "shape": list(v.shape),
                    "dtype": dtypes.get(v.dtype) or dtypes.setdefault(v.dtype, str(v.dtype)),
                    "value": value,
                }
                for (name, v), value in zip(result.values.items(), values, strict=True)
            }
        ),
        "copies": copy_records(result.copies),
        "memory_peak": dict(result.peak_bytes),
        "memory": memory_records(outcome.memory),
        "policy": prepared.policy.name(),
        "printed": list(result.printed),
    }
