"""Plain, stable text for pipes and golden tests: whitespace-aligned columns, `N/A` for unknowns."""

from __future__ import annotations

from collections.abc import Sequence

NA = "N/A"


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing spaces stripped."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines)


def na(value: object, fmt: str = "{}") -> str:
    """`fmt` applied to `value`, or N/A when the driver did not say (None)."""
    return NA if value is None else fmt.format(value)
