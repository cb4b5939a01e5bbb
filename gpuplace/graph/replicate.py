"""`replicate:` blocks: data parallelism as Keras' multi_gpu_model did it, built on tower copies.

```yaml
- replicate: {gpus: 4, split: [x], merge: concat, merge_device: /cpu:0}
  graph: [...]          # the model body
```
Each input named in `split` is cut along axis 0 into one sub-batch per GPU (Keras' `get_slice`:
the last replica takes the remainder), placed with the input (`colocate_with`). One copy of the
body runs per GPU under `/device:GPU:i` with names `replica_i/...`. Every output of the body (an
op nobody in the body consumes) is merged under its own name on `merge_device` (concat along
axis 0 by default, as Keras' `cpu_merge`; or add_n or mean), so `fetch: [y]` gets the merged batch.
Variables in the body are defined once, outside the replicas, and shared by them, as the layers
of Keras' template model are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .attrs import show
from .ops import REGISTRY, suggest

if TYPE_CHECKING:
    from .walk import Device, Scope, Walker, _Namespace

SETTINGS = ("gpus", "split", "merge", "merge_device")
MERGES = {"concat": "concat", "add_n": "add_n", "mean": "average_n"}


def _error(message: str, where: object, machine: bool = False) -> Exception:
    """A spec error; `machine`: this machine cannot do it (exit 1, like a placement failure)."""
    from .walk import SpecError

    err = SpecError(message, where)
    if machine:
        err.exit_code = 1
    return err


def _available(num_gpus: int) -> str:
    return str(["/cpu:0"] + [f"/gpu:{i}" for i in range(num_gpus)])


def replica_gpus(value: object, num_gpus: int | None, where: object) -> list[int]:
    """`gpus`: a count, `all`, or a list of GPU indices; Keras' checks and messages."""
    if value == "all":
        if num_gpus is None:
            raise _error(
                "replicate: gpus: all needs a machine; run it with gpuplace run or plan", where
            )
        gpus = list(range(num_gpus))
    elif type(value) is int:
        gpus = list(range(value))
    elif (
        type(value) is list
        and all(type(g) is int and g >= 0 for g in value)
        and len(set(value)) == len(value)
    ):
        gpus = list(value)
    else:
        raise _error(
            f"replicate: gpus must be a count, 'all' or a list of GPU indices, got {show(value)}",
            where,
        )
    if len(gpus) < 2:
        raise _error(
            "For multi-gpu usage to be effective, call `multi_gpu_model` with `gpus >= 2`. "
            f"Received: `gpus={len(gpus)}` (replicate: gpus)",
            where,
        )
    if num_gpus is not None and max(gpus) >= num_gpus:
        wanted = str(["/cpu:0"] + [f"/gpu:{g}" for g in gpus])
        raise _error(
            f"To call `multi_gpu_model` with `gpus={value}`, we expect the following devices to be "
            f"available: {wanted}. However this machine only has: {_available(num_gpus)}. "
            "Try reducing `gpus`.",
            where,
            machine=True,
        )
    return gpus


def _settings(item: dict[str, Any]) -> dict[str, Any]:
    spec = item.get("replicate")
    if type(spec) is not dict:
        raise _error(
            f"replicate: expected a mapping like {{gpus: 2, split: [x]}}, got {show(spec)}", item
        )
    for key in spec:
        if key not in SETTINGS:
            raise _error(
                f"replicate: unknown setting {show(key)}{suggest(str(key), SETTINGS)}; accepted: {', '.join(SETTINGS)}",
                item,
            )
    split = spec.get("split", [])
    if type(split) is not list or not all(type(x) is str for x in split):
        raise _error(f"replicate: split must be a list of op names, got {show(split)}", item)
    merge = spec.get("merge", "concat")
    if merge not in MERGES:
        raise _error(
            f"replicate: merge must be one of {', '.join(MERGES)}, got {show(merge)}", item
        )
    return {**spec, "split": split, "merge": merge}


def _referenced(items: Sequence[Any]) -> Iterator[str]:
    """Names the body's ops take as inputs (output suffixes `:k` removed), nested blocks too."""
    for item in items:
        if type(item) is not dict:
            continue
        inputs = item.get("inputs")
        if type(inputs) is list:
            yield from (x.rsplit(":", 1)[0] for x in inputs if type(x) is str)
        if type(item.get("graph")) is list:
            yield from _referenced(item["graph"])


def expand_replicate(walker: Walker, item: dict[str, Any], scope: Scope, ns: _Namespace,
                     device: Device) -> None:  # fmt: skip
    """Walk a replicate block: shared variables, per-GPU slices and body copies, merges."""
    from .walk import Scope as ScopeClass
    from .walk import _check_keys

    _check_keys(item, ("replicate", "graph"), "a replicate block")
    settings = _settings(item)
    gpus = replica_gpus(settings.get("gpus", "all"), walker.num_gpus, item)
    body = item["graph"]
    shared = [op for op in body if type(op) is dict and op.get("op") == "variable"]
    rest = [op for op in body if not (type(op) is dict and op.get("op") == "variable")]
    walker.walk_items(shared, scope, ns, device, item)
    for x in settings["split"]:
        if scope.find(x) is None:
            raise _error(
                f"replicate: split names {show(x)}, which no op before the block defines", item
            )
    copies = [
        (walker.device(f"/device:GPU:{g}", device, item, "replicate"), f"{ns.prefix}replica_{g}/")
        for g in gpus
    ]
    slices = [(x, k, len(gpus)) for x in settings["split"] for k in range(len(gpus))]
    exports = ScopeClass(scope)
    walker.expand(rest, copies, exports, item, slices=slices)
    consumed = set(_referenced(rest))
    outputs = [n for n in exports.names if n not in consumed and n not in settings["split"]]
    merge_device = walker.device(
        settings.get("merge_device", "/cpu:0"), device, item, "replicate merge_device"
    )
    for name in exports.names:
        if name not in outputs:
            scope.define(name, exports.names[name], None)
    for name in outputs:
        raw: dict[str, Any] = {"name": name, "op": MERGES[settings["merge"]], "inputs": [name]}
        if settings["merge"] == "concat":
            raw["axis"] = 0
        walker.add_synthetic(raw, exports, scope, name, merge_device, ns.prefix + name)


def slice_item(x: str, index: int, parts: int) -> dict[str, Any]:
    """The synthetic op that gives replica `index` its rows of `x`, placed with `x`."""
    return {"name": x, "op": "batch_slice", "inputs": [x], "parts": parts, "index": index,
            "colocate_with": x}  # fmt: skip


assert {"batch_slice", "average_n", "concat", "add_n"} <= set(REGISTRY)
