"""parse_json.json_unique: a plain `json.loads` checked by counting must refuse a key given twice
exactly where a read with a hook that sees every object's pairs does (the old rule, below)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.parse_json import DuplicateKey, json_unique


def old_rule(text: str) -> Any:
    """The rule as it was: every object's pairs, a key seen twice refused on the spot."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
        return dict(pairs)

    return json.loads(text, object_pairs_hook=unique)


def outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return "data", read(text)
    except DuplicateKey as err:
        return "duplicate", err.key
    except ValueError as err:
        return type(err).__name__, str(err)


# strings heavy in what the count looks at: `:` and the escapes that hide or show one
PIECES = ["a", "b", ":", "::", "/gpu:0", "\\u003a", "\\u003A", "\\\\", "\\\\u003a", "\\n", "é"]
strings = st.lists(st.sampled_from(PIECES), max_size=3).map(lambda p: '"' + "".join(p) + '"')
scalars = st.one_of(strings, st.sampled_from(["1", "-2.5e3", "true", "null"]))


def _object(members: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in members) + "}"


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        # keys from a small set, so that a key given twice is common
        st.lists(
            st.tuples(st.sampled_from(['"a"', '"b"', '"a:b"', '"\\u0061"']), inner), max_size=4
        ).map(_object),
    ),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(values, st.sampled_from(["", " x", "]"]))
def test_refuses_a_key_twice_as_the_hook_does(text: str, tail: str) -> None:
    assert outcome(json_unique, text + tail) == outcome(old_rule, text + tail)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"d": {"a": "x:y", "a": "x:y"}}',
        '{"a": 1, "a": 2, "b": "\\u003a"}',  # the escape's `:` would make up for the lost member
        '[{"a": 1}, {"b": {"c": [1, 2], "c": 3}}]',
    ],
)
def test_a_key_twice_is_refused(text: str) -> None:
    with pytest.raises(DuplicateKey):
        json_unique(text)


def test_colons_in_keys_and_values_are_kept() -> None:
    text = '{"a:b": "/job:localhost/device:GPU:0", "c": ["x:", {"d": ":"}]}'
    assert json_unique(text) == json.loads(text)
