"""What `gpuplace plan` prints: placement with reasons, then per device ops, bytes and copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from ..devices.cluster import task_label
from ..devices.cluster_spec import network_of
from ..devices.model import View
from ..echo import sample
from ..memory.pools import DeviceMemory
from ..placement.cost import DASK_HOP
from ..placement.loads import DeviceLoad, copies_and_loads
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
from .plan_records import placement_fragment
from .records import copy_records, machine_record, placed_ops, rate_records
from .schema import SCHEMA_VERSION
from .text import columns, fit_table, left_out
from .training import (
    TRAINING_DROP,
    TRAINING_HEADER,
    step_record,
    training_record,
    training_rows,
    training_title,
)

if TYPE_CHECKING:  # a plan without --training does not load memory/training.py
    from ..memory.training import TrainingMemory

LOAD_HEADER = (
    "DEVICE", "OPS", "OUTPUT BYTES", "COPIES IN", "COPY BYTES IN", "COPIES OUT", "BUSY (EST)",
    "PEAK (PREDICTED)", "LIMIT", "FITS",
)  # fmt: skip
PEAK = LOAD_HEADER.index("PEAK (PREDICTED)")
# with --training: inference and training side by side, FITS judged by the training step
TRAIN_LOAD_HEADER = (*LOAD_HEADER[:PEAK], "PEAK (INFER)", "PEAK (TRAIN)", *LOAD_HEADER[PEAK + 1 :])
Steps: TypeAlias = "Sequence[TrainingMemory] | None"  # predict_training's: one per device, or None


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


def estimated_ops(prepared: Prepared) -> list[dict[str, str]]:
    """The imported ops gpuplace has no kernel for (`Opaque`): their cost is estimated."""
    return [
        {"op": op.name, "onnx_type": str(op.attrs.get("onnx_type", ""))}
        for op in prepared.graph.ops
        if op.type == "Opaque"
    ]


def estimated_lines(prepared: Prepared) -> list[str]:
    """One line naming the ops whose time is estimated (none: no line)."""
    found = estimated_ops(prepared)
    if not found:
        return []
    named = sample([f"{e['op']} ({e['onnx_type']})" for e in found])
    return [
        f"estimated: {named}: no kernel in gpuplace, so their time is a guess (one unit of work "
        "per output element) and run refuses the model"
    ]


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
    return copies_and_loads(prepared.graph, prepared.placement)


def fits(m: DeviceMemory | None, step: TrainingMemory | None = None) -> bool | None:
    """Whether the predicted peak (the training step's, when given) stays within the device's
    limit (None: no limit, the CPU)."""
    if m is None or m.limit is None:
        return None
    return (m.peak if step is None else step.peak) <= m.limit


def _by_device(steps: Steps) -> dict[str, TrainingMemory]:
    return {} if steps is None else {t.device: t for t in steps}


def _load_rows(
    loads: list[DeviceLoad], memory: Sequence[DeviceMemory], est: PlanEstimate, steps: Steps = None
) -> list[tuple[str, ...]]:
    by_name, trained = {m.device: m for m in memory}, _by_device(steps)
    rows: list[tuple[str, ...]] = []
    for d in loads:
        m, step = by_name.get(d.device), trained.get(d.device)
        peak = "-" if m is None else device_memory(m.peak)
        train = () if steps is None else ("-" if step is None else device_memory(step.peak),)
        limit = "-" if m is None or m.limit is None else device_memory(m.limit)
        fit = fits(m, step)
        fits_cell = "-" if fit is None else ("yes" if fit else "NO")
        out = est.estimate.copies_out.get(d.device, (0, 0))
        busy = _ms(est.estimate.busy.get(d.device, 0.0))
        rows.append((short_device(d.device), str(d.ops), human(d.output_bytes), str(d.copies_in),
                     human(d.copy_bytes_in), f"{out[0]} ({human(out[1])})", busy, peak, *train,
                     limit, fits_cell))  # fmt: skip
    return rows


def _load_header(steps: Steps) -> tuple[str, ...]:
    return LOAD_HEADER if steps is None else TRAIN_LOAD_HEADER


def _training_block(prepared: Prepared, steps: Steps, width: int | None = None) -> list[str]:
    """With --training: the step's parts per device, under a title (fitted to `width`)."""
    if steps is None or prepared.training is None:
        return []
    rows = training_rows(steps)
    if width is None:
        return ["", training_title(prepared.training), columns(TRAINING_HEADER, rows)]
    text, dropped = fit_table(TRAINING_HEADER, rows, width, TRAINING_DROP)
    return ["", training_title(prepared.training), text, *left_out(dropped, width)]


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
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate,
    steps: Steps = None,
) -> str:  # fmt: skip
    copies, loads = _loads(prepared)
    pruned = pruned_line(prepared)
    return "\n".join([
        *_head(view, prepared),
        *([pruned] if pruned else []),
        columns(EXPLAIN_HEADER, explain_rows(prepared.graph, prepared.placement, copies)),
        "",
        columns(_load_header(steps), _load_rows(loads, memory, est, steps)),
        *_training_block(prepared, steps),
        *_tail(prepared, copies, est),
        rates_line(prepared),
        makespan_line(est),
        *estimated_lines(prepared),
    ])  # fmt: skip


# what a narrow terminal loses first from the per-device table (`plan_fitted`)
LOAD_DROP = ("COPY BYTES IN", "COPIES IN", "OUTPUT BYTES", "COPIES OUT", "OPS")


def plan_fitted(
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate, width: int,
    steps: Steps = None,
) -> str:  # fmt: skip
    """`plan` on a terminal: `plan_plain`'s tables within `width` columns (at least 80):
    reasons and copies wrapped, then the columns of EXPLAIN_DROP and LOAD_DROP left out."""
    width = max(width, 80)
    copies, loads = _loads(prepared)
    pruned = pruned_line(prepared)
    rows = _load_rows(loads, memory, est, steps)
    loads_text, dropped = fit_table(_load_header(steps), rows, width, LOAD_DROP)
    return "\n".join([
        *_head(view, prepared),
        *([pruned] if pruned else []),
        explain_fitted(prepared.graph, prepared.placement, copies, width),
        "",
        loads_text,
        *left_out(dropped, width),
        *_training_block(prepared, steps, width),
        *_tail(prepared, copies, est),
        rates_line(prepared),
        makespan_line(est),
        *estimated_lines(prepared),
    ])  # fmt: skip


def plan_json(
    view: View, prepared: Prepared, memory: Sequence[DeviceMemory], est: PlanEstimate,
    steps: Steps = None,
) -> dict[str, Any]:  # fmt: skip
    """`plan --json`; with --training each device's `peak_predicted` is the training step's
    (`peak_inference` beside it, `training` its parts) and `fits` is judged by it."""
    copies, loads = _loads(prepared)
    by_name, trained = {m.device: m for m in memory}, _by_device(steps)
    return {
        "schema_version": SCHEMA_VERSION,
        "machine": machine_record(view),
        "strategy": prepared.strategy,
        "rates": rate_records(prepared),
        "placement": placement_fragment(*placed_ops(prepared), prepared.pruned),
        "pruned": list(prepared.pruned),
        "policy": prepared.policy.name(),
        "training": training_record(prepared.training),
        "estimate": {"makespan_seconds": est.estimate.makespan,
                     "critical_path_seconds": est.bounds.critical_path,
                     "work_bound_seconds": est.bounds.work,
                     "stage_bound_seconds": est.bounds.stages,
                     "makespan_over_bound": makespan_ratio(est)},
        "copies": copy_records(copies),
        "estimated": estimated_ops(prepared),
        "devices": [_device_record(d, by_name.get(d.device), trained.get(d.device), est)
                    for d in loads],
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


def _device_record(d: DeviceLoad, m: DeviceMemory | None, step: TrainingMemory | None,
                   est: PlanEstimate) -> dict[str, Any]:  # fmt: skip
    inference = None if m is None else m.peak
    record = {
        "device": d.device, "ops": d.ops, "output_bytes": d.output_bytes,
        "copies_in": d.copies_in, "copy_bytes_in": d.copy_bytes_in,
        "peak_predicted": inference if step is None else step.peak,
        "limit": None if m is None else m.limit,
        "fits": fits(m, step),
        "busy_seconds": est.estimate.busy.get(d.device, 0.0),
        "copies_out": est.estimate.copies_out.get(d.device, (0, 0))[0],
        "copy_bytes_out": est.estimate.copies_out.get(d.device, (0, 0))[1],
    }  # fmt: skip
    if step is not None:
        record["peak_inference"] = inference
        record["training"] = step_record(step)
    return record
