"""The three placement strategies behind `--strategy`, chosen by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..devices.model import Host, LogicalGpu
from ..devices.rates import MeasuredRate
from ..errors import BadInput
from ..graph.model import STRATEGIES, Graph
from . import place
from .flat import Flat
from .model import Placement


def place_with(
    strategy: str, graph: Graph, logical: Sequence[LogicalGpu], host: Host, soft: bool,
    rates: Mapping[str, MeasuredRate] | None = None,
    footprint: Callable[[Flat], Flat] | None = None,
) -> Placement:  # fmt: skip
    """Place by TensorFlow's rules, or spread the ops it would pile on GPU:0 (balanced,
    round-robin); explicit devices, colocation and CPU-only ops are honoured by all three.
    Balanced costs ops with `rates` (measured, by GPU UUID) where a card has them, and charges
    memory as `footprint` sizes the flattened graph (a training step's: `memory/training.py`)."""
    if strategy == "tensorflow":
        return place(graph, len(logical), allow_soft_placement=soft)
    if strategy == "round-robin":
        from .baselines import round_robin

        return round_robin(graph, len(logical), allow_soft_placement=soft)
    if strategy == "balanced":
        from .balanced import place_balanced
        from .cost import device_models

        models = device_models(logical, host, rates)
        return place_balanced(graph, models, allow_soft_placement=soft, footprint=footprint)
    raise BadInput(
        f"placement strategy {strategy!r} is not one of {', '.join(STRATEGIES)} "
        "(--strategy, or config placement.strategy)"
    )
