"""Graph specs: load YAML/JSON into a `Graph` (names, devices, inputs, shapes), the op registry,
and feeding placeholders. `load("graph.yaml").ops` come in execution order."""

from __future__ import annotations

from .feeds import apply_feeds, require_fed
from .loader import load, loads
from .model import Config, Graph, Op, TensorRef, TensorSpec
from .ops import OpDef, get_op, list_ops

__all__ = [
    "Config",
    "Graph",
    "Op",
    "OpDef",
    "TensorRef",
    "TensorSpec",
    "apply_feeds",
    "get_op",
    "list_ops",
    "load",
    "loads",
    "require_fed",
]
