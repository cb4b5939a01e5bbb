"""Plain, stable text for pipes and golden tests: whitespace-aligned columns, `N/A` for unknowns."""

from __future__ import annotations

from collections.abc import Sequence

NA = "N/A"


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing spaces stripped.

    The last column is not padded: one long cell there (an op fed by 20,000 copies) would
    otherwise pad every row to its width."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = [
        "  ".join(
            [*(str(c).ljust(w) for c, w in zip(r[:-1], widths, strict=True)), str(r[-1])]
        ).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines)


def fit_columns(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int, drop: Sequence[str]
) -> tuple[list[str], list[list[str]], list[str]]:
    """The columns that fit `width` characters in `columns`' layout: the names in `drop` go,
    in that order, until the widest line fits (or none is left to drop). Returns the header,
    the rows and the names dropped."""
    keep = list(range(len(header)))
    dropped: list[str] = []

    def widest() -> int:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in keep]
        return sum(widths) + 2 * (len(widths) - 1)

    for name in drop:
        if widest() <= width or name not in header:
            continue
        keep.remove(header.index(name))
        dropped.append(name)
    return [header[i] for i in keep], [[r[i] for i in keep] for r in rows], dropped


def na(value: object, fmt: str = "{}") -> str:
    """`fmt` applied to `value`, or N/A when the driver did not say (None)."""
    return NA if value is None else fmt.format(value)
