"""Spec text -> plain Python data (dicts, lists, scalars), fast, with line numbers where cheap.

Specs and machine files both come through here. JSON is YAML, but `json.loads` is ~60x faster
than PyYAML's C loader, so text that starts with `{` or `[` is tried as JSON first (a `.json`
file must be JSON). YAML is composed by libyaml (C) and turned into Python data
by a small builder instead of PyYAML's constructor: faster, and the composed nodes carry marks,
so every mapping's line comes for free. A document of plain lists, mappings and scalars (any
spec without anchors or tags on collections) skips the nodes: it is built straight from
libyaml's events, the same data with the same lines (composing is most of a YAML load). Plain
scalars are read as YAML 1.2 reads numbers (`1e3` is a float, `010` is ten, `0o10` eight;
YAML 1.1 has `1e3` a string and `010` eight), the rest as YAML 1.1 (`yes` is true). JSON keeps
no lines; `parse_json.json_lines` re-reads it (pure Python, slower) when an error needs one.
Hostile text is bounded before it costs: nesting
(libyaml stops at 1,000 levels, the builder at MAX_DEPTH), what YAML aliases repeat (a billion
laughs), and a key given twice in a mapping is an error naming both lines (YAML forbids it;
PyYAML and json keep the last silently). Callers pause the cyclic GC (`gc_paused`), which
otherwise makes loading a large spec superlinear. The YAML half is `yaml_text.py`, imported on
the first YAML text: JSON alone never imports PyYAML.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .limits import AliasLimit, Limits
from .parse_json import DuplicateKey, duplicate_key_error, json_file, json_unique

SPEC_ALIASES = Limits().aliases


class Document(NamedTuple):
    """Parsed spec data, and the 1-based line of each mapping by `id()` (None: not tracked)."""

    data: Any
    lines: dict[int, int] | None


def parse(text: str, source: str, aliases: AliasLimit = SPEC_ALIASES) -> Document:
    """JSON for a `.json` file; else JSON when the text parses as JSON, else YAML. Bounded:
    nesting (MAX_DEPTH), the nodes YAML aliases repeat (`aliases`); a key twice in
    one mapping is refused, naming both lines."""
    if source.lower().endswith(".json"):
        return Document(json_file(text, source), None)
    if text.lstrip()[:1] in ("{", "["):
        try:
            return Document(json_unique(text), None)
        except DuplicateKey as err:  # JSON's own words, and fast, even for a large file
            raise duplicate_key_error(text, source, err.key) from None
        except (RecursionError, ValueError):  # YAML reads JSON too, and says where it fails
            pass
    return parse_yaml(text, source, aliases)


def parse_yaml(text: str, source: str, aliases: AliasLimit = SPEC_ALIASES) -> Document:
    """YAML text -> a Document: built straight from libyaml's events when the text has nothing
    but plain lists, mappings and scalars, else, and for every error, from the composed nodes
    (`yaml_text.read_yaml`)."""
    from .yaml_text import read_yaml

    return Document(*read_yaml(text, source, aliases))


def is_number_text(text: str) -> bool:
    """Whether `text`, written unquoted in YAML, would be read as a number (`1e3`, `0x10`)."""
    from . import yaml_text

    return yaml_text.is_number_text(text)


def key_line(text: str, key: str, index: int | None = None) -> int | None:
    """The line of the top-level `key` in YAML or JSON text, or of its value's item `index` when
    that value is a list; None when the text does not read as YAML. For messages only."""
    from . import yaml_text

    return yaml_text.key_line(text, key, index)
