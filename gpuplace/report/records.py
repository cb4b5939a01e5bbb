"""JSON records shared by `run`, `plan` and `mem --json`: the machine, placement, copies,
memory and rates as plain dicts, and `json_text`, which writes every document gpuplace prints."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..devices.model import LogicalGpu, View
from ..graph.model import Graph
from ..placement.model import Placement

if TYPE_CHECKING:
    from ..execute.executor import CopyRecord
    from ..results import Prepared


def machine_record(view: View) -> dict[str, Any]:
    """The one `machine` object of every JSON document (`devices --json`'s)."""
    from .devices import machine_json

    return machine_json(view)


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


def placed_ops(prepared: Prepared) -> tuple[Graph, Placement]:
    """Every op as placed (`Prepared.placed`), typed for the records."""
    placed: tuple[Graph, Placement] = prepared.placed()
    return placed
