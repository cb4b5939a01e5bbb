"""What a message echoes of the user's input, bounded: a long value is cut, a long list shows its
first and last items and how many lie between, and a whole line stays within one screen.

Input is often hostile or huge (a 100,000-character variable, a cycle through 2,000 ops, 10,000
logical GPUs); a message that quotes it whole floods the terminal and hides the fix. Every
message that echoes input goes through these three functions, so the bounds are the same
everywhere (the README's input limits list them).
"""

from __future__ import annotations

from collections.abc import Sequence

VALUE_CHARS = 60  # a value from a spec quoted in a message (an attr, a name)
TEXT_CHARS = 200  # a setting's text quoted in a message (a flag's value, an environment variable)
ITEMS = 8  # items of a list shown: the first half and the last half, with the count between
LINE_CHARS = 2000  # a whole line: about one 80x25 screen


def clip(text: str, limit: int = VALUE_CHARS) -> str:
    """`text`, or its first `limit` - 3 characters and `...` when it is longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(value: object, limit: int = VALUE_CHARS) -> str:
    """A value for a message: its repr, cut short (a spec may hold a million-element list).

    An int too long for repr (Python refuses more than 4,300 digits) is said by its size."""
    try:
        return clip(repr(value), limit)
    except ValueError:
        return f"<{type(value).__name__} too large to show>"


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
