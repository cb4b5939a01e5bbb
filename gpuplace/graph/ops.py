"""The op registry: for each op type its TensorFlow type, kernels per device type, inputs, attrs,
shape inference and compute. `get_op("matmul").tf_type == "MatMul"`.

Kernels come from TensorFlow's own registry (`tf_registry.py`, captured from TF 2.21's CPU and
CUDA builds): `kernel_match` gives, for an op's dtypes, the device types with a kernel and the
registered kernel serving each (Relu on int32 has no GPU kernel; MatMul on int64 has a CPU
one). `TF_TYPE_ATTRS` says where each of a TF type's type attrs comes from. `kernels` is the
type's upper bound: CPU and GPU, but the CPU alone for the file ops (load, save), which are not
TensorFlow's, and Print, whose only kernel is a CPU one, so soft placement has work to do.

Each op stands for what TF1's Python API builds for it, so it has TF1's default name and the
TF type of the op carrying that name (`default_name`, `tf_type_for`): `zeros` is a Const named
`zeros` below 1000 elements and a Fill above (`array_ops._constant_if_small`); `add` is `x + y`,
named `add`. Whether TF's placer treats an op as a generator (`IsGeneratorNode` in `placer.cc`:
no inputs, one output, not a ref) follows from that op: a Const or Placeholder is one, but Fill
and the random ops take a shape tensor as input in TF, so they are placed like any other op
(`generator_for`). `generator` itself means that the op has no inputs here and builds its
value on the host.
"""

from __future__ import annotations

import difflib
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from types import MappingProxyType, ModuleType
from typing import Any

from ..echo import show
from ..errors import BadInput
from . import infer as inf
from . import kernels as k
from .attr_rules import check_constant, check_load, check_random, check_split, check_variable
from .attrs import (
    AXES,
    BOOL,
    DTYPE,
    INITIALIZER,
    INT,
    NEW_SHAPE,
    NUMBER,
    NUMERIC,
    OUT_PATH,
    PATH,
    PERM,
    POSITIVE,
    SCALAR,
    SEED,
    SHAPE,
    SIZES,
    TEXT,
    VALUE,
    Attr,
    AttrError,
    number_hint,
)
from .model import OpMeta, TensorSpec
from .tf_registry import KernelMatch, match
from .writes import WriteRules, save_path, write_rules

BOTH = frozenset({"CPU", "GPU"})
CPU_ONLY = frozenset({"CPU"})
# TF types of the ops gpuplace's generators become that take no inputs in TF's GraphDef (Fill,
# RandomUniform and RandomStandardNormal read a shape tensor). VariableV2 takes none either but
# its output is a ref, so TF's placer does not defer it; LoadNpy stands for a Const of the file.
NO_INPUT_TF_TYPES = frozenset({"Const", "Placeholder", "LoadNpy"})
SMALL_CONSTANT = 1000  # array_ops._constant_if_small: tf.zeros/tf.ones below this are a Const
STRUCTURAL = frozenset({"name", "op", "inputs", "device", "colocate_with"})
REQUIRED = object()  # marks an attr without a default
EMPTY: Mapping[str, Any] = MappingProxyType({})


class TfType(str):
    """A TensorFlow op type (`AddV2`) that also carries the default name TF1's Python API gives
    an unnamed op of this kind (`add`, from `x + y`): `walk.Names.unique` names an op after it.
    Equal to, and printed as, the plain type."""

    default_name: str

    def __new__(cls, tf_type: str, default_name: str | None = None) -> TfType:
        made = super().__new__(cls, tf_type)
        made.default_name = tf_type if default_name is None else default_name
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # copy and pickle
        return (str(self), self.default_name)


@dataclass(frozen=True)
class OpDef:
    """One op type. Satisfies `gpuplace.graph.model.OpMeta` (tf_type, kernels, generator,
    resident, and the per-op `tf_type_for`, `generator_for`, `kernel_match`). `attrs` maps each
    accepted attr to (kind, default or REQUIRED)."""

    name: str
    tf_type: str
    infer_fn: inf.InferFn
    compute_fn: k.ComputeFn
    attrs: Mapping[str, tuple[Attr, Any]] = field(default_factory=lambda: EMPTY)
    min_inputs: int = 0
    max_inputs: int | None = 0  # None: any number (add_n, concat)
    kernels: frozenset[str] = BOTH
    generator: bool = False
    resident: bool = False
    check: Callable[[dict[str, Any]], None] | None = None  # rules across attrs
    outputs: int | Callable[[Mapping[str, Any]], int] = 1
    tf_type_of: Callable[[Mapping[str, Any]], str] | None = None  # Split or SplitV
    default_name: str = ""  # TF1's name for an unnamed op ("" means tf_type)
    fields: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", STRUCTURAL | frozenset(self.attrs))
        name = self.default_name or self.tf_type
        object.__setattr__(self, "default_name", name)
        # The TF type carries the default name: the loader's fast path names ops after it.
        object.__setattr__(self, "tf_type", TfType(self.tf_type, name))
        of = self.tf_type_of
        if of is not None:
            object.__setattr__(self, "tf_type_of", lambda attrs: TfType(of(attrs), name))

    @property
    def host_value(self) -> bool:
        """compute returns host numpy arrays that the executor puts on the device."""
        return self.generator

    def num_outputs(self, attrs: Mapping[str, Any]) -> int:
        return self.outputs if isinstance(self.outputs, int) else self.outputs(attrs)

    def tf_type_for(self, attrs: Mapping[str, Any]) -> str:
        """The TensorFlow type for these attrs (split is SplitV when given sizes; zeros is a
        Const when small, else a Fill)."""
        return self.tf_type if self.tf_type_of is None else self.tf_type_of(attrs)

    def generator_for(self, attrs: Mapping[str, Any]) -> bool:
        """Whether TF's placer defers this op to its second pass, where it follows its
        consumers (`IsGeneratorNode`): the op TF builds for it has no inputs and no ref output."""
        return self.generator and self.tf_type_for(attrs) in NO_INPUT_TF_TYPES

    @property
    def tf_generator(self) -> bool | None:
        """`generator_for` when it does not depend on the attrs (the placer then asks once per
        type), else None."""
        if self.generator and self.tf_type_of is not None:
            return None
        return self.generator and self.tf_type in NO_INPUT_TF_TYPES

    @property
    def reads_source(self) -> bool:
        """Whether `kernel_match` needs the dtype of input 0 (Cast's SrcT)."""
        return any(SOURCE in TF_TYPE_ATTRS.get(t, EMPTY).values() for t in self._tf_types)

    @property
    def _tf_types(self) -> tuple[str, ...]:
        return _TF_TYPES_OF.get(self.name, (str(self.tf_type),))

    def kernel_match(
        self, attrs: Mapping[str, Any], dtype: str, source: str | None = None
    ) -> KernelMatch | None:
        """TensorFlow's registered kernels for this op when output 0 is `dtype` (and input 0
        is `source`), or None for an op that is not TensorFlow's (load, save, average_n)."""
        tf_type = self.tf_type_for(attrs)
        spec = TF_TYPE_ATTRS.get(tf_type)
        if spec is None:
            return None
        values = {OUTPUT: dtype, SOURCE: source or dtype}
        return match(str(tf_type), tuple((a, values.get(v, v)) for a, v in spec.items()))

    def infer(
        self, op_name: str, attrs: Mapping[str, Any], input_specs: tuple[TensorSpec, ...]
    ) -> tuple[TensorSpec, ...]:
        """Output specs, or BadInput in TensorFlow's words naming `op_name`."""
        return self.infer_fn(op_name, self.tf_type_for(attrs), attrs, input_specs)

    def compute(self, xp: ModuleType, inputs: Sequence[Any], attrs: Mapping[str, Any]) -> list[Any]:
        return self.compute_fn(xp, inputs, attrs)

    @property
    def xp_function(self) -> str | None:
        """The array library's function an elementwise kernel calls (`add`), else None: the
        executor then calls it directly (see `kernels.Elementwise`)."""
        fn = self.compute_fn
        return fn.xp_function if isinstance(fn, k.Elementwise) else None

    def normalize(
        self, op_name: str, given: Mapping[str, Any], base: str = "",
        writes: WriteRules | None = None,
    ) -> Mapping[str, Any]:  # fmt: skip
        """Checked attrs with defaults filled in, from a spec entry (structural keys ignored).

        Relative paths start at `base` (the spec's folder); a path the op writes follows
        `writes` (by default: under `base`, see `writes.py`). A missing seed becomes a hash of
        the op name: runs are reproducible, and two unseeded random ops still differ.
        """
        if not self.attrs:
            return EMPTY
        out: dict[str, Any] = {}
        for attr, (kind, default) in self.attrs.items():
            if attr in given:
                value = given[attr]
                try:
                    out[attr] = kind.check(value)
                    if kind is PATH:
                        out[attr] = os.path.join(base, os.path.expanduser(value))
                    elif kind is OUT_PATH:
                        out[attr] = save_path(op_name, value, writes or write_rules(base))
                except AttrError as err:
                    hint = number_hint(value) if any(kind is n for n in NUMERIC) else ""
                    raise BadInput(
                        f"op '{op_name}' ({self.name}): {attr}: {show(value)} is not accepted; "
                        f"expected {err}{hint}"
                    ) from None
            elif default is REQUIRED:
                raise BadInput(
                    f"op '{op_name}' ({self.name}) needs '{attr}'; {self.name} takes: "
                    f"{', '.join(self.attrs)}"
                )
            elif default is not None:
                out[attr] = default
        if "seed" in self.attrs and "seed" not in out:
            out["seed"] = zlib.crc32(op_name.encode())
        if self.check is not None:
            try:
                self.check(out)
            except AttrError as err:
                raise BadInput(f"op '{op_name}' ({self.name}): {err}") from None
        return out


def _gen(
    name: str, tf_type: str, compute_fn: k.ComputeFn, attrs: dict[str, Any], **kw: Any
) -> OpDef:
    attrs = {"shape": (SHAPE, REQUIRED), "dtype": (DTYPE, "float32"), **attrs}
    return OpDef(name, tf_type, inf.from_attrs, compute_fn, attrs, generator=True, **kw)


def _unary(name: str, tf_type: str, allowed: frozenset[str], xp_name: str) -> OpDef:
    return OpDef(
        name, tf_type, inf.unary(allowed), k.elementwise(xp_name), min_inputs=1, max_inputs=1
    )


def _binary(
    name: str, tf_type: str, xp_name: str, int_result: str | None = None, default_name: str = ""
) -> OpDef:
    infer_fn = inf.binary(inf.NUMERIC, int_result)
    compute_fn = k.elementwise(xp_name)
    return OpDef(name, tf_type, infer_fn, compute_fn, min_inputs=2, max_inputs=2,
                 default_name=default_name)  # fmt: skip


def _reduce(name: str, tf_type: str, kind: str) -> OpDef:
    attrs = {"axis": (AXES, None), "keepdims": (BOOL, False)}
    return OpDef(name, tf_type, inf.reduce(kind), k.reduction(kind), attrs, 1, 1)


_UNIFORM = {"minval": (NUMBER, 0.0), "maxval": (NUMBER, 1.0), "seed": (SEED, None)}
_NORMAL = {"mean": (NUMBER, 0.0), "stddev": (NUMBER, 1.0), "seed": (SEED, None)}
_INIT = {  # a variable's initializer and its parameters; their defaults are set in attr_rules.py
    "initializer": (INITIALIZER, "zeros"),
    "value": (VALUE, None),
    **{param: (NUMBER, None) for param in ("minval", "maxval", "mean", "stddev")},
    "seed": (SEED, None),
}


def _split_outputs(attrs: Mapping[str, Any]) -> int:
    return int(attrs.get("num_split") or len(attrs["sizes"]))


def _split_type(attrs: Mapping[str, Any]) -> str:
    """TensorFlow's Split takes num_split; SplitV takes sizes."""
    return "SplitV" if "sizes" in attrs else "Split"


def _filled_type(attrs: Mapping[str, Any]) -> str:
    """tf.zeros and tf.ones: a Const below 1000 elements, else a Fill (`_constant_if_small`).
    Also called on a spec's raw entry, before its shape is checked."""
    shape = attrs.get("shape")
    if isinstance(shape, (list, tuple)) and all(type(d) is int for d in shape):
        return "Const" if prod(shape) < SMALL_CONSTANT else "Fill"
    return "Fill"


# Where each type attr of the TF op TF1's Python API builds comes from: output 0's dtype, input
# 0's (Cast's SrcT), or a fixed dtype (the int32 shape, axis and index tensors the Python API
# makes from Python ints: tf.fill's dims, a reduction's axes, tf.split's sizes, ...). Every type
# attr of the captured OpDef is named (tests/graph/test_tf_registry.py checks it).
OUTPUT, SOURCE = "<output>", "<source>"
TF_TYPE_ATTRS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "Const": {"dtype": OUTPUT}, "Fill": {"T": OUTPUT, "index_type": "int32"},
    "RandomUniform": {"dtype": OUTPUT, "T": "int32"},
    "RandomStandardNormal": {"dtype": OUTPUT, "T": "int32"},
    "Placeholder": {"dtype": OUTPUT}, "VariableV2": {"dtype": OUTPUT}, "Print": {"T": OUTPUT},
    "Identity": {"T": OUTPUT}, "AddV2": {"T": OUTPUT}, "Sub": {"T": OUTPUT}, "Mul": {"T": OUTPUT},
    "RealDiv": {"T": OUTPUT},  # x / y on ints casts both to float64 first (math_ops.truediv)
    "Neg": {"T": OUTPUT}, "Exp": {"T": OUTPUT}, "Log": {"T": OUTPUT}, "Tanh": {"T": OUTPUT},
    "Relu": {"T": OUTPUT}, "Sigmoid": {"T": OUTPUT}, "Softmax": {"T": OUTPUT},
    "MatMul": {"T": OUTPUT}, "AddN": {"T": OUTPUT},
    "StridedSlice": {"T": OUTPUT, "Index": "int32"},
    "Sum": {"T": OUTPUT, "Tidx": "int32"}, "Mean": {"T": OUTPUT, "Tidx": "int32"},
    "Max": {"T": OUTPUT, "Tidx": "int32"}, "Transpose": {"T": OUTPUT, "Tperm": "int32"},
    "Reshape": {"T": OUTPUT, "Tshape": "int32"}, "ConcatV2": {"T": OUTPUT, "Tidx": "int32"},
    "Split": {"T": OUTPUT}, "SplitV": {"T": OUTPUT, "Tlen": "int32"},
    "Cast": {"SrcT": SOURCE, "DstT": OUTPUT},
})  # fmt: skip
# the TF types an op can be, where that depends on its attrs
_TF_TYPES_OF = {"zeros": ("Const", "Fill"), "ones": ("Const", "Fill"), "split": ("Split", "SplitV")}


_OPS = (
    _gen("constant", "Const", k.constant, {"value": (VALUE, REQUIRED), "shape": (SHAPE, None)},
         check=check_constant),
    _gen("zeros", "Fill", k.zeros, {}, tf_type_of=_filled_type, default_name="zeros"),
    _gen("ones", "Fill", k.ones, {}, tf_type_of=_filled_type, default_name="ones"),
    _gen("fill", "Fill", k.constant, {"value": (SCALAR, REQUIRED)}, check=check_constant),
    _gen("random_uniform", "RandomUniform", k.random_uniform, _UNIFORM, check=check_random,
         default_name="random_uniform"),
    _gen("random_normal", "RandomStandardNormal", k.random_normal, _NORMAL, check=check_random,
         default_name="random_normal"),
    _gen("placeholder", "Placeholder", k.placeholder, {}),
    _gen("variable", "VariableV2", k.variable, _INIT, resident=True, check=check_variable,
         default_name="Variable"),
    OpDef("load", "LoadNpy", inf.from_attrs, k.load, attrs={"path": (PATH, REQUIRED)},
        generator=True, kernels=CPU_ONLY, check=check_load),
    OpDef("save", "SaveNpy", inf.no_outputs, k.save, attrs={"path": (OUT_PATH, REQUIRED)},
        min_inputs=1, max_inputs=1, kernels=CPU_ONLY, outputs=0),
    OpDef("print", "Print", inf.unary(inf.ANY), k.passthrough, attrs={"message": (TEXT, "")},
        min_inputs=1, max_inputs=1, kernels=CPU_ONLY),
    OpDef("identity", "Identity", inf.unary(inf.ANY), k.identity, min_inputs=1, max_inputs=1),
    _binary("add", "AddV2", "add", default_name="add"),  # x + y (tf.add is Add, named Add)
    _binary("sub", "Sub", "subtract", default_name="sub"),  # x - y
    _binary("mul", "Mul", "multiply", default_name="mul"),  # x * y
    _binary("div", "RealDiv", "divide", int_result="float64", default_name="truediv"),  # x / y
    _unary("neg", "Neg", inf.NUMERIC, "negative"),
    _unary("exp", "Exp", inf.FLOATS, "exp"),
    _unary("log", "Log", inf.FLOATS, "log"),
    _unary("tanh", "Tanh", inf.FLOATS, "tanh"),
    OpDef("relu", "Relu", inf.unary(inf.NUMERIC), k.relu, min_inputs=1, max_inputs=1),
    OpDef("sigmoid", "Sigmoid", inf.unary(inf.FLOATS), k.sigmoid, min_inputs=1, max_inputs=1),
    OpDef("softmax", "Softmax", inf.softmax, k.softmax, min_inputs=1, max_inputs=1),
    OpDef("matmul", "MatMul", inf.matmul, k.matmul,
        attrs={"transpose_a": (BOOL, False), "transpose_b": (BOOL, False)},
        min_inputs=2, max_inputs=2),
    OpDef("add_n", "AddN", inf.add_n, k.add_n, min_inputs=1, max_inputs=None),
    OpDef("average_n", "Average", inf.add_n, k.average_n, min_inputs=1, max_inputs=None),
    OpDef("batch_slice", "StridedSlice", inf.batch_slice, k.batch_slice,
        attrs={"parts": (POSITIVE, REQUIRED), "index": (INT, REQUIRED)},
        min_inputs=1, max_inputs=1, default_name="strided_slice"),  # x[start:stop]
    _reduce("reduce_sum", "Sum", "sum"),
    _reduce("reduce_mean", "Mean", "mean"),
    _reduce("reduce_max", "Max", "max"),
    OpDef("transpose", "Transpose", inf.transpose, k.transpose, attrs={"perm": (PERM, None)},
        min_inputs=1, max_inputs=1, default_name="transpose"),
    OpDef("reshape", "Reshape", inf.reshape, k.reshape, attrs={"shape": (NEW_SHAPE, REQUIRED)},
        min_inputs=1, max_inputs=1),
    OpDef("concat", "ConcatV2", inf.concat, k.concat, attrs={"axis": (INT, 0)},
        min_inputs=1, max_inputs=None, default_name="concat"),
    OpDef("split", "Split", inf.split, k.split,
        attrs={"num_split": (POSITIVE, None), "sizes": (SIZES, None), "axis": (INT, 0)},
        min_inputs=1, max_inputs=1, check=check_split, outputs=_split_outputs,
        tf_type_of=_split_type, default_name="split"),
    OpDef("cast", "Cast", inf.cast, k.cast, attrs={"dtype": (DTYPE, REQUIRED)},
        min_inputs=1, max_inputs=1),
    # an imported ONNX op without a kernel here: planned from ONNX's shapes, never run
    OpDef("Opaque", "Opaque", inf.opaque, k.opaque, max_inputs=None),
)  # fmt: skip
REGISTRY: Mapping[str, OpDef] = MappingProxyType({d.name: d for d in _OPS})
OP_META: Mapping[str, OpMeta] = REGISTRY  # what the placer needs; mypy checks OpDef fits OpMeta


def get_op(type_name: str) -> OpDef:
    """The OpDef for a registry name (`matmul`); BadInput suggesting the closest names."""
    found = REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if found is None:
        raise BadInput(f"unknown op {type_name!r}{suggest(type_name, REGISTRY)}")
    return found


def list_ops() -> list[OpDef]:
    """Every op type, sorted by name."""
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def suggest(
    word: object, choices: Mapping[str, Any] | Sequence[str], label: str = "accepted"
) -> str:
    """`; did you mean 'x'?` for the close matches of `word`, else `; accepted: a, b` (when
    there are few choices to list)."""
    names = sorted(map(str, choices))
    close = difflib.get_close_matches(str(word), names, n=3)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if len(names) <= 40:
        return f"; {label}: {', '.join(names)}"
    return ""
