"""`OpDef`, one op type of the registry (`ops.py` holds them all), and what it needs to answer the
placer: TensorFlow's registered kernels for its dtypes (`kernel_match`, through `TF_TYPE_ATTRS`),
its TF type and generator status per op, its attrs' checks, and its FLOP count (`flops`).

`kernels` is the type's upper bound: CPU and GPU, but the CPU alone for the file ops (load,
save), which are not TensorFlow's, and Print, whose only kernel is a CPU one. An op that is not
TensorFlow's (the ONNX ops, load, save) has no entry in `TF_TYPE_ATTRS`: `kernel_match` is None.

`flops`, when set, is `(attrs, input_specs, output_specs) -> FLOPs of one run`; the cost model
(`placement/cost.py: op_flops`) uses it before its own table, which counts one per output
element for a type it does not know.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any

from ..echo import show
from ..errors import BadInput
from . import infer as inf
from . import kernels as k
from .attrs import NUMERIC, OUT_PATH, PATH, Attr, AttrError, number_hint
from .model import FlopsFn, TensorSpec
from .tf_registry import KernelMatch, match
from .writes import WriteRules, save_path, write_rules

BOTH = frozenset({"CPU", "GPU"})
CPU_ONLY = frozenset({"CPU"})
# TF types of the ops gpuplace's generators become that take no inputs in TF's GraphDef (Fill,
# RandomUniform and RandomStandardNormal read a shape tensor). VariableV2 takes none either but
# its output is a ref, so TF's placer does not defer it; LoadNpy stands for a Const of the file.
NO_INPUT_TF_TYPES = frozenset({"Const", "Placeholder", "LoadNpy"})
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
    resident, and the per-op `tf_type_for`, `generator_for`, `kernel_match`, `flops`). `attrs` maps each
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
    flops: FlopsFn | None = None  # FLOPs of one run; None: the cost model's table decides
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
    def onnx(self) -> bool:
        """An ONNX operator (`onnx_ops/`): named by its ONNX type, which is also its tf_type."""
        return self.name == self.tf_type

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
