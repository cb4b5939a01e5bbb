"""`gpuplace plan --format html`: one self-contained HTML page (inline CSS, JS and SVG; nothing
fetched when it is viewed) with, for each placement side by side, the placement graph coloured
by device, the estimated schedule per device (ops and copies), each device's memory over time
against its limit, and the plan's tables.

Every string from the input (op names, scopes, reasons, paths) is escaped with `html.escape`
and clipped (`echo.clip`); the page is bounded by the drawing limits of `graph_svg` and
`charts` and by MAX_ROWS rows of the op table per placement, whatever the graph's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from string import Template

from ...devices.model import View
from ...echo import clip
from ...memory.pools import DeviceMemory
from ...results import PlanEstimate, Prepared
from ..cluster import cluster_line
from ..dot import _colors
from ..explain import EXPLAIN_HEADER, explain_rows, short_device
from ..lines import SIM, pruned_line
from ..plan import LOAD_HEADER, _load_rows, _loads, fits, makespan_line, plan_title, rates_line
from .charts import MAX_LANES, memory_svg, timeline_svg
from .graph_svg import graph_svg
from .trace import Trace

MAX_ROWS = 400  # op rows per placement; the text plan lists them all
CELL_CHARS = 160  # characters of one table cell
TITLE_CHARS = 200  # characters of the machine's description in a title
MEMORY_NOTE = (
    "Bytes in use while the estimated schedule runs the devices side by side; the dashed line "
    "is the device's limit. PEAK (PREDICTED) below is the executor's, which runs one op at a "
    "time, so the two can differ."
)


@dataclass(frozen=True)
class Side:
    """One placement of the page: what `plan` computes for it, and its estimated schedule."""

    prepared: Prepared
    memory: Sequence[DeviceMemory]
    estimate: PlanEstimate
    trace: Trace


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _row(cells: Sequence[str]) -> str:
    return (
        "<tr>" + "".join(f"<td>{escape(clip(cell, CELL_CHARS))}</td>" for cell in cells) + "</tr>"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(_row(row) for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _legend(view: View, devices: Sequence[str], colors: dict[str, str]) -> str:
    simulated = view.machine.simulated
    items = []
    for full in devices:
        device = short_device(full)
        sim = SIM if simulated and "GPU" in device else ""
        items.append(
            f'<li data-device="{escape(device)}"><span class="swatch" '
            f'style="background:{colors[full]}"></span>{escape(device + sim)}</li>'
        )
    return f'<ul class="legend">{"".join(items)}</ul>'


def _panel(view: View, side: Side, colors: dict[str, str], scale: float) -> str:
    prepared, est, trace = side.prepared, side.estimate, side.trace
    graph, notes = graph_svg(prepared.graph, prepared.placement, colors)
    copies, loads = _loads(prepared)
    rows = explain_rows(prepared.graph, prepared.placement, copies)
    more = len(rows) - MAX_ROWS
    lanes = [i for i, points in enumerate(trace.memory) if len(points) > 1]  # holds something
    memory = "".join(
        memory_svg(trace, i, colors[trace.devices[i]], scale) for i in lanes[:MAX_LANES]
    )
    load_rows = _load_rows(loads, side.memory, est)
    used = len({b.device for b in trace.ops} | {b.device for b in trace.copies})
    pruned = pruned_line(prepared)
    parts = [
        f'<section class="side" data-strategy="{escape(prepared.strategy)}">',
        f"<h2>{escape(clip(plan_title(view, prepared), TITLE_CHARS))}</h2>",
        f'<p class="makespan">{escape(makespan_line(est))}</p>',
        f"<p>{escape(clip(rates_line(prepared), 400))}</p>",
        *([f'<p class="note">{escape(clip(pruned, 400))}</p>'] if pruned else []),
        "<h3>Placement graph</h3>",
        *([f'<p class="note">{escape(notes)}</p>'] if notes else []),
        f'<div class="scroll">{graph}</div>',
        "<h3>Estimated schedule</h3>",
        *([f'<p class="note">{used} devices hold ops; the first {MAX_LANES} are drawn, here and below</p>']
          if used > MAX_LANES else []),
        f'<div class="scroll">{timeline_svg(trace, colors, scale)}</div>',
        "<h3>Memory in use over time</h3>",
        f'<p class="note">{MEMORY_NOTE}</p>',
        f'<div class="scroll">{memory}</div>',
        "<h3>Per device</h3>",
        f'<div class="scroll">{_table(LOAD_HEADER, load_rows, "devices")}</div>',
        "<h3>Placement</h3>",
        f'<div class="scroll">{_table(EXPLAIN_HEADER, rows[:MAX_ROWS], "ops sortable")}</div>',
        *([f'<p class="note">{more} more ops not shown; the text plan lists every op</p>']
          if more > 0 else []),
        "</section>",
    ]  # fmt: skip
    return "\n".join(parts)


def _summary_row(side: Side) -> str:
    """STRATEGY, MAKESPAN (EST), OPS, COPIES, FITS (`yes`, or `NO:` and the devices over)."""
    est = side.estimate.estimate
    over = [short_device(m.device) for m in side.memory if fits(m) is False]
    cells = (
        side.prepared.strategy, f"{est.makespan * 1000:.3f} ms", str(len(side.prepared.graph.ops)),
        str(sum(n for n, _ in est.copies_in.values())),
        "yes" if not over else "NO: " + ", ".join(over),
    )  # fmt: skip
    return _row(cells)


def plan_html(view: View, sides: Sequence[Side], missing: str | None = None) -> str:
    """The whole page for one or more placements of one graph on `view`'s machine; `missing`
    says why a placement to compare with is not there."""
    devices = sides[0].trace.devices
    colors = _colors(devices)
    scale = max((s.trace.makespan for s in sides), default=0.0) or 1e-9
    machine, cluster = view.machine, sides[0].prepared.cluster
    where = (
        f"the simulated machine {clip(machine.description, TITLE_CHARS)}"
        if machine.simulated
        else "this machine"
    )
    if cluster is not None:
        where = clip(cluster_line(cluster).removeprefix("Cluster: "), TITLE_CHARS)
    banner = (
        f'<p class="simulated">Every GPU on this page is simulated ({escape(clip(machine.description, TITLE_CHARS))}): '
        "times come from the cost model, not from a card.</p>"
        if machine.simulated else ""
    )  # fmt: skip
    summary = "".join(_summary_row(s) for s in sides)
    return Template(_asset("page.html")).substitute(
        title=escape(f"gpuplace plan on {where}"),
        css=_asset("page.css"),
        js=_asset("page.js"),
        banner=banner,
        legend=_legend(view, devices, colors),
        summary=summary,
        sides="\n".join(_panel(view, s, colors, scale) for s in sides),
        missing=f'<p class="note">Not compared: {escape(clip(missing, 400))}</p>'
        if missing
        else "",
    )
