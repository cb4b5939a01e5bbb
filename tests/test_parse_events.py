"""`yaml_text.py`'s fast YAML path (`_Events`: data straight from libyaml's events) against the
composer's (`yaml.compose` + `_Builder`): the same data, the same mapping lines, the same
errors; whatever the fast path does not handle goes to the composer."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.errors import BadInput
from gpuplace.parse import SPEC_ALIASES, Document, parse_yaml
from gpuplace.yaml_text import _Builder, _Events, _Loader


def composed(text: str) -> Document:
    """The composer's path alone (what parse_yaml did before the fast path)."""
    node = yaml.compose(text, Loader=_Loader)
    builder = _Builder(SPEC_ALIASES)
    return Document(None if node is None else builder.build(node), builder.lines)


def lines_in_order(doc: Document) -> list[int]:
    """Each mapping's line, in the order a walk of the data meets them."""
    out: list[int] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            assert doc.lines is not None
            out.append(doc.lines[id(value)])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(doc.data)
    return out


def same(text: str) -> None:
    fast, slow = _Events(text, SPEC_ALIASES).document(), composed(text)
    assert fast.data == slow.data
    assert lines_in_order(fast) == lines_in_order(slow)
    assert parse_yaml(text, "s.yaml").data == slow.data


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False) | st.sampled_from(["yes", "off", "010", "0o17", "1e3", "~", ".inf", "2001-12-14", "1:30", "0x1F", "a: b", "- x", ""])
)  # fmt: skip
_DATA = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)


@given(_DATA, st.sampled_from([None, True, False]))
def test_the_fast_path_builds_what_the_composer_builds(data: Any, flow: bool | None) -> None:
    same(yaml.safe_dump(data, default_flow_style=flow, sort_keys=False))


@pytest.mark.parametrize(
    "text",
    [
        "", "---\n", "a: 1\n", "- 1\n- [2, {b: yes, c: 010}]\n", "graph:\n  - {op: add, inputs: [a, b]}\n",
        "a: 2001-12-14\nb: 1:30\nc: 0o17\nd: 1e3\ne: .nan\nf: ~\ng: 'yes'\nh: \"1\"\n",
    ],
)  # fmt: skip
def test_plain_documents_take_the_fast_path(text: str) -> None:
    same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1]\nb: *x\n",  # an anchor and an alias
        "d: &d {k: 1}\ne:\n  <<: *d\n  j: 2\n",  # a merge key
        "a: !!str 3\nb: !!int '4'\n",  # tags on scalars are built (not a fallback): same data
        "a: !!set {x}\n",  # a tag on a mapping
        "? [a]\n: 1\n",  # a list as a key
        "a: 1\nb: 2\na: 3\n",  # a key twice
        "--- 1\n--- 2\n",  # two documents
        "a: [1, 2\n",  # a syntax error
        "a: !!int abc\n",  # a value its tag cannot read
        "a:\x01\n",  # a control character
        "[" * 300 + "]" * 300 + "\n",  # nesting past MAX_DEPTH
    ],
)
def test_whatever_the_fast_path_leaves_reads_as_the_composer_reads_it(text: str) -> None:
    try:
        expected: Any = composed(text).data
    except Exception:
        expected = None
    if expected is None:
        with pytest.raises(BadInput):
            parse_yaml(text, "s.yaml")
    else:
        assert parse_yaml(text, "s.yaml").data == expected
