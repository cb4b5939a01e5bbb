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


MIN_WRAP = 16  # the narrowest a wrapped column gets before columns are left out


def fit_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    drop: Sequence[str] = (),
    wrap: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """`columns`' layout within `width` characters, for a terminal: the columns named in `wrap`
    (reasons, lists of copies) wrap at spaces onto more lines; when even that is too wide, the
    columns named in `drop` are left out in that order. Returns the text and what was left out.
    No cell is ever cut: a wrapped one keeps every character, on more lines."""
    import textwrap

    natural = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    keep = list(range(len(header)))

    def needed() -> int:
        return sum(
            min(natural[i], MIN_WRAP) if header[i] in wrap else natural[i] for i in keep
        ) + 2 * (len(keep) - 1)

    dropped: list[str] = []
    for name in drop:
        if needed() <= width:
            break
        if name in header and header.index(name) in keep:
            keep.remove(header.index(name))
            dropped.append(name)
    widths = {i: natural[i] for i in keep}
    wrapping = sorted((i for i in keep if header[i] in wrap), key=natural.__getitem__)
    left = width - sum(natural[i] for i in keep if i not in wrapping) - 2 * (len(keep) - 1)
    for n, i in enumerate(wrapping):  # the narrow ones whole, the rest share what is left
        widths[i] = max(min(natural[i], left // (len(wrapping) - n)), min(natural[i], MIN_WRAP))
        left -= widths[i]
    lines: list[str] = []
    for row in [header, *rows]:
        cells = [
            textwrap.wrap(str(row[i]), widths[i], break_on_hyphens=False) or [""]
            if i in wrapping and len(str(row[i])) > widths[i]
            else [str(row[i])]
            for i in keep
        ]
        for k in range(max(map(len, cells))):
            parts = [c[k] if k < len(c) else "" for c in cells]
            padded = [p.ljust(widths[i]) for p, i in zip(parts[:-1], keep[:-1], strict=True)]
            lines.append("  ".join([*padded, parts[-1]]).rstrip())
    return "\n".join(lines), dropped


def left_out(dropped: Sequence[str], width: int) -> list[str]:
    """The line that names the columns a terminal table left out, if any."""
    if not dropped:
        return []
    import textwrap

    line = f"({', '.join(dropped)} left out to fit {width} columns; --wide shows all)"
    return textwrap.wrap(line, width, break_on_hyphens=False)


def na(value: object, fmt: str = "{}") -> str:
    """`fmt` applied to `value`, or N/A when the driver did not say (None)."""
    return NA if value is None else fmt.format(value)
