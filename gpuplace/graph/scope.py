"""The walker's plain parts, shared by `walk.py` and `replicate.py`: spec errors, device scopes,
namespaces and TensorFlow's unique-name rule. Imports neither of them (no cycle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..devices.names import DeviceSpec
from ..echo import show
from ..errors import BadInput, Text
from .ops import suggest


class SpecError(BadInput):
    """A spec error about one raw mapping (`where`), which the loader turns into file:line."""

    def __init__(self, message: Text, where: object = None, other: object = None) -> None:
        super().__init__(message)
        self.where = where
        self.other = other  # a second mapping to cite, e.g. the first of two duplicates


class Device(NamedTuple):
    """A device scope: the merged spec and its canonical string ("" for unconstrained)."""

    spec: DeviceSpec
    text: str


UNCONSTRAINED = Device(DeviceSpec(), "")


class Names:
    """TensorFlow's `Graph.unique_name` (tensorflow/python/framework/ops.py), called once per
    op in the order TensorFlow would build the graph, written names included: a name not used
    yet is kept; else it becomes name_1, name_2, ..., skipping names taken, compared
    case-insensitively. So an unnamed constant is `Const`, then `Const_1`; a written `Const_1`
    after them is `Const_1_1`; a written `A` after a written `a` is `A_1`.
    """

    def __init__(self) -> None:
        self.used: dict[str, int] = {}

    def unique(self, name: str) -> str:
        """`name` made unique, and marked used; an op's TF type (`TfType`, as the loader's fast
        path passes it) stands for that op's default name."""
        if type(name) is not str:
            name = getattr(name, "default_name", name)
        key = name.lower()
        i = self.used.get(key, 0)
        self.used[key] = i + 1
        if i == 0:
            return name
        base = key
        while key in self.used:
            key = f"{base}_{i}"
            i += 1
        self.used[key] = 1
        return f"{name}_{i - 1}"


class Scope:
    """Names visible in one namespace -> entry indices (one per copy), chained to the outer
    (`parent`). A plain class, not a dataclass, which would exec its generated methods at
    every start-up (CONTRIBUTING.md)."""

    __slots__ = ("names", "parent", "written")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, list[int]] = {}
        self.written: dict[str, object] = {}  # names from `name:` -> mapping

    def find(self, name: str) -> list[int] | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.names.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def define(self, name: str, indices: list[int], written: object) -> None:
        """Bind `name`; `written` is the mapping whose `name:` it is, None if generated.

        A written name beats a generated one; two written ones clash.
        """
        if written is None:
            if name in self.names:
                return
        else:
            first = self.written.setdefault(name, written)
            if first is not written:
                raise SpecError(f"duplicate op name {name!r}; rename one of them", written, first)
        self.names[name] = indices


class Namespace(NamedTuple):
    """One namespace of names: the top level (`names` None: the global ones) or one copy of
    a tower or replica body, whose ops' names start with `prefix`."""

    names: Names | None  # None: the top level, whose names are the global ones
    prefix: str


def check_keys(item: dict[str, Any], allowed: Sequence[str], what: str) -> None:
    """SpecError unless `item` (a block) has only `allowed` keys and a `graph:` list."""
    for key in item:
        if key not in allowed:
            raise SpecError(
                f"{what} takes {' and '.join(allowed)}; unknown key {show(key)}"
                f"{suggest(key, allowed)}",
                item,
            )
    if type(item.get("graph")) is not list:
        raise SpecError(f"{what} needs 'graph', a list of ops", item)
