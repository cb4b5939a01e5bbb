"""The size of a graph before it is built: the ops a `graph:` list expands to, counted first.

Towers and replicate blocks repeat their bodies, and YAML aliases can nest them, so a 1 KB file
can mean 2^40 ops; a split's `num_split` can ask for 10^7 outputs. Walking such a spec would
take the machine down, so the loader counts first, following `walk.py`'s rules (one op per op
item, plus one per output of a split past its first; a towers block repeats its body per
tower; a replicate block per GPU, with a slice per split input and at most one merge per body
op), memoised per list (an alias shares one list), and refuses past `Limits.ops`, naming the
innermost block or op that passes it, before anything is built. Malformed items count as one
op: the walk refuses them afterwards, in its own words.
"""

from __future__ import annotations

from typing import Any

from ..limits import OPS_ENV
from .scope import SpecError

_SPLITS = frozenset(("split", "Split"))  # TF's and ONNX's


def count_ops(items: list[Any], num_gpus: int | None, limit: int) -> int:
    """The ops `items` expands to (a split's outputs past its first count as ops); SpecError
    past `limit`. `num_gpus`: what `replicate: {gpus: all}` means (None: unknown, counted 0)."""
    counter = _Counter(num_gpus or 0, limit)
    total = counter.items(items)
    if total > limit:
        raise SpecError(f"the graph has {total:,} ops, {_past(limit)}")
    return total


def _past(limit: int) -> str:
    return (
        f"more than the {limit:,} a graph may have; check the spec (nested towers, replicate "
        f"blocks and YAML aliases repeat their bodies), or raise the limit with {OPS_ENV} "
        f"(e.g. {OPS_ENV}={2 * limit})"
    )


class _Counter:
    def __init__(self, num_gpus: int, limit: int) -> None:
        self.num_gpus = num_gpus
        self.limit = limit
        self.memo: dict[int, int] = {}  # id(list) -> its count: a list an alias repeats

    def items(self, items: list[Any]) -> int:
        count = self.memo.get(id(items))
        if count is not None:
            return count
        # one per item, corrected where an item is a block or a split: most items of a large
        # spec are neither, and cost a lookup and a set test (the kind's hash, which the
        # loader's own lookups of it reuse), no arithmetic
        count = len(items)
        for item in items:
            if type(item) is dict:
                op: dict[str, Any] = item  # a typed dict: compiled, `get` is a C call
                kind = op.get("op")
                if kind is None:
                    count += self.block(item) - 1
                elif type(kind) is str and kind in _SPLITS:
                    count += _split_outputs(item, self.limit) - 1
        self.memo[id(items)] = count
        return count

    def block(self, item: dict[str, Any]) -> int:
        """A device block, towers or replicate block: its ops; SpecError past the limit."""
        body = item.get("graph")
        inner = self.items(body) if type(body) is list else 0
        if "towers" in item:
            towers = item["towers"]
            copies = len(towers) if type(towers) is list else 0
            count, what = (
                copies * inner,
                f"towers: this block repeats {inner:,} ops {copies:,} times",
            )
        elif "replicate" in item:
            settings = item["replicate"]
            settings = settings if isinstance(settings, dict) else {}
            copies = self._gpus(settings.get("gpus", "all"))
            split = settings.get("split")
            slices = len(split) if type(split) is list else 0
            # each GPU's copy of the body and slices (at least one op: a copy is made), merges
            count = copies * max(inner + slices, 1) + inner
            what = f"replicate: this block repeats {inner:,} ops for {copies:,} GPUs"
        else:
            return inner
        if count > self.limit:
            raise SpecError(f"{what}: {count:,} ops, {_past(self.limit)}", item)
        return count

    def _gpus(self, value: object) -> int:
        """What `replicate: {gpus: ...}` asks for (the walk checks the value)."""
        if value == "all":
            return self.num_gpus
        if type(value) is int:
            return max(value, 0)
        return len(value) if type(value) is list else 0


def _split_outputs(item: dict[str, Any], limit: int) -> int:
    """A split's outputs, from `num_split` or `sizes` as written (ONNX's Split: `num_outputs`
    or `split`; the walk checks them)."""
    pieces = item.get("num_split", item.get("num_outputs"))
    if type(pieces) is not int:
        sizes = item.get("sizes", item.get("split"))
        pieces = len(sizes) if type(sizes) is list else 1
    if pieces > limit:
        name, kind = item.get("name"), item["op"]
        label = f"op {name!r} ({kind})" if type(name) is str else f"a {kind} op"
        raise SpecError(f"{label}: {pieces:,} outputs, {_past(limit)}", item)
    return max(pieces, 1)
