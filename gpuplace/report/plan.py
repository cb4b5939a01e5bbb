"""What `gpuplace plan` prints: placement with reasons, then per device ops, bytes and copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..devices.cluster import task_label
from ..devices.cluster_spec import network_of
from ..devices.model import View
from ..memory.pools import DeviceMemory
from ..placement.cost import DASK_HOP
from ..placement.loads import DeviceLoad, device_loads, planned_copies
from ..results import PlanEstimate, Prepared
from ..units import device_memory, human
from .cluster import (
    TASK_HEADER,
    cluster_line,
    cluster_record,
    network_line,
    network_record,
    task_records,
    task_rows,
)
from .explain import EXPLAIN_HEADER, explain_fitted, explain_rows, short_device
from .lines import pruned_line
from .lines import title as run_title
from .records import copy_records, machine_record, placed_ops, placement_records, rate_records
from .schema import SCHEMA_VERSION
from .text import columns, fit_table, left_out

LOAD_HEADER = (
    "DEVICE", "OPS", "OUTPUT BYTES", "COPIES IN", "COPY BYTES IN", "COPIES OUT", "BUSY (EST)",
    "PEAK (PREDICTED)", "LIMIT", "FITS",
)  # fmt: skip


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def makespan_ratio(est: PlanEstimate) -> float:
    """The estimated makespan over the tightest lower bound (1.0: no placement does better)."""
    return float(est.estimate.makespan / est.bound) if est.bound > 0 else 1.0


def makespan_line(est: PlanEstimate) -> str:
    """Estimated makespan beside the lower bounds, and its ratio to the tightest."""
    ratio = makespan_ratio(est)
    b = est.bounds
    return (
        f"Estimated makespan {_ms(est.estimate.makespan)}; lower bounds: critical path "
        f"{_ms(b.critical_path)}, work / GPUs {_ms(b.work)}, stage by stage "
        f"{_ms(b.stages) if b.stages else '- (no op every path crosses)'}; "
        f"makespan / bound {ratio:.2f}"
    )


def rates_line(prepared: Prepared) -> str:
    """Where each GPU's rates in the cost model came from: measured, a preset, or the default."""
    from ..placement.cost import rate_sources

    if prepared.cluster is not None:
        parts = [
            f"{task_label(name)}/{gpus} {source}"
            for name, logical in prepared.task_logical.items()
            for gpus, source in rate_sources(logical, prepared.rates.by_uuid)
        ]
        return "rates: " + ("; ".join(parts) if parts else "no GPU; CPU:0 at the default rates")
    sources = rate_sources(prepared.logical, prepared.rates.by_uuid)
    if not sources:
        return "rates: no GPU; CPU:0 at the default CPU rates"
    return "rates: " + "; ".join(f"{gpus} {source}" for gpus, source in sources)


def _loads(prepared: Prepared) -> tuple[list[Any], list[DeviceLoad]]:
    copies = planned_copies(prepared.graph, prepared.placement)
    return copies, device_loads(prepared.graph, prepared.placement, copies)


def fits(m: DeviceMemory | None) -> bool | None:
    """Whether the predicted peak stays within the device's limit (None: no limit, the CPU)."""
    return None if m is None or m.limit is None else m.peak <= m.limit


def _load_rows(
    loads: list[DeviceLoad], memory: Sequence[DeviceMemory], est: PlanEstimate
) -> list[tuple[str, ...]]:
    by_name = {m.device: m for m in memory}
    rows: list[tuple[str, ...]] = []
    for d in loads:
        m = by_name.get(d.device)
        peak = "-" if m is None else device_memory(m.peak)
        limit = "-" if m is None or m.limit is None else device_memory(m.limit)
        fit = fits(m)
        fits_cell = "-" if fit is None else ("yes" if fit else "NO")
        out = est.estimate.copies_out.get(d.device, (0, 0))
        busy = _ms(est.estimate.busy.get(d.device, 0.0))
        rows.append((short_device(d.device), str(d.ops), human(d.output_bytes), str(d.copies_in),
                     human(d.copy_bytes_in), f"{out[0]} ({human(out[1])})", busy, peak, limit,
                     fits_cell))  # fmt: skip
    return rows


def title(view: View, strategy: str = "tensorflow") -> str:
    return run_title(view, strategy, "Plan")


def plan_title(view: View, prepared: Prepared) -> str:
    """`Plan on the simulated machine 4xK520 (strategy tensorflow)`, or across hosts `Plan on a
    simulated cluster (strategy tensorflow)`."""
    return _head(view, prepared)[0]


def _head(view: View, prepared: Prepared) -> list[str]:
    """The title; across hosts, `Plan on a simulated cluster ...` and the `Cluster:` line."""
    cluster = prepared.cluster
    if cluster is None:
        return [title(view, prepared.strategy)]
    where = "a simulated cluster" if cluster.simulated else f"the cluster at {cluster.scheduler}"
    return [f"Plan on {where} (strategy {prepared.strategy})", cluster_line(cluster)]


def _tail(prepared: Prepared, copies: Sequence[Any], est: PlanEstimate) -> list[str]:
    """Across hosts: NET IN / NET OUT per task and the network line, before the rates."""
    cluster = prepared.cluster
    if cluster is None:
        return []
    rows = task_rows(cluster, copies, prepared.placement.devices)
    return ["", columns(TASK_HEADER, rows), network_line(network_of(cluster), DASK_HOP)]


def plan_plain(
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate
) -> str:
    copies, loads = _loads(prepared)
    pruned = pruned_line(prepared)
    return "\n".join([
        *_head(view, prepared),
        *([pruned] if pruned else []),
        columns(EXPLAIN_HEADER, explain_rows(prepared.graph, prepared.placement, copies)),
        "",
        columns(LOAD_HEADER, _load_rows(loads, memory, est)),
        *_tail(prepared, copies, est),
        rates_line(prepared),
        makespan_line(est),
    ])  # fmt: skip


# what a narrow terminal loses first from the per-device table (`plan_fitted`)
LOAD_DROP = ("COPY BYTES IN", "COPIES IN", "OUTPUT BYTES", "COPIES OUT", "OPS")


def plan_fitted(
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate, width: int
) -> str:
    """`plan` on a terminal: `plan_plain`'s tables within `width` columns (at least 80):
    reasons and copies wrapped, then the columns of EXPLAIN_DROP and LOAD_DROP left out."""
    width = max(width, 80)
    copies, loads = _loads(prepared)
    pruned = pruned_line(prepared)
    loads_text, dropped = fit_table(LOAD_HEADER, _load_rows(loads, memory, est), width, LOAD_DROP)
    return "\n".join([
        *_head(view, prepared),
        *([pruned] if pruned else []),
        explain_fitted(prepared.graph, prepared.placement, copies, width),
        "",
        loads_text,
        *left_out(dropped, width),
        *_tail(prepared, copies, est),
        rates_line(prepared),
        makespan_line(est),
    ])  # fmt: skip


def plan_json(
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate
) -> dict[str, Any]:
    copies, loads = _loads(prepared)
    by_name = {m.device: m for m in memory}
    return {
        "schema_version": SCHEMA_VERSION,
        "machine": machine_record(view),
        "strategy": prepared.strategy,
        "rates": rate_records(prepared),
        "placement": placement_records(*placed_ops(prepared), prepared.pruned),
        "pruned": list(prepared.pruned),
        "policy": prepared.policy.name(),
        "estimate": {"makespan_seconds": est.estimate.makespan,
                     "critical_path_seconds": est.bounds.critical_path,
                     "work_bound_seconds": est.bounds.work,
                     "stage_bound_seconds": est.bounds.stages,
                     "makespan_over_bound": makespan_ratio(est)},
        "copies": copy_records(copies),
        "devices": [
            {"device": d.device, "ops": d.ops, "output_bytes": d.output_bytes,
             "copies_in": d.copies_in, "copy_bytes_in": d.copy_bytes_in,
             "peak_predicted": by_name[d.device].peak if d.device in by_name else None,
             "limit": by_name[d.device].limit if d.device in by_name else None,
             "fits": fits(by_name.get(d.device)),
             "busy_seconds": est.estimate.busy.get(d.device, 0.0),
             "copies_out": est.estimate.copies_out.get(d.device, (0, 0))[0],
             "copy_bytes_out": est.estimate.copies_out.get(d.device, (0, 0))[1]}
            for d in loads
        ],
        **_cluster_json(prepared, copies),
    }  # fmt: skip


def _cluster_json(prepared: Prepared, copies: Sequence[Any]) -> dict[str, Any]:
    """Across hosts: the cluster, the network and per task what crosses it; {} on one host."""
    cluster = prepared.cluster
    if cluster is None:
        return {}
    return {
        "cluster": cluster_record(cluster),
        "network": network_record(network_of(cluster), DASK_HOP),
        "tasks": task_records(cluster, copies),
    }
