"""`gpuplace devices`: the rows (shared by table, plain text and JSON) and their renderings."""

from __future__ import annotations

from typing import Any

from ..devices.model import View, VisibleGpu
from ..devices.visible import visible
from ..echo import TEXT_CHARS, show
from ..units import device_memory
from .schema import SCHEMA_VERSION
from .text import NA, columns, fit_table, left_out, na

SIM = " [simulated]"
HEADER = (
    "DEVICE",
    "CUDA",
    "NVML",
    "PRODUCT",
    "UUID",
    "BUS-ID",
    "MEMORY TOTAL",
    "USED",
    "FREE",
    "CC",
    "UTIL",
    "TEMP",
    "POWER",
)


def _mem(n: int | None) -> str:
    return NA if n is None else device_memory(n)


def _power(gpu: VisibleGpu) -> str:
    draw, cap = gpu.gpu.power_draw_watts, gpu.gpu.power_limit_watts
    if draw is None and cap is None:
        return NA
    return f"{na(draw and round(draw), '{}W')} / {na(cap and round(cap), '{}W')}"


KEYS = (
    "name", "device_type", "cuda_index", "nvml_index", "product", "cores", "uuid", "pci_bus_id",
    "memory_total", "memory_used", "memory_free", "compute_capability", "utilization_percent",
    "temperature_celsius", "power_draw_watts", "power_limit_watts", "mig", "available", "error",
    "simulated",
)  # fmt: skip


def _cpu_record(view: View) -> dict[str, Any]:
    host = view.machine.host
    record: dict[str, Any] = dict.fromkeys(KEYS)
    record.update(name="/device:CPU:0", device_type="CPU", product=host.cpu_model,
                  cores=host.cores, memory_total=host.memory_total, available=True,
                  simulated=host.simulated)  # fmt: skip
    return record


def _gpu_record(v: VisibleGpu) -> dict[str, Any]:
    g = v.gpu
    mig = None
    if v.mig is not None:
        mig = {"uuid": v.mig.uuid, "gpu_instance_id": v.mig.gpu_instance_id,
               "compute_instance_id": v.mig.compute_instance_id, "parent_uuid": g.uuid}  # fmt: skip
    return {
        "name": v.name, "device_type": "GPU", "cuda_index": v.cuda_index,
        "nvml_index": g.nvml_index, "product": v.product, "cores": None, "uuid": v.uuid,
        "pci_bus_id": g.pci_bus_id, "memory_total": v.memory_total, "memory_used": v.memory_used,
        "memory_free": v.memory_free, "compute_capability": g.compute_capability,
        "utilization_percent": g.utilization_percent, "temperature_celsius": g.temperature_celsius,
        "power_draw_watts": g.power_draw_watts, "power_limit_watts": g.power_limit_watts,
        "mig": mig, "available": g.available, "error": g.error, "simulated": g.simulated,
    }  # fmt: skip


def device_records(view: View) -> list[dict[str, Any]]:
    """One JSON-ready record per device the process sees: CPU:0, then GPUs in CUDA order."""
    return [_cpu_record(view), *(_gpu_record(v) for v in view.gpus)]


def devices_json(view: View) -> dict[str, Any]:
    """The `gpuplace devices --json` document (schema: gpuplace/schemas/devices.schema.json)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "machine": machine_json(view),
        "devices": device_records(view),
    }


def machine_json(view: View) -> dict[str, Any]:
    """The `machine` object of every JSON document: what it is, its driver, how many GPUs it has
    and the process sees (as TensorFlow names them), in which order, and why any are hidden."""
    m = view.machine
    return {
        "source": m.source,
        "description": m.description,
        "simulated": m.simulated,
        "driver_version": m.driver_version,
        "cuda_version": m.cuda_version,
        "gpu_count": len(m.gpus),
        "visible_gpu_count": len(view.gpus),
        "visible_gpus": [g.name for g in view.gpus],
        "cuda_visible_devices": view.cuda_visible_devices,
        "no_gpu_reason": notice(view),
        "order": _order(view),
        "warnings": list(view.warnings),
    }


def _order(view: View) -> dict[str, str] | None:
    """Which order CUDA numbers the GPUs in (CUDA_DEVICE_ORDER) and how gpuplace knows it."""
    o = view.order
    return None if o is None else {"kind": o.kind, "source": o.source, "detail": o.detail}


def notice(view: View) -> str | None:
    """Why no GPU (or fewer than the machine has) is listed, else None: the CUDA_VISIBLE_DEVICES
    or MIG rule that hides each one, and how to see it."""
    m = view.machine
    if m.no_gpu_reason:
        return f"No GPU listed: {m.no_gpu_reason}."
    fewer = len(view.gpus) < len(m.gpus)
    if not fewer and not view.hidden:
        return None
    parts = list(view.hidden)
    if fewer:
        shown = "none" if not view.gpus else f"{len(view.gpus)}"
        count = f"the {len(m.gpus)} GPU{'s' if len(m.gpus) > 1 else ''} of this machine"
        cvd = view.cuda_visible_devices
        if cvd is None:
            parts.insert(0, f"CUDA shows {shown} of {count}.")
        else:
            unset = " (unset it to see all)" if len(visible(m.gpus, None)) == len(m.gpus) else ""
            parts.insert(
                0, f"CUDA_VISIBLE_DEVICES={show(cvd, TEXT_CHARS)} shows {shown} of {count}{unset}."
            )
    return " ".join(parts)


def title(view: View) -> str:
    m = view.machine
    if m.simulated:
        return f"Simulated machine {m.description} (every device below is simulated)"
    versions = f"driver {m.driver_version or NA}, CUDA {m.cuda_version or NA}"
    return f"This machine (NVML, {versions})" if m.gpus else "This machine"


def device_rows(view: View) -> list[tuple[str, ...]]:
    """Display cells per device, in HEADER order."""
    rows: list[tuple[str, ...]] = []
    for r, v in zip(device_records(view), [None, *view.gpus], strict=True):
        sim = SIM if r["simulated"] else ""
        if v is None:
            memory = NA if r["memory_total"] is None else device_memory(r["memory_total"])
            rows.append(
                (
                    r["name"],
                    "-",
                    "-",
                    f"{r['product']}, {r['cores']} cores{sim}",
                    "-",
                    "-",
                    memory,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                )
            )
            continue
        product = r["product"] if r["available"] else f"unavailable: {r['error']}"
        rows.append(
            (
                r["name"],
                str(r["cuda_index"]),
                str(r["nvml_index"]),
                product + sim,
                r["uuid"],
                r["pci_bus_id"],
                _mem(r["memory_total"]),
                _mem(r["memory_used"]),
                _mem(r["memory_free"]),
                na(r["compute_capability"]),
                na(r["utilization_percent"], "{}%"),
                na(r["temperature_celsius"], "{}C"),
                _power(v),
            )
        )
    return rows


def devices_plain(view: View) -> str:
    """Stable text for pipes and scripts: a title, aligned columns, then notices."""
    lines = [title(view), columns(HEADER, device_rows(view))]
    note = notice(view)
    if note:
        lines.append(note)
    return "\n".join(lines)


# what a terminal narrower than the whole table loses first (`devices_fitted`); DEVICE, CUDA,
# PRODUCT, MEMORY TOTAL and FREE always stay
DROP = ("POWER", "TEMP", "UTIL", "UUID", "USED", "BUS-ID", "CC", "NVML")


def short_uuid(uuid: str) -> str:
    """A UUID as nvitop shows it: its kind and first 8 hex digits (`GPU-1f49aa16`)."""
    kind, _, rest = uuid.partition("-")
    return f"{kind}-{rest[:8]}" if rest and len(rest) > 8 else uuid


def short_bus_id(bus_id: str) -> str:
    """A PCI bus id without its all-zero domain (`00000000:83:00.0` -> `83:00.0`)."""
    domain, sep, rest = bus_id.partition(":")
    return rest if sep and domain.strip("0") == "" and rest else bus_id


def devices_fitted(view: View, width: int, bold: bool = False) -> str:
    """`devices` on a terminal: the plain layout within `width` columns (at least 80): UUIDs and
    bus ids shortened, then the columns of DROP left out in that order until it fits, and one
    line naming what was left out (`--wide` shows everything, as a pipe gets it)."""
    index = {h: i for i, h in enumerate(HEADER)}
    rows = []
    for row in device_rows(view):
        cells = list(row)
        cells[index["UUID"]] = short_uuid(cells[index["UUID"]])
        cells[index["BUS-ID"]] = short_bus_id(cells[index["BUS-ID"]])
        rows.append(cells)
    named = ["MEMORY" if h == "MEMORY TOTAL" else h for h in HEADER]  # its values' width
    table, dropped = fit_table(named, rows, max(width, 80), DROP)
    if bold:  # the header line in bold (ANSI), as the terminal shows it
        first, _, rest = table.partition("\n")
        table = f"\x1b[1m{first}\x1b[0m\n{rest}"
    lines = [title(view), table]
    note = notice(view)
    if note:
        lines.append(note)
    return "\n".join([*lines, *left_out(dropped, max(width, 80))])
