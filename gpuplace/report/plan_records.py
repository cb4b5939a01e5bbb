"""The placement records of a large document written straight as JSON text (`JsonText`).

`placement_records` builds one dict per op, and orjson then writes each of them; on a
100,000-op graph that is most of `plan --json`'s document. Here each distinct record but for
its op name (type, request, decision, `runs`, outputs: most ops of a large graph share one) is
written once, in the layout `json_text` gives a list at that depth, and each op is its name's
JSON text between that record's two halves, joined once into the bytes `json_chunks` writes
as they are (no copy into the rest of the document). `json_text` of a document holding the
text is byte for byte that of the same document holding `placement_records`' list.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import orjson

from ..graph.model import Graph, Op, columns
from ..placement.model import Decision, Placement
from .records import JsonText, placement_records


def placement_fragment(graph: Graph, placement: Placement, pruned: Sequence[str] = (),
                       depth: int = 1) -> Any:  # fmt: skip
    """`placement_records(graph, placement, pruned)` as the JSON text `json_text` writes for a
    list `depth` levels into the document (1: a value of the top-level object), as a
    `JsonText`; the records themselves where orjson cannot write them (an integer past 64
    bits, a lone surrogate), which `json_text` then writes its own way."""
    if not graph.ops:
        return placement_records(graph, placement, pruned)
    try:
        return _text(graph, placement, frozenset(pruned), depth)
    except TypeError:  # orjson.JSONEncodeError
        return placement_records(graph, placement, pruned)


# the bytes a plain name may hold: printable ASCII but `"` and `\\` (JSON writes those as
# they are), and the new line `_names` joins them with
_PLAIN = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\') + b"\n"


def _names(names: list[str]) -> tuple[list[bytes], bool]:
    """Each name's JSON text, and whether those texts are plain: the name itself (then its
    quotes are the record's) and ASCII."""
    joined = "\n".join(names)
    if joined.isascii():
        data = joined.encode("ascii")
        if not data.translate(None, _PLAIN):
            quoted = data.split(b"\n")
            if len(quoted) == len(names):  # no name held a new line
                return quoted, True
    quoted = [orjson.dumps(n) for n in names]
    return quoted, False


# An int argument of a function plan_records.pxd declares: compiled, a plain `int` annotation
# is Cython's own exact int type, which the declaration contradicts (as in execute/schedule.py).
Int = int


def _text(graph: Graph, placement: Placement, skipped: AbstractSet[str], depth: Int) -> JsonText:
    item = "\n" + "  " * (depth + 1)  # a list item's indent, and the base of its lines
    head = "{" + item + '  "op": '  # each record up to its name ("op" is its first key)
    ops = graph.ops
    names, types, devices, outputs = columns(graph)  # not each op's fields: `Columns`
    quoted, plain = _names(names)
    close = start = '"' if plain else ""
    between = "," + item + head + start
    # the record after its name, per all but the name: keyed by the outputs tuple's identity
    # (the loader shares one per distinct outputs; equal tuples apart give the same text) and
    # its decision's, which costs no hashing of shapes per op. A graph's ops share a few
    # decisions, each mostly with one type, device and outputs: per decision (`seen`, by its
    # identity, taken only where it differs from the previous op's) the last of those it went
    # with and their text, reused while an op's are those very objects (no key built per op)
    tails: dict[tuple[Any, ...], bytes] = {}
    seen: dict[int, tuple[Any, ...]] = {}
    after: list[bytes] = []
    decision: Decision | None = None
    known: tuple[Any, ...] | None = None  # seen[ident]
    ident = 0  # id(decision), taken once per run of one decision
    at = 0  # the op's place in `ops` and the columns
    for d in placement.in_order(names):
        if d is not decision:
            decision = d
            ident = id(d)
            known = seen.get(ident)
        runs = not skipped or names[at] not in skipped
        outs, op_type, device = outputs[at], types[at], devices[at]
        if (known is None or known[0] is not outs or known[1] is not op_type
                or known[2] is not device or known[3] is not runs):  # fmt: skip
            key = (id(outs), ident, op_type, device, runs)
            tail = tails.get(key)
            if tail is None:
                text = close + _tail(ops[at], d, placement, runs, item, head) + between
                tail = tails[key] = text.encode()
            known = seen[ident] = (outs, op_type, device, runs, tail)
        after.append(known[4])
        at += 1  # noqa: SIM113 (a typed index: enumerate is slow compiled)
    last = after[-1][: -len(between)] + (item[:-2] + "]").encode()
    after[-1] = last
    parts: list[bytes] = [b""] * (2 * len(names) + 1)
    parts[0] = ("[" + item + head + start).encode()
    parts[1::2] = quoted
    parts[2::2] = after
    texts = [*tails.values(), last] if plain else [*tails.values(), last, b"".join(quoted)]
    return JsonText(parts, _ascii(texts))


def _ascii(texts: list[bytes]) -> bool:
    """Whether every text is ASCII without DEL (0x7f): a function of its own, as `_text` is
    compiled as a cpdef function, which cannot hold a generator."""
    return all(t.isascii() and b"\x7f" not in t for t in texts)


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
