"""Spec text -> plain Python data (dicts, lists, scalars), fast, with line numbers where cheap.

JSON is YAML, but `json.loads` is ~60x faster than PyYAML's C loader, so text that starts with
`{` or `[` is tried as JSON first. YAML is composed by libyaml (C) and turned into Python data
by a small builder instead of PyYAML's constructor: faster, and the composed nodes carry marks,
so every mapping's line comes for free. Plain scalars are read as YAML 1.2 reads numbers (`1e3`
is a float, `010` is ten, `0o10` eight; YAML 1.1 has `1e3` a string and `010` eight), the rest as
YAML 1.1 (`yes` is true). JSON keeps no lines; `parse_json_lines` re-reads it
(pure Python, slower) when an error needs one. Callers pause the cyclic GC (`gc_paused`), which
otherwise makes loading a large spec superlinear.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json import decoder as json_decoder
from json import scanner as json_scanner
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import BadInput

_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"
_BUSY = object()


# YAML 1.2 numbers on top of PyYAML's YAML 1.1 patterns: an exponent needs no dot and no sign
# (`1e3`, `2.5E-3`), `.5` may be signed; `0o17` is octal and `017` decimal. Only the patterns
# change (same first characters, same number of regexes tried), so resolving costs the same.
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+
    |[-+]?[0-9][0-9_]*\.[0-9_]*
    |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT_RE = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0o[0-7_]+
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[0-9][0-9_]*
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""",
    re.X,
)


def is_number_text(text: str) -> bool:
    """Whether `text`, written unquoted in YAML, would be read as a number (`1e3`, `0x10`)."""
    return ":" not in text and bool(_FLOAT_RE.match(text) or _INT_RE.match(text))


class _Loader(_BASE_LOADER):  # type: ignore[misc]
    """The C (else Python) SafeLoader with YAML 1.2 number patterns; yaml.SafeLoader unchanged."""


_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, _FLOAT_RE if tag == _FLOAT else _INT_RE if tag == _INT else regexp)
        for tag, regexp in resolvers
    ]
    for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
}


class _Constructor(SafeConstructor):
    """SafeConstructor with YAML 1.2 integers: `0o17` octal, leading zeros decimal (`010` is 10)."""

    def construct_yaml_int(self, node: Any) -> int:
        text = str(node.value).replace("_", "")
        if not text:
            raise ValueError("no digits")
        digits = text[1:] if text[0] in "+-" else text
        if digits.isdigit():
            return int(text)
        if digits[:2] == "0o":
            return (-1 if text[0] == "-" else 1) * int(digits[2:], 8)
        return int(super().construct_yaml_int(node))  # 0x.., 0b.., 1:30 (sexagesimal)


_Constructor.yaml_constructors = {
    **SafeConstructor.yaml_constructors,
    _INT: _Constructor.construct_yaml_int,
}


@dataclass(frozen=True)
class Document:
    """Parsed spec data, and the 1-based line of each mapping by `id()` (None: not tracked)."""

    data: Any
    lines: dict[int, int] | None


def parse(text: str, source: str) -> Document:
    """JSON when it parses as JSON (or must, for a `.json` file), else YAML."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return Document(json.loads(text), None)
        except json.JSONDecodeError as err:
            if source.lower().endswith(".json"):
                raise BadInput(
                    f"{source}:{err.lineno}:{err.colno}: JSON syntax error: {err.msg}"
                ) from None
        except (RecursionError, ValueError) as err:  # ValueError: an int of 4,301+ digits
            if source.lower().endswith(".json"):
                raise BadInput(f"{source}: cannot read the JSON: {err}") from None
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Document:
    try:
        node = yaml.compose(text, Loader=_Loader)
        builder = _Builder()
        return Document(None if node is None else builder.build(node), builder.lines)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = " ".join(f"{err.context or ''} {err.problem or ''}".split())
        raise BadInput(f"{where}: YAML syntax error: {what}") from None
    except yaml.YAMLError as err:
        raise BadInput(f"{source}: YAML error: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise BadInput(f"{source}: the spec is nested too deeply") from None


class _Builder:
    """Composed YAML nodes -> Python data, as SafeLoader builds it, recording mapping lines.

    Aliases are memoised by node (so `*a` repeated costs nothing and recursion is caught).
    """

    def __init__(self) -> None:
        self.lines: dict[int, int] = {}
        self.memo: dict[int, Any] = {}
        self.scalars = _Constructor()

    def build(self, node: Node) -> Any:
        if node.__class__ is ScalarNode:
            if node.tag == _STR:
                return node.value
            try:
                return self.scalars.construct_object(node)
            except (ValueError, TypeError, OverflowError) as err:  # `!!int abc`, `!!timestamp`
                raise yaml.constructor.ConstructorError(
                    None, None, f"cannot read {node.value!r} as {node.tag}: {err}", node.start_mark
                ) from None
        key = id(node)
        done = self.memo.get(key)
        if done is _BUSY:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "found a recursive alias (an anchor used inside itself)",
                node.start_mark,
            )
        if done is not None:
            return done
        self.memo[key] = _BUSY
        if isinstance(node, MappingNode):
            out: Any = self._mapping(node)
        else:
            out = self._sequence(node)
        self.memo[key] = out
        return out

    def _sequence(self, node: Node) -> list[Any]:
        if node.tag != _SEQ:
            raise _unsupported(node)
        return [self.build(item) for item in node.value]

    def _mapping(self, node: MappingNode) -> dict[Any, Any]:
        if node.tag != _MAP:
            raise _unsupported(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:  # `<<: *defaults`: PyYAML merges, then we start over
                self.scalars.flatten_mapping(node)
                return self._mapping(node)
            key = self.build(key_node)
            if key.__class__ is list or key.__class__ is dict:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key (a list or mapping)", key_node.start_mark
                )
            out[key] = self.build(value_node)
        self.lines[id(out)] = node.start_mark.line + 1
        return out


def _unsupported(node: Node) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(
        None, None, f"unsupported tag {node.tag!r}; use plain lists and mappings", node.start_mark
    )


def key_line(text: str, key: str, index: int | None = None) -> int | None:
    """The line of the top-level `key` in YAML or JSON text, or of its value's item `index` when
    that value is a list; None when the text does not read as YAML. It reads the whole text
    again, keeping every node's position: for messages only."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError):
        return None
    if not isinstance(node, MappingNode):
        return None
    found = [(k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == key]
    if not found:
        return None
    key_node, value = found[-1]  # a key given twice: the last one holds
    if index is not None and isinstance(value, SequenceNode) and 0 <= index < len(value.value):
        return int(value.value[index].start_mark.line) + 1
    return int(key_node.start_mark.line) + 1


def parse_json_lines(text: str) -> Document:
    """JSON again with each object's line (the pure-Python scanner; used only for messages)."""
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
    return Document(decoder.decode(text), lines)
