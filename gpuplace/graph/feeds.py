"""Feeding placeholders, as `feed_dict` does: `--feed NAME=FILE.npy` or `--feed NAME=JSON`.

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
from .infer import fmt
from .model import Graph, Op
from .ops import suggest


def apply_feeds(graph: Graph, feeds: Mapping[str, str]) -> Graph:
    """A copy of `graph` with each fed placeholder's value in its attrs; BadInput for a name
    that is not a placeholder, a value that does not fit, or any placeholder left unfed."""
    by_name = graph.by_name()
    placeholders = [op.name for op in graph.ops if op.type == "placeholder"]
    values: dict[str, Any] = {}
    for name, text in feeds.items():
        op = by_name.get(name)
        if op is None:
            raise BadInput(
                f"--feed {name}: no op named {name!r} in {graph.source}"
                f"{suggest(name, placeholders, 'placeholders')}"
            )
        if op.type != "placeholder":
            listed = ", ".join(placeholders) or "none"
            raise BadInput(
                f"--feed {name}: op {name!r} is a {op.type}, not a placeholder; only placeholders "
                f"are fed (placeholders in {graph.source}: {listed})"
            )
        values[name] = _value(op, text)
    ops = tuple(
        replace(op, attrs={**op.attrs, "value": values[op.name]}) if op.name in values else op
        for op in graph.ops
    )
    fed = replace(graph, ops=ops) if values else graph
    require_fed(fed)
    return fed


def require_fed(graph: Graph) -> None:
    """BadInput listing every placeholder without a value (call before running)."""
    unfed = [op for op in graph.ops if op.type == "placeholder" and "value" not in op.attrs]
    if unfed:
        what = ", ".join(
            f"'{op.name}' with dtype {op.outputs[0].dtype} and shape {fmt(op.outputs[0].shape)}"
            for op in unfed
        )
        raise BadInput(
            f"You must feed a value for placeholder tensor {what}; pass --feed NAME=FILE.npy "
            f"or --feed NAME=JSON for each (e.g. {example(unfed[0])})"
        )


def example(op: Op) -> str:
    """A short `--feed` for placeholder `op` that fits its shape and dtype: JSON counting up
    (`x=[1.0,2.0]`; 2 per unknown dimension), or a .npy file when that would be long."""
    spec = op.outputs[0]
    dims = [d if type(d) is int and d >= 0 else 2 for d in spec.shape]
    count = 1
    for d in dims:
        count *= d
    if count > 6 or count == 0:
        return f"--feed {op.name}={op.name}.npy, written by numpy.save"
    numbers = iter(range(1, count + 1))

    def nest(level: int) -> str:
        if level < len(dims):
            return "[" + ",".join(nest(level + 1) for _ in range(dims[level])) + "]"
        n = next(numbers)
        if spec.dtype == "bool":
            return "true" if n % 2 else "false"
        return f"{n}.0" if spec.dtype.startswith("float") else str(n)

    return f"--feed {op.name}={nest(0)}"


def _value(op: Op, text: str) -> Any:
    import numpy as np

    if text.lower().endswith(".npy"):
        try:
            value = np.load(text, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise BadInput(
                f"--feed {op.name}={text}: cannot read it as a .npy file: {err}"
            ) from None
    else:
        try:
            value = np.asarray(json.loads(text))
        except json.JSONDecodeError as err:
            raise BadInput(
                f"--feed {op.name}={text}: neither JSON ({err.msg}) nor a .npy path; write e.g. "
                f"{example(op)} or --feed {op.name}={op.name}.npy"
            ) from None
        except ValueError:
            raise BadInput(
                f"--feed {op.name}={text}: lists of different lengths; give a rectangular list"
            ) from None
    return _fit(op, value, text)


def _fit(op: Op, value: Any, text: str) -> Any:
    """`value` as the placeholder's dtype, if its shape matches and the cast loses nothing."""
    import numpy as np

    spec = op.outputs[0]
    if value.dtype.kind not in "biuf":
        raise BadInput(f"--feed {op.name}={text}: expected numbers, got {value.dtype} values")
    if tuple(value.shape) != spec.shape:
        raise BadInput(
            f"Cannot feed value of shape {tuple(value.shape)} for Tensor '{op.name}:0', which has "
            f"shape '{spec.shape}'; give a value of shape {fmt(spec.shape)}"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # 1e39 -> float32 inf, as TF feeds it
        converted = value.astype(spec.dtype)
    lossy = not np.can_cast(value.dtype, spec.dtype, "same_kind") or (
        value.dtype.kind in "iu" and not np.array_equal(converted, value)
    )
    if lossy:
        raise BadInput(
            f"--feed {op.name}: cannot feed {value.dtype} values to placeholder '{op.name}' of "
            f"dtype {spec.dtype} without changing them; give {spec.dtype} values"
        )
    return converted
