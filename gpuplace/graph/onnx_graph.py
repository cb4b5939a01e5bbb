"""Build a `Graph` from a parsed ONNX ModelProto (`onnx_import.py` reads the file): bind the
symbolic dims, run ONNX's shape inference, then walk the nodes in order (see onnx_import.py's
docstring for what each becomes)."""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from pathlib import Path
from types import ModuleType
from typing import Any

from ..echo import show
from ..errors import BadInput, Message, Part, Setting
from ..limits import OPS_ENV, Limits
from .fold import evaluate
from .model import Config, Graph, Op, TensorRef, TensorSpec
from .onnx_names import Placer, module_of, unbound_dims
from .onnx_ops.shape_attrs import ONNX_DTYPES
from .onnx_tensors import (
    attr_value,
    constant_value,
    dtype_of,
    onnx_dtype,
    read_initializers,
    weight_module,
)
from .ops import REGISTRY, OpDef
from .resolve import new_op, new_ref
from .scope import Names

FOLD_ELEMENTS = 1 << 16  # a node whose inputs are all known is computed at import up to this size
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
SHAPE_OF = ("Shape", "Size")  # folded once their input's shape is known
_OPDEFS: dict[str, OpDef] = dict(REGISTRY)  # a plain dict: faster to read than the mapping proxy
# attr values a shape rule's answer may be cached under (with their type: 1, 1.0 and True differ)
_PLAIN = frozenset({int, float, str, bool, type(None)})
_ELEM_TYPES = {dtype: elem for elem, dtype in ONNX_DTYPES.items()}  # gpuplace's dtype -> ONNX's
Inferred = Mapping[str, bytes]  # tensor name -> ONNX's inferred type, a serialized TypeProto


class Importer:
    """One model's import: the tensors known by value, the tensors made by ops, the ops."""

    def __init__(self, onnx: ModuleType, model: Any, source: str, limits: Limits) -> None:
        self.onnx, self.model, self.source, self.limits = onnx, model, source, limits
        self.graph = model.graph
        self.known: dict[str, Any] = {}  # tensor name -> numpy value (initializers, folded)
        self.weights: set[str] = set()  # the known tensors that are initializers
        self.made: dict[str, tuple[TensorRef, TensorSpec]] = {}
        self.ops: list[Op] = []
        self.modules: dict[str, str] = {}  # op name -> its module, where it has one
        self.names = Names()
        self.inferred: Inferred = {}
        # Per-model caches of answers that depend only on their key: (shape, dtype) -> the
        # TypeProto ONNX writes for it, serialized; an op's type, input specs and plain attrs
        # -> its output specs; (shape, dtype) -> TensorSpec
        self.typeprotos: dict[tuple[tuple[int, ...], str], bytes] = {}
        self.shapes: dict[tuple[Any, ...], tuple[TensorSpec, ...]] = {}
        self.specs: dict[tuple[tuple[int, ...], str], TensorSpec] = {}

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
        self.known.update(read_initializers(self.onnx, graph, self.source))
        self.weights.update(self.known)
        self._bind(dims)
        self.inferred = self._infer_shapes()
        placer = Placer(devices, self.source)
        outputs = [o.name for o in graph.output]
        inputs = {i.name for i in graph.input}
        # graph outputs a node makes under another name keep theirs (`_fetch`): reserved first
        reserved = {n for n in outputs if n not in self.known and n not in inputs}
        if reserved:
            for n in graph.node:
                name = n.name
                if name in reserved and n.output and n.output[0] == name:
                    reserved.discard(name)
        for name in reserved:
            self.names.unique(name)
        self._placeholders(placer)
        for index, node in enumerate(graph.node):
            self._node(index, node, placer)
        fetch = tuple(self._fetch(name, placer, reserved) for name in outputs)
        placer.check_used()
        return Graph(tuple(self.ops), fetch, config, self.source, (), True, onnx_model=str(path))

    # -- inputs --------------------------------------------------------------------------------

    def _bind(self, dims: Mapping[str, int]) -> None:
        """Set each symbolic dim of the graph inputs to its value in `dims`; refuse the unbound
        ones (all of them at once) and names the model does not have."""
        inputs = [i for i in self.graph.input if i.name not in self.known]
        missing, seen = unbound_dims(inputs, dims)
        unknown = sorted(set(dims) - seen)
        if unknown:
            have = f"its symbolic dims: {', '.join(sorted(seen))}" if seen else "it has none"
            raise BadInput(
                Message(
                    f"{self.source}: ", Setting("dims", key=unknown[0]),
                    f": the model has no dim {unknown[0]!r}; {have}",
                )
            )  # fmt: skip
        if missing:
            places: dict[str, list[str]] = {}  # each dim once, with every place it occurs
            for d, where in missing:
                places.setdefault(d, []).append(where)
            flags: list[Part] = []
            for d in places:
                flags += [" ", Setting("dims", "N", key=d)] if d != "?" else []
            listed = "; ".join(f"{d} ({', '.join(where)})" for d, where in places.items())
            raise BadInput(
                Message(
                    f"{self.source}: unbound symbolic dims: {listed}; bind them with",
                    *flags, " (or dims: in a YAML wrapper, see docs/onnx.md)",
                )
            )  # fmt: skip
        for i in inputs:
            for d in i.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    d.dim_value = dims[d.dim_param]

    def _infer_shapes(self) -> dict[str, bytes]:
        """ONNX's type of every tensor, run once on the whole model: each as its serialized
        TypeProto, compared whole with the one gpuplace's spec makes (`_agrees`) and decoded
        only where they differ (`_theirs`)."""
        try:
            inferred = self.onnx.shape_inference.infer_shapes(self.model, data_prop=True)
        except Exception as err:  # onnx.shape_inference.InferenceError and protobuf errors
            raise self.fail(f"ONNX shape inference refuses the model: {_first_line(err)}") from None
        g = inferred.graph
        out = {info.name: info.type.SerializeToString() for info in g.value_info}
        for infos in (g.output, g.input):  # these win, as they did when read in this order
            out.update({info.name: info.type.SerializeToString() for info in infos})
        return out

    def _theirs(self, tensor: str) -> tuple[tuple[int | None, ...] | None, int]:
        """ONNX's shape and element type of `tensor` (None: a dim or rank it cannot tell; 0: no
        element type)."""
        raw = self.inferred.get(tensor)
        if raw is None:
            return None, 0
        t = self.onnx.TypeProto.FromString(raw).tensor_type
        shape = None
        if t.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        return shape, t.elem_type

    def _agrees(self, tensor: str, spec: TensorSpec) -> bool:
        """Whether ONNX inferred exactly `spec` for `tensor`, every dim known: its TypeProto's
        bytes equal the ones this shape and dtype serialize to (made once per shape and dtype)."""
        key = (spec.shape, spec.dtype)
        mine = self.typeprotos.get(key)
        if mine is None:
            if spec.dtype not in _ELEM_TYPES:
                return False
            proto = self.onnx.TypeProto()
            tensor_type = proto.tensor_type
            tensor_type.elem_type = _ELEM_TYPES[spec.dtype]
            tensor_type.shape.SetInParent()
            for d in spec.shape:
                tensor_type.shape.dim.add().dim_value = d
            mine = self.typeprotos[key] = proto.SerializeToString()
        return self.inferred.get(tensor) == mine

    def _placeholders(self, placer: Placer) -> None:
        for i in self.graph.input:
            if i.name in self.known:
                continue  # an initializer listed as an input too (older exporters)
            t = i.type.tensor_type
            dtype = onnx_dtype(t.elem_type, f"graph input {i.name!r}", self.source)
            shape = tuple(int(d.dim_value) for d in t.shape.dim)
            spec = TensorSpec(shape, dtype)
            name = self.names.unique(i.name)
            attrs = {"shape": shape, "dtype": dtype}
            self._add(name, "placeholder", (), attrs, (spec,), "", placer)
            self.made[i.name] = (new_ref(name), spec)

    # -- nodes ---------------------------------------------------------------------------------

    def _node(self, index: int, node: Any, placer: Placer) -> None:
        """One node -> its op (or a folded value, or an Opaque op). The common node (a
        registry op, no folding, ONNX agreeing) reads each protobuf field once."""
        kind, node_name, outputs = node.op_type, node.name, list(node.output)
        label = node_name or f"{kind}_{index}"
        standard = node.domain in ("", "ai.onnx")
        if kind == "Constant" and standard:
            self.known[outputs[0]] = constant_value(self.onnx, node, label, self.source)
            return
        opdef = _OPDEFS.get(kind) if standard and kind[:1].isupper() else None
        attrs: dict[str, Any] = {}  # an opaque node's are not read: it has no attrs here
        if opdef is not None:
            given = node.attribute
            if len(given):
                attrs = {a.name: attr_value(self.onnx, a, self.source) for a in given}
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
        known, made = self.known, self.made
        for tensor in data:
            if tensor and tensor not in made and tensor not in known:
                raise self.fail(
                    f"node {label!r} ({kind}): input {tensor!r} is made by no earlier node and is "
                    "no graph input or initializer; the graph is not in topological order or "
                    "misses that tensor"
                )
        if opdef is None:
            self._opaque(label, node, data, placer)
            return
        if attrs:
            unknown = [a for a in attrs if a not in opdef.attrs]
            if unknown:  # normalize would drop it, and with it what it changes
                takes = ", ".join(opdef.attrs) or "none"
                raise self.fail(
                    f"node {label!r} ({kind}): attribute {unknown[0]!r} is not one of {kind}'s "
                    f"(it takes: {takes}); the exporter wrote an attribute ONNX does not define"
                )
        if (data[0] in known or kind in SHAPE_OF if data else kind in ALWAYS_FOLD) and self._fold(
            label, node, data, attrs
        ):
            return  # _fold computes only these: all inputs known, or Shape/Size of one made
        if opdef.attrs:  # an op without attrs has none here (refused above): normalize's {}
            try:
                attrs = dict(opdef.normalize(label, attrs))
            except BadInput as err:
                raise self.fail(f"node {err}") from None
        refs, specs = [], []
        for tensor in data:
            ref, spec = made.get(tensor) or self._materialize(tensor, placer)
            refs.append(ref)
            specs.append(spec)
        outs = self._outputs(opdef, label, attrs, tuple(specs))
        for k, tensor in enumerate(outputs):
            if tensor and (k >= len(outs) or not self._agrees(tensor, outs[k])):
                self._check_output(label, kind, outputs, k, outs)
        name = self._unique(label)
        self._add(name, kind, tuple(refs), attrs, outs, module_of(node_name), placer)
        for k, tensor in enumerate(outputs):
            if tensor and k < len(outs):
                made[tensor] = (new_ref(name, k), outs[k])

    def _outputs(
        self, opdef: OpDef, label: str, attrs: dict[str, Any], specs: tuple[TensorSpec, ...]
    ) -> tuple[TensorSpec, ...]:
        """The op's output specs by its shape rule, which depends only on its type, attrs and
        input specs: answered once per distinct (type, input specs, plain attrs)."""
        key: tuple[Any, ...] | None = (opdef.name, specs)
        if attrs:
            plain: list[Any] = []
            for a, v in attrs.items():
                t = type(v)
                if t is list or t is tuple:
                    if not all(type(x) is int for x in v):
                        key = None
                        break
                    v = tuple(v)
                elif t not in _PLAIN:
                    key = None
                    break
                plain += (a, t, v)
            else:
                key = (opdef.name, specs, *plain)
        outs = self.shapes.get(key) if key is not None else None
        if outs is None:
            try:
                outs = opdef.infer(label, attrs, specs)
            except BadInput as err:
                raise self.fail(f"node {err}") from None
            if key is not None:
                self.shapes[key] = outs
        return outs

    def _unique(self, name: str) -> str:
        """`Names.unique`, the first use of a name (the common case) answered here."""
        key = name.lower()
        used = self.names.used
        if key in used:
            return self.names.unique(name)
        used[key] = 1
        return name

    def _folded_value(self, tensor: str, attr: str, label: str, kind: str) -> Any:
        value = self.known.get(tensor)
        if value is None:
            raise self.fail(
                f"node {label!r} ({kind}): its input {attr!r} (tensor {tensor!r}) is computed "
                "from data at run time, but gpuplace needs it at import to know shapes; "
                "bind every symbolic dim (--dim) or export the model with static shapes"
            )
        if attr in SCALAR_INPUTS:
            if not value.size:
                return None
            one = value.reshape(-1)[0]
            return one if kind == "Range" else one.item()  # Range's dtype is its inputs'
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
        dtype = dtype_of(value, tensor, self.source)
        key = (value.shape, dtype)
        spec = self.specs.get(key)
        if spec is None:
            spec = self.specs[key] = TensorSpec(tuple(value.shape), dtype)
        name = self._unique(tensor)
        attrs = {"value": value, "shape": spec.shape, "dtype": dtype}
        if tensor in self.weights:
            kind, module = "variable", weight_module(tensor)
            attrs["initializer"] = "constant"
        else:
            kind, module = "constant", ""
        self._add(name, kind, (), attrs, (spec,), module, placer)
        self.made[tensor] = found = (new_ref(name), spec)
        return found

    def _check_output(
        self, label: str, kind: str, outputs: list[str], k: int, outs: tuple[TensorSpec, ...]
    ) -> None:
        """Output `k`, where ONNX's type is not exactly gpuplace's: refused when gpuplace makes
        fewer outputs, when ONNX's element type is one gpuplace lacks, or when a dim or the
        dtype disagree (a dim or rank ONNX cannot tell agrees with any)."""
        tensor = outputs[k]
        if k >= len(outs):
            raise self.fail(
                f"node {label!r} ({kind}): ONNX names {len(outputs)} outputs, gpuplace's "
                f"{kind} makes {len(outs)}"
            )
        shape, elem = self._theirs(tensor)
        ours = outs[k]
        theirs = ONNX_DTYPES.get(elem) if elem else None
        if shape == ours.shape and theirs == ours.dtype:
            return
        if elem and theirs is None:
            onnx_dtype(elem, f"tensor {tensor!r} (output of node {label!r})", self.source)
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

    def _opaque(self, label: str, node: Any, data: list[str], placer: Placer) -> None:
        """An op gpuplace has no kernel for: placed and costed from ONNX's shapes, never run."""
        kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        outs: list[TensorSpec] = []
        for tensor in node.output:
            shape, elem = self._theirs(tensor)
            if not tensor or shape is None or None in shape or not elem:
                raise self.fail(
                    f"node {label!r}: op {kind} is not supported and ONNX shape inference cannot "
                    f"tell its output {tensor!r}'s shape, so gpuplace cannot plan around it; "
                    f"supported ops: {', '.join(supported_ops())}"
                )
            dtype = onnx_dtype(elem, f"tensor {tensor!r} (output of node {label!r})", self.source)
            outs.append(TensorSpec(tuple(d for d in shape if d is not None), dtype))  # all
        refs, _ = self._inputs(data, placer)
        name = self._unique(label)
        attrs = {"onnx_type": kind, "outputs": tuple(outs)}
        self._add(name, "Opaque", refs, attrs, tuple(outs), module_of(node.name), placer)
        for k, tensor in enumerate(node.output):
            self.made[tensor] = (new_ref(name, k), outs[k])

    # -- ops and names -------------------------------------------------------------------------

    def _add(
        self, name: str, kind: str, refs: tuple[TensorRef, ...], attrs: Mapping[str, Any],
        outs: tuple[TensorSpec, ...], module: str, placer: Placer,
    ) -> None:  # fmt: skip
        device = placer.device(name, module) if placer.pins else ""
        self.ops.append(new_op(name, kind, refs, device, attrs, outs, None, None, module))
        if module:
            self.modules[name] = module

    def _fetch(self, tensor: str, placer: Placer, reserved: set[str]) -> TensorRef:
        """The graph output `tensor`, fetched under its ONNX name."""
        ref, spec = self.made.get(tensor) or self._materialize(tensor, placer)
        if ref.op == tensor and ref.index == 0:
            return ref
        if tensor not in reserved:  # a known value materialized under its own name above
            return ref
        attrs: Mapping[str, Any] = {}
        module = self.modules.get(ref.op, "")
        device = placer.device(ref.op, module)
        op = new_op(tensor, "identity", (ref,), device, attrs, (spec,), ref.op, None, module)
        self.ops.append(op)  # colocated with the tensor's producer (and of its module)
        return new_ref(tensor)


def supported_ops() -> list[str]:
    """The ONNX op types gpuplace imports (registry ops named like ONNX's, plus Constant)."""
    return sorted({n for n in REGISTRY if n[:1].isupper() and n != "Opaque"} | {"Constant"})


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return show(text[0] if text else type(err).__name__, 300)
