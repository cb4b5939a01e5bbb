"""Placements as device maps: each op's module path, the shortest prefixes whose ops all share a
device, and a device map turned back into device requests (to judge someone else's map).

Module paths come from the op names alone, so a YAML graph and an imported one are treated alike:

- a PyTorch exporter's node name, `/model/layers.0/mlp/fc1/MatMul`: the scopes between the
  slashes, each split at its dots, then the node: `model.layers.0.mlp.fc1.MatMul`;
- a state_dict name (an ONNX initializer from a torch export), `model.layers.0.mlp.fc1.weight`:
  its dotted parts, as they are;
- a TensorFlow name, `tower_0/dense/kernel`: its name scopes, then the op;
- in the dotted form only, a weight with a bare name (what the exporter's constant folding leaves,
  `onnx::MatMul_223`: a variable or constant whose name has no scope) goes under the module of the
  first op that reads it: `transformer.h.0.attn.c_attn.onnx::MatMul_223`.

`grouped` then folds the ops' paths into a trie and keeps, from the root down, the first node
whose ops all share a device: the shortest uniform prefixes, one key each ("" when the whole graph
is on one device, which Accelerate reads as "everything"). Every op takes the device of the
longest key that is a prefix of its path (as Accelerate matches parameters); a module whose
ops differ but that is itself an op's whole path (`a.b` beside `a.b.c`) keeps its own key. Two
ops with one path on two devices (`/a/b` and `a.b`) cannot both be said: the first one's device
is the key's (the document's `ops` has each op exactly).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..echo import show
from ..errors import BadInput, Message, Setting
from ..graph.model import Graph, Op
from ..limits import read_text
from ..parse_json import json_file

DOTTED = "."  # Accelerate's keys: module paths of the PyTorch model
SCOPED = "/"  # TensorFlow's name scopes
WEIGHTS = frozenset({"variable", "constant"})  # what a bare name is keyed by its reader for


def module_path(name: str, sep: str = DOTTED) -> tuple[str, ...]:
    """The parts of an op's name, outermost first (see the module's docstring). With `sep` "/"
    only the slashes split (TensorFlow's name scopes; a dot is part of a scope's name)."""
    parts = [p for p in name.strip("/").split("/") if p] or [name]
    if sep == SCOPED:
        return tuple(parts)
    return tuple(piece for part in parts for piece in part.split(".") if piece) or (name,)


def op_paths(graph: Graph, sep: str = DOTTED) -> list[tuple[str, tuple[str, ...]]]:
    """Each op's name and module path (see the module's docstring), in graph order."""
    first_reader: dict[str, str] = {}
    for op in graph.ops:
        for ref in op.inputs:
            first_reader.setdefault(ref.op, op.name)
    out = []
    for op in graph.ops:
        path = module_path(op.name, sep)
        weight = op.type in WEIGHTS and not op.inputs
        if sep == DOTTED and weight and len(path) == 1 and op.name in first_reader:
            path = module_path(first_reader[op.name], sep)[:-1] + path
        out.append((op.name, path))
    return out


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    device: str | None = None  # the one device of every op under it; None until one is seen
    mixed: bool = False
    ops: int = 0
    own: str | None = None  # the device of the first op whose path ends here
    own_ops: int = 0


def grouped(
    devices: Iterable[tuple[tuple[str, ...], str]], sep: str = DOTTED
) -> dict[str, tuple[str, int]]:
    """The shortest prefixes whose ops all share a device: key (parts joined by `sep`) ->
    (device, number of ops under it), in the order the ops first appear. `devices` gives each
    op's module path (`op_paths`) and device. Linear in the total length of the paths."""
    root = _Node()
    for path, device in devices:
        node = root
        for part in (*path, ""):  # "" : the op itself, below its scopes
            if node.device is None and not node.mixed:
                node.device = device
            elif node.device != device:
                node.mixed, node.device = True, None
            node.ops += 1
            if part == "":
                node.own = node.own or device
                node.own_ops += 1
                break
            node = node.children.setdefault(part, _Node())
    out: dict[str, tuple[str, int]] = {}
    pending: list[tuple[tuple[str, ...], _Node]] = [((), root)]
    while pending:  # depth first, in the order ops were first seen
        path, node = pending.pop()
        if not node.mixed and node.device is not None:
            out[sep.join(path)] = (node.device, node.ops)
            continue
        if node.own is not None:  # ops named as the module itself; the longer keys win below
            out[sep.join(path)] = (node.own, node.own_ops)
        pending.extend(((*path, k), child) for k, child in reversed(node.children.items()))
    return out


def lookup(parts: tuple[str, ...], keys: Mapping[str, object], sep: str = DOTTED) -> str | None:
    """The key of `keys` that covers the module path `parts`: the longest one that is a prefix
    of it ("" covers everything), as Accelerate matches a parameter to its device map; None
    when no key covers it."""
    for end in range(len(parts), -1, -1):
        key = sep.join(parts[:end])
        if key in keys:
            return key
    return None


@dataclass(frozen=True)
class Pinned:
    """A graph with every op's device requested from a device map, and the ops it left alone."""

    graph: Graph
    uncovered: tuple[str, ...] = ()


def pin(graph: Graph, device_map: Mapping[str, int | str], gpus: int) -> Pinned:
    """Request each op's device from an Accelerate-shaped `device_map` (module path -> GPU index
    or "cpu"): an op takes the device of the longest key covering its module path (`lookup`);
    ops no key covers keep their own request. BadInput for a value that is neither a GPU index
    below `gpus` nor "cpu" (naming the key)."""
    wanted: dict[str, str] = {}
    for key, value in device_map.items():
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < gpus:
            wanted[key] = f"/device:GPU:{value}"
        elif value == "cpu":
            wanted[key] = "/device:CPU:0"
        else:
            raise BadInput(
                Message(
                    Setting("device_map", key=key), f": {show(value)} is not a device of this "
                    f"machine; expected a GPU index 0..{gpus - 1} or 'cpu'",
                )
            )  # fmt: skip
    ops: list[Op] = []
    uncovered: list[str] = []
    for op, (_, path) in zip(graph.ops, op_paths(graph), strict=True):
        found = lookup(path, wanted)
        if found is None:
            uncovered.append(op.name)
            ops.append(op)
        else:
            ops.append(replace(op, device=wanted[found], colocate_with=None))
    return Pinned(replace(graph, ops=tuple(ops)), tuple(uncovered))


def accelerate_value(device: str) -> int | str:
    """A TensorFlow device name as Accelerate's device map says it: GPU:i -> i, CPU -> "cpu"."""
    kind, _, index = device.rpartition("device:")[2].partition(":")
    return int(index) if kind.upper() == "GPU" else "cpu"


def short_device(device: str) -> str:
    """`/job:localhost/replica:0/task:0/device:GPU:1` -> `/device:GPU:1` (what tf.device takes)."""
    return "/device:" + device.rpartition("device:")[2]


MAP_FILE_BYTES = 16 * 2**20  # a device map of a very large model is well under a MiB
_CUDA = re.compile(r"cuda:([0-9]{1,4})")


def read_device_map(path: str) -> dict[str, int | str]:
    """The device map in the JSON file at `path` (`--device-map`): a bare map, as Accelerate's
    `infer_auto_device_map` returns it and `json.dump` writes it, or the document `plan --format
    device-map` writes (its `modules`, which cover every op, not only the weights that its
    `device_map` keys for Accelerate). torch's `"cuda:1"` is read as GPU 1; other values are
    kept for `pin` to judge (and refuse by key)."""
    data = json_file(
        read_text(path, MAP_FILE_BYTES, "cannot read device map", "a device map is JSON"), path
    )
    if isinstance(data, dict) and data.get("kind") == "device-map":
        data = data.get("modules")
    if not isinstance(data, dict) or not data:
        raise BadInput(
            f'{path}: expected a JSON object of module paths mapped to GPU indices or "cpu" '
            '(e.g. {"model.layers.0": 0, "lm_head": "cpu"}), or the document plan '
            f"--format device-map writes; got {show(data)}"
        )
    out: dict[str, int | str] = {}
    for key, value in data.items():
        cuda = _CUDA.fullmatch(value) if isinstance(value, str) else None
        out[key] = int(cuda.group(1)) if cuda else value
    return out
