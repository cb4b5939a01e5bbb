"""`--explain`'s view of a placement, shared by `run` and `plan`: one row per op with its device,
the reason, its output and the copies it receives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..devices.cluster import short_name
from ..graph.model import Graph
from ..placement.model import Placement
from ..units import human
from .text import columns, fit_table, left_out

if TYPE_CHECKING:
    from ..execute.executor import CopyRecord


def short_device(full: str) -> str:
    """`/job:localhost/replica:0/task:0/device:GPU:0` -> `GPU:0` for tables; a device of a
    cluster's task keeps its task: `task:1/GPU:0`."""
    return short_name(full)


def _tasks_differ(src: str, dst: str) -> bool:
    """Whether a copy crosses tasks (cluster names only; a local run's never do)."""
    if src.startswith("/job:localhost/") or not src.startswith("/job:"):
        return False
    return src.rsplit("/device:", 1)[0] != dst.rsplit("/device:", 1)[0]


def copies_in(copies: Sequence[CopyRecord]) -> dict[str, list[str]]:
    """Per consumer op, the copies it needed, as `tensor CPU:0->GPU:0 96 B` (between two tasks
    of a cluster `tensor task:1/GPU:0->task:0/CPU:0 16 B (network)`)."""
    out: dict[str, list[str]] = {}
    for c in copies:
        text = f"{c.tensor} {short_device(c.src)}->{short_device(c.dst)} {human(c.nbytes)}"
        if _tasks_differ(c.src, c.dst):
            text += " (network)"
        out.setdefault(c.op, []).append(text)
    return out


EXPLAIN_HEADER = ("OP", "TYPE", "DEVICE", "REASON", "SHAPE", "DTYPE", "BYTES", "COPIES IN")


def explain_rows(
    graph: Graph, placement: Placement, copies: Sequence[CopyRecord]
) -> list[tuple[str, ...]]:
    incoming = copies_in(copies)
    decisions = placement.decisions
    cells: dict[tuple[Any, ...], tuple[str, str, str]] = {}  # outputs -> SHAPE, DTYPE, BYTES
    rows: list[tuple[str, ...]] = []
    for op in graph.ops:
        d = decisions[op.name]
        key = tuple((s.shape, s.dtype) for s in op.outputs)
        out = cells.get(key)
        if out is None:
            out = cells[key] = (
                ", ".join(f"[{','.join(map(str, s.shape))}]" for s in op.outputs) or "-",
                ", ".join(s.dtype for s in op.outputs) or "-",
                human(sum(s.nbytes for s in op.outputs)),
            )
        copied = incoming.get(op.name)
        rows.append((op.name, op.type, short_device(d.device), d.reason, *out,
                     "; ".join(copied) if copied else "-"))  # fmt: skip
    return rows


def explain_plain(graph: Graph, placement: Placement, copies: Sequence[CopyRecord]) -> str:
    return columns(EXPLAIN_HEADER, explain_rows(graph, placement, copies))


# what a narrow terminal loses first (`explain_fitted`); REASON and COPIES IN wrap instead
EXPLAIN_DROP = ("DTYPE", "BYTES", "SHAPE", "TYPE")
EXPLAIN_WRAP = ("REASON", "COPIES IN")


def explain_fitted(
    graph: Graph, placement: Placement, copies: Sequence[CopyRecord], width: int
) -> str:
    """`--explain` on a terminal: the table within `width` columns (at least 80), reasons and
    copies wrapped, then DTYPE, BYTES, SHAPE and TYPE left out if it still does not fit."""
    width = max(width, 80)
    rows = explain_rows(graph, placement, copies)
    text, dropped = fit_table(EXPLAIN_HEADER, rows, width, EXPLAIN_DROP, EXPLAIN_WRAP)
    return "\n".join([text, *left_out(dropped, width)])
