"""What `plan` reports per device before anything runs: the copies a placement implies (TF's
Send/Recv pairs) and each device's ops, output bytes and incoming copies."""

from __future__ import annotations

from dataclasses import dataclass

from ..graph.model import Graph, Op
from .model import Placement


@dataclass(frozen=True)
class PlannedCopy:
    """A transfer the run will make: `tensor` from its producer's device to a consumer's."""

    op: str
    tensor: str
    src: str
    dst: str
    nbytes: int


@dataclass(frozen=True)
class DeviceLoad:
    device: str
    ops: int
    output_bytes: int
    copies_in: int
    copy_bytes_in: int


def copies_and_loads(graph: Graph, placement: Placement) -> tuple[list[PlannedCopy],
                                                                  list[DeviceLoad]]:  # fmt: skip
    """The copies a placement implies: cross-device edges, one per (tensor, destination) as
    TF's Send/Recv pairs; and per device in priority order the ops placed there, the bytes
    they output and the copies coming in. One pass over the ops (linear)."""
    decisions = placement.decisions
    ops: dict[str, int] = dict.fromkeys(placement.devices, 0)
    outputs: dict[str, int] = dict.fromkeys(placement.devices, 0)
    sizes: dict[tuple[tuple[int, ...], str], int] = {}  # bytes per (shape, dtype), once each
    seen: set[tuple[str, str]] = set()
    copies = []
    by_name: dict[str, Op] = {}  # built for the first copy: most edges stay on one device
    for op in graph.ops:
        dst = decisions[op.name].device
        made = 0
        for s in op.outputs:
            key = (s.shape, s.dtype)
            size = sizes.get(key)
            made += sizes.setdefault(key, s.nbytes) if size is None else size
        ops[dst] = ops.get(dst, 0) + 1
        outputs[dst] = outputs.get(dst, 0) + made
        for ref in op.inputs:
            src = decisions[ref.op].device
            if src != dst and (str(ref), dst) not in seen:
                seen.add((str(ref), dst))
                by_name = by_name or graph.by_name()
                nbytes = by_name[ref.op].outputs[ref.index].nbytes
                copies.append(PlannedCopy(op.name, str(ref), src, dst, nbytes))
    copies_in: dict[str, tuple[int, int]] = {}  # one pass over the copies, not one per device
    for c in copies:
        count, nbytes = copies_in.get(c.dst, (0, 0))
        copies_in[c.dst] = (count + 1, nbytes + c.nbytes)
    loads = [DeviceLoad(d, ops[d], outputs[d], *copies_in.get(d, (0, 0))) for d in ops]
    return copies, loads
