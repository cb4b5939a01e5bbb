"""A graph of ops as plain data: what `graph/loader.py` produces and everything else consumes.

Contract shared by the loader, the placer and the executor:
- `Graph.ops` is in a valid execution order (inputs before consumers); the loader rejects cycles.
- `Op.type` is the registry name (`constant`, `matmul`, ...); `OpMeta.tf_type` is TensorFlow's
  type (`Const`, `MatMul`), used in messages; unnamed ops get TF1's Python default names
  (`OpDef.default_name`: `Const_1`, `add`, `zeros`).
- `Op.device` is the requested device after merging nested scopes, in TensorFlow's canonical
  form (`/job:localhost/device:GPU:1`, `/device:CPU:0`, `/device:GPU:*`), or "" when unconstrained.
- `Op.outputs` are inferred at load time, so shape errors surface before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from ..devices.cluster_spec import ClusterDescription

DTYPES: dict[str, int] = {
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Shape and dtype of one op output; `nbytes` is what it occupies on a device."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * DTYPES[self.dtype]


@dataclass(frozen=True, slots=True)
class TensorRef:
    """Output `index` of op `op`; written `op` or `op:1` as in TensorFlow."""

    op: str
    index: int = 0

    def __str__(self) -> str:
        return self.op if self.index == 0 else f"{self.op}:{self.index}"


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    type: str
    inputs: tuple[TensorRef, ...] = ()
    device: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    outputs: tuple[TensorSpec, ...] = ()
    colocate_with: str | None = None
    line: int | None = None  # line in the spec file, for messages
    # the module an imported op belongs to: the PyTorch module path of an ONNX node
    # (`/encoder/layer.0/attn/MatMul` -> `encoder.layer.0.attn`), else "" (graph/onnx_import.py)
    module: str = ""


# `config.placement.strategy` (and `--strategy`): how ops without a device are placed
STRATEGIES = ("tensorflow", "balanced", "round-robin")
# `config.log_format` (and `run --log-format`): the placement log as the "Using GPUs" guide
# shows it (`a: /job:...`, the default), or TensorFlow 2.x's exact lines (`a: (Const): /job:...`)
LOG_FORMATS = ("guide", "tensorflow")
# `config.training` (and `--training`, `--dtype`): the optimizer of the training step to size,
# and the weights' and activations' dtype (float16, bfloat16: mixed precision); memory/training.py
TRAINING_OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
TRAINING_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True, slots=True)
class Config:
    """The spec's `config:` block (mirrors tf.ConfigProto); command-line flags override it."""

    log_device_placement: bool = False
    allow_soft_placement: bool = False
    gpu_options: Mapping[str, Any] = field(default_factory=dict)
    placement: Mapping[str, Any] = field(default_factory=dict)
    log_format: str = LOG_FORMATS[0]
    training: Mapping[str, str] = field(default_factory=dict)  # optimizer, dtype


class Columns(NamedTuple):
    """The fields of `Graph.ops` that most passes read per op, one list each, in op order:
    reading a frozen dataclass's field costs more than a hundred instructions even compiled,
    an item of a list a few. The loader fills them as it makes the ops (`Wiring.columns`);
    `columns` reads them off the ops for any other graph, once."""

    names: list[str]
    types: list[str]
    devices: list[str]  # the requested device, "" when unconstrained
    outputs: list[tuple[TensorSpec, ...]]


@dataclass(frozen=True, slots=True)
class Wiring:
    """`Graph.ops`' inputs as op indices: what the loader knows for free while it resolves
    names, so that the passes after it (the placer, flattening) need not look names up again.

    `ops` is the very tuple it describes (a Graph made with other ops, e.g. by `replace`, is
    wired again from names: `wiring`); `index` maps each name to its op (the last op of a
    name, if names repeat); op i's inputs are the `arity[i]` entries of `producers` after
    op i-1's: the op each reads (-1: a name no op has) and, unless `outputs` is None (every
    input reads output 0), which of its outputs. `columns`: the ops' names, types, devices
    and outputs as lists (`Columns`)."""

    ops: tuple[Op, ...]
    index: Mapping[str, int]
    producers: list[int]
    arity: list[int]
    outputs: list[int] | None = None
    columns: Columns | None = None  # `columns`: the loader's, else read off the ops once


def wiring(graph: Graph) -> Wiring:
    """`graph`'s Wiring: the loader's, else worked out from the names (once per graph: it is
    kept on the graph)."""
    found = graph.wiring
    if found is not None and found.ops is graph.ops:
        return found
    found = name_wiring(graph.ops)
    object.__setattr__(graph, "wiring", found)  # a cache: the graph's value is unchanged
    return found


def columns(graph: Graph) -> Columns:
    """`graph`'s Columns: the loader's, else read off its ops (once per graph: they are kept
    on its Wiring). Shared: never to be changed."""
    return wired_columns(wiring(graph))


def wired_columns(wired: Wiring) -> Columns:
    """The Columns of the ops `wired` describes (see `columns`)."""
    found = wired.columns
    if found is None:
        ops = wired.ops
        found = Columns(
            [op.name for op in ops], [op.type for op in ops], [op.device for op in ops],
            [op.outputs for op in ops],
        )  # fmt: skip
        object.__setattr__(wired, "columns", found)  # a cache: the wiring's value is unchanged
    return found


def name_wiring(ops: tuple[Op, ...], running: bool = False) -> Wiring:
    """The Wiring of `ops` worked out from their names: an input's producer is the op of its
    name (the last of that name), or with `running` the last of that name before the reader
    (-1 if none yet: a run of some of a graph's ops, `execute/schedule.py`)."""
    index: dict[str, int] = {} if running else {op.name: i for i, op in enumerate(ops)}
    producers: list[int] = []
    outputs: list[int] = []
    arity: list[int] = []
    get = index.get
    for i, op in enumerate(ops):
        refs = op.inputs
        arity.append(len(refs))
        for ref in refs:
            producers.append(get(ref.op, -1))
            outputs.append(ref.index)
        if running:
            index[op.name] = i
    return Wiring(ops, index, producers, arity, outputs if any(outputs) else None)


@dataclass(frozen=True, slots=True)
class Graph:
    ops: tuple[Op, ...]
    fetch: tuple[TensorRef, ...]
    config: Config = field(default_factory=Config)
    source: str = "<spec>"
    targets: tuple[str, ...] = ()  # ops without outputs named in `fetch:` (save): run, no value
    fetch_given: bool | None = None  # the spec had `fetch:` (None: unknown, e.g. built in code)
    cluster: ClusterDescription | None = None  # the spec's `cluster:` block, if any
    onnx_model: str | None = None  # the ONNX file the graph was imported from (run --verify)
    # the ops' inputs as indices (`wiring(graph)`); never compared or printed
    wiring: Wiring | None = field(default=None, compare=False, repr=False)

    def by_name(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}


# An op type's FLOPs for one run, from its attrs, input specs and output specs (`OpDef.flops`).
FlopsFn = Callable[[Mapping[str, Any], tuple[TensorSpec, ...], tuple[TensorSpec, ...]], float]


class OpMeta(Protocol):
    """What the placer needs to know about an op type (the registry's OpDef satisfies it).

    The placer also uses, where an OpMeta has them, per-op answers (`placement/tf.py`):
    `tf_type_for(attrs)` (tf.zeros is a Const or a Fill), `generator_for(attrs)` (TF's
    `IsGeneratorNode` for the op TF builds) with `tf_generator` (that answer when fixed per
    type), and `kernel_match(attrs, dtype, source)` (TensorFlow's registry: no GPU kernel for
    int32 MatMul).
    """

    @property
    def tf_type(self) -> str: ...
    @property
    def kernels(self) -> frozenset[str]: ...  # device types with a kernel: {"CPU", "GPU"}
    @property
    def generator(self) -> bool: ...  # no inputs here, value built on the host (Const, ...)
    @property
    def resident(self) -> bool: ...  # stays on its device for the whole run (variable)
