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

`OpDef` itself lives in `opdef.py`; the ONNX operators (registry name = ONNX op type, not
TensorFlow's) in `onnx_ops/`, each module's tuple joined to the registry by one line here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from types import MappingProxyType
from typing import Any

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
)
from .model import OpMeta
from .onnx_ops import index as onnx_index
from .onnx_ops import logic as onnx_logic
from .onnx_ops import nn as onnx_nn
from .onnx_ops import shape as onnx_shape
from .opdef import CPU_ONLY, EMPTY, REQUIRED, TF_TYPE_ATTRS, OpDef

# re-exported: the registry's users import these from here
__all__ = ["EMPTY", "OP_META", "REGISTRY", "REQUIRED", "TF_TYPE_ATTRS", "OpDef", "get_op",
           "list_ops", "suggest"]  # fmt: skip

SMALL_CONSTANT = 1000  # array_ops._constant_if_small: tf.zeros/tf.ones below this are a Const


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
    *onnx_shape.OPS, *onnx_index.OPS, *onnx_logic.OPS,  # Reshape, Gather, Where, ...
    *onnx_nn.OPS,  # the ONNX operators (graph/onnx_ops/): Gemm, Conv, LayerNormalization, ...
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
    import difflib  # only for a message

    names = sorted(map(str, choices))
    close = difflib.get_close_matches(str(word), names, n=3)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if len(names) <= 40:
        return f"; {label}: {', '.join(names)}"
    return ""
