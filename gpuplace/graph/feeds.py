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

from ..echo import TEXT_CHARS, sample
from ..errors import BadInput, Message, Part, Setting, Term
from .infer import fmt
from .model import Graph, Op
from .ops import suggest


def apply_feeds(graph: Graph, feeds: Mapping[str, Any]) -> Graph:
    """A copy of `graph` with each fed placeholder's value in its attrs; BadInput for a name
    that is not a placeholder, a value that does not fit, or any placeholder left unfed.

    A value is a .npy path or JSON text (what `--feed` takes), or an array or nested list;
    messages name each feed as a Setting (`--feed x`, `Options.feeds['x']`)."""
    by_name = graph.by_name()
    placeholders = [op.name for op in graph.ops if op.type == "placeholder"]
    values: dict[str, Any] = {}
    for name, text in feeds.items():
        op = by_name.get(name)
        if op is None:
            raise BadInput(
                Message(
                    Setting("feeds", key=name), f": no op named {name!r} in {graph.source}"
                    f"{suggest(name, placeholders, 'placeholders')}",
                )
            )  # fmt: skip
        if op.type != "placeholder":
            listed = sample(placeholders) or "none"
            raise BadInput(
                Message(
                    Setting("feeds", key=name), f": op {name!r} is a {op.type}, not a "
                    f"placeholder; only placeholders are fed (placeholders in {graph.source}: "
                    f"{listed})",
                )
            )  # fmt: skip
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
        what = sample(
            [f"'{op.name}' with dtype {op.outputs[0].dtype} and shape {fmt(op.outputs[0].shape)}"
             for op in unfed], width=TEXT_CHARS,
        )  # fmt: skip
        raise BadInput(
            Message(
                f"You must feed a value for placeholder tensor {what}; ", Term.FEED_EACH,
                " (e.g. ", *example(unfed[0]), ")",
            )
        )  # fmt: skip


def example(op: Op) -> tuple[Part, ...]:
    """A short feed for placeholder `op` that fits its shape and dtype, as Message parts: JSON
    counting up (`--feed x=[1.0,2.0]`; 2 per unknown dimension), or a .npy file when that would
    be long."""
    spec = op.outputs[0]
    dims = [d if type(d) is int and d >= 0 else 2 for d in spec.shape]
    count = 1
    for d in dims:
        count *= d
    if count > 6 or count == 0:
        return _npy(op), ", written by numpy.save"
    numbers = iter(range(1, count + 1))

    def nest(level: int) -> str:
        if level < len(dims):
            return "[" + ",".join(nest(level + 1) for _ in range(dims[level])) + "]"
        n = next(numbers)
        if spec.dtype == "bool":
            return "true" if n % 2 else "false"
        return f"{n}.0" if spec.dtype.startswith("float") else str(n)

    return (Setting("feeds", nest(0), key=op.name),)


def _npy(op: Op) -> Setting:
    """A .npy file fed to `op`: `--feed x=x.npy`."""
    return Setting("feeds", f"{op.name}.npy", key=op.name)


def _value(op: Op, fed: Any) -> Any:
    """The value fed to `op`: a .npy file or JSON text, or (from Python) an array or list."""
    import numpy as np

    text = fed if isinstance(fed, str) else None
    given = Setting("feeds", text, key=op.name)  # an array is named without its value
    if text is not None and text.lower().endswith(".npy"):
        try:
            value = np.load(text, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise BadInput(Message(given, f": cannot read it as a .npy file: {err}")) from None
    else:
        try:
            value = np.asarray(fed if text is None else json.loads(text))
        except json.JSONDecodeError as err:
            raise BadInput(
                Message(
                    given, f": neither JSON ({err.msg}) nor a .npy path; write e.g. ",
                    *example(op), " or ", _npy(op),
                )
            ) from None  # fmt: skip
        except ValueError:
            raise BadInput(
                Message(given, ": lists of different lengths; give a rectangular list")
            ) from None
    return _fit(op, value, given)


def _fit(op: Op, value: Any, given: Setting) -> Any:
    """`value` as the placeholder's dtype, if its shape matches and the cast loses nothing;
    messages start with `given`, the feed as the caller wrote it."""
    import numpy as np

    spec = op.outputs[0]
    if value.dtype.kind not in "biuf":
        raise BadInput(Message(given, f": expected numbers, got {value.dtype} values"))
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
            Message(
                Setting("feeds", key=op.name), f": cannot feed {value.dtype} values to "
                f"placeholder '{op.name}' of dtype {spec.dtype} without changing them; give "
                f"{spec.dtype} values",
            )
        )  # fmt: skip
    return converted
