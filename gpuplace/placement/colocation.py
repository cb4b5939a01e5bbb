"""Colocation groups as TensorFlow's `ColocationGraph` builds them (`colocation_graph.cc`).

Every op starts as its own group; `colocate_with: NAME` joins the op to group NAME, as the
`_class: loc:@NAME` attribute does (`ColocateAllNodes`). Groups are a union-find over op
indices, union by rank with TF's tie-break (`Member::Merge`) and path compression, so building
them is linear. Each root holds the group's merged requested device (`MergeDevNames`) and the
intersection of its members' kernel device types (`MergeSupportedDevices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..devices.names import DeviceSpec
from ..graph.model import Op
from .model import PlacementError

_ADDRESS = (("job", "jobs"), ("replica", "replicas"), ("task", "tasks"))


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
            merged = replace(merged, **{field: theirs})
    if other.device_type is not None:
        if merged.device_type is not None and merged.device_type != other.device_type:
            if not soft:
                raise MergeConflict("incompatible types", merged, other)
            return replace(merged, device_type=None, device_index=None)
        merged = replace(merged, device_type=other.device_type)
    if other.device_index is not None:
        if merged.device_index is not None and merged.device_index != other.device_index:
            if not soft:
                raise MergeConflict("incompatible ids", merged, other)
            return replace(merged, device_index=None)
        merged = replace(merged, device_index=other.device_index)
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
    """

    def __init__(
        self,
        ops: Sequence[Op],
        requested: Sequence[DeviceSpec],
        types: Sequence[frozenset[str]],
        soft: bool,
        distinct_names: bool = False,
    ) -> None:
        self.soft = soft
        self.parent = list(range(len(ops)))
        self.rank = [0] * len(ops)
        self.size = [1] * len(ops)
        self.requested = list(requested)
        self.types = list(types)
        self.ops = ops
        self.requesters: dict[int, str | None] = {}  # roots of merged groups; see requester()
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
            raise ColocationError(message, "no device type supports both", ops[x].name)
        self.requesters[new] = self.requester(new) or self.requester(old)  # before requested
        self.parent[old] = new
        if self.rank[new] == self.rank[old]:
            self.rank[new] += 1
        self.requested[new], self.types[new] = requested, types
        self.size[new] += self.size[old]


class ColocationError(PlacementError):
    """A colocation TF refuses; `why` is the short cause that soft placement reports."""

    def __init__(self, tf_message: str, why: str, op: str) -> None:
        if why in ("incompatible jobs", "incompatible replicas", "incompatible tasks"):
            hint = "gpuplace: ops colocated together must request the same job, replica and task."
        else:
            hint = (
                "gpuplace: give the colocated ops devices and kernels in common, or pass "
                "--allow-soft-placement to let TensorFlow relax the request."
            )
        super().__init__(tf_message, hint, op)
        self.why = why
