"""YAML text -> plain Python data with each mapping's line: `parse.py`'s YAML half, which
`parse.parse` imports only when a spec or machine file is YAML (PyYAML's import is about a
tenth of a small command's start-up; a JSON spec never pays it). What it reads and how: see
`parse.py`'s docstring.
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any, NamedTuple

import yaml
from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.events import (
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .echo import clip_middle
from .errors import BadInput
from .limits import MAX_DEPTH, AliasLimit

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


class Read(NamedTuple):
    """YAML's data, and the 1-based line of each mapping by `id()` (`parse.Document`'s fields)."""

    data: Any
    lines: dict[int, int]


def read_yaml(text: str, source: str, aliases: AliasLimit) -> Read:
    """YAML text -> its data and lines: built straight from libyaml's events when the text has nothing
    but plain lists, mappings and scalars (`_Events`, about 1.7x faster), else, and for every error,
    from the composed nodes (`_Builder`), which the fast path matches value for value."""
    try:
        return _Events(text, aliases).document()
    except Exception:  # anything else (anchors, tags, merge keys, errors): compose, as always
        pass
    try:
        node = yaml.compose(text, Loader=_Loader)
        builder = _Builder(aliases)
        return Read(None if node is None else builder.build(node), builder.lines)
    except _Refused as err:
        raise BadInput(f"{source}:{err.where}: {err.problem}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = " ".join(f"{err.context or ''} {err.problem or ''}".split())
        raise BadInput(f"{where}: YAML syntax error: {what}") from None
    except yaml.reader.ReaderError as err:  # a control character, read before any mark exists
        line = text.count("\n", 0, err.position) + 1
        column = err.position - text.rfind("\n", 0, err.position)
        raise BadInput(
            f"{source}:{line}:{column}: YAML error: control character U+{err.character:04X} is "
            "not allowed in YAML text; remove it (inside double quotes, an escape such as "
            "\\x01 stands for one)"
        ) from None
    except yaml.YAMLError as err:
        raise BadInput(f"{source}: YAML error: {' '.join(str(err).split())}") from None
    except UnicodeEncodeError as err:  # a lone surrogate, from Python text
        raise BadInput(
            f"{source}: not valid text ({err.reason} at character {err.start})"
        ) from None
    except RecursionError:
        raise BadInput(f"{source}: nested too deeply (over {MAX_DEPTH} levels)") from None


class _Refused(yaml.MarkedYAMLError):
    """What the builder refuses (a key twice, nesting past MAX_DEPTH, an alias bomb), at a mark."""

    def __init__(self, problem: str, mark: Mark) -> None:
        super().__init__(None, None, problem, mark)
        self.where = f"{mark.line + 1}:{mark.column + 1}"


class _Builder:
    """Composed YAML nodes -> Python data, as SafeLoader builds it, recording mapping lines.

    Aliases are memoised by node (so `*a` repeated costs nothing and recursion is caught), but
    what they repeat is counted: later stages walk every copy, so `room` bounds the nodes all
    aliases may repeat (a billion laughs is refused here, before anything walks it). Nesting
    is bounded by MAX_DEPTH, and a key given twice in one mapping is refused.
    """

    def __init__(self, aliases: AliasLimit) -> None:
        self.lines: dict[int, int] = {}
        self.memo: dict[int, Any] = {}
        self.scalars = _Constructor()
        self.depth = 0
        self.aliases = aliases
        self.room = aliases.nodes  # nodes aliases may still repeat
        self.sizes: dict[int, int] = {}  # id(node) -> nodes in it, for nodes aliases repeat

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
            self._repeat(node)
            return done
        self.memo[key] = _BUSY
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Refused(
                f"lists and mappings nest more than {MAX_DEPTH} levels deep here; a spec needs "
                "far fewer (a value has at most 64 dimensions)",
                node.start_mark,
            )
        if isinstance(node, MappingNode):
            out: Any = self._mapping(node)
        else:
            out = self._sequence(node)
        self.depth -= 1
        self.memo[key] = out
        return out

    def _repeat(self, node: Node) -> None:
        """Count what an alias repeats; refuse past `aliases.nodes` in all."""
        self.room -= self._size(node)
        if self.room < 0:
            raise _Refused(
                f"the aliases of the anchor here take what YAML aliases repeat past "
                f"{self.aliases.nodes:,} nodes (an alias bomb?); write the data out, or "
                f"{self.aliases.fix}",
                node.start_mark,
            )

    def _size(self, node: Node) -> int:
        """Nodes in `node`, aliases counted in full (memoised: linear in distinct nodes)."""
        if node.__class__ is ScalarNode:
            return 1
        size = self.sizes.get(id(node))
        if size is None:
            items = node.value if node.__class__ is SequenceNode else chain(*node.value)
            size = self.sizes[id(node)] = 1 + sum(map(self._size, items))
        return size

    def _sequence(self, node: Node) -> list[Any]:
        if node.tag != _SEQ:
            raise _unsupported(node)
        return [self.build(item) for item in node.value]

    def _mapping(self, node: MappingNode, merged: int = 0) -> dict[Any, Any]:
        """A mapping; `merged`: how many of its first pairs `<<:` merged in (they may repeat
        a key that the mapping's own pairs then override)."""
        if node.tag != _MAP:
            raise _unsupported(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:  # `<<: *defaults`: PyYAML merges, then we start over
                own = [pair for pair in node.value if pair[0].tag != _MERGE]
                self._keys(own)
                self.scalars.flatten_mapping(node)
                return self._mapping(node, len(node.value) - len(own))
            key = self.build(key_node)
            if key.__class__ is list or key.__class__ is dict:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable key (a list or mapping)", key_node.start_mark
                )
            out[key] = self.build(value_node)
        if not merged and len(out) != len(node.value):
            self._keys(node.value)
        self.lines[id(out)] = node.start_mark.line + 1
        return out

    def _keys(self, pairs: list[tuple[Node, Node]]) -> None:
        """Refuse a key given twice among `pairs`, naming both lines."""
        first: dict[Any, Node] = {}
        for key_node, _ in pairs:
            if key_node.__class__ is not ScalarNode:
                continue  # a list or mapping: refused as unhashable when the mapping is built
            key = self.build(key_node)
            if key in first:
                mark = first[key].start_mark
                raise _Refused(
                    f"duplicate key {clip_middle(str(key))!r} (first at {mark.line + 1}:"
                    f"{mark.column + 1}); a key may appear once in a mapping: merge the two or "
                    "rename one",
                    key_node.start_mark,
                )
            first[key] = key_node


class _Fallback(Exception):
    """What only the composer handles (an anchor, an alias, a merge key, a tag on a list or a
    mapping, a key that is not a scalar, a key given twice, nesting past MAX_DEPTH)."""


_MISSING = object()


class _Events:
    """libyaml's events -> Python data, as `yaml.compose` + `_Builder` would build it, without
    the nodes: scalars are resolved by the loader's own resolver (memoised by text) and built by
    `_Builder`; the first thing it does not handle raises, and `read_yaml` composes instead
    (so a spec with an anchor is read twice up to its first one)."""

    def __init__(self, text: str, aliases: AliasLimit) -> None:
        self.loader = _Loader(text)
        self.get = self.loader.get_event
        self.builder = _Builder(aliases)
        self.scalars: dict[tuple[str, Any], Any] = {}
        self.depth = 0

    def document(self) -> Read:
        get = self.get
        get()  # StreamStartEvent
        event = get()
        if event.__class__ is StreamEndEvent:
            return Read(None, {})
        data = self.node(get())  # after DocumentStartEvent
        if get().__class__ is not DocumentEndEvent or get().__class__ is not StreamEndEvent:
            raise _Fallback  # more than one document: the composer says so
        return Read(data, self.builder.lines)

    def node(self, event: Any) -> Any:
        cls = event.__class__
        if cls is ScalarEvent:
            return self.scalar(event)
        if event.anchor is not None or event.tag not in (None, "!", _SEQ, _MAP):
            raise _Fallback
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Fallback
        get, node = self.get, self.node
        if cls is SequenceStartEvent and event.tag != _MAP:
            items: list[Any] = []
            append = items.append
            item = get()
            while item.__class__ is not SequenceEndEvent:
                append(node(item))
                item = get()
            self.depth -= 1
            return items
        if cls is not MappingStartEvent or event.tag == _SEQ:
            raise _Fallback  # a list tagged as a mapping, or the other way round
        out: dict[Any, Any] = {}
        pairs = 0
        key = get()
        while key.__class__ is not MappingEndEvent:
            if key.__class__ is not ScalarEvent:
                raise _Fallback  # a list or mapping as a key: the composer refuses it
            name = self.scalar(key)
            out[name] = node(get())
            pairs += 1
            key = get()
        if len(out) != pairs:
            raise _Fallback  # a key twice: the composer's builder names both lines
        self.builder.lines[id(out)] = event.start_mark.line + 1
        self.depth -= 1
        return out

    def scalar(self, event: Any) -> Any:
        if event.anchor is not None:
            raise _Fallback
        tag = event.tag
        if tag is not None and tag != "!":
            return self.builder.build(
                ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
            )
        key = (event.value, event.implicit)
        value = self.scalars.get(key, _MISSING)
        if value is _MISSING:
            tag = self.loader.resolve(ScalarNode, event.value, event.implicit)
            if tag == _MERGE:
                raise _Fallback
            node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
            value = self.scalars[key] = self.builder.build(node)
        return value


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
    key_node, value = found[0]
    if index is not None and isinstance(value, SequenceNode) and 0 <= index < len(value.value):
        return int(value.value[index].start_mark.line) + 1
    return int(key_node.start_mark.line) + 1
