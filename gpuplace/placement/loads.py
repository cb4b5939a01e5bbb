"""What `plan` reports per device before anything runs: the copies a placement implies (TF's
Send/Recv pairs) and each device's ops, output bytes and incoming copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..graph.model import Graph, TensorSpec, columns, wiring
from .model import Decision, Placement

_new_tuple = tuple.__new__


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
    `Wiring`: no lookup by name), each op's name and outputs read from the graph's columns
    (`graph.model.Columns`)."""
    names, _, _, outputs_of = columns(graph)
    devices = decided_devices(placement.in_order(names))
    ops_of: dict[str, int] = dict.fromkeys(placement.devices, 0)
    outputs: dict[str, int] = dict.fromkeys(placement.devices, 0)
    made_by: dict[int, int] = {}  # bytes per outputs tuple (the loader shares equal ones)
    sizes: dict[tuple[tuple[int, ...], str], int] = {}  # bytes per (shape, dtype), once each
    last: tuple[TensorSpec, ...] = ()  # the previous op's outputs, and the bytes they make
    made = 0
    run: str | None = None  # the device of the run of neighbours being counted
    run_ops = run_bytes = 0  # and their ops and bytes, added to the device's when it ends
    same = 0  # the ops of the run since `made` last changed: added to its bytes at a change
    for specs, dst in zip(outputs_of, devices, strict=True):
        if specs is not last:  # neighbours mostly share a tuple: looked up only on a change
            run_bytes += made * same
            same = 0
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
            _add(ops_of, outputs, run, run_ops, run_bytes + made * same)
            run, run_ops, run_bytes, same = dst, 0, 0, 0
        run_ops += 1
        same += 1
    _add(ops_of, outputs, run, run_ops, run_bytes + made * same)
    used = [d for d, count in ops_of.items() if count]
    copies = _copies(graph, placement, devices) if len(used) > 1 else []  # else none crosses
    copies_in: dict[str, tuple[int, int]] = {}  # one pass over the copies, not one per device
    for c in copies:
        count, nbytes = copies_in.get(c.dst, (0, 0))
        copies_in[c.dst] = (count + 1, nbytes + c.nbytes)
    loads = [DeviceLoad(d, ops_of[d], outputs[d], *copies_in.get(d, (0, 0))) for d in ops_of]
    return copies, loads


def decided_devices(decisions: Sequence[Decision]) -> list[str]:
    """Each decision's device, read once per run of one decision (the placers share a
    decision among the ops it holds for, and a frozen dataclass's field costs more to read
    than comparing two objects)."""
    devices: list[str] = []
    last: Decision | None = None
    device = ""
    for d in decisions:
        if d is not last:
            last, device = d, d.device
        devices.append(device)
    return devices


def _add(ops_of: dict[str, int], outputs: dict[str, int], device: str | None, ops: int,
         nbytes: int) -> None:  # fmt: skip
    """Count a run of `ops` neighbours on `device` (None: none yet) making `nbytes`."""
    if device is not None:
        ops_of[device] = ops_of.get(device, 0) + ops
        outputs[device] = outputs.get(device, 0) + nbytes


def _copies(graph: Graph, placement: Placement, devices: Sequence[str]) -> list[PlannedCopy]:
    """The cross-device edges, one per (tensor, destination), in the order the ops read them:
    each input's producer and output by index (`Wiring`), names from the graph's columns; an
    op's inputs themselves are read only where no op of the graph has the name an input gives
    (a KeyError if that edge crosses, as looking its op up by name would give)."""
    wired = wiring(graph)
    producers, arity, read = wired.producers, wired.arity, wired.outputs
    names, _, _, outputs_of = columns(graph)
    seen: set[tuple[int, int, str]] = set()
    copies = []
    j = 0
    for i in range(len(names)):
        dst = devices[i]
        for k in range(arity[i]):
            p = producers[j]
            index = 0 if read is None else read[j]
            j += 1
            if p >= 0:
                src = devices[p]
                if src != dst and (p, index, dst) not in seen:
                    seen.add((p, index, dst))
                    nbytes = outputs_of[p][index].nbytes
                    tensor = names[p] if index == 0 else f"{names[p]}:{index}"  # str(ref)
                    draft = (names[i], tensor, src, dst, nbytes)
                    copies.append(_new_tuple(PlannedCopy, draft))  # its __new__ is Python
            elif placement.decisions[graph.ops[i].inputs[k].op].device != dst:
                raise KeyError(graph.ops[i].inputs[k].op)
    return copies
