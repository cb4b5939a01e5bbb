"""`plan --format device-map` and `plan --format tf`: a placement handed back in the form a
framework takes.

- device-map: one JSON document whose `device_map` is in the shape of Hugging Face Accelerate's
  `device_map` (module path -> GPU index, or "cpu"), so `from_pretrained(...,
  device_map=doc["device_map"])` or `accelerate.dispatch_model` takes it: the shortest prefixes
  whose weights (the graph's variables: an ONNX model's initializers) all share a device
  (`placement/devmap.py: grouped`), so that every key names a module or parameter of the
  PyTorch model (a graph without variables: over all its ops). `modules` is the same over every
  op (weights, compute, inputs), and `ops` gives every op's device by its own name.
- tf: Python text, one `with tf.device(...)` block per name scope whose ops all share a device.

Both say which machine the placement is for, and that its GPUs are simulated when they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..devices.model import View
from ..placement.devmap import DOTTED, SCOPED, accelerate_value, grouped, op_paths, short_device
from ..results import Prepared
from .schema import SCHEMA_VERSION


def _placed(prepared: Prepared, sep: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(op name, module path, full device name) of every op as placed, pruned or not, in graph
    order."""
    graph, placement = prepared.placed()
    return [(name, path, placement.decisions[name].device) for name, path in op_paths(graph, sep)]


def _machine(view: View) -> dict[str, Any]:
    m = view.machine
    return {"machine": m.description or "this machine", "simulated": m.simulated}


def device_map_doc(view: View, prepared: Prepared) -> dict[str, Any]:
    """The device-map document (see the module's docstring)."""
    placed = _placed(prepared, DOTTED)
    graph, _ = prepared.placed()
    weights = [p for p, op in zip(placed, graph.ops, strict=True) if op.type == "variable"]
    groups = grouped((path, device) for _, path, device in placed)
    accelerate = grouped((path, device) for _, path, device in weights) if weights else groups
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "device-map",
        **_machine(view),
        "strategy": prepared.strategy,
        "source": prepared.graph.source,
        "device_map": {key: accelerate_value(d) for key, (d, _) in accelerate.items()},
        "modules": {key: accelerate_value(device) for key, (device, _) in groups.items()},
        "ops": {name: accelerate_value(device) for name, _, device in placed},
    }


def tf_text(view: View, prepared: Prepared) -> str:
    """`with tf.device(...)` blocks keyed by name scope, as Python text (see the docstring).
    Every name from the input is written as a JSON string (escaped, on one line), in the code
    and in the comments alike, so no name can end a comment and start a line of code."""
    m = view.machine
    where = (
        f"the simulated machine {_one_line(m.description)} (simulated GPUs)"
        if m.simulated
        else "this machine"
    )
    placed = _placed(prepared, SCOPED)
    names = {name for name, _, _ in placed}
    groups = grouped(((path, device) for _, path, device in placed), SCOPED)
    source = _one_line(prepared.graph.source)
    lines = [
        f"# Placement by gpuplace (strategy {prepared.strategy}) of {source} on {where}.",
        "# One block per name scope whose ops all share a device: build that scope's ops inside it.",
        "import tensorflow as tf",
        "",
        "# name scope (or op outside any) -> device",
        f"DEVICES = {_py_dict({k: short_device(d) for k, (d, _) in groups.items()})}",
        "",
    ]
    last = None
    for scope, (device, count) in groups.items():  # neighbours on one device share a block
        if device != last:
            lines.append(f"with tf.device({json.dumps(short_device(device))}):")
            last = device
        what = f"{count} op{'s' if count != 1 else ''}"
        if count == 1 and scope in names:
            lines.append(f"    pass  # build op {_one_line(scope)} here")
        elif scope:
            lines.append(f"    with tf.name_scope({json.dumps(scope)}):")
            lines.append(f"        pass  # build name scope {_one_line(scope + '/')} here ({what})")
        else:
            lines.append(f"    pass  # build the whole graph here ({what})")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """`text` as it reads, when it is plain; else as a JSON string (newlines and other control
    characters escaped), so that it stays on its line of a comment."""
    return text if text.isprintable() else json.dumps(text)


def _py_dict(items: Mapping[str, str]) -> str:
    """A dict literal, one entry a line (JSON strings are Python strings)."""
    if not items:
        return "{}"
    body = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in items.items())
    return "{\n" + body + "}"
