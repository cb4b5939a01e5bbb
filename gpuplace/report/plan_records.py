"""The placement records of a large document written straight as JSON text (`orjson.Fragment`).

`placement_records` builds one dict per op, and orjson then writes each of them; on a
100,000-op graph that is most of `plan --json`'s document. Here each distinct record but for
its op name (type, request, decision, `runs`, outputs: most ops of a large graph share one) is
written once, in the layout `json_text` gives a list at that depth, and each op is its name's
JSON text between that record's two halves. `json_text` of a document holding the fragment is
byte for byte that of the same document holding `placement_records`' list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from ..graph.model import Graph, Op
from ..placement.model import Decision, Placement
from .records import placement_records


def placement_fragment(graph: Graph, placement: Placement, pruned: Sequence[str] = (),
                       depth: int = 1) -> Any:  # fmt: skip
    """`placement_records(graph, placement, pruned)` as the JSON text `json_text` writes for a
    list `depth` levels into the document (1: a value of the top-level object), as an
    `orjson.Fragment`; the records themselves where orjson cannot write them (an integer past
    64 bits, a lone surrogate), which `json_text` then writes its own way."""
    if not graph.ops:
        return placement_records(graph, placement, pruned)
    try:
        return orjson.Fragment(_text(graph, placement, frozenset(pruned), depth))
    except TypeError:  # orjson.JSONEncodeError
        return placement_records(graph, placement, pruned)


_ESCAPED = re.compile(r'[^ -~]|["\\]')  # what JSON writes other than as it is (ASCII)


def _text(graph: Graph, placement: Placement, skipped: frozenset[str], depth: int) -> str:
    item = "\n" + "  " * (depth + 1)  # a list item's indent, and the base of its lines
    head = "{" + item + '  "op": '  # each record up to its name ("op" is its first key)
    names = [op.name for op in graph.ops]
    if _ESCAPED.search(" ".join(names)) is None:  # each name's JSON is itself, quoted
        quoted, close, start = names, '"', '"'
    else:
        quoted, close, start = [orjson.dumps(n).decode() for n in names], "", ""
    between = "," + item + head + start
    decisions = placement.decisions
    # the record after its name, per all but the name: keyed by the outputs tuple's identity
    # (the loader shares one per distinct outputs; equal tuples apart give the same text) and
    # its decision's, which costs no hashing of shapes per op
    tails: dict[tuple[Any, ...], str] = {}
    parts = ["[", item, head, start]
    for op, name in zip(graph.ops, quoted, strict=True):
        d = decisions[op.name]
        runs = op.name not in skipped
        key = (id(op.outputs), id(d), op.type, op.device, runs)
        tail = tails.get(key)
        if tail is None:
            tail = tails[key] = close + _tail(op, d, placement, runs, item, head) + between
        parts.append(name)
        parts.append(tail)
    parts[-1] = parts[-1][: -len(between)] + item[:-2] + "]"
    return "".join(parts)


def _tail(op: Op, decision: Decision, placement: Placement, runs: bool, item: str,
          head: str) -> str:  # fmt: skip
    """`op`'s record as `_text` writes it, from just after its name's text to its end."""
    record = placement_records(
        Graph((op,), ()),
        Placement({op.name: decision}, placement.devices),
        () if runs else (op.name,),
    )[0]
    text = orjson.dumps({**record, "op": ""}, option=orjson.OPT_INDENT_2).decode()
    text = text.replace("\n", item)
    if not text.startswith(head + '""'):
        raise AssertionError(f"a placement record begins {text[:40]!r}")
    return text[len(head) + 2 :]
