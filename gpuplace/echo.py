"""What a message echoes of the user's input, bounded: a long value is cut, a long list shows its
first and last items and how many lie between, and a whole line stays within one screen.

Input is often hostile or huge (a 100,000-character variable, a cycle through 2,000 ops, 10,000
logical GPUs); a message that quotes it whole floods the terminal and hides the fix. Every
message that echoes input goes through these three functions, so the bounds are the same
everywhere (docs/graph-spec.md's input limits list them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

VALUE_CHARS = 60  # a value from a spec quoted in a message (an attr, a name)
TEXT_CHARS = 200  # a setting's text quoted in a message (a flag's value, an environment variable)
ITEMS = 8  # items of a list shown: the first half and the last half, with the count between
LINE_CHARS = 2000  # a whole line: about one 80x25 screen
PATH_CHARS = 80  # a path or a file's text quoted in a message: its start and its end
SHOWN_DEPTH = 200  # nesting shown of a value (as deep as a spec may nest); deeper is `...`


def clip(text: str, limit: int = VALUE_CHARS) -> str:
    """`text`, or its first `limit` - 3 characters and `...` when it is longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_middle(text: str, limit: int = PATH_CHARS) -> str:
    """`text` whole when short, else its start, `...` and its end: for paths and file text,
    whose end (the file name, the line) says as much as its start."""
    if len(text) <= limit:
        return text
    keep = (limit - 3) // 2
    return f"{text[:keep]}...{text[-keep:]}"


def show(value: object, limit: int = VALUE_CHARS) -> str:
    """A value for a message: its repr, cut short. Only about `limit` characters are ever made,
    so a million-element list, or one that YAML aliases repeat 10^9 times, costs nothing; an
    int too long for repr (over 4,300 digits) is said by its size."""
    pieces: list[str] = []
    size = 0
    for piece in _repr_pieces(value, 0, limit):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            break
    return clip("".join(pieces), limit)


def _repr_pieces(value: object, depth: int, limit: int) -> Iterator[str]:
    """repr(value), in pieces, lists and dicts item by item (deeper than SHOWN_DEPTH: `...`)."""
    if depth > SHOWN_DEPTH:
        yield "..."
    elif isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            yield ", " if i else ""
            yield from _repr_pieces(item, depth + 1, limit)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ", " if i else ""
            yield from _repr_pieces(key, depth + 1, limit)
            yield ": "
            yield from _repr_pieces(item, depth + 1, limit)
        yield "}"
    elif isinstance(value, str):
        yield repr(value[: limit + 1])  # the rest is cut anyway
    elif isinstance(value, int) and value.bit_length() > 10_000:  # repr refuses 4,301+ digits
        yield f"<an integer of {value.bit_length():,} bits>"
    else:
        yield repr(value)


def sample(
    items: Sequence[str], sep: str = ", ", limit: int = ITEMS, width: int = VALUE_CHARS
) -> str:
    """`items` joined by `sep`; past `limit` items, the first and last halves around
    `... (N more) ...`: `op0 -> op1 -> op2 -> op3 -> ... (1,993 more) ... -> op1998 -> op1999`.
    Each item shown is cut at `width` characters."""
    if len(items) <= limit:
        return sep.join(clip(item, width) for item in items)
    head, tail = items[: limit // 2], items[len(items) - (limit - limit // 2) :]
    skipped = f"... ({len(items) - len(head) - len(tail):,} more) ..."
    shown = [*head, skipped, *tail]
    return sep.join(clip(item, width) for item in shown)


def fit_line(text: str, limit: int = LINE_CHARS) -> str:
    """A whole message within one screen: past `limit` characters, its start and its end (which
    carries the fix) around `... (N characters cut) ...`."""
    if len(text) <= limit:
        return text
    keep = limit - 48  # room for the marker, whose count has at most 17 digits and commas
    head = keep * 2 // 3
    cut = f" ... ({len(text) - keep:,} characters cut) ... "
    return text[:head] + cut + text[len(text) - (keep - head) :]
