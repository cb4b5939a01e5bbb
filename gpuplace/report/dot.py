"""`gpuplace plan --format dot`: the placement as a Graphviz graph (render with `dot -Tsvg`).

Ops are boxes filled with their device's color, grouped in one cluster per device; edges within a
device are thin, edges that cross devices (the copies a run makes) are bold and labelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph.model import Graph
from ..placement.model import Placement
from ..units import human
from .explain import short_device

PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")
CPU_COLOR = "#d9d9d9"


def _quote(text: str) -> str:
    """A DOT string: quotes and backslashes escaped, newlines as DOT's `\n` line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _colors(devices: Sequence[str]) -> dict[str, str]:
    gpus = [d for d in devices if "device:GPU" in d]
    colors = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(sorted(gpus, key=_index))}
    colors.update({d: CPU_COLOR for d in devices if d not in colors})
    return colors


def _index(device: str) -> int:
    return int(device.rsplit(":", 1)[-1])


def to_dot(graph: Graph, placement: Placement, title: str) -> str:
    """The whole digraph, one cluster per device that holds ops."""
    colors = _colors(placement.devices)
    lines = [
        "digraph gpuplace {",
        f"  label={_quote(title)}; labelloc=t; rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    by_device: dict[str, list[str]] = {}
    for op in graph.ops:
        by_device.setdefault(placement.decisions[op.name].device, []).append(op.name)
    types = {op.name: op.type for op in graph.ops}
    for n, device in enumerate(d for d in placement.devices if d in by_device):
        lines.append(f"  subgraph cluster_{n} {{")
        lines.append(f"    label={_quote(short_device(device))}; color={_quote(colors[device])};")
        for name in by_device[device]:
            label = f"{name}\n{types[name]}"
            lines.append(
                f"    {_quote(name)} [label={_quote(label)}, fillcolor={_quote(colors[device])}];"
            )
        lines.append("  }")
    by_name = graph.by_name()
    for op in graph.ops:
        dst = placement.decisions[op.name].device
        for ref in op.inputs:
            src = placement.decisions[ref.op].device
            edge = f"  {_quote(ref.op)} -> {_quote(op.name)}"
            if src != dst:
                nbytes = by_name[ref.op].outputs[ref.index].nbytes
                edge += f" [style=bold, penwidth=3, label={_quote('copy ' + human(nbytes))}]"
            lines.append(edge + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"
