"""`replicate:` blocks: data parallelism as Keras' multi_gpu_model did it, built on tower copies.

```yaml
- replicate: {gpus: 4, split: [x], merge: concat, merge_device: /cpu:0}
  graph: [...]          # the model body
```
Each input named in `split` is cut along axis 0 into one sub-batch per GPU (Keras' `get_slice`:
the last replica takes the remainder), placed with the input (`colocate_with`). One copy of the
body runs per GPU under `/device:GPU:i` with names `replica_i/...` (`tf.name_scope`: a scope
takes its name by TF's unique-name rule too, so after an op named `replica_0` the scope is
`replica_0_1/`). Every output of the body (an op nobody in the body consumes) is merged under
its own name on `merge_device` (concat along axis 0 by default, as Keras' `cpu_merge`; or add_n
or mean), so `fetch: [y]` gets the merged batch.
Variables in the body are defined once, outside the replicas, and shared by them, as the layers
of Keras' template model are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..echo import sample, show
from ..errors import Message, Part, Setting, Text
from .infer import fmt
from .ops import REGISTRY, suggest
from .scope import Device, Namespace, Scope, SpecError, check_keys

if TYPE_CHECKING:
    from .model import TensorSpec


class _Entry(Protocol):
    raw: dict[str, Any]


class Walker(Protocol):
    """What a replicate block needs of `walk.Walker` (which imports this module, not the
    reverse): walk ops into a scope, repeat a body, resolve device strings, add its own ops."""

    num_gpus: int | None

    @property
    def entries(self) -> Sequence[_Entry]: ...

    def walk_items(self, items: list[Any], scope: Scope, ns: Namespace, device: Device,
                   where: object) -> None: ...  # fmt: skip

    def expand(self, body: list[Any], copies: Sequence[tuple[Device, str]], scope: Scope,
               where: object, slices: Sequence[tuple[str, int, int]] = ()) -> None: ...  # fmt: skip

    def device(self, text: Any, outer: Device, where: object, label: str) -> Device: ...

    def add_synthetic(self, raw: dict[str, Any], resolve_in: Scope, bind_in: Scope, local: str,
                      device: Device, name: str) -> None: ...  # fmt: skip

    def name_scope(self, name: str) -> str: ...


SETTINGS = ("gpus", "split", "merge", "merge_device")
MERGES = {"concat": "concat", "add_n": "add_n", "mean": "average_n"}


class Synthetic(dict[str, Any]):
    """An op gpuplace writes for a replicate block (`role`: "slice", a replica's share of a split
    input, or "merge", an output merged across the replicas). `block` is the block's mapping and
    `anchor` the user's op it stands for (the split input, the body's output): an error about it
    cites their lines and is said in the block's terms (`replica_error`)."""

    __slots__ = ("anchor", "block", "role")

    def __init__(self, role: str, items: dict[str, Any]) -> None:
        super().__init__(items)
        self.role = role
        self.block: dict[str, Any] | None = None
        self.anchor: object = None


class FlagSettings(dict[str, Any]):
    """The settings of the block `--replicate N|all` wraps a graph in; `flag` names it."""

    __slots__ = ("flag",)

    def __init__(self, items: dict[str, Any], flag: Setting) -> None:
        super().__init__(items)
        self.flag = flag


def _error(message: Text, where: object, machine: bool = False) -> Exception:
    """A spec error; `machine`: this machine cannot do it (exit 1, like a placement failure)."""
    err = SpecError(message, where)
    if machine:
        err.exit_code = 1
    return err


def _available(num_gpus: int) -> str:
    return str(["/cpu:0"] + [f"/gpu:{i}" for i in range(num_gpus)])


def replica_gpus(
    value: object, num_gpus: int | None, where: object, flag: Setting | None = None
) -> list[int]:
    """`gpus`: a count, `all`, or a list of GPU indices; Keras' checks and messages. `flag`:
    the `--replicate` that wrote the block, if it did."""
    if value == "all":
        if num_gpus is None:
            what, count = (flag, "--replicate 4, or replicate=4") if flag else (
                "replicate: gpus: all", "gpus: 4"
            )  # fmt: skip
            raise _error(
                Message(
                    what, " needs a machine to count its GPUs; run it with gpuplace run or plan, "
                    "or pass gpus= to load() or loads() (a function from the spec's Config to the "
                    f"number of GPUs, e.g. gpus=lambda config: 4), or give a count ({count})",
                ),
                where,
            )  # fmt: skip
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
        few = value == "all"  # the machine has too few GPUs, not the spec: exit 1
        has = f": all; this machine only has: {_available(len(gpus))}" if few else ""
        raise _error(
            "For multi-gpu usage to be effective, call `multi_gpu_model` with `gpus >= 2`. "
            f"Received: `gpus={len(gpus)}` (replicate: gpus{has})",
            where,
            machine=few,
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
    if not isinstance(spec, dict):  # FlagSettings too
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
    if type(merge) is not str or merge not in MERGES:  # a list or a mapping is unhashable
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


def expand_replicate(walker: Walker, item: dict[str, Any], scope: Scope, ns: Namespace,
                     device: Device) -> None:  # fmt: skip
    """Walk a replicate block: shared variables, per-GPU slices and body copies, merges."""
    check_keys(item, ("replicate", "graph"), "a replicate block")
    settings = _settings(item)
    spec = item["replicate"]
    flag = spec.flag if isinstance(spec, FlagSettings) else None
    gpus = replica_gpus(settings.get("gpus", "all"), walker.num_gpus, item, flag)
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
        (
            walker.device(f"/device:GPU:{g}", device, item, "replicate"),
            walker.name_scope(f"{ns.prefix}replica_{g}"),
        )
        for g in gpus
    ]
    slices = [(x, k, len(gpus)) for x in settings["split"] for k in range(len(gpus))]
    exports = Scope(scope)
    start = len(walker.entries)
    walker.expand(rest, copies, exports, item, slices=slices)
    for i in range(start, len(walker.entries)):  # this block's slices: tie them to it
        raw = walker.entries[i].raw
        if type(raw) is Synthetic and raw.block is None:
            found = scope.find(raw["inputs"][0]) or [i]
            raw.block, raw.anchor = item, walker.entries[found[0]].raw
    consumed = set(_referenced(rest))
    outputs = [n for n in exports.names if n not in consumed and n not in settings["split"]]
    merge_device = walker.device(
        settings.get("merge_device", "/cpu:0"), device, item, "replicate merge_device"
    )
    for name in exports.names:
        if name not in outputs:
            scope.define(name, exports.names[name], None)
    for name in outputs:
        merge = Synthetic(
            "merge", {"name": name, "op": MERGES[settings["merge"]], "inputs": [name]}
        )
        if settings["merge"] == "concat":
            merge["axis"] = 0
        merge.block, merge.anchor = item, walker.entries[exports.names[name][0]].raw
        walker.add_synthetic(merge, exports, scope, name, merge_device, ns.prefix + name)


def slice_item(x: str, index: int, parts: int) -> dict[str, Any]:
    """The synthetic op that gives replica `index` its rows of `x`, placed with `x`."""
    return Synthetic("slice", {"name": x, "op": "batch_slice", "inputs": [x], "parts": parts,
                               "index": index, "colocate_with": x})  # fmt: skip


def replica_error(raw: Synthetic, specs: Sequence[TensorSpec] | None, reason: str) -> Exception:
    """An error about a slice or merge op, said in the terms of the block the user wrote.

    `specs`: the op's input specs (None: an input has no output, so the merge has nothing to
    take); `reason`: the shape function's message, for cases not worded here. Errors only.
    """
    block = raw.block or {}
    settings = block.get("replicate")
    flag = settings.flag if isinstance(settings, FlagSettings) else None
    label: Part = flag or "replicate"
    anchor = raw.anchor if type(raw.anchor) is dict else {}
    if raw.role == "slice":
        return _error(_slice_message(raw, specs or (), label, flag, settings, reason), raw)
    name = raw["name"]
    merge = settings.get("merge", "concat") if isinstance(settings, dict) else "concat"
    if specs is None:
        kind = anchor.get("op")
        if kind == "save":
            saved = anchor.get("inputs")
            what = (
                f"the merged {saved[0]!r}" if type(saved) is list and saved else "the merged tensor"
            )
            return _error(
                Message(
                    label, f": op {name!r} (save) in the body has no output to merge, and each "
                    "replica would write its own share of the batch to "
                    f"{show(anchor.get('path'))}; move the save below the block, where it saves "
                    f"{what}",
                ),
                raw,
            )  # fmt: skip
        return _error(
            Message(
                label, f": op {name!r} ({show(kind)}) in the body has no output, so the block "
                f"cannot merge it across the replicas (merge: {merge}); move it below the block",
            ),
            raw,
        )  # fmt: skip
    shapes = sample([fmt(s.shape) for s in specs])
    if merge == "concat" and any(not s.shape for s in specs):
        fix = (
            "write a replicate: block with merge: mean or merge: add_n instead of the flag"
            if flag
            else "use merge: mean or merge: add_n for a scalar (a loss)"
        )
        return _error(
            Message(
                label, f": merge concat (along axis 0) cannot concatenate the scalar output "
                f"{name!r} of the replicas (shape [] in each); {fix}, or keep a batch dimension "
                f"in {name!r} (e.g. keepdims: true)",
            ),
            raw,
        )  # fmt: skip
    if merge == "concat" and len({s.shape[1:] for s in specs}) > 1:
        return _error(
            Message(
                label, f": merge concat (along axis 0) cannot concatenate output {name!r} of the "
                f"replicas: their shapes ({shapes}) differ beyond axis 0; keep the batch on axis "
                f"0 of {name!r}",
            ),
            raw,
        )  # fmt: skip
    if merge != "concat" and len({s.shape for s in specs}) > 1:
        return _error(
            Message(
                label, f": merge {merge} cannot combine output {name!r} of the replicas: their "
                f"shapes differ ({shapes}; the last replica takes the rest of a batch that does "
                f"not divide evenly); use merge: concat for a per-sample output, reduce {name!r} "
                "to one shape in each replica (e.g. reduce_mean), or give a batch the replicas "
                "divide evenly",
            ),
            raw,
        )  # fmt: skip
    message = f": merge {merge} of output {name!r} of the replicas: {reason}"
    return _error(Message(label, message), raw)


def _slice_message(
    raw: Synthetic,
    specs: Sequence[TensorSpec],
    label: Part,
    flag: Setting | None,
    settings: Any,
    reason: str,
) -> Message:
    x, parts = raw["inputs"][0], raw["parts"]
    shape = specs[0].shape if specs else None
    if shape == ():
        fix = (
            f"give placeholder {x!r} a batch dimension, or write a replicate: block that "
            "splits only the batched inputs"
            if flag
            else f"split only inputs with a batch dimension (drop {x!r} from split)"
        )
        return Message(
            label, f": split {x!r} is a scalar (shape []), which cannot be cut into replicas "
            f"along axis 0; {fix}",
        )  # fmt: skip
    if shape is not None and shape[0] < parts:
        gpus = (
            ""
            if flag or not isinstance(settings, dict)
            else f" (gpus: {show(settings.get('gpus', 'all'))})"
        )
        return Message(
            label, f": split {x!r} has a batch of {shape[0]} (shape {fmt(shape)}), smaller than "
            f"the {parts} replicas{gpus}; give {x!r} a batch of at least {parts} along axis 0, "
            "or replicate over fewer GPUs",
        )  # fmt: skip
    return Message(label, f": split {x!r} cannot be cut into {parts} replicas: {reason}")


assert {"batch_slice", "average_n", "concat", "add_n"} <= set(REGISTRY)
