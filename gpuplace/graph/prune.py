"""Pruning a graph to its fetches, as TensorFlow's `session.run(fetches)` does.

DirectSession runs only the ops the fetched tensors depend on (`subgraph::PruneForTargets`):
the fetched ops and, transitively, the producers of their inputs. Everything else is not run:
no kernel, no allocation, no print, no file written. Without a `fetch:` the loader's default
fetch is every output no op consumes, which asks for the whole graph; then nothing is pruned
(an op without outputs, `save`, still runs). Naming a `save` in `fetch:` makes it a target, as
`session.run([y, save_op])`: it runs, with what it needs, and returns no value.

`needed` is one sweep over the ops from last to first (they are in execution order, so every
consumer comes before its producers; linear in ops + inputs); `prune` keeps the graph's op
order, so the result is still a valid execution order.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import NamedTuple

from .model import Graph


class Pruned(NamedTuple):
    """The ops the fetches need (`graph`, in run order) and the names of the others (`dropped`,
    in graph order)."""

    graph: Graph
    dropped: tuple[str, ...]


def needed(graph: Graph) -> frozenset[str] | None:
    """The names of the ops `graph.fetch` needs, or None when that is every op (nothing to
    prune): all ops are needed, or the fetch is the default one (every unconsumed output)."""
    if _default_fetch(graph):
        return None
    keep = {ref.op for ref in graph.fetch} | set(graph.targets)
    add = keep.add
    for op in reversed(graph.ops):  # consumers before producers: one sweep
        if op.name in keep:
            for ref in op.inputs:
                add(ref.op)
    return None if len(keep) == len(graph.ops) else frozenset(keep)


def _default_fetch(graph: Graph) -> bool:
    """Whether the fetch is the loader's default, every output no op consumes (the spec has no
    `fetch:`). A spec's own `fetch:` is explicit even when it lists exactly those: a `save` it
    does not need is not run. For a graph built in code (unknown), a fetch of exactly those
    outputs and no target is read as the default."""
    if graph.fetch_given is not None:
        return not graph.fetch_given
    if graph.targets:
        return False
    consumed = {(ref.op, ref.index) for op in graph.ops for ref in op.inputs}
    unconsumed = {
        (op.name, k)
        for op in graph.ops
        for k in range(len(op.outputs))
        if (op.name, k) not in consumed
    }
    return unconsumed == {(ref.op, ref.index) for ref in graph.fetch}


def prune(graph: Graph, keep: Collection[str] | None = None) -> Pruned:
    """`graph` without the ops its fetches do not need (`keep`: from `needed`, if known)."""
    if keep is None:
        keep = needed(graph)
        if keep is None:
            return Pruned(graph, ())
    ops = tuple(op for op in graph.ops if op.name in keep)
    dropped = tuple(op.name for op in graph.ops if op.name not in keep)
    return Pruned(replace(graph, ops=ops) if dropped else graph, dropped)
