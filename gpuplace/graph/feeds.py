"""Feeding placeholders, as `feed_dict` does: `--feed NAME=FILE.npy` or `--feed NAME=JSON`
(`Options.feeds` from Python, which also takes arrays and nested lists).

Each value is checked against its placeholder's shape and dtype and stored in that op's attrs
(`attrs["value"]`, a numpy array), where the placeholder's kernel finds it. Every placeholder
must be fed before a run; the message lists all that are not, in TensorFlow's words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import BadInput
from ..naming import CLI, Naming
from .infer import fmt
from .model import Graph, Op
from .ops import suggest


def apply_feeds(graph: Graph, feeds: Mapping[str, Any], naming: Naming = CLI) -> Graph:
    """A copy of `graph` with each fed placeholder's value in its attrs; BadInput for a name
    that is not a placeholder, a value that does not fit, or any placeholder left unfed.

    A value is a .npy path or JSON text (what `--feed` takes), or an array or nested list;
    messages name each feed as `naming` does (the CLI's `--feed x` by default)."""
    by_name = graph.by_name()
    placeholders = [op.name for op in graph.ops if op.type == "placeholder"]
    values: dict[str, Any] = {}
    for name, text in feeds.items():
        op = by_name.get(name)
        if op is None:
            raise BadInput(
                f"{naming.feed(name)}: no op named {name!r} in {graph.source}"
                f"{suggest(name, placeholders, 'placeholders')}"
            )
        if op.type != "placeholder":
            listed = ", ".join(placeholders) or "none"
            raise BadInput(
                f"{naming.feed(name)}: op {name!r} is a {op.type}, not a placeholder; only "
                f"placeholders are fed (placeholders in {graph.source}: {listed})"
            )
        values[name] = _value(op, text, naming)
    ops = tuple(
        replace(op, attrs={**op.attrs, "value": values[op.name]}) if op.name in values else op
        for op in graph.ops
    )
    fed = replace(graph, ops=ops) if values else graph
    require_fed(fed, naming)
    return fed


def require_fed(graph: Graph, naming: Naming = CLI) -> None:
    """BadInput listing every placeholder without a value (call before running)."""
    unfed = [op for op in graph.ops if op.type == "placeholder" and "value" not in op.attrs]
    if unfed:
        what = ", ".join(
            f"'{op.name}' with dtype {op.outputs[0].dtype} and shape {fmt(op.outputs[0].shape)}"
            for op in unfed
        )
        how = (
            "pass --feed NAME=FILE.npy or --feed NAME=JSON for each"
            if naming.cli
            else "give each a value in Options.feeds: a .npy path, JSON text or an array"
        )
        raise BadInput(
            f"You must feed a value for placeholder tensor {what}; {how} "
            f"(e.g. {example(unfed[0], naming)})"
        )


def example(op: Op, naming: Naming = CLI) -> str:
    """A short feed for placeholder `op` that fits its shape and dtype: JSON counting up
    (`--feed x=[1.0,2.0]`; 2 per unknown dimension), or a .npy file when that would be long."""
    spec = op.outputs[0]
    dims = [d if type(d) is int and d >= 0 else 2 for d in spec.shape]
    count = 1
    for d in dims:
        count *= d
    if count > 6 or count == 0:
        return f"{naming.feed(op.name, f'{op.name}.npy')}, written by numpy.save"
    numbers = iter(range(1, count + 1))

    def nest(level: int) -> str:
        if level < len(dims):
            return "[" + ",".join(nest(level + 1) for _ in range(dims[level])) + "]"
        n = next(numbers)
        if spec.dtype == "bool":
            return "true" if n % 2 else "false"
        return f"{n}.0" if spec.dtype.startswith("float") else str(n)

    return naming.feed(op.name, nest(0))


def _value(op: Op, fed: Any, naming: Naming) -> Any:
    """The value fed to `op`: a .npy file or JSON text, or (from Python) an array or list."""
    import numpy as np

    text = fed if isinstance(fed, str) else None
    given = naming.feed(op.name, text)  # an array is named without its value
    if text is not None and text.lower().endswith(".npy"):
        try:
            value = np.load(text, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise BadInput(f"{given}: cannot read it as a .npy file: {err}") from None
    else:
        try:
            value = np.asarray(fed if text is None else json.loads(text))
        except json.JSONDecodeError as err:
            raise BadInput(
                f"{given}: neither JSON ({err.msg}) nor a .npy path; write e.g. "
                f"{example(op, naming)} or {naming.feed(op.name, f'{op.name}.npy')}"
            ) from None
        except ValueError:
            raise BadInput(
                f"{given}: lists of different lengths; give a rectangular list"
            ) from None
    return _fit(op, value, given, naming)


def _fit(op: Op, value: Any, given: str, naming: Naming) -> Any:
    """`value` as the placeholder's dtype, if its shape matches and the cast loses nothing;
    messages start with `given`, the feed as the caller wrote it."""
    import numpy as np

    spec = op.outputs[0]
    if value.dtype.kind not in "biuf":
        raise BadInput(f"{given}: expected numbers, got {value.dtype} values")
    if tuple(value.shape) != spec.shape:
        raise BadInput(
            f"Cannot feed value of shape {tuple(value.shape)} for Tensor '{op.name}:0', which has "
            f"shape '{spec.shape}'; give a value of shape {fmt(spec.shape)}"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # 1e39 -> float32 inf, as TF feeds it
        converted = value.astype(spec.dtype)
    lossy = value.size > 0 and (  # `[]` reads as float64 but has no values to change
        not np.can_cast(value.dtype, spec.dtype, "same_kind")
        or (value.dtype.kind in "iu" and not np.array_equal(converted, value))
    )
    if lossy:
        raise BadInput(
            f"{naming.feed(op.name)}: cannot feed {value.dtype} values to placeholder "
            f"'{op.name}' of dtype {spec.dtype} without changing them; give {spec.dtype} values"
        )
    return converted
