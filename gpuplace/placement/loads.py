"""What `plan` reports per device before anything runs: the copies a placement implies (TF's
Send/Recv pairs) and each device's ops, output bytes and incoming copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..graph.model import Graph, TensorSpec, wiring
from .model import Placement


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
    inputs only where the ops are on more than one device, by op index (the loader's
    `Wiring`: no lookup by name)."""
    devices = [d.device for d in placement.in_order([op.name for op in graph.ops])]
    ops_of: dict[str, int] = dict.fromkeys(placement.devices, 0)
    outputs: dict[str, int] = dict.fromkeys(placement.devices, 0)
    made_by: dict[int, int] = {}  # bytes per outputs tuple (the loader shares equal ones)
    sizes: dict[tuple[tuple[int, ...], str], int] = {}  # bytes per (shape, dtype), once each
    last: tuple[TensorSpec, ...] = ()  # the previous op's outputs, and the bytes they make
    made = 0
    run: str | None = None  # the device of the run of neighbours being counted
    run_ops = run_bytes = 0  # and their ops and bytes, added to the device's when it ends
    for op, dst in zip(graph.ops, devices, strict=True):
        specs = op.outputs
        if specs is not last:  # neighbours mostly share a tuple: looked up only on a change
            last = specs
            made = made_by.get(id(specs), -1)
            if made < 0:
                made = 0
                for s in specs:
                    key = (s.shape, s.dtype)
                    size = sizes.get(key)
                    made += sizes.setdefault(key, s.nbytes) if size is None else size
                made_by[id(specs)] = made
        if dst is not run and dst != run:
            _add(ops_of, outputs, run, run_ops, run_bytes)
            run, run_ops, run_bytes = dst, 0, 0
        run_ops += 1
        run_bytes += made
    _add(ops_of, outputs, run, run_ops, run_bytes)
    used = [d for d, count in ops_of.items() if count]
    copies = _copies(graph, placement, devices) if len(used) > 1 else []  # else none crosses
    copies_in: dict[str, tuple[int, int]] = {}  # one pass over the copies, not one per device
    for c in copies:
        count, nbytes = copies_in.get(c.dst, (0, 0))
        copies_in[c.dst] = (count + 1, nbytes + c.nbytes)
    loads = [DeviceLoad(d, ops_of[d], outputs[d], *copies_in.get(d, (0, 0))) for d in ops_of]
    return copies, loads


def _add(ops_of: dict[str, int], outputs: dict[str, int], device: str | None, ops: int,
         nbytes: int) -> None:  # fmt: skip
    """Count a run of `ops` neighbours on `device` (None: none yet) making `nbytes`."""
    if device is not None:
        ops_of[device] = ops_of.get(device, 0) + ops
        outputs[device] = outputs.get(device, 0) + nbytes


def _copies(graph: Graph, placement: Placement, devices: Sequence[str]) -> list[PlannedCopy]:
    """The cross-device edges, one per (tensor, destination), in the order the ops read them:
    each input's producer by index (`Wiring`), by name only where no op of the graph has
    the name (a KeyError if that edge crosses, as looking its op up by name would give)."""
    producers = wiring(graph).producers  # each op's inputs' in turn
    seen: set[tuple[int, int, str]] = set()
    copies = []
    j = 0
    for op, dst in zip(graph.ops, devices, strict=True):
        for ref in op.inputs:
            p = producers[j]
            j += 1
            if p >= 0:
                src = devices[p]
                if src != dst and (p, ref.index, dst) not in seen:
                    seen.add((p, ref.index, dst))
                    nbytes = graph.ops[p].outputs[ref.index].nbytes
                    copies.append(PlannedCopy(op.name, str(ref), src, dst, nbytes))
            elif placement.decisions[ref.op].device != dst:
                raise KeyError(ref.op)
    return copies
