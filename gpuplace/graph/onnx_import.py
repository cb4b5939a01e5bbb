"""ONNX models in: a `.onnx` file (a protobuf ModelProto) -> the same `Graph` a spec loads to.

The only module that imports `onnx` (lazily: without it, one line naming the extra). Bounded
before anything is parsed: the file's bytes against `limits.spec_bytes`, its node count
against `limits.ops`. Then, in the graph's own order (ONNX graphs are topologically sorted):

- each graph input that is not an initializer becomes a `placeholder` named after it, its
  symbolic dims bound by `dims` (`--dim batch=32`; an unbound one is refused, listing them all);
- each initializer becomes a resident `variable` holding the tensor's own array (no copy when the
  tensor's bytes are raw), made when a node first reads it as data;
- each node becomes the registry op of its ONNX type (`graph/ops.py`: `Gemm`, `Reshape`, ...),
  named by its ONNX name (unnamed: `<OpType>_<index>`; made unique as TensorFlow would), its
  PyTorch module path (`/encoder/layer.0/attn/MatMul` -> `encoder.layer.0.attn`) on `Op.module`;
- inputs whose values decide shapes (Reshape's `shape`, Slice's `starts`, ...) become attrs
  (`SHAPE_INPUTS`); nodes whose inputs are all known and small (Constant, Shape of a bound
  input, the Gather/Concat/Range that follow) are computed here with the ops' own numpy compute
  and folded away;
- shapes and dtypes come from gpuplace's own inference and are checked against ONNX's shape
  inference, node by node; a disagreement names the node;
- an op gpuplace lacks becomes an `Opaque` op with the shapes ONNX infers (plan estimates it;
  run refuses it), or is refused naming the node and the supported ops when they are unknown;
- the graph outputs are fetched under their ONNX names (an `identity` op carries the name when
  the node that makes the tensor is named otherwise).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Mapping
from math import prod
from pathlib import Path
from types import ModuleType
from typing import Any

from ..echo import clip_middle, show
from ..errors import BadInput
from ..gc_pause import gc_paused
from ..limits import OPS_ENV, SPEC_SIZE_ENV, Limits, read_bytes
from .fold import evaluate
from .model import DTYPES, Config, Graph, Op, TensorRef, TensorSpec
from .onnx_names import Placer, module_of, unbound_dims
from .ops import REGISTRY
from .resolve import new_op, new_ref
from .scope import Names

EXTRA = "pip install 'gpuplace[onnx]'"
STRIP_BYTES = 1 << 12  # initializers past this go to ONNX's shape inference without their bytes
FOLD_ELEMENTS = 1 << 16  # a node whose inputs are all known is computed at import up to this size
# ONNX's TensorProto.DataType -> gpuplace's dtype; other types are refused naming the tensor
ONNX_DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}
ONNX_TYPE_NAMES = {
    2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 8: "string", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16",
}  # fmt: skip
# Inputs ONNX passes as tensors whose values decide shapes: attrs of the registry op, named after
# the input in the ONNX schema (the ONNX op convention); by op type, input index -> attr.
SHAPE_INPUTS: Mapping[str, Mapping[int, str]] = {
    "Reshape": {1: "shape"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "Squeeze": {1: "axes"},
    "Unsqueeze": {1: "axes"},
    "Expand": {1: "shape"},
    "Split": {1: "split"},
    "ReduceMean": {1: "axes"},
    "ReduceSum": {1: "axes"},
    "ReduceMax": {1: "axes"},
    "CumSum": {1: "axis"},
    "ConstantOfShape": {0: "input"},
    "Range": {0: "start", 1: "limit", 2: "delta"},
    "Pad": {1: "pads", 2: "constant_value", 3: "axes"},
    "Clip": {1: "min", 2: "max"},
    "Tile": {1: "repeats"},
    "TopK": {1: "K"},
}
NONE: Mapping[int, str] = {}
SCALAR_INPUTS = frozenset({"axis", "start", "limit", "delta", "min", "max", "K", "constant_value"})
ALWAYS_FOLD = frozenset({"Shape", "Size", "ConstantOfShape", "Range"})  # folded without inputs


def onnx_module() -> ModuleType:
    """`import onnx`, or BadInput naming the extra that installs it."""
    try:
        import onnx
    except ImportError:
        raise BadInput(f"reading an ONNX model needs the onnx extra: {EXTRA}") from None
    return onnx


def looks_like_onnx(head: bytes) -> bool:
    """Whether bytes start like a serialized ModelProto: field 1 (ir_version, a varint) first,
    as every writer emits it; a YAML or JSON spec never starts with byte 0x08."""
    return len(head) >= 2 and head[0] == 0x08 and 1 <= head[1] <= 0x7F


def is_onnx_path(path: str | os.PathLike[str]) -> bool:
    """A file gpuplace reads as an ONNX model: named `.onnx`, or a regular file starting like
    one (a FIFO or device is never opened here: the spec reader refuses or bounds it)."""
    if os.fspath(path).lower().endswith(".onnx"):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return looks_like_onnx(f.read(2))
    except (OSError, ValueError):
        return False


def load_onnx(
    path: str | os.PathLike[str],
    *,
    dims: Mapping[str, int] | None = None,
    devices: Mapping[str, str] | None = None,
    config: Config | None = None,
    limits: Limits | None = None,
    source: str | None = None,
) -> Graph:
    """Read the ONNX model at `path` (bounded) and import it; `dims` binds symbolic dims,
    `devices` pins ops by name or module prefix (`Placer`), `config` is the wrapper's."""
    limits = limits or Limits()
    name = clip_middle(os.fspath(path))
    hint = f"set {SPEC_SIZE_ENV} to raise the limit (e.g. {SPEC_SIZE_ENV}=4GiB)"
    data = read_bytes(path, limits.spec_bytes, f"cannot read ONNX model {name!r}", hint)
    if not looks_like_onnx(data[:2]):
        raise BadInput(
            f"{name}: not an ONNX model (a .onnx file is a protobuf ModelProto, which starts with "
            f"byte 0x08; this one starts with {data[:8]!r}); export the model again, or give a "
            "YAML or JSON spec"
        )
    onnx = onnx_module()
    with gc_paused():  # a large model makes many objects, none of them garbage
        return _import(onnx, data, name, path, limits, source, dims, devices, config)


def _import(
    onnx: ModuleType, data: bytes, name: str, path: str | os.PathLike[str], limits: Limits,
    source: str | None, dims: Mapping[str, int] | None, devices: Mapping[str, str] | None,
    config: Config | None,
) -> Graph:  # fmt: skip
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # google.protobuf.message.DecodeError, or a RuntimeError from upb
        raise BadInput(
            f"{name}: not a readable ONNX model (the protobuf does not parse: {err}); the file "
            "may be truncated or corrupt, export it again"
        ) from None
    return Importer(onnx, model, source or os.fspath(path), limits).build(
        dims or {}, devices or {}, config or Config(), Path(path).resolve()
    )


def _dtype(elem_type: int, what: str, source: str) -> str:
    dtype = ONNX_DTYPES.get(elem_type)
    if dtype is None:
        kind = ONNX_TYPE_NAMES.get(elem_type, f"element type {elem_type}")
        raise BadInput(
            f"{source}: {what} is {kind}, which gpuplace does not support; it takes "
            f"{', '.join(DTYPES)} (cast the tensor in the model)"
        )
    return dtype


class Importer:
    """One model's import: the tensors known by value, the tensors made by ops, the ops."""

    def __init__(self, onnx: ModuleType, model: Any, source: str, limits: Limits) -> None:
        self.onnx, self.model, self.source, self.limits = onnx, model, source, limits
        self.graph = model.graph
        self.known: dict[str, Any] = {}  # tensor name -> numpy value (initializers, folded)
        self.weights: set[str] = set()  # the known tensors that are initializers
        self.made: dict[str, tuple[TensorRef, TensorSpec]] = {}
        self.ops: list[Op] = []
        self.names = Names()
        self.opaque: list[str] = []

    def fail(self, message: str) -> BadInput:
        return BadInput(f"{self.source}: {message}")

    def build(
        self, dims: Mapping[str, int], devices: Mapping[str, str], config: Config, path: Path
    ) -> Graph:
        graph = self.graph
        if len(graph.node) > self.limits.ops:
            raise self.fail(
                f"the model has {len(graph.node):,} nodes, more than the limit of "
                f"{self.limits.ops:,} ops; set {OPS_ENV} to raise it"
            )
        self._initializers()
        self._bind(dims)
        inferred = self._infer_shapes()
        placer = Placer(devices, self.source)
        outputs = [o.name for o in graph.output]
        inputs = {i.name for i in graph.input}
        same = {n.output[0] for n in graph.node if n.output and n.output[0] == n.name}
        reserved = {n for n in outputs if n not in self.known and n not in same | inputs}
        for name in reserved:
            self.names.unique(name)
        self._placeholders(placer)
        for index, node in enumerate(graph.node):
            self._node(index, node, inferred, placer, reserved)
        fetch = tuple(self._fetch(name, placer, reserved) for name in outputs)
        placer.check_used()
        return Graph(tuple(self.ops), fetch, config, self.source, (), True, onnx_model=str(path))

    # -- inputs --------------------------------------------------------------------------------

    def _initializers(self) -> None:
        """Each initializer's array: a view of its raw bytes (no copy) where it has them."""
        import numpy as np

        helper = self.onnx.numpy_helper
        little = sys.byteorder == "little"
        for t in self.graph.initializer:
            what = f"initializer {t.name!r}"
            if t.data_location == 1:  # EXTERNAL
                raise self.fail(
                    f"{what} keeps its data in an external file, which gpuplace does not read; "
                    "save the model with its weights inside (onnx.save(..., "
                    "save_as_external_data=False)) or give a model under 2 GiB"
                )
            dtype = _dtype(t.data_type, what, self.source)
            shape = tuple(t.dims)
            count = prod(shape)
            if any(d < 0 for d in shape):
                raise self.fail(f"{what} has a negative dim: {list(shape)}")
            raw = t.raw_data
            have = len(raw) // DTYPES[dtype] if raw else _field_count(t)
            if have != count or (raw and len(raw) % DTYPES[dtype]):
                raise self.fail(
                    f"{what} declares shape {list(shape)} ({count:,} elements) but holds "
                    f"{have:,}; the file is corrupt, export it again"
                )
            try:
                if raw and little:  # ONNX stores raw data little-endian
                    value = np.frombuffer(raw, dtype=dtype).reshape(shape)
                else:
                    value = helper.to_array(t)
            except (ValueError, TypeError) as err:
                raise self.fail(f"{what} cannot be read: {err}") from None
            self.known[t.name] = value
            self.weights.add(t.name)
            if raw and len(raw) > STRIP_BYTES:  # shape inference reads its dims, not its bytes
                t.ClearField("raw_data")

    def _bind(self, dims: Mapping[str, int]) -> None:
        """Set each symbolic dim of the graph inputs to its value in `dims`; refuse the unbound
        ones (all of them at once) and names the model does not have."""
        inputs = [i for i in self.graph.input if i.name not in self.known]
        missing, seen = unbound_dims(inputs, dims)
        unknown = sorted(set(dims) - seen)
        if unknown:
            have = f"its symbolic dims: {', '.join(sorted(seen))}" if seen else "it has none"
            raise self.fail(f"--dim {unknown[0]}: the model has no dim {unknown[0]!r}; {have}")
        if missing:
            flags = " ".join(f"--dim {d}=N" for d in dict.fromkeys(m[0] for m in missing))
            listed = "; ".join(f"{d} ({where})" for d, where in missing)
            raise self.fail(
                f"unbound symbolic dims: {listed}; bind them with {flags} (or dims: in a YAML "
                "wrapper, see docs/onnx.md)"
            )
        for i in inputs:
            for d in i.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    d.dim_value = dims[d.dim_param]

    def _infer_shapes(self) -> dict[str, tuple[tuple[int | None, ...] | None, int]]:
        """ONNX's shapes and element types of every tensor (None: a dim or rank it cannot tell)."""
        try:
            inferred = self.onnx.shape_inference.infer_shapes(self.model, data_prop=True)
        except Exception as err:  # onnx.shape_inference.InferenceError and protobuf errors
            raise self.fail(f"ONNX shape inference refuses the model: {_first_line(err)}") from None
        out: dict[str, tuple[tuple[int | None, ...] | None, int]] = {}
        g = inferred.graph
        for info in (*g.value_info, *g.output, *g.input):
            t = info.type.tensor_type
            shape = None
            if t.HasField("shape"):
                shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            out[info.name] = (shape, t.elem_type)
        return out

    def _placeholders(self, placer: Placer) -> None:
        for i in self.graph.input:
            if i.name in self.known:
                continue  # an initializer listed as an input too (older exporters)
            t = i.type.tensor_type
            dtype = _dtype(t.elem_type, f"graph input {i.name!r}", self.source)
            shape = tuple(int(d.dim_value) for d in t.shape.dim)
            spec = TensorSpec(shape, dtype)
            name = self.names.unique(i.name)
            attrs = {"shape": shape, "dtype": dtype}
            self._add(name, "placeholder", (), attrs, (spec,), "", placer)
            self.made[i.name] = (new_ref(name), spec)

    # -- nodes ---------------------------------------------------------------------------------

    def _node(
        self, index: int, node: Any, inferred: Mapping[str, Any], placer: Placer,
        reserved: set[str],
    ) -> None:  # fmt: skip
        kind, node_name, outputs = node.op_type, node.name, list(node.output)
        label = node_name or f"{kind}_{index}"
        standard = node.domain in ("", "ai.onnx")
        if kind == "Constant" and standard:
            self.known[outputs[0]] = self._constant_value(node, label)
            return
        opdef = REGISTRY.get(kind) if standard and kind[:1].isupper() else None
        attrs: dict[str, Any] = (
            {a.name: self._attr(a) for a in node.attribute} if len(node.attribute) else {}
        )
        folded = SHAPE_INPUTS.get(kind, NONE) if opdef is not None else NONE
        data = list(node.input)
        if folded or "" in data:
            given, data = data, []
            for k, tensor in enumerate(given):
                if k in folded:
                    if tensor:
                        attrs[folded[k]] = self._folded_value(tensor, folded[k], label, kind)
                elif tensor or any(given[k:]):
                    data.append(tensor)
        while data and not data[-1]:
            data.pop()
        for tensor in data:
            if tensor and tensor not in self.known and tensor not in self.made:
                raise self.fail(
                    f"node {label!r} ({kind}): input {tensor!r} is made by no earlier node and is "
                    "no graph input or initializer; the graph is not in topological order or "
                    "misses that tensor"
                )
        if opdef is None:
            self._opaque(label, node, data, inferred, placer, reserved)
            return
        if self._fold(label, node, data, attrs):
            return
        try:
            attrs = dict(opdef.normalize(label, attrs))
        except BadInput as err:
            raise self.fail(f"node {err}") from None
        refs, specs = self._inputs(data, placer)
        try:
            outs = opdef.infer(label, attrs, tuple(specs))
        except BadInput as err:
            raise self.fail(f"node {err}") from None
        self._check_outputs(label, kind, outputs, outs, inferred)
        name = self._unique(label, reserved)
        self._add(name, kind, refs, attrs, outs, module_of(node_name), placer)
        for k, tensor in enumerate(outputs):
            if tensor and k < len(outs):
                self.made[tensor] = (new_ref(name, k), outs[k])

    def _constant_value(self, node: Any, label: str) -> Any:
        import numpy as np

        for a in node.attribute:
            value = self._attr(a)
            if a.name == "value":
                return value
            if a.name in ("value_float", "value_floats"):
                return np.asarray(value, dtype=np.float32)
            if a.name in ("value_int", "value_ints"):
                return np.asarray(value, dtype=np.int64)
        raise self.fail(f"node {label!r} (Constant): no value attribute gpuplace reads")

    def _attr(self, a: Any) -> Any:
        value = self.onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if a.type == self.onnx.AttributeProto.TENSOR:
            _dtype(value.data_type, f"attribute {a.name!r}", self.source)
            return self.onnx.numpy_helper.to_array(value)
        if isinstance(value, (list, tuple)):
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
        return value

    def _folded_value(self, tensor: str, attr: str, label: str, kind: str) -> Any:
        value = self.known.get(tensor)
        if value is None:
            raise self.fail(
                f"node {label!r} ({kind}): its input {attr!r} (tensor {tensor!r}) is computed "
                "from data at run time, but gpuplace needs it at import to know shapes; "
                "bind every symbolic dim (--dim) or export the model with static shapes"
            )
        if attr in SCALAR_INPUTS:
            return value.reshape(-1)[0].item() if value.size else None
        return [v.item() for v in value.reshape(-1)]

    def _fold(self, label: str, node: Any, data: list[str], attrs: dict[str, Any]) -> bool:
        """Compute the node here (`fold.evaluate`: the op's own numpy compute) when its inputs
        are known (Shape's: when its input's shape is) and small; its outputs become known."""
        import numpy as np

        kind = node.op_type
        if kind in ("Shape", "Size") and data and data[0] in self.made:
            spec = self.made[data[0]][1]  # a zero-strided stand-in: the shape, no memory
            values = [np.broadcast_to(np.zeros((), dtype=spec.dtype), spec.shape)]
        elif all(t in self.known for t in data) and (data or kind in ALWAYS_FOLD):
            values = [self.known[t] for t in data]
            if sum(v.size for v in values) > FOLD_ELEMENTS:
                return False
        else:
            return False
        try:
            if not self._small(kind, label, values, attrs):
                return False  # a large constant (a mask over a long sequence): an op
            outs = evaluate(kind, values, attrs, label)
        except BadInput as err:
            raise self.fail(f"node {err}") from None
        except (ValueError, TypeError, IndexError, MemoryError) as err:
            raise self.fail(f"node {label!r} ({kind}): cannot be computed: {err}") from None
        for tensor, value in zip(node.output, outs, strict=False):
            if tensor:
                self.known[tensor] = value
        return True

    @staticmethod
    def _small(kind: str, label: str, values: list[Any], attrs: Mapping[str, Any]) -> bool:
        """Whether every output of the node holds at most FOLD_ELEMENTS (known before any of
        them is computed, from the op's shape rule)."""
        opdef = REGISTRY[kind]
        specs = tuple(TensorSpec(tuple(v.shape), str(v.dtype)) for v in values)
        outs = opdef.infer(label, opdef.normalize(label, attrs), specs)
        return all(prod(o.shape) <= FOLD_ELEMENTS for o in outs)

    def _inputs(
        self, data: list[str], placer: Placer
    ) -> tuple[tuple[TensorRef, ...], list[TensorSpec]]:
        refs, specs = [], []
        for tensor in data:
            ref, spec = self.made.get(tensor) or self._materialize(tensor, placer)
            refs.append(ref)
            specs.append(spec)
        return tuple(refs), specs

    def _materialize(self, tensor: str, placer: Placer) -> tuple[TensorRef, TensorSpec]:
        """A known value read as data: the initializer's `variable`, or a `constant`."""
        value = self.known[tensor]
        dtype = _dtype_of(value, tensor, self.source)
        spec = TensorSpec(tuple(value.shape), dtype)
        name = self.names.unique(tensor)
        attrs = {"value": value, "shape": spec.shape, "dtype": dtype}
        if tensor in self.weights:
            kind, module = "variable", _weight_module(tensor)
            attrs["initializer"] = "constant"
        else:
            kind, module = "constant", ""
        self._add(name, kind, (), attrs, (spec,), module, placer)
        self.made[tensor] = found = (new_ref(name), spec)
        return found

    def _check_outputs(
        self, label: str, kind: str, outputs: list[str], outs: tuple[TensorSpec, ...],
        inferred: Mapping[str, Any],
    ) -> None:  # fmt: skip
        for k, tensor in enumerate(outputs):
            if not tensor:
                continue
            if k >= len(outs):
                raise self.fail(
                    f"node {label!r} ({kind}): ONNX names {len(outputs)} outputs, gpuplace's "
                    f"{kind} makes {len(outs)}"
                )
            shape, elem = inferred.get(tensor, (None, 0))
            ours = outs[k]
            theirs = ONNX_DTYPES.get(elem) if elem else None
            if shape == ours.shape and theirs == ours.dtype:
                continue  # the common case: both agree, fully known
            if elem and theirs is None:
                _dtype(elem, f"tensor {tensor!r} (output of node {label!r})", self.source)
            same_shape = shape is None or (
                len(shape) == len(ours.shape)
                and all(a is None or a == b for a, b in zip(shape, ours.shape, strict=True))
            )
            if not same_shape or (theirs is not None and theirs != ours.dtype):
                seen = "?" if shape is None else [("?" if d is None else d) for d in shape]
                raise self.fail(
                    f"node {label!r} ({kind}): output {tensor!r}: gpuplace infers {ours.dtype} "
                    f"{list(ours.shape)}, ONNX shape inference {theirs or '?'} {seen}; this is "
                    "a bug in gpuplace's "
                    f"{kind} or in the model: please report it with the model"
                )

    def _opaque(
        self, label: str, node: Any, data: list[str], inferred: Mapping[str, Any],
        placer: Placer, reserved: set[str],
    ) -> None:  # fmt: skip
        """An op gpuplace has no kernel for: placed and costed from ONNX's shapes, never run."""
        kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        outs: list[TensorSpec] = []
        for tensor in node.output:
            shape, elem = inferred.get(tensor, (None, 0))
            if not tensor or shape is None or None in shape or not elem:
                raise self.fail(
                    f"node {label!r}: op {kind} is not supported and ONNX shape inference cannot "
                    f"tell its output {tensor!r}'s shape, so gpuplace cannot plan around it; "
                    f"supported ops: {', '.join(supported_ops())}"
                )
            dtype = _dtype(elem, f"tensor {tensor!r} (output of node {label!r})", self.source)
            outs.append(TensorSpec(tuple(shape), dtype))
        refs, _ = self._inputs(data, placer)
        name = self._unique(label, reserved)
        attrs = {"onnx_type": kind, "outputs": tuple(outs)}
        self._add(name, "Opaque", refs, attrs, tuple(outs), module_of(node.name), placer)
        self.opaque.append(name)
        for k, tensor in enumerate(node.output):
            self.made[tensor] = (new_ref(name, k), outs[k])

    # -- ops and names -------------------------------------------------------------------------

    def _unique(self, label: str, reserved: set[str]) -> str:
        return self.names.unique(label)

    def _add(
        self, name: str, kind: str, refs: tuple[TensorRef, ...], attrs: Mapping[str, Any],
        outs: tuple[TensorSpec, ...], module: str, placer: Placer,
    ) -> None:  # fmt: skip
        device = placer.device(name, module)
        self.ops.append(new_op(name, kind, refs, device, attrs, outs, None, None, module))

    def _fetch(self, tensor: str, placer: Placer, reserved: set[str]) -> TensorRef:
        """The graph output `tensor`, fetched under its ONNX name."""
        ref, spec = self.made.get(tensor) or self._materialize(tensor, placer)
        if ref.op == tensor and ref.index == 0:
            return ref
        if tensor not in reserved:  # a known value materialized under its own name above
            return ref
        attrs: Mapping[str, Any] = {}
        device = placer.device(ref.op, "")
        op = new_op(tensor, "identity", (ref,), device, attrs, (spec,), ref.op, None)
        self.ops.append(op)  # colocated with the tensor's producer: no copy for a name
        return new_ref(tensor)


def refuse_opaque(graph: Graph) -> None:
    """Before a run: an imported op gpuplace has no kernel for stops it (exit 2), naming the
    node and the ops gpuplace runs; `plan` takes it (its cost estimated)."""
    for op in graph.ops:
        if op.type == "Opaque":
            raise BadInput(
                f"{graph.source}: node {op.name!r} is an ONNX {op.attrs.get('onnx_type')} op, "
                "which gpuplace cannot run (plan estimates it); supported ops: "
                f"{', '.join(supported_ops())}"
            )


class _DtypeNames(dict[Any, str]):
    """numpy dtype -> gpuplace's dtype name, filled on first use (numpy is imported lazily)."""

    def get(self, key: Any, default: Any = None) -> Any:
        if not self:
            import numpy as np

            self.update({np.dtype(n): n for n in DTYPES})
        return super().get(key, default)


_DTYPE_NAMES = _DtypeNames()


def supported_ops() -> list[str]:
    """The ONNX op types gpuplace imports (registry ops named like ONNX's, plus Constant)."""
    return sorted({n for n in REGISTRY if n[:1].isupper() and n != "Opaque"} | {"Constant"})


def _dtype_of(value: Any, tensor: str, source: str) -> str:
    name: str | None = _DTYPE_NAMES.get(value.dtype)  # a dict lookup: dtype.name is slow
    if name is None:
        raise BadInput(
            f"{source}: tensor {tensor!r} is {value.dtype}, which gpuplace does not support"
        )
    return name


def _weight_module(name: str) -> str:
    """A PyTorch parameter's module (`encoder.layer.0.attn.query.weight` -> `...attn.query`)."""
    if "/" in name or "." not in name:
        return ""
    return name.rpartition(".")[0]


def _field_count(t: Any) -> int:
    fields: Iterable[Any] = (
        t.float_data,
        t.int32_data,
        t.int64_data,
        t.double_data,
        t.uint64_data,
        t.string_data,
    )
    return max((len(f) for f in fields), default=0)


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return show(text[0] if text else type(err).__name__, 300)
