"""What `gpuplace plan` prints: placement with reasons, then per device ops, bytes and copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..devices.model import View
from ..memory.devices import DeviceMemory
from ..session import DeviceLoad, Prepared, device_loads, planned_copies
from ..units import human
from .run import (
    EXPLAIN_HEADER,
    copy_records,
    explain_rows,
    machine_record,
    placement_records,
    short_device,
)
from .text import columns

LOAD_HEADER = (
    "DEVICE", "OPS", "OUTPUT BYTES", "COPIES IN", "COPY BYTES IN", "PEAK (PREDICTED)", "LIMIT", "FITS",
)  # fmt: skip


def _loads(prepared: Prepared) -> tuple[list[Any], list[DeviceLoad]]:
    copies = planned_copies(prepared.graph, prepared.placement)
    return copies, device_loads(prepared.graph, prepared.placement, copies)


def _load_rows(loads: list[DeviceLoad], memory: Sequence[DeviceMemory]) -> list[tuple[str, ...]]:
    by_name = {m.device: m for m in memory}
    rows: list[tuple[str, ...]] = []
    for d in loads:
        m = by_name.get(d.device)
        peak = "-" if m is None else human(m.peak)
        limit = "-" if m is None or m.limit is None else human(m.limit)
        fits = "-" if m is None or m.limit is None else ("yes" if m.peak <= m.limit else "NO")
        rows.append((short_device(d.device), str(d.ops), human(d.output_bytes), str(d.copies_in),
                     human(d.copy_bytes_in), peak, limit, fits))  # fmt: skip
    return rows


def title(view: View) -> str:
    m = view.machine
    return (
        f"Plan on the simulated machine {m.description}" if m.simulated else "Plan on this machine"
    )


def plan_plain(view: View, prepared: Prepared, memory: Sequence[DeviceMemory]) -> str:
    copies, loads = _loads(prepared)
    return "\n".join([
        title(view),
        columns(EXPLAIN_HEADER, explain_rows(prepared.graph, prepared.placement, copies)),
        "",
        columns(LOAD_HEADER, _load_rows(loads, memory)),
    ])  # fmt: skip


def plan_renderables(view: View, prepared: Prepared, memory: Sequence[DeviceMemory]) -> list[Any]:
    from rich.table import Table

    copies, loads = _loads(prepared)
    ops = Table(title=title(view), title_justify="left")
    for h in EXPLAIN_HEADER:
        ops.add_column(h, overflow="fold")
    for row in explain_rows(prepared.graph, prepared.placement, copies):
        ops.add_row(*row)
    per_device = Table(title="Per device", title_justify="left")
    for h in LOAD_HEADER:
        per_device.add_column(h)
    for row in _load_rows(loads, memory):
        per_device.add_row(*row)
    return [ops, per_device]


def plan_json(view: View, prepared: Prepared, memory: Sequence[DeviceMemory]) -> dict[str, Any]:
    copies, loads = _loads(prepared)
    by_name = {m.device: m for m in memory}
    return {
        "machine": machine_record(view),
        "placement": placement_records(prepared.graph, prepared.placement),
        "policy": prepared.policy.name(),
        "copies": copy_records(copies),
        "devices": [
            {"device": d.device, "ops": d.ops, "output_bytes": d.output_bytes,
             "copies_in": d.copies_in, "copy_bytes_in": d.copy_bytes_in,
             "peak_predicted": by_name[d.device].peak if d.device in by_name else None,
             "limit": by_name[d.device].limit if d.device in by_name else None}
            for d in loads
        ],
    }  # fmt: skip
