"""TensorFlow's graph-mode placer (`placer.cc`, `Placer::Run`), with a reason per decision.

1. `ColocationGraph::Initialize`: kernel types per op (an op with none fails), requested
   devices, colocation groups (see `colocation.py`).
2. First pass, in graph order, over every op that is not a generator: the first candidate of
   its group (`GetDevicesForNode`, see `candidates.py`); the group is then pinned there.
3. Second pass over the generators (no inputs, e.g. Const; not variables, whose TF 1 output
   is a ref): the device of their consumers when all consumers sit on one device that is a
   candidate (heuristic A), else the first candidate.
Errors come from the first op that fails in that order, with TensorFlow's message.

Per-op state is kept in flat lists, and ops alone in their group that request the same device
and have the same type share one Decision, so placing n ops is O(n) and light on memory and
the garbage collector. Not modelled: heuristic B (metadata ops such as
Shape follow their input), resource/ref edges (the op registry exposes neither), and
pre-assigned devices (graphs arrive unplaced).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from ..devices.names import DeviceSpec, parse_device
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, OpMeta
from .candidates import Candidates, Consumers, DeviceTable, LocalDevice
from .colocation import ColocationGraph
from .model import Decision, Placement, PlacementError
from .reasons import Reasons


def place_graph(
    graph: Graph, num_gpus: int, soft: bool, op_meta: Callable[[str], OpMeta]
) -> Placement:
    """Place every op of `graph` on a machine with CPU:0 and `num_gpus` GPUs."""
    with gc_paused():
        return _Placer(graph.ops, DeviceTable(num_gpus, soft), op_meta).run()


def _no_kernel_error(op: Op, meta: OpMeta, table: DeviceTable) -> PlacementError:
    """`ColocationGraph::InitializeMember`'s error for an op with no kernel on this machine."""
    attrs = ", ".join(f"{k}={_short(v)}" for k, v in sorted(op.attrs.items()))
    registered = "\n".join(f"  device='{t}'" for t in sorted(meta.kernels))
    message = (
        f"No OpKernel was registered to support Op '{meta.tf_type}' used by "
        f"{{{{node {op.name}}}}} with these attrs: [{attrs}]\n"
        f"Registered devices: [{', '.join(sorted(table.types))}]\n"
        f"Registered kernels:\n{registered or '  <no registered kernels>'}"
    )
    kernels = " and ".join(sorted(meta.kernels)) or "no device type"
    hint = (
        f"gpuplace: {meta.tf_type} has kernels for {kernels} only; "
        f"this machine has {table.gpus_phrase()}."
    )
    return PlacementError(message, hint, op.name)


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Placer:
    """One run of the placer over one graph; state lives here, not in globals."""

    def __init__(
        self, ops: Sequence[Op], table: DeviceTable, op_meta: Callable[[str], OpMeta]
    ) -> None:
        self.ops, self.table = ops, table
        metas: dict[str, OpMeta] = {}
        specs: dict[str, DeviceSpec] = {}
        for op in ops:
            if op.type not in metas:
                metas[op.type] = op_meta(op.type)
            if op.device not in specs:
                specs[op.device] = parse_device(op.device)
        op_types = [op.type for op in ops]
        self.meta = list(map(metas.__getitem__, op_types))
        self.own = [specs[op.device] for op in ops]
        supported = {name: meta.kernels & table.types for name, meta in metas.items()}
        if not all(supported.values()):
            op = next(op for op in ops if not supported[op.type])
            raise _no_kernel_error(op, metas[op.type], table)
        types = list(map(supported.__getitem__, op_types))
        self.names = [op.name for op in ops]
        self.index = dict(zip(self.names, range(len(ops)), strict=True))  # repeated: last op
        distinct = len(self.index) == len(ops)
        self.groups = ColocationGraph(ops, self.own, types, table.soft, distinct)
        # `IsGeneratorNode`: no inputs, one output that is not a ref. A resident op is a TF 1
        # variable (VariableV2), whose output is a ref: placed in the first pass like any op.
        generates = {name: m.generator and not m.resident for name, m in metas.items()}
        self.generator = [
            generates[t] and not op.inputs for t, op in zip(op_types, ops, strict=True)
        ]
        self.assigned: list[LocalDevice | None] = [None] * len(ops)
        self.pinned: list[LocalDevice | None] = [None] * len(ops)  # by group root
        self.pinned_by = [-1] * len(ops)  # the op that pinned the group
        self.consumers = Consumers(len(ops))
        self.reasons = Reasons(ops, self.meta, self.own, self.groups, table, self.consumers)
        # (requested device, op type) -> device and decision of an op alone in its group
        self.alone: dict[tuple[str, str], tuple[LocalDevice, Decision]] = {}

    def run(self) -> Placement:
        """`Placer::Run`: the two passes; decisions come back in graph order."""
        n, names = len(self.ops), self.names
        first = [i for i in range(n) if not self.generator[i]]
        second = [i for i in range(n) if self.generator[i]]
        made: list[Decision | None] = [None] * n
        self._first_pass(first, made)
        if second:
            self._collect_consumers(first, second)
        for i in second:
            made[i] = self._place(i, follow=True)
        placed = cast("list[Decision]", made)  # the two passes decided every op
        return Placement(
            decisions=dict(zip(names, placed, strict=True)),
            devices=tuple(d.name for d in self.table.devices),
            order=tuple([names[i] for i in first + second]),
        )

    def _collect_consumers(self, first: Sequence[int], second: Sequence[int]) -> None:
        """For each generator: its first consumer, how many, and the one device they sit on.

        Generators' consumers have inputs, so the first pass has placed all of them.
        """
        names, index = self.names, self.index
        generators = {names[g]: g for g in second if index[names[g]] == g}
        add, assigned = self.consumers.add, self.assigned
        for j in first:
            for ref in self.ops[j].inputs:
                g = generators.get(ref.op)
                if g is not None:
                    add(g, j, assigned[j])

    def _first_pass(self, first: Sequence[int], made: list[Decision | None]) -> None:
        """The first pass, with ops alone in their group taken straight from `alone`.

        Most ops of a large graph are alone: one dict lookup each instead of `_place`.
        No other op reads a lone op's pin, so only its assignment is recorded.
        """
        ops, assigned, alone = self.ops, self.assigned, self.alone
        parent, size, ignored = self.groups.parent, self.groups.size, self.groups.ignored
        for i in first:
            if parent[i] == i and size[i] == 1 and i not in ignored:
                op = ops[i]
                found = alone.get((op.device, op.type)) or self._alone(i)
                assigned[i], made[i] = found
            else:
                made[i] = self._place(i, follow=False)

    def _place(self, i: int, follow: bool) -> Decision:
        """Choose op i's device, pin its group there (`AssignAndLog`) and say why."""
        groups = self.groups
        root = groups.root(i)
        pin = self.pinned[root]
        if pin is not None:
            device = pin
            decision = self.reasons.pinned(i, device, self.ops[self.pinned_by[root]].name)
        else:
            cands = self._candidates(i, root)
            target = self.consumers.one_device(i) if follow else None
            if target is not None and target in cands.devices:  # heuristic A
                device, followed = target, True
            else:
                device, followed = cands.devices[0], False
            decision = self.reasons.chosen(i, device, cands, followed, follow)
            self.pinned[root], self.pinned_by[root] = device, i
        self.assigned[i] = device
        return decision

    def _alone(self, i: int) -> tuple[LocalDevice, Decision]:
        """Device and decision of an op that is its own group and follows no consumer.

        They depend only on its requested device string and its type (its group requests
        what it does and has its kernels; its reason names neither the op nor a neighbour),
        so they are computed once per (device, type) and ops alike share one frozen Decision.
        """
        op = self.ops[i]
        cands = self._candidates(i, i)
        device = cands.devices[0]
        found = self.alone[(op.device, op.type)] = (
            device,
            self.reasons.chosen(i, device, cands, False, False),
        )
        return found

    def _candidates(self, i: int, root: int) -> Candidates:
        requested, types = self.groups.requested[root], self.groups.types[root]
        cands = self.table.candidates(requested, types)
        if not cands.devices:
            op = self.ops[i]
            kernels = " and ".join(t for t in ("GPU", "CPU") if t in types)
            raise self.table.no_device_error(op.name, op.device, self.own[i], requested, kernels)
        return cands
