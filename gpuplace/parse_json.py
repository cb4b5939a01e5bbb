"""JSON text -> Python data for `parse.py`: fast (`json.loads`), refusing a key given twice
(json keeps the last silently), and again slowly with lines when a message needs one.

A `.json` file must hold JSON. A key given twice is found by the fast read, then located by a
second, pure-Python read that records where each value starts; nesting too deep for Python's
JSON reader is one line, as is an integer past Python's 4,300 digits.
"""

from __future__ import annotations

import contextlib
import json
from json import decoder as json_decoder
from json import scanner as json_scanner
from typing import Any

from .echo import clip_middle
from .errors import BadInput
from .limits import LONG_INT, MAX_DEPTH


def json_unique(text: str) -> Any:
    """`json.loads(text)`, refusing a key given twice in one object (DuplicateKey, which
    `duplicate_key_error` turns into a message with both lines).

    Read plainly (json's own dicts: faster than a hook given each object's pairs), then
    checked by counting (`_all_keys_kept`); text that fails either is read again with the
    hook, which says what it always said (the same error, or DuplicateKey first)."""
    try:
        data = json.loads(text)
    except (RecursionError, ValueError):
        data = _NOT_READ
    if data is _NOT_READ or not _all_keys_kept(text, data):
        return json.loads(text, object_pairs_hook=_unique)
    return data


_NOT_READ = object()  # the plain read failed


def _all_keys_kept(text: str, data: Any) -> bool:
    """Whether `data`, `text` read by `json.loads` (which keeps the last of a key given
    twice), has every member the text has. Outside its strings, JSON text has a `:` for each
    member and nowhere else, so the text's `:` count is its members plus the `:` in its
    strings; `data` has its members less those a repeated key dropped, and the `:` of its
    strings less the dropped ones': the counts are equal exactly when nothing was dropped.
    Only `\\u003a` escapes put a `:` in a string that the text does not show; such text
    gets False (the caller then reads it with the exact hook)."""
    if "\\" in text and ("\\u003a" in text or "\\u003A" in text):
        return False
    members = 0  # members and `:` in strings, of every object and string in `data`
    stack: list[Any] = [data]  # lists and objects left to count
    while stack:
        value = stack.pop()
        if type(value) is dict:
            obj: dict[str, Any] = value
            members += len(obj)
            for key, item in obj.items():
                members += _colons(key, stack) + _colons(item, stack)
        elif type(value) is list:
            items: list[Any] = value
            for item in items:
                members += _colons(item, stack)
        else:
            members += _colons(value, stack)  # the document itself a string
    return members == text.count(":")


def _colons(value: Any, stack: list[Any]) -> int:
    """For `_all_keys_kept`: the `:` in `value` if it is a string; a list or an object goes on
    `stack`, to be counted in turn."""
    if type(value) is str:
        string: str = value
        return string.count(":") if ":" in string else 0
    if type(value) is dict or type(value) is list:
        stack.append(value)
    return 0


class DuplicateKey(ValueError):
    """A JSON object with a key twice (`key`); where, the slower second read finds."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (json keeps the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out


def json_file(text: str, source: str) -> Any:
    """A `.json` file's data: JSON or an error, never YAML (which would accept a YAML file
    named .json); None for an empty file."""
    if not text.strip():
        return None
    try:
        return json_unique(text)
    except json.JSONDecodeError as err:
        where = f"{source}:{err.lineno}:{err.colno}"
        if text.lstrip()[:1] in ("{", "["):
            raise BadInput(f"{where}: JSON syntax error: {err.msg}") from None
        raise BadInput(
            f"{where}: not JSON ({err.msg}); a .json file holds JSON: write it as JSON, or "
            "name it .yaml if it is YAML"
        ) from None
    except DuplicateKey as err:
        raise duplicate_key_error(text, source, err.key) from None
    except RecursionError:
        raise BadInput(
            f"{source}: the JSON is nested too deeply to read (specs and machine files need fewer than "
            f"{MAX_DEPTH} levels)"
        ) from None
    except ValueError:  # the only other error json raises
        raise BadInput(f"{source}: cannot read the JSON: {LONG_INT}") from None


def duplicate_key_error(text: str, source: str, key: str) -> BadInput:
    """The message for a key given twice in one JSON object, with both lines (a second read
    with the pure-Python scanner, which says where each value starts)."""
    found: list[tuple[str, int, int]] = []

    def parse_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, *args: Any) -> Any:
        starts: list[int] = []

        def scan(s: str, idx: int) -> Any:
            starts.append(idx)
            return scan_once(s, idx)

        pairs, end = json_decoder.JSONObject(s_and_end, strict, scan, None, list, *args[2:])  # type: ignore[attr-defined]
        first: dict[str, int] = {}
        for (name, _), at in zip(pairs, starts, strict=True):
            if name in first and not found:
                found.append((name, first[name], at))
            first.setdefault(name, at)
        return dict(pairs), end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json_scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    with contextlib.suppress(RecursionError, ValueError):
        decoder.decode(text)
    if not found:
        return BadInput(
            f"{source}: duplicate key {clip_middle(key)!r} in one object; give each key once"
        )
    name, first, second = found[0]
    lines = [text.count("\n", 0, text.rfind(":", 0, at)) + 1 for at in (first, second)]
    return BadInput(
        f"{source}:{lines[1]}: duplicate key {clip_middle(name)!r} (first at line {lines[0]}); a key "
        "may appear once in an object: merge the two or rename one"
    )


def json_lines(text: str) -> tuple[Any, dict[int, int]]:
    """JSON again, and the 1-based line of each object by `id()` (the pure-Python scanner,
    slower: for messages only)."""
    lines: dict[int, int] = {}
    cursor = [0, 1]  # offset, line: objects start in increasing order

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        s, end = s_and_end
        cursor[1] += s.count("\n", cursor[0], end)
        cursor[0] = end
        line = cursor[1]
        obj, after = json_decoder.JSONObject(s_and_end, *args)  # type: ignore[attr-defined]
        lines[id(obj)] = line
        return obj, after

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json_scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(text), lines
