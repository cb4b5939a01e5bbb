"""The estimated schedule drawn as inline SVG: one lane per device with its ops and the copies
it receives, and each device's bytes in use over time against its limit.

Both charts share the time axis they are given (`scale`, seconds across the full width), so two
placements drawn with one scale compare by eye. Bounded by pixels, not ops: bars closer than
half a pixel merge into one (its tooltip counts them), and a memory curve keeps per pixel column
its highest and its last value; at most MAX_LANES devices are drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape

from ...echo import clip
from ...units import human
from ..explain import short_device
from .trace import Bar, Trace

WIDTH = 640  # the time axis, in SVG units
LEFT = 56  # room for the lane labels
LANE, ROW = 34, 15  # a device's lane height; its ops row and its copies row
MEM_H = 56
MAX_LANES = 32
TITLE_CHARS = 120


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.4g} ms"


def _merged(bars: Iterable[Bar], scale: float) -> list[tuple[float, float, int, Bar, Bar]]:
    """(start, end, count, first, last) runs of bars less than half a pixel apart."""
    half = scale / WIDTH / 2
    runs: list[tuple[float, float, int, Bar, Bar]] = []
    for bar in bars:
        if runs and bar.start - runs[-1][1] < half:
            start, end, count, first, _ = runs[-1]
            runs[-1] = (start, max(end, bar.end), count + 1, first, bar)
        else:
            runs.append((bar.start, bar.end, 1, bar, bar))
    return runs


def _x(t: float, scale: float) -> float:
    return round(LEFT + WIDTH * t / scale, 2) if scale > 0 else LEFT


def _axis(y: int, scale: float) -> str:
    ticks = []
    for k in range(5):
        t = scale * k / 4
        x = _x(t, scale)
        ticks.append(f'<line class="tick" x1="{x}" y1="{y}" x2="{x}" y2="{y + 4}"/>'
                     f'<text class="tick" x="{x}" y="{y + 15}">{_ms(t)}</text>')  # fmt: skip
    return "".join(ticks)


def _bar_rects(bars: Sequence[Bar], scale: float, y: int, fill: str, kind: str,
               device: str) -> list[str]:  # fmt: skip
    out = []
    for start, end, count, first, last in _merged(bars, scale):
        x1, x2 = _x(start, scale), _x(end, scale)
        if count == 1:
            size = f", {human(first.nbytes)}" if first.nbytes else ""
            tip = f"{clip(first.label, TITLE_CHARS)} on {device}{size}: {_ms(start)} to {_ms(end)}"
        else:
            tip = (f"{count} {kind}s on {device}, {clip(first.label, TITLE_CHARS)} to "
                   f"{clip(last.label, TITLE_CHARS)}: {_ms(start)} to {_ms(end)}")  # fmt: skip
        out.append(
            f'<rect class="{kind}" data-device="{escape(device)}" x="{x1}" y="{y}" '
            f'width="{max(round(x2 - x1, 2), 0.5)}" height="{ROW - 2}" fill="{fill}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    return out


def timeline_svg(trace: Trace, colors: Mapping[str, str], scale: float) -> str:
    """Per device lane: its ops (top row, its color) and the copies it receives (bottom row)."""
    lanes = _lanes(trace)
    height = LANE * len(lanes) + 22
    parts = [f'<svg class="timeline chart" xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 60}" '
             f'height="{height}" viewBox="0 0 {LEFT + WIDTH + 60} {height}" role="img">']  # fmt: skip
    ops_by, copies_by = _by_device(trace.ops), _by_device(trace.copies)
    for row, index in enumerate(lanes):
        full = trace.devices[index]
        device, y = short_device(full), row * LANE
        parts.append(f'<text class="lane" x="2" y="{y + 12}">{escape(device)}</text>'
                     f'<text class="lane sub" x="2" y="{y + 12 + ROW}">copies in</text>')  # fmt: skip
        parts += _bar_rects(ops_by.get(index, []), scale, y + 1, colors[full], "op-bar", device)
        parts += _bar_rects(
            copies_by.get(index, []), scale, y + ROW + 1, "#555", "copy-bar", device
        )
    parts.append(_axis(LANE * len(lanes), scale))
    parts.append("</svg>")
    return "".join(parts)


def _lanes(trace: Trace) -> list[int]:
    """The devices drawn: those that run an op or receive a copy, GPUs first, at most MAX_LANES."""
    used = {b.device for b in trace.ops} | {b.device for b in trace.copies}
    return sorted(used)[:MAX_LANES]


def _by_device(bars: Iterable[Bar]) -> dict[int, list[Bar]]:
    out: dict[int, list[Bar]] = {}
    for bar in bars:
        out.setdefault(bar.device, []).append(bar)
    for lane in out.values():
        lane.sort(key=lambda b: b.start)
    return out


def _columns(points: Sequence[tuple[float, int]], scale: float) -> list[tuple[float, int]]:
    """The step curve with at most two points per pixel column: its highest, then its last."""
    out: list[tuple[float, int]] = []
    column, high, last = None, 0, 0
    for time, value in points:
        x = LEFT + (min(int(WIDTH * time / scale), WIDTH) if scale > 0 else 0)
        if x != column:
            if column is not None:
                out += [(column, high), (column, last)]
            column, high = x, value
        high, last = max(high, value), value
    if column is not None:
        out += [(column, high), (column, last)]
    return out


def memory_svg(trace: Trace, device: int, color: str, scale: float) -> str:
    """One device's bytes in use over time (a step curve), with its limit as a dashed line."""
    points = trace.memory[device]
    peak = max((v for _, v in points), default=0)
    limit = trace.limits[device]
    top = max(peak, limit or 0, 1)
    width = LEFT + WIDTH + 60

    def y(v: int) -> float:
        return round(4 + (MEM_H - 4) * (1 - v / top), 2)

    path, previous = [], y(0)
    for x, v in _columns(points, scale):
        path.append(f"L{x},{previous} L{x},{y(v)}")
        previous = y(v)
    path.append(f"L{_x(scale, scale)},{previous}")
    name = short_device(trace.devices[device])
    parts = [f'<svg class="memory chart" data-device="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{MEM_H + 22}" viewBox="0 0 {width} {MEM_H + 22}" role="img">',
             f'<text class="lane" x="2" y="14">{escape(name)}</text>',
             f'<path class="mem" stroke="{color}" d="M{LEFT},{y(0)} {" ".join(path)}">'
             f"<title>{escape(name)}: at most {human(peak)} in use</title></path>"]  # fmt: skip
    if limit is not None:
        parts.append(f'<line class="limit" x1="{LEFT}" y1="{y(limit)}" x2="{LEFT + WIDTH}" '
                     f'y2="{y(limit)}"><title>limit {human(limit)}</title></line>'
                     f'<text class="limit" x="{LEFT + WIDTH + 2}" y="{y(limit) + 4}">'
                     f"{human(limit)}</text>")  # fmt: skip
    parts.append(
        f'<text class="peak" x="2" y="30">max</text><text class="peak" x="2" y="42">{human(peak)}</text>'
    )
    parts.append(_axis(MEM_H + 2, scale))
    parts.append("</svg>")
    return "".join(parts)
