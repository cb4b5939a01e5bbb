"""`plan --json`'s placement written as one JSON fragment: byte for byte what `json_text` writes
for `placement_records`' list, whatever the names (quotes, backslashes, non-ASCII, control
characters), pruned ops, outputs and decisions; and what orjson refuses is still written."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.graph import Graph, Op, TensorRef, TensorSpec
from gpuplace.placement.model import Decision, Placement
from gpuplace.report.plan_records import placement_fragment
from gpuplace.report.records import (
    JsonText,
    json_bytes,
    json_chunks,
    json_text,
    placement_records,
)

GPU0 = Decision("/job:localhost/replica:0/task:0/device:GPU:0", "default", "TF's default: GPU:0")
CPU0 = Decision("/job:localhost/replica:0/task:0/device:CPU:0", "explicit", 'asked "cpu:0" é')
OUTPUTS = ((TensorSpec((4, 4)),), (), (TensorSpec(()), TensorSpec((2, 3), "int32")))


def _graph(names: list[str]) -> tuple[Graph, Placement]:
    ops = tuple(
        Op(name, ("add", "print", "split")[i % 3], (TensorRef(names[i - 1]),) if i else (),
           device="/cpu:0" if i % 2 else "", outputs=OUTPUTS[i % 3])
        for i, name in enumerate(names)
    )  # fmt: skip
    decisions = {name: (GPU0, CPU0)[i % 2] for i, name in enumerate(names)}
    return Graph(ops, ()), Placement(decisions, (GPU0.device, CPU0.device))


def _both(graph: Graph, placement: Placement, pruned: tuple[str, ...]) -> tuple[str, str]:
    doc = {"schema_version": 1, "placement": None, "pruned": list(pruned)}
    plain = json_text({**doc, "placement": placement_records(graph, placement, pruned)})
    fast = json_text({**doc, "placement": placement_fragment(graph, placement, pruned)})
    return plain, fast


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=0, max_size=12, unique=True),
       st.data())  # fmt: skip
def test_the_fragment_is_the_records_text(names: list[str], data: st.DataObject) -> None:
    graph, placement = _graph(names)
    pruned = tuple(n for n in names if data.draw(st.booleans()))
    plain, fast = _both(graph, placement, pruned)
    assert fast == plain


def test_plain_names_and_escaped_ones_in_one_graph() -> None:
    graph, placement = _graph(["a", "b/c_1", 'q"uote', "back\\slash", "ü", "tab\tx", "z"])
    plain, fast = _both(graph, placement, ("z",))
    assert fast == plain
    assert '"op": "q\\"uote"' in fast and '"op": "\\u00fc"' in fast


def test_what_orjson_refuses_is_written_by_the_standard_library() -> None:
    graph, placement = _graph(["a", "b"])
    doc = {"placement": placement_fragment(graph, placement), "big": 2**70}
    assert json.loads(json_text(doc)) == {
        "placement": json.loads(json.dumps(placement_records(graph, placement))),
        "big": 2**70,
    }
    lone = _graph(["a", "\ud800"])  # a lone surrogate: orjson refuses the name itself
    assert _both(*lone, ())[0] == _both(*lone, ())[1]


def test_the_pieces_written_are_the_document() -> None:
    """`json_chunks` (what a command writes, the placement in blocks as it goes) is `json_bytes`
    piece by piece; a text that is not all ASCII (CPU0's reason) is escaped in one piece; a
    document holding the text deeper than its top level is written the same."""
    names = [f"op{i}" for i in range(5000)]  # 10,001 parts: three blocks
    graph, mixed = _graph(names)
    ascii = Placement(dict.fromkeys(names, GPU0), mixed.devices)
    for placement, pieces in ((ascii, 5), (mixed, 1)):
        fragment = placement_fragment(graph, placement, ("op7",))
        assert isinstance(fragment, JsonText) and len(fragment.parts) == 2 * len(names) + 1
        records = placement_records(graph, placement, ("op7",))
        doc = {"schema_version": 1, "placement": fragment, "pruned": ["op7"], "after": [1.5]}
        plain = json_text({**doc, "placement": records})
        chunks = list(json_chunks(doc))
        assert b"".join(chunks) == json_bytes(doc) == plain.encode("ascii")
        assert len(chunks) == pieces
        nested = {"deeper": {"placement": placement_fragment(graph, placement, (), depth=2)}}
        assert json_text(nested) == json_text(
            {"deeper": {"placement": placement_records(graph, placement)}}
        )
