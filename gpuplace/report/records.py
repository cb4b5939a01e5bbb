"""JSON records shared by `run`, `plan` and `mem --json`: the machine, placement, copies,
memory and rates as plain dicts, and `json_text`, which writes every document gpuplace prints."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ..devices.model import LogicalGpu, View
from ..graph.model import Graph, Op
from ..placement.model import Placement

if TYPE_CHECKING:
    from ..execute.executor import CopyRecord
    from ..results import Prepared


def machine_record(view: View) -> dict[str, Any]:
    """The one `machine` object of every JSON document (`devices --json`'s)."""
    from .devices import machine_json

    return machine_json(view)


def memory_records(memory: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"device": m.device, "reserved": m.reserved, "peak": m.peak, "limit": m.limit}
        for m in memory
    ]


def rate_records(prepared: Prepared) -> list[dict[str, str]]:
    """Where each GPU's rates in the cost model come from (`plan`'s `rates:` line), as data."""
    from ..placement.cost import rate_sources

    sources = rate_sources(prepared.logical, prepared.rates.by_uuid)
    return [{"gpus": gpus, "source": source} for gpus, source in sources]


class Finite(list):  # type: ignore[type-arg]
    """A list whose floats are all finite (built so: no float at all, or each one checked):
    `json_text` writes it without walking it, which is what keeps a 100,000-op document fast."""


class FiniteDict(dict):  # type: ignore[type-arg]
    """A dict whose values hold no float that is not finite (built so), as `Finite`: `json_text`
    writes it without walking it."""


def placement_records(graph: Graph, placement: Placement,
                      pruned: Sequence[str] = ()) -> list[dict[str, Any]]:  # fmt: skip
    """Each op as placed; `runs` is False for the ops the fetches do not need (`pruned`).
    Strings, integers, booleans and None only (a `Finite` list). Ops whose outputs have the
    same shapes and dtypes share one `outputs` list (one record per distinct outputs, built
    once: most of a large graph's ops have a few)."""
    skipped = set(pruned)
    decisions = placement.decisions
    shared: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def outputs(key: tuple[Any, ...], op: Op) -> list[dict[str, Any]]:
        made = shared[key] = [
            {"shape": list(s.shape), "dtype": s.dtype, "bytes": s.nbytes} for s in op.outputs
        ]
        return made

    return Finite([
        {"op": op.name, "type": op.type, "requested_device": op.device or None,
         "device": (d := decisions[op.name]).device, "kind": d.kind, "reason": d.reason,
         "runs": op.name not in skipped,
         "outputs": shared.get(k := tuple([(s.shape, s.dtype) for s in op.outputs]))
         or outputs(k, op)}
        for op in graph.ops
    ])  # fmt: skip


def copy_records(copies: Sequence[CopyRecord]) -> list[dict[str, Any]]:
    """Each copy; a run's have the seconds it took (finite: a `Finite` list)."""
    out = Finite()
    for c in copies:
        record = {"op": c.op, "tensor": c.tensor, "src": c.src, "dst": c.dst, "bytes": c.nbytes}
        if hasattr(c, "seconds"):
            record["seconds"] = finite_json(c.seconds)
        kind = getattr(c, "kind", "")
        if kind:
            record["kind"] = kind
        out.append(record)
    return out


def device_mapping_records(
    logical: Sequence[LogicalGpu], task: str = "/job:localhost/replica:0/task:0"
) -> list[dict[str, Any]]:
    """The `Device mapping:` block as data: each (logical) GPU:i and the card it runs on."""
    return [
        {"device": f"{task}/device:GPU:{lg.index}",
         "cuda_index": lg.gpu.cuda_index, "product": lg.gpu.product,
         "pci_bus_id": lg.gpu.gpu.pci_bus_id, "compute_capability": lg.gpu.gpu.compute_capability,
         "simulated": lg.gpu.gpu.simulated}
        for lg in logical
    ]  # fmt: skip


NON_FINITE = {"nan": "nan", "inf": "inf", "-inf": "-inf"}


def json_value(value: np.ndarray) -> Any:
    """An array as JSON-ready lists; nan, inf and -inf (which JSON has no numbers for) become
    the strings "nan", "inf" and "-inf"."""
    if value.dtype.kind not in "fc" or bool(np.isfinite(value).all()):
        return _finite(value.tolist())
    return _finite(_named_non_finite(value).tolist())


def json_values(values: Sequence[Any]) -> list[Any]:
    """`json_value` of each array, those of one shape and dtype converted together (stacked:
    checked, their non-finite floats named and their lists made in one call each), as when a
    run fetches thousands of small tensors."""
    out: list[Any] = [None] * len(values)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, value in enumerate(values):
        if type(value) is np.ndarray and value.dtype.kind != "c":
            groups.setdefault((value.shape, value.dtype), []).append(i)
        else:  # a numpy scalar, or complex: alone
            out[i] = json_value(value)
    for at in groups.values():
        stacked = np.stack([values[i] for i in at])
        if stacked.dtype.kind == "f" and not np.isfinite(stacked).all():
            stacked = _named_non_finite(stacked)
        for i, lists in zip(at, stacked.tolist(), strict=True):
            out[i] = _finite(lists)
    return out


def _named_non_finite(value: np.ndarray) -> np.ndarray:
    """A float array as objects, each nan, inf and -inf replaced by its name."""
    out = value.astype(object)
    out[np.isnan(value)] = "nan"
    out[np.isposinf(value)] = "inf"
    out[np.isneginf(value)] = "-inf"
    return out


def _finite(value: Any) -> Any:
    """A value's lists as `Finite` (`json_text` need not walk them); a scalar as it is."""
    return Finite(value) if isinstance(value, list) else value


def finite_json(doc: Any) -> Any:
    """`doc` with every non-finite float (nan, inf, -inf) as the string "nan", "inf", "-inf",
    and arrays as lists (`json_value`)."""
    if isinstance(doc, float | np.floating):
        value = float(doc)
        if math.isfinite(value):
            return doc
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(doc, dict):
        return doc if type(doc) is FiniteDict else {k: finite_json(v) for k, v in doc.items()}
    if isinstance(doc, np.ndarray):  # orjson would write its NaNs as null
        return json_value(doc)
    if isinstance(doc, Finite):
        return doc
    if isinstance(doc, list | tuple):
        return [finite_json(v) for v in doc]
    return doc


_NON_ASCII = r"[^\x00-\x7e]"  # json.dumps escapes DEL (0x7f) too; compiled on first use


def _escape(match: re.Match[str]) -> str:
    """One character past `~` as json.dumps escapes it (`\\u00e9`; a surrogate pair past U+FFFF)."""
    return json.dumps(match.group())[1:-1]


class JsonText:
    """JSON text that a document holds as a value, in the ASCII or UTF-8 pieces it is made of
    (`parts`; `ascii`: all of them ASCII but DEL, which JSON text holds as it is). A value of the
    top-level object is joined only as `json_chunks`' caller writes it, a few thousand pieces
    at a time (a 45 MB text is never copied whole: joined in blocks, the memory of one block
    is that of the next), and anywhere else orjson writes it in place. `report/plan_records.py`
    makes it."""

    __slots__ = ("ascii", "parts")

    def __init__(self, parts: list[bytes], ascii: bool) -> None:
        self.parts = parts
        self.ascii = ascii

    @property
    def data(self) -> bytes:
        """The whole text."""
        return b"".join(self.parts)

    def blocks(self, size: int = 4096) -> Iterator[bytes]:
        """The text in pieces of `size` parts."""
        parts = self.parts
        for at in range(0, len(parts), size):
            yield b"".join(parts[at : at + size])


def json_text(doc: Any) -> str:
    """Standard JSON (RFC 8259: no NaN or Infinity), indented by 2 and ASCII only, in
    `json.dumps(doc, indent=2)`'s layout, for every document gpuplace prints: floats JSON has
    no number for are written as the strings "nan", "inf" and "-inf". orjson writes it (15x
    faster than the standard library, whose C writer cannot indent); a float may be spelt
    otherwise than Python spells it (0.00001 for 1e-05: the same number). `finite_json` walks
    all but the `Finite` lists first, since orjson would write a NaN as null. What orjson
    refuses (an integer past 64 bits, a lone surrogate) the standard library writes."""
    return json_bytes(doc).decode("ascii")


def json_bytes(doc: Any) -> bytes:
    """`json_text(doc)` as the ASCII bytes it is made of."""
    pieces = _pieces(doc)
    if len(pieces) == 1 and type(pieces[0]) is bytes:
        return pieces[0]
    return b"".join([b for p in pieces for b in (p.parts if isinstance(p, JsonText) else (p,))])


def json_chunks(doc: Any) -> Iterator[bytes]:
    """`json_bytes(doc)` in the pieces it is made of, for a command to write them one by one
    to stdout: the text around the `JsonText` values of a top-level object, written here, and
    their text joined in blocks as it is written (`JsonText.blocks`), never as one."""
    return _blocks(_pieces(doc))


def _blocks(pieces: list[bytes | JsonText]) -> Iterator[bytes]:
    for piece in pieces:
        if isinstance(piece, JsonText):
            yield from piece.blocks()
        else:
            yield piece


_SPLICE = b"\x00"  # where a JsonText goes: orjson writes no NUL byte of its own (it escapes it)


def _pieces(doc: Any) -> list[bytes | JsonText]:
    """The document's text: ASCII bytes around the `JsonText` values of its top-level object
    (printable ASCII themselves; otherwise one piece, all bytes)."""
    whole = safe = finite_json(doc)
    texts: list[JsonText] = []
    if type(safe) is dict and any(type(v) is JsonText for v in safe.values()):
        marked = {}
        for key, value in safe.items():
            if type(value) is JsonText:
                texts.append(value)
                value = orjson.Fragment(_SPLICE)
            marked[key] = value
        safe = marked
    try:
        out = orjson.dumps(
            safe, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY, default=_fragment
        )
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return [json.dumps(whole, indent=2, allow_nan=False, default=_unfragment).encode("ascii")]
    pieces: list[bytes | JsonText] = []
    at = 0
    for text in texts:
        cut = out.index(_SPLICE, at)
        pieces += [out[at:cut], text]
        at = cut + len(_SPLICE)
    pieces.append(out[at:] if at else out)
    if all(p.ascii if isinstance(p, JsonText) else _ascii(p) for p in pieces):
        return pieces
    whole_text = b"".join([p.data if isinstance(p, JsonText) else p for p in pieces])
    return [re.sub(_NON_ASCII, _escape, whole_text.decode()).encode("ascii")]


def _ascii(data: bytes) -> bool:
    """Whether `data` is what json.dumps writes as it is: ASCII but DEL."""
    return data.isascii() and b"\x7f" not in data


def _fragment(value: Any) -> Any:
    """For orjson: a `JsonText` as the fragment it is."""
    if type(value) is JsonText:
        return orjson.Fragment(value.data)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _unfragment(value: Any) -> Any:
    """For the standard library: an `orjson.Fragment`'s or a `JsonText`'s JSON text as the
    value it stands for."""
    if type(value) is JsonText:
        return json.loads(value.data)
    if isinstance(value, orjson.Fragment):
        return json.loads(orjson.dumps(value))  # orjson writes a fragment as its text
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def placed_ops(prepared: Prepared) -> tuple[Graph, Placement]:
    """Every op as placed (`Prepared.placed`), typed for the records."""
    placed: tuple[Graph, Placement] = prepared.placed()
    return placed
