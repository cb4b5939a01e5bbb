"""TensorFlow's Identity rule (placer.cc, `MatchIdentityOperation`), found once per graph.

In `Placer::Run`'s first pass, an `Identity` that requests no device, has exactly one in-edge
and one out-edge, and whose input and consumer request the same device string goes to its
input's device when its input already has one that the Identity may use. The edges are the
graph's: an op that nothing reads has one out-edge, to `_SINK`, which requests nothing; a
consumer that reads it twice makes two. `tf.py` applies the rule, `reasons.py` explains it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..graph.model import Op


class Identities:
    """placer.cc's `MatchIdentityOperation` over a graph. For each Identity that requests no
    device and has one input (`source`: op -> its input): its out-edges (`edges`; an op no
    op reads has one, to `_SINK`, which requests nothing; a consumer reading it twice is two)
    and its last consumer (`consumer`, -1 for none); `matched` holds those with one out-edge
    whose input and consumer request the same device string. Filled in by
    `match_identities`; a plain class, not a dataclass, which would exec its generated
    methods at every start-up (CONTRIBUTING.md)."""

    __slots__ = ("consumer", "edges", "matched", "source")

    def __init__(self) -> None:
        self.source: dict[int, int] = {}
        self.edges: dict[int, int] = {}
        self.consumer: dict[int, int] = {}
        self.matched: set[int] = set()


def match_identities(ops: Sequence[Op], index: Mapping[str, int], identity: set[str]) -> Identities:
    """`Identities` of `ops` (`identity`: the op types that are TF's Identity). Linear: one
    pass over the inputs."""
    found = Identities()
    if not identity:  # no Identity type in the graph
        return found
    maybe = {
        op.name: i
        for i, op in enumerate(ops)
        if op.type in identity and not op.device and len(op.inputs) == 1
    }
    if not maybe:
        return found
    edges = found.edges = dict.fromkeys(maybe.values(), 0)
    consumer = found.consumer = dict.fromkeys(maybe.values(), -1)
    get = maybe.get
    for j, op in enumerate(ops):
        for ref in op.inputs:
            k = get(ref.op)
            if k is not None:
                edges[k] += 1
                consumer[k] = j
    for k, count in edges.items():
        source = index.get(ops[k].inputs[0].op)
        if source is None:
            continue
        found.source[k] = source
        wanted = ops[consumer[k]].device if count else ""  # _SINK requests nothing
        if count <= 1 and ops[source].device == wanted:
            found.matched.add(k)
    return found
