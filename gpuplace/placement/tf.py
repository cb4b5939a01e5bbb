"""TensorFlow's graph-mode placer (`placer.cc`, `Placer::Run`), with a reason per decision.

1. `ColocationGraph::Initialize`: kernel types per op (an op with none fails), requested
   devices, colocation groups (see `colocation.py`).
2. First pass, in graph order, over every op that is not a generator: the first candidate of
   its group (`GetDevicesForNode`, see `candidates.py`); the group is then pinned there. An
   Identity that requests no device, with one in-edge and one out-edge (to `_SINK` when it has
   no consumer), whose input and consumer request the same device string, takes its input's
   device if that is a candidate (`MatchIdentityOperation`, `match_identities`).
3. Second pass over the generators (`IsGeneratorNode`: the op TF builds takes no inputs and
   has one output that is not a ref, e.g. Const, Placeholder and a small tf.zeros; not Fill or
   the random ops, which read a shape tensor, nor variables, whose TF 1 output is a ref): the
   device of their consumers when all consumers sit on one device that is a candidate
   (heuristic A), else the first candidate.
Errors come from the first op that fails in that order, with TensorFlow's message; errors
about a colocation group of two or more ops carry TF's Colocation Debug Info.

Per-op metadata: the registry's OpDef answers per op (`tf_type_for`, `generator_for`, and
`kernel_match`: TensorFlow's kernel registry by the op's dtypes, e.g. no GPU kernel for int32
MatMul); another `OpMeta` without these answers per type (`tf_type`, `generator` less
`resident`, `kernels`).

Per-op state is kept in flat lists, and ops alone in their group that request the same device
and have the same type share one Decision, so placing n ops is O(n) and light on memory and
the garbage collector. Requested devices are read as the C++ placer reads them
(`devices/names.py: placer_view`); one it cannot parse fails as TF's "Malformed device
specification" does, in `InitializeMembers` order with the kernel errors. Not modelled, for
want of such ops (docs/placement-rules.md): metadata ops (`IsMetadata`: Shape, Size, Rank)
following their input, ref/resource edges (no op takes a ref input), and pre-assigned devices
(graphs arrive unplaced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from ..devices.cluster import TaskName
from ..devices.names import DeviceSpec, MalformedDevice, malformed_fix, placer_spec
from ..echo import clip
from ..gc_pause import gc_paused
from ..graph.model import Graph, Op, OpMeta, TensorSpec, Wiring, wired_columns, wiring
from ..graph.tf_registry import (
    KernelMatch,
    dt,
    dtypes_with_kernels,
    known,
    listing,
    node_attrs,
    registry_name,
)
from .candidates import Candidates, Consumers, DeviceTable, LocalDevice
from .colocation import ColocationGraph
from .identity import match_identities
from .model import Decision, Placement, PlacementError
from .reasons import Reasons


def place_graph(
    graph: Graph, num_gpus: int, soft: bool, op_meta: Callable[[str], OpMeta],
    tasks: Sequence[tuple[TaskName, int]] = (), master: TaskName | None = None,
) -> Placement:  # fmt: skip
    """Place every op of `graph` on a machine with CPU:0 and `num_gpus` GPUs, or on a
    cluster's tasks (each with its number of GPUs; `master`: the session's task)."""
    with gc_paused():
        table = DeviceTable(num_gpus, soft, tasks, master)
        return _Placer(graph.ops, table, op_meta, wiring(graph)).run()


def tf_type_of(meta: OpMeta, op: Op) -> str:
    """The TF type of the op TF1's Python API builds for `op` (zeros: Const or Fill)."""
    per_op = getattr(meta, "tf_type_for", None)
    return str(per_op(op.attrs)) if per_op is not None else meta.tf_type


def kernel_match(meta: OpMeta, op: Op, source: str | None = None) -> KernelMatch | None:
    """TensorFlow's registered kernels for `op` by its dtypes (output 0's; `source`: input
    0's, for Cast), or None where its type's kernels do not depend on them (no `kernel_match`,
    an op that is not TensorFlow's, or one without outputs)."""
    find = getattr(meta, "kernel_match", None)
    if find is None or not op.outputs:
        return None
    found: KernelMatch | None = find(op.attrs, op.outputs[0].dtype, source)
    return found


def kernels_of(meta: OpMeta, op: Op, source: str | None = None) -> frozenset[str]:
    """The device types with a kernel for `op`: its type's, narrowed by the registry."""
    found = kernel_match(meta, op, source)
    return meta.kernels if found is None else found.devices & meta.kernels


def generator_flags(
    ops: Sequence[Op],
    metas: Mapping[str, OpMeta],
    residents: bool = False,
    types: Sequence[str] | None = None,
    arity: Sequence[int] | None = None,
) -> list[bool]:
    """Per op, `IsGeneratorNode` as TF's placer sees the op TF builds for it (`generator_for`,
    else the type's `generator` flag less `resident` ops); always False for an op with inputs.
    With `residents`, variables count too (the strategies defer them with generators).
    `types` and `arity` (`Wiring.arity`), where the caller has them, are each op's type and
    number of inputs: read from lists, not from every op's attributes."""
    fixed: dict[str, bool] = {}
    tests: dict[str, Callable[[Mapping[str, object]], bool]] = {}
    for t, m in metas.items():
        test = getattr(m, "generator_for", None)
        if test is None:
            fixed[t] = m.generator and not m.resident
        else:
            once = getattr(m, "tf_generator", None)
            fixed[t] = bool(once) or (residents and m.resident)
            if once is None and m.generator:
                tests[t] = test
    if types is None or arity is None:
        flags = [fixed[op.type] and not op.inputs for op in ops]
    else:
        flags = [fixed[t] and not a for t, a in zip(types, arity, strict=True)]
    if tests:  # types whose answer depends on the attrs (tf.zeros: Const or Fill)
        kinds = [op.type for op in ops] if types is None else types
        for i in range(len(kinds)):  # a C integer where compiled
            test = tests.get(kinds[i])
            if test is not None and not ops[i].inputs:
                flags[i] = test(ops[i].attrs)
    return flags


def _attr_text(value: object) -> str:
    """An attr's value as TensorFlow's `SummarizeAttrValue` prints it (`false`, not `False`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return clip(str(value), 40)


def _no_kernel_error(
    op: Op, meta: OpMeta, table: DeviceTable, found: KernelMatch | None
) -> PlacementError:
    """`ColocationGraph::InitializeMember`'s error for an op with no kernel on this machine:
    the registered kernels are TensorFlow's list for the op (`KernelsRegisteredForOp`)."""
    tf_type = tf_type_of(meta, op)
    shown = {k: _attr_text(v) for k, v in op.attrs.items()}
    if found is not None and known(tf_type):  # the TF node's attrs: its OpDef's, by default
        defaults = node_attrs(tf_type)
        shown = {k: shown.get(k, v) for k, v in defaults.items()}
        shown.update((name, dt(value)) for name, value in found.attrs)
    attrs = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
    if found is not None and known(tf_type):
        registered = listing(tf_type)
    else:
        registered = "\n".join(f"  device='{t}'" for t in sorted(meta.kernels))
    message = (
        f"No OpKernel was registered to support Op '{tf_type}' used by "
        f"{{{{node {op.name}}}}} with these attrs: [{attrs}]\n"
        f"Registered devices: [{', '.join(sorted(table.types))}]\n"
        f"Registered kernels:\n{registered or '  <no registered kernels>'}"
    )
    kernels = meta.kernels if found is None else found.devices & meta.kernels
    if found is not None and not kernels:
        attr, dtype = found.attrs[0]
        usable = sorted(dtypes_with_kernels(tf_type, attr))
        hint = (
            f"gpuplace: {registry_name()} has no {tf_type} kernel for {attr}={dt(dtype)} "
            f"on any device; cast the inputs (op: cast) to one of {', '.join(usable)} first."
        )
    else:
        listed = " and ".join(sorted(kernels)) or "no device type"
        subject = f"{tf_type} with {found.attrs_text()}" if found is not None else tf_type
        hint = f"gpuplace: {subject} has kernels for {listed} only; {table.has_phrase()}."
    error = PlacementError(message, hint, op.name)
    if found is not None and not kernels:
        error.exit_code = 2  # no machine has a kernel for it: the spec must change (bad input)
    return error


def _requested(device: str) -> DeviceSpec | None:
    """An op's requested device as the C++ placer reads it; None where it is malformed."""
    try:
        return placer_spec(device)
    except MalformedDevice:
        return None


def _first(items: Sequence[object], value: object) -> int:
    return items.index(value) if value in items else len(items)


def _malformed_error(op: Op, i: int, meta: OpMeta) -> PlacementError:
    """`Member::SetRequestedDeviceName`'s error: the device and the node's `DebugString` (its id:
    TF numbers ops from 2 in graph order, after _SOURCE and _SINK; its NodeDef's summary shows
    the dtype attr (`T`, or a Const's `dtype`) and the device, not the op's other attrs)."""
    device = clip(op.device)
    dtype = op.outputs[0].dtype if op.outputs else None
    attr = "" if dtype is None else f"{'T' if op.inputs else 'dtype'}={dt(dtype)}, "
    inputs = ", ".join(
        clip(ref.op if ref.index == 0 else f"{ref.op}:{ref.index}") for ref in op.inputs
    )
    name = clip(op.name)
    message = (
        f"Malformed device specification '{device}' in node: {{name:'{name}' id:{i + 2} op "
        f"device:{{requested: '{device}', assigned: ''}} def:{{{{{{node {name}}}}} = "
        f'{tf_type_of(meta, op)}[{attr}_device="{device}"]({inputs})}}}}'
    )
    error = PlacementError(message, f"gpuplace: {malformed_fix()}", op.name)
    error.exit_code = 2  # the spec must change
    return error


# per (type, dtype, source dtype, TF type): the registry's match, the op's kind, its kernels
# on this machine, and whether its reason names the registry entry (`_Placer._entry`)
_Entry = tuple[KernelMatch | None, str, frozenset[str], bool]


class _Placer:
    """One run of the placer over one graph; state lives here, not in globals."""

    def __init__(
        self,
        ops: Sequence[Op],
        table: DeviceTable,
        op_meta: Callable[[str], OpMeta],
        wired: Wiring | None = None,
    ) -> None:
        self.ops, self.table = ops, table
        if wired is None or wired.ops is not ops:
            wired = wiring(Graph(tuple(ops), ()))
        self.wired = wired
        metas: dict[str, OpMeta] = {}
        specs: dict[str, DeviceSpec | None] = {}
        supported: dict[str, frozenset[str]] = {}
        machine = table.types
        # one pass over the ops' types and requests (the graph's columns, `model.Columns`):
        # each type's meta and kernels, each device's request, once
        names, op_types, devices, _ = wired_columns(wired)
        meta: list[OpMeta] = []
        types: list[frozenset[str]] = []
        own: list[DeviceSpec | None] = []
        malformed = False  # some request is None (`_requested`): checked below, in TF's order
        # neighbours mostly share their type and request (the very strings): looked up on a change
        kind: str | None = None
        device: str | None = None
        current = cast("OpMeta", None)  # the meta of `kind` (set with it)
        kernels: frozenset[str] = frozenset()
        spec: DeviceSpec | None = None
        for op_type, request in zip(op_types, devices, strict=True):
            if op_type is not kind:
                kind, found = op_type, metas.get(op_type)
                if found is None:
                    found = metas[op_type] = op_meta(op_type)
                    supported[op_type] = found.kernels & machine
                current, kernels = found, supported[op_type]
            if request is not device:
                device, spec = request, specs.get(request)
                if spec is None and request not in specs:  # one lookup for a request read before
                    spec = specs[request] = _requested(request)
                    malformed = malformed or spec is None
            meta.append(current)
            types.append(kernels)
            own.append(spec)
        self.meta = meta
        # kinds: what an op's device and reason depend on besides its request (the alone
        # cache's key): its type, and its dtypes where the registry answers by dtype
        self.kinds: list[str] = op_types
        # op -> its registry match, where that says more than "a kernel": the machine has a
        # device type without a kernel for its dtypes, or a DEFAULT kernel serves it
        self.narrowed: dict[int, KernelMatch] = {}
        self.matches: dict[int, KernelMatch] = {}  # op -> its registry match, where it has none
        self.names = names
        self.devices = devices
        self.index = wired.index  # repeated: last op
        narrow = {t: m for t, m in metas.items() if getattr(m, "kernel_match", None) is not None}
        if narrow:
            self._narrow(types, supported, narrow)
        if malformed or not all(types):  # `InitializeMembers`: the first op that fails
            i = min(_first(types, frozenset()), _first(own, None))
            if not types[i]:
                raise _no_kernel_error(ops[i], self.meta[i], table, self.matches.get(i))
            raise _malformed_error(ops[i], i, self.meta[i])
        self.own = cast("list[DeviceSpec]", own)
        distinct = len(self.index) == len(ops)
        self.groups = ColocationGraph(
            ops, self.own, types, table.soft, distinct, tf_type=self.tf_type
        )
        # `IsGeneratorNode`: no inputs, one output that is not a ref. A resident op is a TF 1
        # variable (VariableV2), whose output is a ref: placed in the first pass like any op.
        self.generator = generator_flags(ops, metas, types=op_types, arity=wired.arity)
        self.assigned: list[LocalDevice | None] = [None] * len(ops)
        self.pinned: list[LocalDevice | None] = [None] * len(ops)  # by group root
        self.pinned_by = [-1] * len(ops)  # the op that pinned the group
        self.consumers = Consumers(len(ops))
        self.reasons = Reasons(
            ops, self.meta, self.own, self.groups, table, self.consumers, self.tf_type,
            self.narrowed,
        )  # fmt: skip
        # requested device -> kind -> device and decision of an op alone in its group
        self.alone: dict[str, dict[str, tuple[LocalDevice, Decision]]] = {}
        identity = {t for t, m in metas.items() if m.tf_type == "Identity"}
        self.identities = match_identities(ops, self.index, identity)

    def tf_type(self, i: int) -> str:
        return tf_type_of(self.meta[i], self.ops[i])

    def _narrow(
        self,
        types: list[frozenset[str]],
        supported: dict[str, frozenset[str]],
        narrow: dict[str, OpMeta],
    ) -> None:
        """Per-op kernels from TensorFlow's registry for the ops of the `narrow` types, by their
        dtypes (output 0's; input 0's for Cast's SrcT; the TF type where the attrs choose it)."""
        given: list[str] = self.kinds
        kinds: list[str] = list(given)
        ops, meta = self.ops, self.meta
        found: dict[tuple[str, str, str | None, str], _Entry] = {}
        needs_source = {t for t, m in narrow.items() if getattr(m, "reads_source", False)}
        varies = {t for t, m in narrow.items() if getattr(m, "tf_type_of", None) is not None}
        # most types: by type and output dtype alone (no source dtype, no TF type), no tuple made
        simple: dict[str, dict[str, _Entry]] = {
            t: {} for t in narrow if t not in needs_source | varies
        }
        index, narrowed, matches = self.index, self.narrowed, self.matches
        specs_of = wired_columns(self.wired).outputs  # each op's outputs (`model.Columns`)
        last: tuple[TensorSpec, ...] | None = None  # the outputs `dtype` was read from
        dtype = ""
        # the type and outputs (the very objects) of a `simple` type's `entry`: an op with the
        # same has the same entry, which depends on its type and dtype alone
        kind_of: str | None = None
        outputs_of: tuple[TensorSpec, ...] | None = None
        entry = cast("_Entry", None)  # set with kind_of, or for the op at hand
        for i in range(len(given)):  # a C integer where compiled (enumerate's is an object)
            kind = given[i]
            outputs = specs_of[i]
            if kind is not kind_of or outputs is not outputs_of:
                by_dtype = simple.get(kind)
                if by_dtype is None and kind not in narrow:
                    continue
                if not outputs:
                    continue
                if outputs is not last:  # neighbours mostly share their outputs (the loader's)
                    last = outputs
                    dtype = outputs[0].dtype
                op = ops[i]
                if by_dtype is not None:
                    got = by_dtype.get(dtype)
                    if got is None:
                        key: tuple[str, str, str | None, str] = (kind, dtype, None, "")
                        match = kernel_match(meta[i], op)
                        got = by_dtype[dtype] = self._entry(match, key, supported)
                    entry, kind_of, outputs_of = got, kind, outputs
                else:
                    source = None
                    if kind in needs_source and op.inputs:
                        ref = op.inputs[0]
                        source = ops[index[ref.op]].outputs[ref.index].dtype
                    key = (kind, dtype, source, self.tf_type(i) if kind in varies else "")
                    got = found.get(key)
                    if got is None:
                        got = found[key] = self._entry(
                            kernel_match(meta[i], op, source), key, supported
                        )
                    entry, kind_of = got, None
            match, kinds[i], kernels, notable = entry
            if match is None:
                continue
            types[i] = kernels
            if notable:
                narrowed[i] = match
            if not kernels:
                matches[i] = match
        self.kinds = kinds

    @staticmethod
    def _entry(
        match: KernelMatch | None,
        key: tuple[str, str, str | None, str],
        supported: dict[str, frozenset[str]],
    ) -> _Entry:
        """For one (type, dtype, source dtype, TF type): the registry's match, the op's kind,
        its kernels on this machine, and whether its reason names the registry entry (the
        machine has a device type without a kernel for it, or a notable kernel serves it)."""
        kind = ":".join(filter(None, map(str, key)))
        if match is None:
            return None, kind, supported[key[0]], False
        kernels = match.devices & supported[key[0]]
        notable = kernels != supported[key[0]] or any(map(match.notable, kernels))
        return match, kind, kernels, notable

    def run(self) -> Placement:
        """`Placer::Run`: the two passes; decisions come back in graph order."""
        n = len(self.ops)
        names: list[str] = self.names
        generator: list[bool] = self.generator
        second = [i for i in range(n) if generator[i]]
        made: list[Decision | None] = [None] * n
        self._first_pass(made)
        if second:
            self._collect_consumers()
        for i in second:
            made[i] = self._place(i, follow=True)
        placed = cast("list[Decision]", made)  # the two passes decided every op
        return Placement(
            decisions=dict(zip(names, placed, strict=True)),
            devices=tuple(d.name for d in self.table.devices),
            order=tuple(
                [names[i] for i in range(n) if not generator[i]] + [names[i] for i in second]
                if second
                else names
            ),
        )

    def _collect_consumers(self) -> None:
        """For each generator: its first consumer, how many, and the one device they sit on.

        Generators' consumers have inputs, so the first pass has placed all of them; the
        generators themselves have none, so every op's inputs are walked, in graph order.
        """
        wired = self.wired
        self.consumers.collect(wired.producers, wired.arity, self.generator, self.assigned)

    def _first_pass(self, made: list[Decision | None]) -> None:
        """The first pass (every op but the generators, in graph order), with ops alone in
        their group taken straight from `alone`.

        Most ops of a large graph are alone: one dict lookup each instead of `_place`.
        No other op reads a lone op's pin, so only its assignment is recorded.
        """
        devices: list[str] = self.devices
        assigned: list[LocalDevice | None] = self.assigned
        kinds: list[str] = self.kinds
        alone: dict[str, dict[str, tuple[LocalDevice, Decision]]] = self.alone
        parent: list[int] = self.groups.parent
        size: list[int] = self.groups.size
        ignored: dict[int, str] = self.groups.ignored
        sources: dict[int, int] = self.identities.source
        matched: set[int] = self.identities.matched
        special = bool(ignored or matched or sources)  # else no op needs those looked up
        merged = bool(self.groups.requesters)  # else every op is alone in its group
        generator: list[bool] = self.generator
        for i in range(len(made)):  # compiled, a C integer: the lists are indexed in C
            if generator[i]:
                continue
            if (not merged or (parent[i] == i and size[i] == 1)) and not (
                special and (i in ignored or i in matched)
            ):
                by_kind = alone.get(devices[i])
                found = None if by_kind is None else by_kind.get(kinds[i])
                device, decision = found or self._alone(i)
                if (
                    special and i in sources
                ):  # an Identity the rule passed over: say why, if it matters
                    decision = self._unmatched(i, device, decision)
                assigned[i], made[i] = device, decision
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
            identities = self.identities
            source = identities.source.get(i, -1)
            got = self.assigned[source] if source >= 0 else None
            matched = i in identities.matched
            if target is not None and target in cands.devices:  # heuristic A
                device, followed = target, True
            elif matched and got is not None and got in cands.devices:  # MatchIdentityOperation
                device, followed = got, False
            else:
                device, followed = cands.devices[0], False
            if source >= 0 and device is got and matched:
                decision = self.reasons.follows_input(i, device, identities, cands)
            else:
                decision = self.reasons.chosen(i, device, cands, followed, follow)
                if source >= 0:
                    decision = self._unmatched(i, device, decision)
            self.pinned[root], self.pinned_by[root] = device, i
        self.assigned[i] = device
        return decision

    def _unmatched(self, i: int, device: LocalDevice, decision: Decision) -> Decision:
        """`decision` for an Identity the Identity rule passed over, with why the rule did not
        apply, unless it sits with its input anyway or its input is a generator that requests
        nothing (which usually follows it)."""
        source = self.identities.source[i]
        got = self.assigned[source]
        if got is device or (got is None and not self.ops[source].device):
            return decision
        return self.reasons.identity_missed(decision, i, got, self.identities)

    def _alone(self, i: int) -> tuple[LocalDevice, Decision]:
        """Device and decision of an op that is its own group and follows no consumer.

        They depend only on its requested device string and its kind (its type, and its
        dtypes where the registry answers by dtype: its group requests what it does and has its kernels;
        its reason names neither the op nor a neighbour, and its TF type is its type's for
        every op of the first pass: a zeros op there is a Fill, a small one is a generator),
        so they are computed once per (device, kind) and ops alike share one frozen Decision.
        """
        op = self.ops[i]
        cands = self._candidates(i, i)
        device = cands.devices[0]
        found = self.alone.setdefault(op.device, {})[self.kinds[i]] = (
            device,
            self.reasons.chosen(i, device, cands, False, False),
        )
        return found

    def _candidates(self, i: int, root: int) -> Candidates:
        requested, types = self.groups.requested[root], self.groups.types[root]
        cands = self.table.candidates(requested, types)
        if not cands.devices:
            op, groups = self.ops[i], self.groups
            debug = groups.debug_info(root) if groups.size[root] > 1 else ""
            raise self.table.no_device_error(
                op.name, op.device, self.own[i], requested, self._kernels_phrase(i, root), debug
            )
        return cands

    def _kernels_phrase(self, i: int, root: int) -> str:
        """For the hint: which device types op i's group has kernels for, and who limits it."""
        groups = self.groups
        types = groups.types[root]
        listed = " and ".join(t for t in ("GPU", "CPU") if t in types)
        wanted = groups.requested[root].device_type
        if groups.size[root] > 1 and wanted is not None and wanted not in types:
            return (
                f"its colocation group has kernels for {listed} only: "
                f"{self.reasons.lacking(root, wanted)}"
            )
        found = self.narrowed.get(i)
        if found is not None and wanted is not None and wanted not in found.devices:
            return f"it has kernels for {listed} only ({found.missing(wanted)})"
        return f"it has kernels for {listed} only"
