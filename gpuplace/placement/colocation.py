"""Colocation groups as TensorFlow's `ColocationGraph` builds them (`colocation_graph.cc`).

Every op starts as its own group; `colocate_with: NAME` joins the op to group NAME, as the
`_class: loc:@NAME` attribute does (`ColocateAllNodes`). Groups are a union-find over op
indices, union by rank with TF's tie-break (`Member::Merge`) and path compression, so building
them is linear. Each root holds the group's merged requested device (`MergeDevNames`) and the
intersection of its members' kernel device types (`MergeSupportedDevices`).

`debug_info` is TF's "Colocation Debug Info" (`ColocationGraph::DebugInfo`), which TF appends
to the errors about a group: each member with its op type and the device types it has kernels
for, so a message about one op shows which member held the group back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..devices.names import DeviceSpec
from ..echo import TEXT_CHARS, sample
from ..errors import Message, Term, Text
from ..graph.model import Op
from .model import PlacementError

_ADDRESS = (("job", "jobs"), ("replica", "replicas"), ("task", "tasks"))
PRIORITY_ORDER = ("GPU", "CPU")  # device types by TF's device priority (210, 70)


class MergeConflict(Exception):
    """TF's InvalidArgument from `MergeDevNames`; `what` names the field ("incompatible types")."""

    def __init__(self, what: str, target: DeviceSpec, other: DeviceSpec) -> None:
        super().__init__(
            f"Cannot merge devices with {what}: '{target.to_string()}' and '{other.to_string()}'"
        )
        self.what = what


def merge_dev_names(target: DeviceSpec, other: DeviceSpec, soft: bool) -> DeviceSpec:
    """`DeviceNameUtils::MergeDevNames`: combine two partial specs field by field.

    A job, replica or task conflict is always an error. A type or id conflict is an error
    without soft placement; with it, a type conflict clears type and id, an id conflict the id.
    The message prints the target as merged so far, as TF's in-place merge does.
    """
    merged = target
    for field, plural in _ADDRESS:
        theirs, mine = getattr(other, field), getattr(merged, field)
        if theirs is not None and mine is not None and mine != theirs:
            raise MergeConflict(f"incompatible {plural}", merged, other)
        if theirs is not None:
            merged = merged._replace(**{field: theirs})
    if other.device_type is not None:
        if merged.device_type is not None and merged.device_type != other.device_type:
            if not soft:
                raise MergeConflict("incompatible types", merged, other)
            return merged._replace(device_type=None, device_index=None)
        merged = merged._replace(device_type=other.device_type)
    if other.device_index is not None:
        if merged.device_index is not None and merged.device_index != other.device_index:
            if not soft:
                raise MergeConflict("incompatible ids", merged, other)
            return merged._replace(device_index=None)
        merged = merged._replace(device_index=other.device_index)
    return merged


_ANY = DeviceSpec()


def has_details(spec: DeviceSpec) -> bool:
    """`DeviceNameUtils::HasSomeDetails`: whether any field is set."""
    return spec != _ANY


def _node(name: str) -> str:
    return f"{{{{colocation_node {name}}}}}"


class ColocationGraph:
    """The groups of one graph, as parallel lists indexed by op (TF's `Member`s).

    `parent` and `rank` are the union-find; `requested`, `types`, `requester()` (the first
    member whose own request shaped `requested`) and `size` are meaningful on roots only.
    `ignored` notes the colocations soft placement dropped (op index -> why).
    `distinct_names` says that no two ops share a name (the caller knows it for free).
    `kernels` are each op's own kernel device types; `tf_type(i)` names op i's TF type (for
    `debug_info`; the op's registry type without it).
    """

    def __init__(
        self,
        ops: Sequence[Op],
        requested: Sequence[DeviceSpec],
        types: Sequence[frozenset[str]],
        soft: bool,
        distinct_names: bool = False,
        tf_type: Callable[[int], str] | None = None,
    ) -> None:
        self.soft = soft
        self.parent = list(range(len(ops)))
        self.rank = [0] * len(ops)
        self.size = [1] * len(ops)
        self.requested = list(requested)
        self.types = list(types)
        self.kernels = types
        self.ops = ops
        self.tf_type = tf_type or (lambda i: ops[i].type)
        self._members: dict[int, list[int]] | None = None
        # the roots of merged groups (see requester()); empty: no group was merged, every op
        # is alone in its own
        self.requesters: dict[int, str | None] = {}
        self.ignored: dict[int, str] = {}
        if not distinct_names or any(op.colocate_with is not None for op in ops):
            self._colocate_all(ops)  # else every op founds its own group, and stays alone

    def requester(self, root: int) -> str | None:
        """The first member of root's group whose own request shaped the group's, if any.

        Kept for merged groups only: a group never merged is its root alone, whose request
        is its own.
        """
        if root in self.requesters:
            return self.requesters[root]
        return self.ops[root].name if has_details(self.requested[root]) else None

    def root(self, i: int) -> int:
        """`FindAndUpdateRoot`, iterative, compressing the path it walks."""
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def members(self, root: int) -> list[int]:
        """The ops of root's group, in graph order. Indexed once, on the first call: call it
        only once the groups are built (the placer's passes never merge them)."""
        if self._members is None:
            index: dict[int, list[int]] = {}
            for i in range(len(self.parent)):
                if self.size[self.root(i)] > 1:
                    index.setdefault(self.root(i), []).append(i)
            self._members = index
        return self._members.get(root) or [root]

    def debug_info(self, root: int, members: Sequence[int] | None = None) -> str:
        """TF's `ColocationGraph::DebugInfo` for root's group, verbatim in form: the group's
        merged request and kernel types, each member type's kernel types in priority order,
        then each member with its requested device. Types are listed sorted (TF's order is a
        hash map's). Not modelled: assigned and resource devices, which stay empty."""
        members = self.members(root) if members is None else members
        types = self.types[root]
        lines = [
            "",
            "Colocation Debug Info:",
            "Colocation group had the following types and supported devices: ",
            f"Root Member(assigned_device_name_index_=-1 requested_device_name_="
            f"'{self.requested[root].to_string()}' assigned_device_name_='' "
            f"resource_device_name_='' supported_device_types_=[{', '.join(_ordered(types))}] "
            "possible_devices_=[]",
        ]
        by_type = {self.tf_type(i): self.kernels[i] for i in members}
        lines += [f"{t}: {''.join(d + ' ' for d in _ordered(by_type[t]))}" for t in sorted(by_type)]
        lines += [
            "",
            "Colocation members, user-requested devices, and framework assigned devices, if any:",
        ]
        listed = [f"  {self.ops[i].name} ({self.tf_type(i)}) {self.ops[i].device}" for i in members]
        lines.append(sample(listed, "\n", width=TEXT_CHARS))
        return "\n".join(lines) + "\n"

    def lacking(self, root: int, device_type: str) -> list[int]:
        """The members of root's group without a kernel for `device_type`."""
        return [i for i in self.members(root) if device_type not in self.kernels[i]]

    def _scan(self, root: int) -> list[int]:
        """root's members while groups are still being merged (for an error message)."""
        return [i for i in range(len(self.parent)) if self.root(i) == root]

    def _colocate_all(self, ops: Sequence[Op]) -> None:
        """`ColocateAllNodes`: each op joins its `colocate_with` group, then its own-name group."""
        group_root: dict[str, int] = {}
        for i, op in enumerate(ops):
            if op.colocate_with is not None:
                self._join(group_root, i, op.colocate_with, ops)
            self._join(group_root, i, op.name, ops)

    def _join(self, group_root: dict[str, int], i: int, group: str, ops: Sequence[Op]) -> None:
        """`ColocateNodeToGroup`: the first op naming a group founds it; others merge into it."""
        first = group_root.setdefault(group, i)
        if first == i:
            return
        try:
            self._colocate(i, first, ops)
        except ColocationError as error:
            if not self.soft:
                raise
            self.ignored[i] = f"colocation with {group} ignored ({error.why})"

    def _colocate(self, x: int, y: int, ops: Sequence[Op]) -> None:
        """`ColocationGraph::ColocateNodes`: merge two groups, or fail leaving both unchanged.

        Union by rank, ties going to x's root (`Member::Merge`); the new root's request is the
        target of the merge, so messages name the two specs in TF's order.
        """
        x_root, y_root = self.root(x), self.root(y)
        if x_root == y_root:
            return
        new, old = (y_root, x_root) if self.rank[x_root] < self.rank[y_root] else (x_root, y_root)
        prefix = f"Cannot colocate nodes {_node(ops[x].name)} and {_node(ops[y].name)}"
        try:
            requested = merge_dev_names(self.requested[new], self.requested[old], self.soft)
        except MergeConflict as conflict:
            raise ColocationError(f"{prefix}: {conflict}", conflict.what, ops[x].name) from None
        types = self.types[new] & self.types[old]
        if not types:
            message = (
                f"{prefix} because no device type supports both of those nodes and the other "
                "nodes colocated with them."
            )
            if not self.soft:  # soft placement drops the error: spare the two scans
                message += self.debug_info(x_root, self._scan(x_root))
                message += self.debug_info(y_root, self._scan(y_root))
            raise ColocationError(message, "no device type supports both", ops[x].name)
        self.requesters[new] = self.requester(new) or self.requester(old)  # before requested
        self.parent[old] = new
        if self.rank[new] == self.rank[old]:
            self.rank[new] += 1
        self.requested[new], self.types[new] = requested, types
        self.size[new] += self.size[old]


def _ordered(types: frozenset[str]) -> list[str]:
    """Device types in TF's priority order (GPU before CPU), others after, sorted."""
    return [t for t in PRIORITY_ORDER if t in types] + sorted(types - set(PRIORITY_ORDER))


class ColocationError(PlacementError):
    """A colocation TF refuses; `why` is the short cause that soft placement reports."""

    def __init__(self, tf_message: str, why: str, op: str) -> None:
        hint: Text
        if why in ("incompatible jobs", "incompatible replicas", "incompatible tasks"):
            hint = "gpuplace: ops colocated together must request the same job, replica and task."
        else:
            hint = Message(
                "gpuplace: give the colocated ops devices and kernels in common, or pass ",
                Term.SOFT_PLACEMENT, " to let TensorFlow relax the request.",
            )  # fmt: skip
        super().__init__(tf_message, hint, op)
        self.why = why
