"""The placement graph as inline SVG: ops as boxes filled with their device's color, laid out
left to right by depth (an op sits one column right of its deepest input), edges that cross
devices (the copies a run makes) bold.

Bounded: up to MAX_NODES ops are drawn one box each; a bigger graph is drawn by name scope (the
first component of the op names: `tower_0/*`) per device, one box per group with its op count,
and when even the groups are more than MAX_NODES the largest are drawn and the drawing says how
many it left out. Linear in the ops and edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape

from ...echo import clip
from ...graph.model import Graph
from ...placement.model import Placement
from ..explain import short_device

MAX_NODES = 150
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 30, 40, 10, 8
LABEL_CHARS = 22  # characters of a name inside a box; the tooltip has up to TITLE_CHARS
TITLE_CHARS = 200


@dataclass
class _Node:
    key: str  # op name, or `scope/*` of a group
    device: str
    ops: int = 0
    depth: int = 0
    edges: set[str] = field(default_factory=set)  # keys of the nodes it reads from


def _group(name: str) -> str:
    scope, slash, _ = name.partition("/")
    return f"{scope}/*" if slash else name


def _depths(graph: Graph) -> dict[str, int]:
    """Each op's column: one right of its deepest input; an op without inputs (a variable, a
    constant) sits just left of its first reader rather than in one tall first column."""
    depth: dict[str, int] = {}
    first_reader: dict[str, int] = {}
    for op in graph.ops:  # in execution order: inputs come first
        d = depth[op.name] = 1 + max((depth[r.op] for r in op.inputs), default=-1)
        for r in op.inputs:
            first_reader[r.op] = min(first_reader.get(r.op, d), d)
    for op in graph.ops:
        if not op.inputs and op.name in first_reader:
            depth[op.name] = first_reader[op.name] - 1
    return depth


def _nodes(graph: Graph, placement: Placement) -> tuple[dict[str, _Node], str | None]:
    """The boxes to draw (ops, or groups of a scope on one device) and a note on what was
    grouped or left out (None: every op is drawn)."""
    grouped = len(graph.ops) > MAX_NODES
    depth = _depths(graph)
    key_of: dict[str, str] = {}
    nodes: dict[str, _Node] = {}
    for op in graph.ops:
        device = placement.decisions[op.name].device
        d = depth[op.name]
        key = f"{_group(op.name)} @{short_device(device)}" if grouped else op.name
        key_of[op.name] = key
        node = nodes.get(key)
        if node is None:
            node = nodes[key] = _Node(key, device, depth=d)
        node.ops += 1
        node.depth = min(node.depth, d)
        node.edges.update(key_of[r.op] for r in op.inputs if key_of[r.op] != key)
    if not grouped:
        return nodes, None
    note = f"{len(graph.ops)} ops drawn as {len(nodes)} groups (by name scope and device)"
    if len(nodes) > MAX_NODES:
        largest = sorted(nodes.values(), key=lambda n: -n.ops)[:MAX_NODES]
        kept = {n.key for n in largest}
        note = (
            f"{len(graph.ops)} ops in {len(nodes)} groups (by name scope and device); the "
            f"{MAX_NODES} largest groups are drawn, {len(nodes) - MAX_NODES} left out"
        )
        nodes = {k: n for k, n in nodes.items() if k in kept}
    return nodes, note


def graph_svg(
    graph: Graph, placement: Placement, colors: Mapping[str, str]
) -> tuple[str, str | None]:
    """(the SVG element, the note on grouping or None)."""
    nodes, note = _nodes(graph, placement)
    columns: dict[int, list[_Node]] = {}
    for node in nodes.values():
        columns.setdefault(node.depth, []).append(node)
    where: dict[str, tuple[int, int]] = {}
    for x, depth in enumerate(sorted(columns)):
        for y, node in enumerate(columns[depth]):
            where[node.key] = (PAD + x * (BOX_W + GAP_X), PAD + y * (BOX_H + GAP_Y))
    width = PAD * 2 + max((x for x, _ in where.values()), default=0) + BOX_W
    height = PAD * 2 + max((y for _, y in where.values()), default=0) + BOX_H
    parts = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for node in nodes.values():
        x2, y2 = where[node.key]
        for source in sorted(node.edges):
            if source not in where:
                continue
            x1, y1 = where[source]
            cross = nodes[source].device != node.device
            parts.append(
                f'<path class="edge{" copy" if cross else ""}" d="M{x1 + BOX_W},{y1 + BOX_H // 2} '
                f"C{x1 + BOX_W + GAP_X // 2},{y1 + BOX_H // 2} {x2 - GAP_X // 2},{y2 + BOX_H // 2} "
                f'{x2},{y2 + BOX_H // 2}"/>'
            )
    for node in nodes.values():
        x, y = where[node.key]
        device = short_device(node.device)
        name = node.key.rsplit(" @", 1)[0]
        label = clip(name, LABEL_CHARS) + (f" ({node.ops})" if note else "")
        tip = f"{clip(name, TITLE_CHARS)} on {device}" + (f": {node.ops} ops" if note else "")
        parts.append(
            f'<g class="op" data-device="{escape(device)}"><title>{escape(tip)}</title>'
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" '
            f'fill="{colors[node.device]}"/>'
            f'<text x="{x + 6}" y="{y + 19}">{escape(label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts), note
