"""Feeding placeholders, as `feed_dict` does: `--feed NAME=FILE.npy` or `--feed NAME=JSON`
(`Options.feeds` from Python, which also takes arrays and nested lists).

Each value is checked against its placeholder's shape and dtype and stored in that op's attrs
(`attrs["value"]`, a numpy array), where the placeholder's kernel finds it. Every placeholder
must be fed before a run; the message lists all that are not, in TensorFlow's words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..echo import TEXT_CHARS, clip_middle, sample, show
from ..errors import BadInput, Message, Part, RuntimeFailure, Setting, Term
from ..limits import LONG_INT, MAX_RANK
from ..units import human
from .attrs import RANK_WHY
from .infer import fmt
from .model import Graph, Op
from .npy import NpyError, read_header
from .ops import suggest

_MAX_RANK_WORDS = f"a value has at most {MAX_RANK} dimensions ({RANK_WHY})"


def apply_feeds(graph: Graph, feeds: Mapping[str, Any]) -> Graph:
    """A copy of `graph` with each fed placeholder's value in its attrs; BadInput for a name
    that is not a placeholder, a value that does not fit, or any placeholder left unfed.

    A value is a .npy path or JSON text (what `--feed` takes), or an array or nested list;
    messages name each feed as a Setting (`--feed x`, `Options.feeds['x']`)."""
    if not feeds:  # nothing to look up or copy: a large graph is only checked
        require_fed(graph)
        return graph
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
    given = Setting("feeds", text and clip_middle(text), key=op.name)  # an array: without its value
    if text is not None and text.lower().endswith(".npy"):
        return _fit(op, _npy_value(op, text, given), given)
    data = fed if text is None else _json(op, text, given)
    _check_elements(data, op.outputs[0].dtype, given)
    try:
        value = np.asarray(data)
    except ValueError:
        raise BadInput(
            Message(given, ": lists of different lengths; give a rectangular list")
        ) from None
    return _fit(op, value, given)


def _npy_value(op: Op, path: str, given: Setting) -> Any:
    """A .npy feed: its header checked against the file and the placeholder's shape before
    its data is read (a header may claim 10^12 elements)."""
    import numpy as np

    try:
        header = read_header(path)
    except NpyError as err:
        raise BadInput(Message(given, f": cannot read it as a .npy file: {err}")) from None
    _check_shape(op, header.shape)
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:  # changed since its header was read
        raise BadInput(Message(given, f": cannot read it as a .npy file: {err}")) from None
    except MemoryError:
        raise RuntimeFailure(
            Message(given, f": {human(header.nbytes)} of data do not fit in this host's memory")
        ) from None


def _json(op: Op, text: str, given: Setting) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadInput(
            Message(
                given, f": neither JSON ({err.msg}) nor a .npy path; write e.g. ",
                *example(op), " or ", _npy(op),
            )
        ) from None  # fmt: skip
    except RecursionError:
        raise BadInput(Message(given, f": nested too deeply; {_MAX_RANK_WORDS}")) from None
    except ValueError:  # the only other error json raises
        raise BadInput(Message(given, f": cannot read it as JSON: {LONG_INT}")) from None


def _check_elements(data: Any, dtype: str, given: Setting) -> None:
    """Nested lists (JSON, or Python's) at most MAX_RANK deep, with booleans only for a bool
    placeholder: numpy would cast `[1, true]` to `[1, 1]` silently. One level at a time, so a
    large list costs a few comprehensions, not a Python call per element."""
    level = [data]
    for _ in range(MAX_RANK + 1):
        if any(type(x) is int and not -(2**63) <= x < 2**64 for x in level):
            where, big = _first(data, lambda x: type(x) is int and not -(2**63) <= x < 2**64)
            raise BadInput(
                Message(
                    given, f": element {where} is {show(big)}, an integer beyond 64 bits, which "
                    "numpy cannot hold as a number; write it as a float (e.g. 1e30)",
                )
            )  # fmt: skip
        if dtype != "bool" and any(type(x) is bool for x in level):
            where, flag = _first(data, lambda x: type(x) is bool)
            raise BadInput(
                Message(
                    given, f": element {where} is {json.dumps(flag)}, a boolean, which does "
                    f"not fit a placeholder of dtype {dtype}; give numbers (1 for true)",
                )
            )  # fmt: skip
        lists = [x for x in level if type(x) is list]
        if not lists:
            return
        level = [x for row in lists for x in row]
    raise BadInput(Message(given, f": nested more than {MAX_RANK} deep; {_MAX_RANK_WORDS}"))


def _first(data: Any, found: Callable[[Any], bool]) -> tuple[str, Any]:
    """(`[i][j]`, element): the first element of nested lists `data` that `found` accepts."""
    path: list[int] = []

    def search(value: Any) -> Any:
        if type(value) is not list:
            return value if found(value) else None
        for i, item in enumerate(value):
            path.append(i)
            hit = search(item)
            if hit is not None:
                return hit
            path.pop()
        return None

    hit = search(data)
    return "".join(f"[{i}]" for i in path), hit


def _check_shape(op: Op, shape: tuple[int, ...]) -> None:
    """TensorFlow's words for a value whose shape is not the placeholder's."""
    spec = op.outputs[0]
    if shape != spec.shape:
        raise BadInput(
            f"Cannot feed value of shape {shape} for Tensor '{op.name}:0', which has "
            f"shape '{spec.shape}'; give a value of shape {fmt(spec.shape)}"
        )


def _fit(op: Op, value: Any, given: Setting) -> Any:
    """`value` as the placeholder's dtype, if its shape matches and the cast loses nothing;
    messages start with `given`, the feed as the caller wrote it."""
    import numpy as np

    spec = op.outputs[0]
    if value.dtype.kind not in "biuf":
        raise BadInput(Message(given, f": expected numbers, got {value.dtype} values"))
    _check_shape(op, tuple(value.shape))
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
