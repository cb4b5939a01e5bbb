"""Differential end-to-end properties of `gpuplace run` over random valid specs (hypothesis).

A spec is drawn op by op from most of the registry (generators, placeholders with feeds,
variables, `load` and `save`, elementwise and broadcasting ops, matmul, reductions, reshape,
transpose, concat, split, casts, prints), with random device requests (some naming GPUs the
machine lacks), device scopes nested in `graph:` blocks, `colocate_with`, towers and `fetch:`;
or a model that treats each row alone under a `replicate:` block or `--replicate N`. Each runs
through the CLI with `--json` under the three strategies, on simulated machines (some split
into logical GPUs or narrowed by CUDA_VISIBLE_DEVICES), with or without soft placement. The
properties:

- every run exits 0, 1 (this machine cannot) or 2 (bad input) with one `error:` line and no
  traceback; a kernel failing on a spec that loaded is a bug; `plan --json` agrees with it;
- a run that succeeds prints the JSON the README documents, and its values (and prints and
  saved files) equal those of the same spec with every op on the CPU (no GPU visible, soft
  placement), whatever the strategy: placement never changes results; the replicas of a model,
  merged, equal the model run on the whole batch;
- the placement honours every explicit request the machine can satisfy (TF's rules), colocated
  ops share a device, and a request nothing satisfies fails the tensorflow strategy without
  soft placement.

GPUPLACE_DIFF_EXAMPLES=3000 runs it harder (the default keeps the file to a few seconds).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Result, Run

SETTINGS = settings(
    max_examples=int(os.environ.get("GPUPLACE_DIFF_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
FLOATS = ("float32", "float64", "float16")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
DTYPES = (*NUMERIC, "bool")
STRATEGIES = ("tensorflow", "balanced", "round-robin")


@dataclass(frozen=True)
class Machine:
    """A simulated machine ("" for this one, which has no driver), the flags and environment
    that shape it, and the logical GPUs the process then has."""

    spec: str
    gpus: int
    flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def args(self) -> list[str]:
        return ["--machine", self.spec] if self.spec else []


MACHINES = [
    Machine("4xK520", 4),
    Machine("1xK40c", 1),
    Machine("2xT4", 2, ("--allow-growth",)),
    Machine("2xA100-80GB,1xT4", 3, ("--memory-limit", "64MiB")),
    Machine("1xK40c", 2, ("--virtual-gpus", "GPU:0=64MiB,64MiB")),
    Machine("2xT4", 4, ("--virtual-gpus", "GPU:1=32MiB,32MiB,32MiB")),
    Machine("4xK20m", 2, (), (("CUDA_VISIBLE_DEVICES", "3,1"),)),
    Machine("", 0),
]
TIGHT = Machine("4xK520", 4, ("--memory-limit", "1536B"))  # six small tensors a GPU
DEVICES = [
    "/cpu:0", "/gpu:0", "/gpu:1", "/device:GPU:3", "GPU:2", "/GPU:*", "/device:CPU:*", "gpu",
    "/job:localhost/replica:0/task:0/device:GPU:1", "/job:localhost/device:GPU:0",
    "/replica:0/task:0/cpu:0", "/gpu:5", "/cpu:1",
]  # fmt: skip
RUN_KEYS = {
    "machine", "strategy", "rates", "device_mapping", "placement", "pruned", "results",
    "copies", "memory", "policy", "printed",
}  # fmt: skip
PLACEMENT_KEYS = {"op", "type", "requested_device", "device", "kind", "reason", "outputs"}
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


# --- device requests as TensorFlow merges and matches them (independent of gpuplace's code) ---

Request = tuple[Any, ...]  # (job, replica, task, type, index); None means "any"
ANY: Request = (None,) * 5


def parse(text: str) -> Request:
    """A device string of DEVICES as tf.DeviceSpec reads it."""
    fields: dict[str, Any] = {}
    for piece in filter(None, text.split("/")):
        parts = piece.split(":")
        if parts[0] in ("job", "replica", "task"):
            fields[parts[0]] = parts[1] if parts[0] == "job" else int(parts[1])
        else:
            fields["type"] = (parts[1] if parts[0] == "device" else parts[0]).upper()
            index = parts[-1] if len(parts) > 1 else "*"
            fields["index"] = None if index == "*" else int(index)
    return tuple(fields.get(k) for k in ("job", "replica", "task", "type", "index"))


def merge(inner: Request, outer: Request) -> Request:
    """`with tf.device(outer): with tf.device(inner)`: field by field, the inner one wins."""
    return tuple(i if i is not None else o for i, o in zip(inner, outer, strict=True))


def matches(request: Request, device: str) -> bool:
    kind, index = device.rsplit("/device:", 1)[1].split(":")
    have = ("localhost", 0, 0, kind, int(index))
    return all(r is None or r == h for r, h in zip(request, have, strict=True))


# TensorFlow's kernel registry as captured (gpuplace/graph/data/tf_kernels.json), read here
# without gpuplace's code: the op type TF1's Python API builds for each kind, and the type attrs
# its node has (output 0's dtype; Cast's SrcT is its input's; shape, axis and size tensors are
# int32, as the Python API makes them from Python ints).
REGISTRY = json.loads(
    (Path(__file__).parents[2] / "gpuplace/graph/data/tf_kernels.json").read_text()
)
TF_TYPES = {
    "constant": "Const", "fill": "Fill", "placeholder": "Placeholder", "variable": "VariableV2",
    "random_uniform": "RandomUniform", "random_normal": "RandomStandardNormal",
    "identity": "Identity", "add": "AddV2", "sub": "Sub", "mul": "Mul", "div": "RealDiv",
    "neg": "Neg", "exp": "Exp", "log": "Log", "tanh": "Tanh", "relu": "Relu",
    "sigmoid": "Sigmoid", "softmax": "Softmax", "matmul": "MatMul", "add_n": "AddN",
    "batch_slice": "StridedSlice", "reduce_sum": "Sum", "reduce_mean": "Mean",
    "reduce_max": "Max", "transpose": "Transpose", "reshape": "Reshape", "concat": "ConcatV2",
    "cast": "Cast", "print": "Print",
}  # fmt: skip


def tf_node(
    entry: dict[str, Any], out: str, source: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The TF type and type attrs of the node TF1's Python API builds for a spec entry."""
    kind = entry["op"]
    if kind in ("zeros", "ones"):
        tf_type = "Const" if math.prod(entry["shape"]) < 1000 else "Fill"
    elif kind == "split":
        tf_type = "SplitV" if "sizes" in entry else "Split"
    else:
        tf_type = TF_TYPES.get(kind, "")
    if not tf_type:
        return "", ()
    attrs = []
    for attr in REGISTRY["type_attrs"][tf_type]:
        if attr == "SrcT":
            attrs.append((attr, source))
        elif attr in ("dtype", "DstT") or (attr == "T" and not tf_type.startswith("Random")):
            attrs.append((attr, out))
        else:
            attrs.append((attr, "int32"))
    return tf_type, tuple(attrs)


def kernels(info: Info) -> set[str]:
    """Device types with a kernel: load and save (gpuplace's own) on the CPU only, average_n
    everywhere; TF's ops by the registry: a device type's own kernel whose constraints all hold,
    else a DEFAULT kernel whose constraints hold."""
    if not info.tf_type:
        return {"CPU"} if info.kind in ("load", "save") else {"CPU", "GPU"}
    given = dict(info.attrs)
    holds = [
        device for device, constraints, _ in REGISTRY["kernels"][info.tf_type]
        if all(given.get(name) in allowed for name, allowed in constraints.items())
    ]  # fmt: skip
    return {t for t in ("CPU", "GPU") if t in holds or "DEFAULT" in holds}


def satisfiable(request: Request, info: Info, devices: list[str]) -> list[str]:
    """The devices of `devices` matching `request` with a kernel for the op."""
    found = kernels(info)
    return [d for d in devices if matches(request, d) and d.split(":")[-2] in found]


def devices_of(gpus: int) -> list[str]:
    return [CPU0] + [f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(gpus)]


# --- drawing specs ---


@dataclass(frozen=True)
class T:
    """A tensor later ops can take: its reference, shape and dtype."""

    ref: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Info:
    """What the placement checks need of an op the builder named."""

    kind: str
    dtype: str
    request: Request
    colocate_with: str | None = None
    grouped: bool = False  # in a colocation group (TF merges the group's requests)
    consumers: list[str] | None = field(default_factory=list)  # None: some have no known name
    tf_type: str = ""  # the TF op type, "" for gpuplace's own ops (load, save, average_n)
    attrs: tuple[tuple[str, str], ...] = ()  # its node's type attrs (T=..., Tidx=int32, ...)


@dataclass
class Case:
    spec: dict[str, Any]
    feeds: dict[str, str | np.ndarray] = field(default_factory=dict)  # JSON, or a .npy's array
    files: dict[str, np.ndarray] = field(default_factory=dict)  # .npy files `load` reads
    infos: dict[str, Info] = field(default_factory=dict)
    tensors: dict[str, T] = field(default_factory=dict)  # by reference
    flag_replicate: int | str | None = None  # --replicate N|all
    parts: list[int] | None = None  # the GPUs a replicate block asks for (None: all)
    merge: str = "concat"
    plain: dict[str, Any] | None = None  # the replicated model without replication

    def saves(self) -> list[str]:
        return [name for name, info in self.infos.items() if info.kind == "save"]


def values(draw: st.DrawFn, n: int, dtype: str) -> list[Any]:
    """`n` numbers for `dtype`: small ones, for floats sometimes inf, nan or float16's overflow."""
    if dtype == "bool":
        return draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if dtype in INTS:
        return draw(st.lists(st.integers(-3, 4), min_size=n, max_size=n))
    pool = st.sampled_from([-2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 3.5])
    if draw(st.booleans()):
        pool |= st.sampled_from([math.inf, -math.inf, math.nan, 70000.0])
    return draw(st.lists(pool, min_size=n, max_size=n))


def nest(flat: list[Any], shape: tuple[int, ...]) -> Any:
    """A flat list as the nested list of `shape`."""
    if not shape:
        return flat[0]
    step = len(flat) // shape[0] if shape[0] else 0
    return [nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


class Builder:
    """Draws ops one by one: every input is an earlier tensor of a fitting shape and dtype, or
    one a new generator makes on the spot; ops land in nested device blocks now and then."""

    def __init__(self, draw: st.DrawFn, case: Case) -> None:
        self.draw = draw
        self.case = case
        self.top: list[Any] = []
        self.blocks: list[tuple[list[Any], Request]] = [(self.top, ANY)]
        self.pool: list[T] = []
        self.count = 0

    def name(self, prefix: str = "n") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.draw(st.integers(0, 3)) if rank is None else rank
        dims = st.integers(1, 3)
        if self.draw(st.integers(0, 9)) == 0:
            dims |= st.just(0)
        return tuple(self.draw(dims) for _ in range(rank))

    def emit(self, entry: dict[str, Any], outputs: list[T], dtype: str) -> None:
        """Add an op to the current block, maybe with a device and a colocation."""
        draw, infos = self.draw, self.case.infos
        if draw(st.integers(0, 2)) == 0:
            entry["device"] = draw(st.sampled_from(DEVICES))
        request = merge(parse(entry.get("device", "")), self.blocks[-1][1])
        target = None
        if infos and draw(st.integers(0, 9)) == 0:
            target = entry["colocate_with"] = draw(st.sampled_from(sorted(infos)))
            infos[target].grouped = True
        tf_type, attrs = tf_node(entry, outputs[0].dtype if outputs else dtype, dtype)
        infos[entry["name"]] = Info(
            entry["op"], dtype, request, target, target is not None, tf_type=tf_type, attrs=attrs
        )
        consume(infos, entry.get("inputs", []), entry["name"])
        self.blocks[-1][0].append(entry)
        self.pool.extend(outputs)
        self.case.tensors.update((t.ref, t) for t in outputs)

    def scopes(self) -> None:
        """Maybe open a device block (`device: null` clears the scope), or close one."""
        choice = self.draw(st.integers(0, 9))
        if choice == 0 and len(self.blocks) < 3:
            block: dict[str, Any] = {"graph": []}
            scope = self.blocks[-1][1]
            if self.draw(st.integers(0, 3)):
                text = self.draw(st.sampled_from([*DEVICES, None]))
                block["device"] = text
                scope = ANY if text is None else merge(parse(text), scope)
            self.blocks[-1][0].append(block)
            self.blocks.append((block["graph"], scope))
        elif choice == 1 and len(self.blocks) > 1:
            self.blocks.pop()

    def source(self, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> T:
        """A new generator op (constant, zeros, fill, random, placeholder, variable, load)."""
        draw, case = self.draw, self.case
        shape = self.shape() if shape is None else shape
        dtype = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
        n = math.prod(shape)
        kinds = ["constant", "constant", "zeros", "ones", "fill", "placeholder", "variable", "load"]
        kind = draw(
            st.sampled_from(kinds + (["random_uniform", "random_normal"] * (dtype in FLOATS)))
        )
        name = self.name()
        entry: dict[str, Any] = {"name": name, "op": kind}
        if kind == "constant":
            flat = values(draw, max(n, 1), dtype)
            style = draw(st.integers(0, 2))
            if style == 0 and shape and n:
                entry["value"] = nest(flat, shape)  # the nesting is the shape
            else:  # flat, or one value filling the shape
                entry.update(value=flat[:1] if style == 1 or not n else flat, shape=list(shape))
        elif kind == "fill":
            entry.update(value=values(draw, 1, dtype)[0], shape=list(shape))
        elif kind == "load":
            with np.errstate(over="ignore"):  # 70000.0 is float16's inf
                case.files[f"{name}.npy"] = np.array(
                    nest(values(draw, n, dtype), shape) if n else np.zeros(shape), dtype
                )
            entry["path"] = f"{name}.npy"
        elif kind == "variable":
            inits = ["zeros", "ones", "constant"] + ["random_normal", "random_uniform"] * (
                dtype in FLOATS
            )
            entry.update(shape=list(shape), initializer=draw(st.sampled_from(inits)))
            if entry["initializer"] == "constant":
                entry["value"] = (
                    values(draw, n, dtype)
                    if n and draw(st.booleans())
                    else values(draw, 1, dtype)[0]
                )
        else:
            entry["shape"] = list(shape)
            if kind.startswith("random") and draw(st.booleans()):
                entry["seed"] = draw(st.integers(0, 5))
            if kind == "placeholder":  # JSON [] is float64, which int and bool refuse: a .npy
                fed = values(draw, n, dtype)
                case.feeds[name] = json.dumps(nest(fed, shape)) if n else np.zeros(shape, dtype)
        if kind != "load" and (dtype != "float32" or draw(st.booleans())):
            entry["dtype"] = dtype
        made = T(name, shape, dtype)
        self.emit(entry, [made], dtype)
        return made

    def pick(self, ok: Any = lambda t: True, make: Any = None) -> T:
        """Mostly an earlier tensor passing `ok`, else a new one from `make()` (or `source()`)."""
        found = [t for t in self.pool if ok(t)]
        if found and self.draw(st.integers(0, 3)):
            return self.draw(st.sampled_from(found))
        return make() if make else self.source()

    def op(self, kind: str, inputs: list[T], out: T, **attrs: Any) -> None:
        """An op with inputs and one output (named after the op)."""
        name = self.name()
        refs = [t.ref.removesuffix(":0") if self.draw(st.booleans()) else t.ref for t in inputs]
        entry = {"name": name, "op": kind, "inputs": refs, **attrs}
        self.emit(entry, [replace(out, ref=name)], inputs[0].dtype)

    def any_op(self) -> None:
        kind = self.draw(st.sampled_from(OPS))
        getattr(self, "op_" + kind.split(":")[0])(kind.split(":")[-1])

    def op_unary(self, kind: str) -> None:
        allowed = {"identity": DTYPES, "print": DTYPES, "neg": NUMERIC, "relu": NUMERIC}
        dtypes = allowed.get(kind, FLOATS)
        x = self.pick(
            lambda t: t.dtype in dtypes and (kind != "softmax" or bool(t.shape)),
            lambda: self.source(
                self.shape(self.draw(st.integers(1, 2))), self.draw(st.sampled_from(dtypes))
            ),
        )
        self.op(kind, [x], x)

    def op_cast(self, _: str) -> None:
        x = self.pick()
        dtype = self.draw(st.sampled_from(DTYPES))
        self.op("cast", [x], T("", x.shape, dtype), dtype=dtype)

    def op_binary(self, kind: str) -> None:
        x = self.pick(lambda t: t.dtype in NUMERIC, lambda: self.source(dtype="float32"))
        # a shape broadcasting against x's: a suffix of it, some dimensions 1
        suffix = x.shape[self.draw(st.integers(0, len(x.shape))) :]
        want = tuple(1 if self.draw(st.integers(0, 3)) == 0 else d for d in suffix)
        y = self.pick(
            lambda t: t.dtype == x.dtype and t.shape == want, lambda: self.source(want, x.dtype)
        )
        a, b = (x, y) if self.draw(st.booleans()) else (y, x)
        dtype = "float64" if kind == "div" and a.dtype in INTS else a.dtype
        self.op(kind, [a, b], T("", np.broadcast_shapes(a.shape, b.shape), dtype))

    def op_matmul(self, _: str) -> None:
        dtypes = [*FLOATS, "int32", "int32"] + ["int64"] * (self.draw(st.integers(0, 9)) == 0)
        a = self.pick(
            lambda t: len(t.shape) == 2 and t.dtype in dtypes,
            lambda: self.source(self.shape(2), self.draw(st.sampled_from(dtypes))),
        )
        ta, tb = self.draw(st.booleans()), self.draw(st.booleans())
        m, k = a.shape[::-1] if ta else a.shape
        n = self.draw(st.integers(1, 3))
        want = (n, k) if tb else (k, n)
        b = self.pick(
            lambda t: t.shape == want and t.dtype == a.dtype, lambda: self.source(want, a.dtype)
        )
        flags = {"transpose_a": ta, "transpose_b": tb}
        self.op("matmul", [a, b], T("", (m, n), a.dtype), **{k: v for k, v in flags.items() if v})

    def op_nary(self, kind: str) -> None:
        x = self.pick(lambda t: t.dtype in NUMERIC, lambda: self.source(dtype="int32"))
        more = [
            self.pick(
                lambda t: t.shape == x.shape and t.dtype == x.dtype,
                lambda: self.source(x.shape, x.dtype),
            )
            for _ in range(self.draw(st.integers(0, 2)))
        ]
        self.op(kind, [x, *more], x)

    def op_concat(self, _: str) -> None:
        x = self.pick(lambda t: bool(t.shape), lambda: self.source(self.shape(1)))
        axis = self.draw(st.integers(-len(x.shape), len(x.shape) - 1))
        parts = [x]
        for _ in range(self.draw(st.integers(0, 2))):
            want = list(x.shape)
            want[axis] = self.draw(st.integers(0, 2))
            parts.append(
                self.pick(
                    lambda t, w=tuple(want): t.shape == w and t.dtype == x.dtype,
                    lambda w=tuple(want): self.source(w, x.dtype),
                )
            )
        shape = list(x.shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        self.op("concat", parts, T("", tuple(shape), x.dtype), axis=axis)

    def op_reduce(self, kind: str) -> None:
        """reduce_sum, _mean, _max over no dimension of size 0 (max refuses it)."""
        x = self.pick(lambda t: t.dtype in NUMERIC and 0 not in t.shape,
                      lambda: self.source(self.shape(), "float32"))  # fmt: skip
        if 0 in x.shape:
            x = self.source(tuple(d or 1 for d in x.shape), x.dtype)
        rank, keep = len(x.shape), self.draw(st.booleans())
        axes = None
        if rank and self.draw(st.booleans()):
            axes = self.draw(st.lists(st.integers(0, rank - 1), max_size=rank, unique=True))
        attrs: dict[str, Any] = {"keepdims": keep} if keep or self.draw(st.booleans()) else {}
        if axes is not None:
            attrs["axis"] = [a - rank if self.draw(st.booleans()) else a for a in axes]
            if len(axes) == 1 and self.draw(st.booleans()):
                attrs["axis"] = attrs["axis"][0]
        gone = set(range(rank)) if axes is None else set(axes)
        shape = tuple(1 if i in gone else d for i, d in enumerate(x.shape) if keep or i not in gone)
        self.op(kind, [x], T("", shape, x.dtype), **attrs)

    def op_reshape(self, _: str) -> None:
        x = self.pick()
        n = math.prod(x.shape)
        shapes = [(n,), (1, n), (n, 1), (-1,), (1, -1)] + [(2, n // 2), (-1, 2)] * (
            n % 2 == 0 and n > 0
        )
        new = self.draw(st.sampled_from(shapes))
        known = math.prod(d for d in new if d != -1)
        out = tuple((n // known if known else 0) if d == -1 else d for d in new)
        self.op("reshape", [x], T("", out, x.dtype), shape=list(new))

    def op_transpose(self, _: str) -> None:
        x = self.pick()
        if self.draw(st.booleans()):
            self.op("transpose", [x], T("", x.shape[::-1], x.dtype))
            return
        perm = self.draw(st.permutations(range(len(x.shape))))
        self.op("transpose", [x], T("", tuple(x.shape[p] for p in perm), x.dtype), perm=list(perm))

    def op_split(self, _: str) -> None:
        x = self.pick(
            lambda t: bool(t.shape), lambda: self.source(self.shape(self.draw(st.integers(1, 3))))
        )
        axis = self.draw(st.integers(0, len(x.shape) - 1))
        size = x.shape[axis]
        if self.draw(st.booleans()):
            count = self.draw(st.sampled_from([d for d in (1, 2, 3) if size % d == 0]))
            sizes, attrs = [size // count] * count, {"num_split": count}
        else:
            first = self.draw(st.integers(0, size))
            sizes = [first, size - first]
            attrs = {"sizes": [first, -1] if self.draw(st.booleans()) else sizes}
        name = self.name()
        outs = [
            T(f"{name}:{k}", (*x.shape[:axis], s, *x.shape[axis + 1 :]), x.dtype)
            for k, s in enumerate(sizes)
        ]
        axis -= len(x.shape) * self.draw(st.booleans())
        self.emit(
            {"name": name, "op": "split", "inputs": [x.ref], "axis": axis, **attrs}, outs, x.dtype
        )

    def op_save(self, _: str) -> None:
        x = self.pick()
        name = self.name()
        self.emit(
            {"name": name, "op": "save", "inputs": [x.ref], "path": f"{name}.npy"}, [], x.dtype
        )

    def op_towers(self, _: str) -> None:
        """The guide's towers: a small body copied once per device, summed (or concatenated)."""
        x = self.pick(lambda t: t.dtype in FLOATS, lambda: self.source(dtype="float32"))
        devices = self.draw(st.lists(st.sampled_from(DEVICES[:6]), min_size=1, max_size=3))
        body, ref = [], x.ref
        for _ in range(self.draw(st.integers(1, 2))):
            name = self.name("tw")
            kind = self.draw(st.sampled_from(["relu", "neg", "tanh", "identity"]))
            body.append({"name": name, "op": kind, "inputs": [ref]})
            ref = name
        self.blocks[-1][0].append({"towers": devices, "graph": body})
        consume(self.case.infos, [x.ref], None)
        if x.shape and self.draw(st.booleans()):
            out = T("", (x.shape[0] * len(devices), *x.shape[1:]), x.dtype)
            self.op("concat", [T(ref, x.shape, x.dtype)], out)
        else:
            self.op("add_n", [T(ref, x.shape, x.dtype)], x)


OPS = [
    "unary:identity", "unary:neg", "unary:exp", "unary:log", "unary:tanh", "unary:sigmoid",
    "unary:relu", "unary:softmax", "unary:print", "cast", "binary:add", "binary:sub",
    "binary:mul", "binary:div", "binary:add", "matmul", "matmul", "nary:add_n", "nary:average_n",
    "concat", "reduce:reduce_sum", "reduce:reduce_mean", "reduce:reduce_max", "reshape",
    "transpose", "split", "save", "towers",
]  # fmt: skip


@st.composite
def graphs(draw: st.DrawFn) -> Case:
    case = Case(spec={})
    b = Builder(draw, case)
    for _ in range(draw(st.integers(1, 14))):
        b.scopes()
        if draw(st.integers(0, 3)) == 0:
            b.source()
        else:
            b.any_op()
    if draw(st.integers(0, 3)) == 0:  # inputs may name ops defined later
        b.top[:] = draw(st.permutations(b.top))
    case.spec = {"graph": b.top}
    if draw(st.booleans()):
        refs = [t.ref for t in b.pool] + case.saves()
        case.spec["fetch"] = draw(
            st.lists(st.sampled_from(refs), min_size=1, max_size=3, unique=True)
        )
    unnamed(draw, case, b.top)
    if draw(st.integers(0, 4)) == 0:
        case.spec["config"] = {"allow_soft_placement": draw(st.booleans())}
    return case


def unnamed(draw: st.DrawFn, case: Case, items: list[Any]) -> None:
    """Drop the name of some ops nothing names (TF1's default names, made unique)."""
    named = {str(r).split(":")[0] for r in case.spec.get("fetch", [])}
    entries, stack = [], list(items)
    while stack:
        item = stack.pop()
        named.update(x.split(":")[0] for x in item.get("inputs", []))
        named.add(item.get("colocate_with"))
        if "op" in item:
            entries.append(item)
        else:  # a device block, or towers (each op of whose body some op names)
            stack.extend(item["graph"])
    for item in entries:
        unfed = item["op"] != "placeholder"  # a feed names its placeholder
        if unfed and item["name"] not in named and draw(st.integers(0, 3)) == 0:
            case.infos.pop(item.pop("name"), None)
            consume(case.infos, item.get("inputs", []), None)


def consume(infos: dict[str, Info], inputs: list[str], consumer: str | None) -> None:
    """Note `consumer` (None: a name the builder does not know) on each input's producer."""
    for ref in inputs:
        producer = infos.get(ref.split(":")[0])
        if producer is not None and producer.consumers is not None:
            producer.consumers = None if consumer is None else [*producer.consumers, consumer]


ROWWISE = ["relu", "tanh", "neg", "softmax", "sigmoid", "add", "mul", "matmul", "reduce_sum",
           "concat", "identity"]  # fmt: skip


@st.composite
def replicated(draw: st.DrawFn) -> Case:
    """A batch placeholder x and a model treating each row alone (so its replicas on the
    sub-batches, merged, equal it on the whole batch) under a `replicate:` block or
    `--replicate N`; `plain` is the same model without replication."""
    batch, width = draw(st.integers(2, 6)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(FLOATS))
    fed = [float(v) for v in values(draw, batch * width, "int32")]
    case = Case(spec={}, feeds={"x": json.dumps(nest(fed, (batch, width)))})
    outer: list[dict[str, Any]] = [
        {"name": "x", "op": "placeholder", "shape": [batch, width], "dtype": dtype}
    ]
    body: list[dict[str, Any]] = []
    rows = [("x", width)]  # tensors with a batch dimension: (name, width)
    consumed = set()
    for i in range(draw(st.integers(1, 5))):
        src, w = draw(st.sampled_from(rows))
        kind = draw(st.sampled_from(ROWWISE))
        entry: dict[str, Any] = {"op": kind, "inputs": [src]}
        out = w
        if kind in ("add", "mul"):  # with a row vector: a shared variable or an outer constant
            if draw(st.booleans()):
                init = {"initializer": "constant", "value": values(draw, 1, "int32")[0]}
                body.insert(
                    0, {"name": f"c{i}", "op": "variable", "shape": [w], "dtype": dtype, **init}
                )
            else:
                outer.append(
                    {
                        "name": f"c{i}",
                        "op": "constant",
                        "value": values(draw, w, "int32"),
                        "dtype": dtype,
                    }
                )
            entry["inputs"] = [src, f"c{i}"][:: draw(st.sampled_from([1, -1]))]
        elif kind == "matmul":
            out = draw(st.integers(1, 3))
            body.insert(0, {"name": f"w{i}", "op": "variable", "shape": [w, out], "dtype": dtype,
                            "initializer": "random_normal", "seed": i})  # fmt: skip
            entry["inputs"] = [src, f"w{i}"]
        elif kind == "reduce_sum":
            entry.update(axis=1, keepdims=True)
            out = 1
        elif kind == "concat":
            other, more = draw(st.sampled_from(rows))
            entry.update(inputs=[src, other], axis=1)
            out = w + more
            consumed.add(other)
        consumed.add(src)
        if draw(st.integers(0, 4)) == 0:
            entry["device"] = draw(st.sampled_from(["/cpu:0", "/gpu:0"]))
        body.append({"name": f"r{i}", **entry})
        rows.append((f"r{i}", out))
    outputs = [n for n, _ in rows[1:] if n not in consumed]
    case.merge = draw(st.sampled_from(["concat", "concat", "add_n", "mean"]))
    if case.merge == "concat" and draw(st.integers(0, 2)) == 0:
        case.flag_replicate = draw(st.sampled_from([2, 3, 4, "all"]))
        count = case.flag_replicate
        case.parts = None if count == "all" else list(range(int(count)))
        case.spec = {"graph": outer + body}
    else:
        gpus = draw(st.sampled_from([2, 3, 4, "all", [0, 1], [1, 0], [2, 0, 1]]))
        block: dict[str, Any] = {"gpus": gpus, "split": ["x"]}
        if case.merge != "concat" or draw(st.booleans()):
            block["merge"] = case.merge
        if draw(st.booleans()):
            block["merge_device"] = draw(st.sampled_from(["/cpu:0", "/gpu:0", "/device:GPU:1"]))
        case.parts = (
            gpus if isinstance(gpus, list) else None if gpus == "all" else list(range(gpus))
        )
        case.spec = {"graph": [*outer, {"replicate": block, "graph": body}]}
    case.plain = {"graph": outer + body}
    if draw(st.booleans()):
        case.spec["fetch"] = case.plain["fetch"] = draw(
            st.lists(st.sampled_from(outputs), min_size=1, unique=True)
        )
    return case


# --- running and checking ---


@dataclass
class Ran:
    """One `gpuplace run --json`: the result, and on success the values, prints and files."""

    result: Result
    values: dict[str, np.ndarray] = field(default_factory=dict)
    printed: list[str] = field(default_factory=list)
    saved: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def code(self) -> int:
        return self.result.code

    @property
    def doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.result.out)
        return doc


def write(tmp_path: Path, case: Case, spec: dict[str, Any], as_json: bool) -> Path:
    """The spec, the .npy files it loads and those fed, in a new folder (hypothesis reuses
    tmp_path); YAML or JSON."""
    folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name, array in case.files.items():
        np.save(folder / name, array)
    for name, value in case.feeds.items():
        if isinstance(value, np.ndarray):
            np.save(folder / f"feed_{name}.npy", value)
    path = folder / ("g.json" if as_json else "g.yaml")
    path.write_text(json.dumps(spec) if as_json else yaml.safe_dump(spec, sort_keys=False))
    return path


def launch(
    run: Run, path: Path, case: Case, machine: Machine, *flags: str, cpu: bool = False
) -> Ran:
    """`gpuplace run --json` with the case's feeds, checked (and `plan --json` beside it); with
    `cpu`, no GPU visible and soft placement: every op on CPU:0."""
    env = {"CUDA_VISIBLE_DEVICES": ""} if cpu else dict(machine.env)
    args = [*machine.args(), *flags, *(["--allow-soft-placement"] if cpu else machine.flags)]
    for name in case.saves():
        (path.parent / f"{name}.npy").unlink(missing_ok=True)
    ran = Ran(run("run", str(path), "--json", *args, *feed_args(path, case), env=env))
    check_output(ran.result)
    plan = run("plan", str(path), "--json", *args, env=env)
    check_output(plan, plan=True)
    assert plan.code == ran.code, (plan.err, ran.result.err)
    if ran.code == 0:
        doc = ran.doc
        planned = json.loads(plan.out)
        assert planned["placement"] == doc["placement"]
        peaks = {d["device"]: d["peak_predicted"] for d in planned["devices"]}
        assert peaks == doc["memory_peak"], "plan predicts the peaks the run reaches"
        ran.values = {name: array(r) for name, r in doc["results"].items()}
        ran.printed = sorted(doc["printed"])
        for name in case.saves():
            if (path.parent / f"{name}.npy").exists():
                ran.saved[name] = np.load(path.parent / f"{name}.npy")
    return ran


def feed_args(path: Path, case: Case) -> list[str]:
    return [
        f"--feed={name}={path.parent / f'feed_{name}.npy' if isinstance(v, np.ndarray) else v}"
        for name, v in case.feeds.items()
    ]


def check_output(result: Result, plan: bool = False, text: bool = False) -> None:
    """Exit 0, 1 or 2; one error line on failure, none on success; never a traceback; the
    JSON documented (`plan`'s, or `run`'s unless `text`)."""
    output = result.out + result.err
    assert result.code in (0, 1, 2), output
    assert "Traceback" not in output, output
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == (0 if result.code == 0 else 1), result.err
    if result.code == 1:  # this machine cannot; never a kernel failing on a spec that loaded
        assert " failed on /job:" not in errors[0], errors[0]
    if result.code == 0 and not text:
        doc = json.loads(result.out, parse_constant=lambda c: pytest.fail(f"JSON has {c}"))
        keys = {"machine", "strategy", "rates", "placement", "pruned", "estimate", "devices"}
        assert set(doc) >= (keys if plan else RUN_KEYS), sorted(doc)
        for record in doc["placement"]:
            assert set(record) >= PLACEMENT_KEYS, sorted(record)


def array(record: dict[str, Any]) -> np.ndarray:
    """A result of the JSON (non-finite numbers are the strings "nan", "inf", "-inf")."""

    def number(v: Any) -> Any:
        return (
            [number(x) for x in v] if isinstance(v, list) else float(v) if isinstance(v, str) else v
        )

    return np.array(number(record["value"]), dtype=record["dtype"]).reshape(record["shape"])


def same(got: dict[str, np.ndarray], want: dict[str, np.ndarray], context: str) -> None:
    """Same names, shapes, dtypes, and values (nan equal to nan) up to rounding."""
    assert sorted(got) == sorted(want), context
    for name, value in got.items():
        ref = want[name]
        assert (value.shape, value.dtype) == (ref.shape, ref.dtype), f"{context}: {name}"
        if value.dtype.kind == "f":
            tol = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}[value.dtype.name]
            close = np.allclose(value, ref, rtol=tol, atol=tol, equal_nan=True)
        else:
            close = np.array_equal(value, ref)
        assert close, f"{context}: {name}\n{value}\nvs\n{ref}"


def check_placement(ran: Ran, case: Case, soft: bool) -> None:
    """Satisfiable requests of ops outside colocation groups are honoured and colocated ops
    share a device; each fetched value has the shape and dtype its op declared (and the
    builder expected)."""
    doc = ran.doc
    devices = devices_of(len(doc["device_mapping"]))
    placed = {r["op"]: r["device"] for r in doc["placement"]}
    declared = {}
    for record in doc["placement"]:
        for k, spec in enumerate(record["outputs"]):
            declared[f"{record['op']}:{k}"] = (spec["shape"], spec["dtype"])
        info = case.infos.get(record["op"])
        if info is None:
            continue
        if info.colocate_with in placed and not soft:
            assert record["device"] == placed[info.colocate_with], record
        if info.grouped or info.request == ANY:
            continue
        if satisfiable(info.request, info, devices):
            assert matches(info.request, record["device"]), record
        else:
            assert soft or doc["strategy"] != "tensorflow", record
    for name, r in doc["results"].items():
        key = name if ":" in name else f"{name}:0"
        assert declared[key] == (r["shape"], r["dtype"]), name
        t = case.tensors.get(name) or case.tensors.get(key)
        assert t is None or (tuple(r["shape"]), r["dtype"]) == (t.shape, t.dtype), name


GENERATORS = {"constant", "zeros", "ones", "placeholder", "load"}  # TF's IsGeneratorNode (Const)


def check_tf_defaults(ran: Ran, case: Case) -> None:
    """TensorFlow's placer on the ops without a request: the first device with a kernel (GPU:0
    before CPU:0), except that a generator goes where all its consumers are when it can
    (heuristic A). Not checked: identity (heuristic B), colocation groups, unknown consumers."""
    doc = ran.doc
    placed = {r["op"]: r["device"] for r in doc["placement"]}
    devices = devices_of(len(doc["device_mapping"]))
    for name, info in case.infos.items():
        if info.grouped or info.request != ANY or info.kind == "identity" or name not in placed:
            continue
        candidates = satisfiable(ANY, info, devices)
        if not candidates:
            continue
        want = min(candidates, key=lambda d: ("CPU" in d, d))  # GPUs first, by name
        if info.kind in GENERATORS:
            if info.consumers is None:
                continue
            where = {placed[c] for c in info.consumers}
            if len(where) == 1 and where <= set(candidates):
                want = where.pop()
        assert placed[name] == want, (name, info, placed)


def unsatisfiable(case: Case, gpus: int) -> bool:
    """Some op outside colocation groups requests what no device offers it (TF's placer fails
    without soft placement)."""
    devices = devices_of(gpus)
    return any(
        not i.grouped and i.request != ANY and not satisfiable(i.request, i, devices)
        for i in case.infos.values()
    )


@pytest.mark.slow  # 100 random graphs, each run five times (three strategies, CPU, verify)
@SETTINGS
@given(case=graphs(), machine=st.sampled_from([*MACHINES, TIGHT]), soft=st.booleans(),
       as_json=st.booleans())  # fmt: skip
def test_placement_never_changes_values(
    run: Run, tmp_path: Path, case: Case, machine: Machine, soft: bool, as_json: bool
) -> None:
    path = write(tmp_path, case, case.spec, as_json)
    flag = "--allow-soft-placement" if soft else "--no-allow-soft-placement"
    runs = {s: launch(run, path, case, machine, "--strategy", s, flag) for s in STRATEGIES}
    codes = {s: r.code for s, r in runs.items()}
    errors = {s: r.result.err for s, r in runs.items()}
    # tensorflow places the whole graph; balanced and round-robin what the fetches need
    cpu = launch(run, path, case, machine, "--strategy", "tensorflow", cpu=True)
    if cpu.code == 2 or 2 in codes.values():  # bad input is bad on every machine
        assert cpu.code == codes["tensorflow"] == 2, (cpu.result.err, errors)
        cpu = launch(run, path, case, machine, "--strategy", "balanced", cpu=True)
        assert (cpu.code == 2) == (codes["balanced"] == 2) == (codes["round-robin"] == 2), codes
    if codes["tensorflow"] == 0:  # the others place fewer ops, under the same rules
        assert codes["balanced"] == 0, errors  # and balanced never does worse than TF where it fits
        assert codes["round-robin"] == 0 or "OOM when allocating" in errors["round-robin"], errors
    if not soft and codes["tensorflow"] != 2 and unsatisfiable(case, machine.gpus):
        assert codes["tensorflow"] == 1, runs["tensorflow"].result.out
    if 0 in codes.values():
        assert cpu.code == 0, cpu.result.err
    for strategy, ran in runs.items():
        if ran.code == 0:
            check_placement(ran, case, soft)
            if strategy == "tensorflow":
                check_tf_defaults(ran, case)
            context = f"{strategy} on {machine}"
            same(ran.values, cpu.values, context)
            same(ran.saved, cpu.saved, context)
            assert ran.printed == cpu.printed, context
    args = [*machine.args(), *machine.flags, flag, "--explain", "--log-placement", "--verify"]
    text = run("run", str(path), *args, *feed_args(path, case), env=dict(machine.env))
    check_output(text, text=True)
    exact = not {t.dtype for t in case.tensors.values()} & {"float16", "float32"}
    if codes["tensorflow"] == 0 and exact:  # the float64 reference computes what this run did
        assert text.code == 0 and text.out.count(": ok\n") == len(cpu.values), text.out
    else:
        assert text.code in (codes["tensorflow"], 1), text.err  # 1: a float16/32 mismatch


@SETTINGS
@given(case=replicated(), machine=st.sampled_from(MACHINES),
       strategy=st.sampled_from(STRATEGIES), as_json=st.booleans())  # fmt: skip
def test_replicas_merged_equal_the_model_on_the_whole_batch(
    run: Run, tmp_path: Path, case: Case, machine: Machine, strategy: str, as_json: bool
) -> None:
    assert case.plain is not None
    flags = ["--strategy", strategy]
    if case.flag_replicate:
        flags += ["--replicate", str(case.flag_replicate)]
    got = launch(run, write(tmp_path, case, case.spec, as_json), case, machine, *flags)
    want = launch(run, write(tmp_path, case, case.plain, as_json), case, machine, cpu=True)
    assert want.code == 0, want.result.err
    parts = list(range(machine.gpus)) if case.parts is None else case.parts
    batch = case.spec["graph"][0]["shape"][0]
    if len(parts) < 2 or max(parts) >= machine.gpus:  # this machine cannot
        assert got.code == 1, got.result.err
        return
    if batch < len(parts) or (case.merge != "concat" and batch % len(parts)):
        assert got.code == 2, got.result.err  # a batch too small, or shares of unequal shapes
        return
    assert got.code == 0, got.result.err
    merged, step = want.values, batch // len(parts)
    if case.merge != "concat":  # each output's shares, summed in replica order
        cuts = [(k * step, (k + 1) * step) for k in range(len(parts))]
        for key, value in want.values.items():
            total = value[: cuts[0][1]].copy()
            for a, b in cuts[1:]:
                total += value[a:b]
            merged[key] = (
                total if case.merge == "add_n" else (total / len(parts)).astype(value.dtype)
            )
    same(got.values, merged, f"{strategy} on {machine}, merge {case.merge} over {parts}")
