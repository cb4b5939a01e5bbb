"""What `gpuplace run` and `gpuplace plan` print: TensorFlow's placement log, the explain table,
the results as numpy prints them, and the JSON documents. Pure: strings and dicts, no printing."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..devices.model import LogicalGpu, View
from ..graph.model import Graph
from ..placement.model import Placement
from ..units import human
from .text import columns

if TYPE_CHECKING:
    from ..execute.executor import CopyRecord
    from ..results import Outcome, Prepared

SIM = " [simulated]"


def tf_bus_id(bus_id: str) -> str:
    """TensorFlow prints a 4-digit PCI domain: NVML's 00000000:05:00.0 is 0000:05:00.0."""
    domain, _, rest = bus_id.partition(":")
    return (
        f"{int(domain, 16):04x}:{rest}"
        if rest and domain.strip("0123456789abcdefABCDEF") == ""
        else bus_id
    )


def title(view: View, strategy: str = "tensorflow", verb: str = "Plan") -> str:
    """`Plan on the simulated machine 4xK520 (strategy tensorflow)`, or `Run on this machine ...`."""
    m = view.machine
    where = f"the simulated machine {m.description}" if m.simulated else "this machine"
    return f"{verb} on {where} (strategy {strategy})"


def device_mapping(logical: Sequence[LogicalGpu]) -> str:
    """TensorFlow's `Device mapping:` block (direct_session.cc), one line per (logical) GPU;
    `device:` is the CUDA ordinal of the card, which logical GPUs share."""
    if not logical:
        return "Device mapping: no known devices."
    lines = ["Device mapping:"]
    for lg in logical:
        g = lg.gpu
        cc = f", compute capability: {g.gpu.compute_capability}" if g.gpu.compute_capability else ""
        lines.append(
            f"/job:localhost/replica:0/task:0/device:GPU:{lg.index} -> device: {g.cuda_index}, "
            f"name: {g.product}, pci bus id: {tf_bus_id(g.gpu.pci_bus_id)}{cc}"
            + (SIM if g.gpu.simulated else "")
        )
    return "\n".join(lines)


def placement_log(graph: Graph, placement: Placement) -> str:
    """One `name: /job:localhost/replica:0/task:0/device:GPU:0` line per op, in graph order."""
    return "\n".join(f"{op.name}: {placement.decisions[op.name].device}" for op in graph.ops)


def results_text(values: Mapping[str, np.ndarray]) -> str:
    """Each fetch under its name, the value as numpy prints it (`[[22. 28.]\\n [49. 64.]]`)."""
    return "\n".join(f"{name}:\n{value}" for name, value in values.items())


def short_device(full: str) -> str:
    """`/job:localhost/replica:0/task:0/device:GPU:0` -> `GPU:0` for tables."""
    return full.rsplit("device:", 1)[-1]


def copies_in(copies: Sequence[CopyRecord]) -> dict[str, list[str]]:
    """Per consumer op, the copies it needed, as `tensor CPU:0->GPU:0 96 B`."""
    out: dict[str, list[str]] = {}
    for c in copies:
        text = f"{c.tensor} {short_device(c.src)}->{short_device(c.dst)} {human(c.nbytes)}"
        out.setdefault(c.op, []).append(text)
    return out


EXPLAIN_HEADER = ("OP", "TYPE", "DEVICE", "REASON", "SHAPE", "DTYPE", "BYTES", "COPIES IN")


def explain_rows(
    graph: Graph, placement: Placement, copies: Sequence[CopyRecord]
) -> list[tuple[str, ...]]:
    incoming = copies_in(copies)
    rows: list[tuple[str, ...]] = []
    for op in graph.ops:
        d = placement.decisions[op.name]
        shape = ", ".join(f"[{','.join(map(str, s.shape))}]" for s in op.outputs) or "-"
        dtype = ", ".join(s.dtype for s in op.outputs) or "-"
        nbytes = sum(s.nbytes for s in op.outputs)
        rows.append(
            (op.name, op.type, short_device(d.device), d.reason, shape, dtype, human(nbytes),
             "; ".join(incoming.get(op.name, [])) or "-")
        )  # fmt: skip
    return rows


def explain_plain(graph: Graph, placement: Placement, copies: Sequence[CopyRecord]) -> str:
    return columns(EXPLAIN_HEADER, explain_rows(graph, placement, copies))


def explain_table(graph: Graph, placement: Placement, copies: Sequence[CopyRecord]) -> Any:
    from rich.table import Table

    table = Table(title="Placement", title_justify="left")
    for h in EXPLAIN_HEADER:
        table.add_column(h, overflow="fold")
    for row in explain_rows(graph, placement, copies):
        table.add_row(*row)
    return table


def placement_records(graph: Graph, placement: Placement,
                      pruned: Sequence[str] = ()) -> list[dict[str, Any]]:  # fmt: skip
    """Each op as placed; `runs` is False for the ops the fetches do not need (`pruned`)."""
    skipped = set(pruned)
    return [
        {
            "op": op.name, "type": op.type, "requested_device": op.device or None,
            "device": placement.decisions[op.name].device, "kind": placement.decisions[op.name].kind,
            "reason": placement.decisions[op.name].reason, "runs": op.name not in skipped,
            "outputs": [{"shape": list(s.shape), "dtype": s.dtype, "bytes": s.nbytes} for s in op.outputs],
        }
        for op in graph.ops
    ]  # fmt: skip


def copy_records(copies: Sequence[CopyRecord]) -> list[dict[str, Any]]:
    return [
        {"op": c.op, "tensor": c.tensor, "src": c.src, "dst": c.dst, "bytes": c.nbytes,
         **({"seconds": c.seconds} if hasattr(c, "seconds") else {})}
        for c in copies
    ]  # fmt: skip


def device_mapping_records(logical: Sequence[LogicalGpu]) -> list[dict[str, Any]]:
    """The `Device mapping:` block as data: each (logical) GPU:i and the card it runs on."""
    return [
        {"device": f"/job:localhost/replica:0/task:0/device:GPU:{lg.index}",
         "cuda_index": lg.gpu.cuda_index, "product": lg.gpu.product,
         "pci_bus_id": lg.gpu.gpu.pci_bus_id, "compute_capability": lg.gpu.gpu.compute_capability,
         "simulated": lg.gpu.gpu.simulated}
        for lg in logical
    ]  # fmt: skip


def machine_record(view: View) -> dict[str, Any]:
    m = view.machine
    return {"source": m.source, "description": m.description, "simulated": m.simulated,
            "visible_gpus": [g.name for g in view.gpus]}  # fmt: skip


def memory_records(memory: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"device": m.device, "reserved": m.reserved, "peak": m.peak, "limit": m.limit}
        for m in memory
    ]


def rate_records(prepared: Prepared) -> list[dict[str, str]]:
    """Where each GPU's rates in the cost model come from (`plan`'s `rates:` line), as data."""
    from ..placement.cost import rate_sources

    sources = rate_sources(prepared.logical, prepared.rates.by_uuid)
    return [{"gpus": gpus, "source": source} for gpus, source in sources]


def placed_ops(prepared: Prepared) -> tuple[Graph, Placement]:
    """Every op as placed (`Prepared.placed`), typed for the records."""
    placed: tuple[Graph, Placement] = prepared.placed()
    return placed


def run_json(view: View, prepared: Prepared, outcome: Outcome) -> dict[str, Any]:
    """`gpuplace run --json`: the device mapping, placement with reasons (what --log-placement and
    --explain print), results (shape, dtype, value), copies, memory, the strategy and the rates'
    sources, and `pruned`: the ops the fetches do not need, which did not run."""
    result = outcome.result
    return {
        "machine": machine_record(view),
        "strategy": prepared.strategy,
        "rates": rate_records(prepared),
        "device_mapping": device_mapping_records(prepared.logical),
        "placement": placement_records(*placed_ops(prepared), prepared.pruned),
        "pruned": list(prepared.pruned),
        "results": {
            name: {"shape": list(v.shape), "dtype": str(v.dtype), "value": json_value(v)}
            for name, v in result.values.items()
        },
        "copies": copy_records(result.copies),
        "memory_peak": dict(result.peak_bytes),
        "memory": memory_records(outcome.memory),
        "policy": prepared.policy.name(),
        "printed": list(result.printed),
    }


NON_FINITE = {"nan": "nan", "inf": "inf", "-inf": "-inf"}


def json_value(value: np.ndarray) -> Any:
    """An array as JSON-ready lists; nan, inf and -inf (which JSON has no numbers for) become
    the strings "nan", "inf" and "-inf"."""
    if value.dtype.kind not in "fc" or bool(np.isfinite(value).all()):
        return value.tolist()
    out = value.astype(object)
    out[np.isnan(value)] = "nan"
    out[np.isposinf(value)] = "inf"
    out[np.isneginf(value)] = "-inf"
    return out.tolist()


def finite_json(doc: Any) -> Any:
    """`doc` with every non-finite float (nan, inf, -inf) as the string "nan", "inf", "-inf"."""
    if isinstance(doc, float | np.floating):
        value = float(doc)
        if math.isfinite(value):
            return doc
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(doc, dict):
        return {k: finite_json(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite_json(v) for v in doc]
    return doc


def json_text(doc: Any) -> str:
    """Standard JSON (RFC 8259: no NaN or Infinity) for every document gpuplace prints: values
    JSON has no number for are written as strings ("nan", "inf", "-inf"); any left raises."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        return json.dumps(finite_json(doc), indent=2, allow_nan=False)


LISTED = 8  # names shown in the `not run` line before `and N more`


def listed(names: Sequence[str]) -> str:
    """`a, b, c`, or the first LISTED names and `and N more`."""
    text = ", ".join(names[:LISTED])
    return text + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def pruned_line(prepared: Prepared) -> str | None:
    """`fetch [b] needs 2 of 6 ops; not run (as TensorFlow's session.run): p, q, big, bigr`, or
    None when every op runs."""
    pruned = prepared.pruned
    if not pruned:
        return None
    fetch = listed([*(str(ref) for ref in prepared.graph.fetch), *prepared.graph.targets])
    kept = len(prepared.graph.ops)
    return (
        f"fetch [{fetch}] needs {kept} of {kept + len(pruned)} ops; not run (as TensorFlow's "
        f"session.run): {listed(pruned)}"
    )


def no_gpu_warning(view: View) -> str:
    """The warning for a graph run without a GPU: why none is visible, and what would show some
    (CUDA_VISIBLE_DEVICES hiding them, a simulated machine without any, or no driver here)."""
    from .devices import notice

    note = notice(view)
    if note:
        reason = note.removeprefix("No GPU listed: ").split(". ")[0].rstrip(".")
    elif view.machine.simulated:
        reason = f"the simulated machine {view.machine.description} has none"
    else:
        reason = "none found"
    if view.machine.gpus and view.cuda_visible_devices is not None:  # the variable hides them
        reason = reason.replace(" (unset it to see all)", "")
        hint = "unset CUDA_VISIBLE_DEVICES to see them"
    elif view.machine.gpus:  # MIG-enabled GPUs without instances: `gpuplace devices` says more
        hint = "gpuplace devices says why"
    elif view.machine.simulated:
        hint = "give --machine a machine with GPUs (e.g. --machine 4xK520)"
    else:
        hint = "--machine 4xK520 simulates GPUs"
    return f"no GPU visible ({reason}): every op runs on CPU:0; {hint}"
