"""Resolving inputs and ordering ops: stages of the loader between the walk and inference.

Each input names an op as seen from the op's namespace (its tower copy, then the enclosing
scopes, then every op's global name), `name:k` picks output k, and a name defined in towers
gives one input per copy. Inputs may name ops defined later in the file; then the ops are
ordered by Kahn's algorithm (linear), and a cycle is reported as its path.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NoReturn

from .attrs import show
from .ops import suggest
from .walk import Entry, Scope, SpecError

Inputs = list[tuple[int, int]]  # (entry index, output index) per input


class Lookup:
    """Resolves a name seen from a scope: local names first, then every op's global name."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self._global: dict[str, int] | None = None

    def find(self, scope: Scope, name: str) -> list[int] | None:
        found = scope.find(name)
        if found is None:
            if self._global is None:
                self._global = {e.name: i for i, e in enumerate(self.entries)}
            index = self._global.get(name)
            found = None if index is None else [index]
        return found

    def refs(self, scope: Scope, text: Any, what: str, where: object) -> Inputs:
        """`name` or `name:k` -> (entry, output) pairs; a body's name gives one per copy."""
        if type(text) is not str:
            raise SpecError(f"{what} {show(text)} is not an op name (a string)", where)
        name, index = text, 0
        if ":" in text:
            name, _, digits = text.rpartition(":")
            if not (digits.isascii() and digits.isdigit()):
                raise SpecError(
                    f"{what} {text!r} is not NAME or NAME:OUTPUT (e.g. s:1 for split s's second "
                    "output)",
                    where,
                )
            index = int(digits)
        found = self.find(scope, name)
        if found is None:
            known = self._visible(scope)
            raise SpecError(f"{what} {name!r} names no op{suggest(name, known, 'ops')}", where)
        return [(j, index) for j in found]

    def _visible(self, scope: Scope) -> list[str]:
        seen = {e.name for e in self.entries}
        chain: Scope | None = scope
        while chain is not None:
            seen.update(chain.names)
            chain = chain.parent
        return sorted(seen)


def resolve(entries: list[Entry], names: Lookup) -> tuple[list[Inputs], dict[int, str], bool]:
    """Each entry's inputs as (entry, output) pairs, its colocation target, and whether any
    input points forward (then the file order is not an execution order)."""
    all_inputs: list[Inputs] = []
    colocate: dict[int, str] = {}
    forward = False
    for i, e in enumerate(entries):
        raw = e.raw.get("inputs")
        inputs: Inputs = []
        if raw is not None:
            if type(raw) is not list:
                raise SpecError(
                    f"op '{e.name}': inputs must be a list of op names, e.g. [a, b], got "
                    f"{show(raw)}",
                    e.raw,
                )
            local = e.scope.names
            for text in raw:
                found = local.get(text) if type(text) is str else None
                if found is not None and len(found) == 1:
                    j = found[0]
                    inputs.append((j, 0))
                    forward = forward or j >= i
                    continue
                if found is None:  # outer scopes, global names, `name:k`, or an error
                    pairs = names.refs(e.scope, text, f"op '{e.name}': input", e.raw)
                else:
                    pairs = [(j, 0) for j in found]
                forward = forward or any(j >= i for j, _ in pairs)
                inputs.extend(pairs)
        high = e.opdef.max_inputs
        if not e.opdef.min_inputs <= len(inputs) <= (len(inputs) if high is None else high):
            _bad_arity(e, inputs, raw)
        all_inputs.append(inputs)
        if "colocate_with" in e.raw:
            colocate[i] = _colocation(i, e, names)
    return all_inputs, colocate, forward


def _bad_arity(e: Entry, inputs: Inputs, raw: Any) -> NoReturn:
    low, high = e.opdef.min_inputs, e.opdef.max_inputs
    if high is None:
        takes = f"at least {low} input{'s' if low > 1 else ''}"
    elif low == high:
        takes = f"{low} input{'s' if low != 1 else ''}" if low else "no inputs"
    else:
        takes = f"{low} to {high} inputs"
    copies = (
        " (a name defined in towers means all its copies)" if raw and len(inputs) > len(raw) else ""
    )
    example = ", ".join("abcdefgh"[: min(max(low, 1), 8)])
    fix = "remove 'inputs'" if high == 0 else f"list {takes}, e.g. inputs: [{example}]"
    raise SpecError(
        f"op '{e.name}' ({e.opdef.name}) takes {takes}, got {len(inputs)} "
        f"(inputs: {show(raw or [])}){copies}; {fix}",
        e.raw,
    )


def _colocation(i: int, e: Entry, names: Lookup) -> str:
    text = e.raw["colocate_with"]
    found = names.refs(e.scope, text, f"op '{e.name}': colocate_with", e.raw)
    if len(found) != 1 or found[0][1] != 0 or found[0][0] == i:
        raise SpecError(
            f"op '{e.name}': colocate_with {show(text)} must name one other op (not an output "
            "like s:1, nor a name defined in towers, which means every copy)",
            e.raw,
        )
    return names.entries[found[0][0]].name


def order(entries: list[Entry], inputs: list[Inputs]) -> list[int]:
    """Kahn's algorithm, first-in first-out from the file order; a cycle is an error."""
    n = len(entries)
    waiting = [len(ins) for ins in inputs]
    consumers: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(inputs):
        for j, _ in ins:
            consumers[j].append(i)
    ready = deque(i for i in range(n) if not waiting[i])
    order = []
    while ready:
        j = ready.popleft()
        order.append(j)
        for i in consumers[j]:
            waiting[i] -= 1
            if not waiting[i]:
                ready.append(i)
    if len(order) < n:
        _cycle(entries, inputs, waiting)
    return order


def _cycle(entries: list[Entry], inputs: list[Inputs], waiting: list[int]) -> None:
    """Raise naming one cycle, in data-flow order (a -> b: a is an input of b)."""
    at = next(i for i, count in enumerate(waiting) if count)
    seen: dict[int, int] = {}
    path: list[int] = []
    while at not in seen:
        seen[at] = len(path)
        path.append(at)
        at = next(j for j, _ in inputs[at] if waiting[j])
    loop = [*path[seen[at] :], at][::-1]
    text = " -> ".join(entries[i].name for i in loop)
    raise SpecError(
        f"cycle in the graph: {text}; an op cannot depend on its own output, remove one of "
        "these inputs",
        entries[loop[0]].raw,
    )
