"""What `plan` reports per device before anything runs: the copies a placement implies (TF's
Send/Recv pairs) and each device's ops, output bytes and incoming copies."""

from __future__ import annotations

from typing import NamedTuple

from ..graph.model import Graph, Op
from .model import Decision, Placement


class PlannedCopy(NamedTuple):
    """A transfer the run will make: `tensor` from its producer's device to a consumer's."""

    op: str
    tensor: str
    src: str
    dst: str
    nbytes: int


class DeviceLoad(NamedTuple):
    device: str
    ops: int
    output_bytes: int
    copies_in: int
    copy_bytes_in: int


def copies_and_loads(graph: Graph, placement: Placement) -> tuple[list[PlannedCopy],
                                                                  list[DeviceLoad]]:  # fmt: skip
    """The copies a placement implies: cross-device edges, one per (tensor, destination) as
    TF's Send/Recv pairs; and per device in priority order the ops placed there, the bytes
    they output and the copies coming in. One pass over the ops (linear), and over their
    inputs only where the ops are on more than one device."""
    ops_of: dict[str, int] = dict.fromkeys(placement.devices, 0)
    outputs: dict[str, int] = dict.fromkeys(placement.devices, 0)
    made_by: dict[int, int] = {}  # bytes per outputs tuple (the loader shares equal ones)
    sizes: dict[tuple[tuple[int, ...], str], int] = {}  # bytes per (shape, dtype), once each
    names, decided = _decided(graph, placement)
    devices = [d.device for d in decided]
    for op, dst in zip(graph.ops, devices, strict=True):
        made = made_by.get(id(op.outputs), -1)
        if made < 0:
            made = 0
            for s in op.outputs:
                key = (s.shape, s.dtype)
                size = sizes.get(key)
                made += sizes.setdefault(key, s.nbytes) if size is None else size
            made_by[id(op.outputs)] = made
        ops_of[dst] = ops_of.get(dst, 0) + 1
        outputs[dst] = outputs.get(dst, 0) + made
    used = [d for d, count in ops_of.items() if count]
    copies = _copies(graph, placement, names, devices) if len(used) > 1 else []  # else none crosses
    copies_in: dict[str, tuple[int, int]] = {}  # one pass over the copies, not one per device
    for c in copies:
        count, nbytes = copies_in.get(c.dst, (0, 0))
        copies_in[c.dst] = (count + 1, nbytes + c.nbytes)
    loads = [DeviceLoad(d, ops_of[d], outputs[d], *copies_in.get(d, (0, 0))) for d in ops_of]
    return copies, loads


def _decided(graph: Graph, placement: Placement) -> tuple[list[str], list[Decision]]:
    """The ops' names, and each op's decision in graph order: `decisions`' own order where it
    is the graph's (as `Placement` keeps it: a walk, no lookup by name), else looked up."""
    names = [op.name for op in graph.ops]
    return names, placement.in_order(names)


def _copies(graph: Graph, placement: Placement, names: list[str],
            devices: list[str]) -> list[PlannedCopy]:  # fmt: skip
    """The cross-device edges, one per (tensor, destination), in the order the ops read them."""
    decisions = placement.decisions
    seen: set[tuple[str, str]] = set()
    copies = []
    op_of: dict[str, Op] = {}  # built for the first copy: most edges stay on one device
    for op, dst in zip(graph.ops, devices, strict=True):
        for ref in op.inputs:
            src = decisions[ref.op].device
            if src != dst:
                tensor = str(ref)
                if (tensor, dst) not in seen:
                    seen.add((tensor, dst))
                    op_of = op_of or dict(zip(names, graph.ops, strict=True))
                    nbytes = op_of[ref.op].outputs[ref.index].nbytes
                    copies.append(PlannedCopy(op.name, tensor, src, dst, nbytes))
    return copies
