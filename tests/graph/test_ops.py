"""The op registry: TF types, kernels, arity, attrs, shape inference and compute (numpy as xp)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gpuplace.errors import BadInput
from gpuplace.graph import TensorSpec, get_op, list_ops, loads
from gpuplace.graph.ops import OP_META

TF_TYPES = {
    "batch_slice": "StridedSlice", "average_n": "Average",
    "constant": "Const", "zeros": "Fill", "ones": "Fill", "fill": "Fill",
    "random_uniform": "RandomUniform", "random_normal": "RandomStandardNormal",
    "placeholder": "Placeholder", "variable": "VariableV2", "load": "LoadNpy", "save": "SaveNpy",
    "print": "Print", "identity": "Identity", "add": "AddV2", "sub": "Sub", "mul": "Mul",
    "div": "RealDiv", "neg": "Neg", "exp": "Exp", "log": "Log", "relu": "Relu",
    "sigmoid": "Sigmoid", "tanh": "Tanh", "softmax": "Softmax", "matmul": "MatMul",
    "add_n": "AddN", "reduce_sum": "Sum", "reduce_mean": "Mean", "reduce_max": "Max",
    "transpose": "Transpose", "reshape": "Reshape", "concat": "ConcatV2", "split": "Split",
    "cast": "Cast",
}  # fmt: skip
GENERATORS = {"constant", "zeros", "ones", "fill", "random_uniform", "random_normal",
              "placeholder", "variable", "load", "Constant", "ConstantOfShape", "Range"}  # fmt: skip
# numpy and cupy both provide these; device kernels may call nothing else on xp
XP_CALLS = {"add", "subtract", "multiply", "divide", "negative", "exp", "log", "tanh", "maximum",
            "max", "sum", "mean", "matmul", "transpose", "reshape", "concatenate", "split",
            "asarray", "ascontiguousarray"}  # fmt: skip


def test_registry_lists_every_op_with_its_tensorflow_type() -> None:
    tf_ops = [d for d in list_ops() if not d.onnx]  # ONNX's are tests/onnx_ops/'s
    assert {d.name: d.tf_type for d in tf_ops} == TF_TYPES
    assert [d.name for d in tf_ops] == sorted(TF_TYPES)
    assert OP_META["matmul"].tf_type == "MatMul"


def test_kernels_generators_and_residency() -> None:
    cpu_only = {d.name for d in list_ops() if d.kernels == frozenset({"CPU"})}
    assert cpu_only == {"load", "save", "print"}
    assert all(d.kernels == frozenset({"CPU", "GPU"}) for d in list_ops() if d.name not in cpu_only)
    assert {d.name for d in list_ops() if d.generator} == GENERATORS
    assert all(d.host_value == d.generator for d in list_ops())
    assert [d.name for d in list_ops() if d.resident] == ["variable"]
    assert all(d.min_inputs == d.max_inputs == 0 for d in list_ops() if d.generator)


def test_get_op_suggests() -> None:
    with pytest.raises(BadInput, match="unknown op 'relu6'; did you mean 'relu'"):
        get_op("relu6")


def test_split_outputs_and_type_depend_on_attrs() -> None:
    split = get_op("split")
    assert split.num_outputs({"num_split": 3, "axis": 0}) == 3
    assert split.num_outputs({"sizes": (1, -1), "axis": 0}) == 2
    assert (split.tf_type_for({"num_split": 2}), split.tf_type_for({"sizes": (1,)})) == (
        "Split",
        "SplitV",
    )
    assert get_op("save").num_outputs({}) == 0


F32 = "float32"


@pytest.mark.parametrize(
    ("op", "attrs", "inputs", "outputs"),
    [
        ("constant", {"value": [[1, 2], [3, 4]]}, [], [((2, 2), F32)]),
        ("constant", {"value": 7, "shape": [3], "dtype": "int64"}, [], [((3,), "int64")]),
        ("fill", {"value": 1.5, "shape": [2, 1]}, [], [((2, 1), F32)]),
        ("variable", {"shape": [2, 3], "initializer": "random_uniform"}, [], [((2, 3), F32)]),
        ("add", {}, [((2, 1), F32), ((3,), F32)], [((2, 3), F32)]),
        ("div", {}, [((2,), "int32"), ((2,), "int32")], [((2,), "float64")]),
        ("matmul", {"transpose_a": True}, [((3, 2), F32), ((3, 4), F32)], [((2, 4), F32)]),
        ("matmul", {"transpose_b": True}, [((2, 3), F32), ((4, 3), F32)], [((2, 4), F32)]),
        ("add_n", {}, [((2, 2), F32)] * 3, [((2, 2), F32)]),
        ("reduce_sum", {}, [((2, 3), F32)], [((), F32)]),
        ("reduce_mean", {"axis": -1, "keepdims": True}, [((2, 3), F32)], [((2, 1), F32)]),
        ("reduce_max", {"axis": [0, 1]}, [((2, 3, 4), "int32")], [((4,), "int32")]),
        ("transpose", {}, [((2, 3, 4), F32)], [((4, 3, 2), F32)]),
        ("transpose", {"perm": [0, 2, 1]}, [((2, 3, 4), F32)], [((2, 4, 3), F32)]),
        ("reshape", {"shape": [3, -1]}, [((2, 3, 4), F32)], [((3, 8), F32)]),
        ("concat", {"axis": 1}, [((2, 3), F32), ((2, 5), F32)], [((2, 8), F32)]),
        ("split", {"num_split": 2, "axis": 1}, [((2, 4), F32)], [((2, 2), F32)] * 2),
        ("split", {"sizes": [1, -1, 2]}, [((6, 2), F32)], [((1, 2), F32), ((3, 2), F32), ((2, 2), F32)]),
        ("cast", {"dtype": "bool"}, [((2,), F32)], [((2,), "bool")]),
        ("softmax", {}, [((2, 5), "float16")], [((2, 5), "float16")]),
        ("print", {"message": "x"}, [((2,), "int64")], [((2,), "int64")]),
    ],
)  # fmt: skip
def test_infer(op: str, attrs: dict[str, Any], inputs: list[Any], outputs: list[Any]) -> None:
    opdef = get_op(op)
    specs = tuple(TensorSpec(shape, dtype) for shape, dtype in inputs)
    result = opdef.infer("x", opdef.normalize("x", attrs), specs)
    assert result == tuple(TensorSpec(shape, dtype) for shape, dtype in outputs)


def run(op: str, inputs: list[Any], xp: ModuleType = np, **attrs: Any) -> list[Any]:
    opdef = get_op(op)
    return opdef.compute(xp, [np.asarray(x) for x in inputs], opdef.normalize(op, attrs))


A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "expected"),
    [
        ("constant", [], {"value": [1, 2, 3, 4, 5, 6], "shape": [2, 3]}, [A]),
        ("constant", [], {"value": [5], "shape": [2]}, [[5.0, 5.0]]),
        ("zeros", [], {"shape": [2]}, [[0.0, 0.0]]),
        ("ones", [], {"shape": [1, 2], "dtype": "int32"}, [[[1, 1]]]),
        ("identity", [A], {}, [A]),
        ("print", [A], {}, [A]),
        ("add", [A, [10.0, 20.0, 30.0]], {}, [[[11, 22, 33], [14, 25, 36]]]),
        ("sub", [[3.0], [1.0]], {}, [[2.0]]),
        ("mul", [[3.0], [2.0]], {}, [[6.0]]),
        ("div", [[3], [2]], {}, [[1.5]]),
        ("neg", [[1.0, -2.0]], {}, [[-1.0, 2.0]]),
        ("exp", [[0.0]], {}, [[1.0]]),
        ("log", [[1.0]], {}, [[0.0]]),
        ("relu", [[-1.0, 2.0]], {}, [[0.0, 2.0]]),
        ("sigmoid", [[0.0]], {}, [[0.5]]),
        ("tanh", [[0.0]], {}, [[0.0]]),
        ("softmax", [[[0.0, 0.0]]], {}, [[[0.5, 0.5]]]),
        ("matmul", [A, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]], {}, [[[22, 28], [49, 64]]]),
        ("matmul", [A, A], {"transpose_b": True}, [[[14, 32], [32, 77]]]),
        ("add_n", [A, A, A], {}, [[[3, 6, 9], [12, 15, 18]]]),
        ("reduce_sum", [A], {"axis": 0}, [[5, 7, 9]]),
        ("reduce_mean", [[[1, 2], [4, 4]]], {"axis": 1, "keepdims": True}, [[[1], [4]]]),
        ("reduce_max", [A], {}, [6.0]),
        ("transpose", [A], {}, [[[1, 4], [2, 5], [3, 6]]]),
        ("reshape", [A], {"shape": [-1]}, [[1, 2, 3, 4, 5, 6]]),
        ("concat", [A, A], {"axis": 1}, [[[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]]),
        ("split", [[1, 2, 3, 4]], {"num_split": 2}, [[1, 2], [3, 4]]),
        ("split", [[1, 2, 3, 4]], {"sizes": [1, -1]}, [[1], [2, 3, 4]]),
        ("cast", [[1.7, -1.7]], {"dtype": "int32"}, [[1, -1]]),
    ],
)  # fmt: skip
def test_compute(op: str, inputs: list[Any], attrs: dict[str, Any], expected: list[Any]) -> None:
    out = run(op, inputs, **attrs)
    assert len(out) == len(expected)
    for got, want in zip(out, expected, strict=True):
        np.testing.assert_allclose(got, want)


def test_compute_keeps_the_inferred_dtype() -> None:
    opdef = get_op("reduce_mean")
    x = np.array([[1, 2]], dtype=np.int32)
    attrs = opdef.normalize("m", {"axis": 1})
    (out,) = opdef.compute(np, [x], attrs)
    (spec,) = opdef.infer("m", attrs, (TensorSpec((1, 2), "int32"),))
    assert (out.dtype.name, out.shape) == (spec.dtype, spec.shape) == ("int32", (1,))


class RecordingXp(ModuleType):
    """numpy, recording which functions a kernel calls."""

    def __init__(self) -> None:
        super().__init__("recording_xp")
        self.calls: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.calls.add(name)
        return getattr(np, name)


def test_device_kernels_call_only_what_cupy_also_has() -> None:
    xp = RecordingXp()
    a, m = np.ones((2, 3), np.float32), np.ones((3, 3), np.float32)
    for d in list_ops():
        if d.generator or d.onnx or d.name in ("save", "split"):  # ONNX's: tests/onnx_ops/
            continue
        inputs = [a, a] if d.min_inputs == 2 else [a]
        attrs = (
            {"shape": [-1]}
            if d.name == "reshape"
            else {"dtype": "int32"}
            if d.name == "cast"
            else {"parts": 2, "index": 1}
            if d.name == "batch_slice"
            else {}
        )
        d.compute(xp, [m, m] if d.name == "matmul" else inputs, d.normalize("x", attrs))
    run("split", [a], xp, num_split=3, axis=1)
    assert xp.calls <= XP_CALLS


def test_random_values_are_seeded_and_reproducible() -> None:
    normal = get_op("random_normal")
    attrs = normal.normalize("r", {"shape": [1000], "seed": 3, "mean": 2.0, "stddev": 0.5})
    first, again = normal.compute(np, [], attrs)[0], normal.compute(np, [], attrs)[0]
    assert first.dtype == np.float32 and np.array_equal(first, again)
    assert abs(first.mean() - 2.0) < 0.1 and abs(first.std() - 0.5) < 0.1
    uniform = get_op("random_uniform").normalize("u", {"shape": [1000], "minval": -1, "maxval": 1})
    values = get_op("random_uniform").compute(np, [], uniform)[0]
    assert values.min() >= -1 and values.max() < 1


def test_unseeded_random_ops_get_a_seed_from_their_name() -> None:
    graph = loads(
        "graph: [{name: a, op: random_normal, shape: [2]}, {name: b, op: random_normal, shape: [2]}]"
    )
    a, b = (op.attrs["seed"] for op in graph.ops)
    assert a != b
    assert loads("graph: [{name: a, op: random_normal, shape: [2]}]").ops[0].attrs["seed"] == a


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"initializer": "constant", "value": [1, 2]}, [1.0, 2.0]),
        ({"initializer": "ones"}, [1.0, 1.0]),
        ({}, [0.0, 0.0]),
    ],
)
def test_variable_initializers(attrs: dict[str, Any], expected: list[float]) -> None:
    variable = get_op("variable")
    (value,) = variable.compute(np, [], variable.normalize("w", {"shape": [2], **attrs}))
    np.testing.assert_array_equal(value, expected)


def test_variable_random_initializer_matches_the_random_op() -> None:
    variable, normal = get_op("variable"), get_op("random_normal")
    w = variable.normalize("w", {"shape": [3], "initializer": "random_normal", "seed": 1})
    r = normal.normalize("r", {"shape": [3], "seed": 1})
    np.testing.assert_array_equal(variable.compute(np, [], w)[0], normal.compute(np, [], r)[0])


@pytest.mark.parametrize(
    ("op", "attrs", "fragment"),
    [
        ("random_uniform", {"shape": [1], "minval": 2, "maxval": 1}, "minval (2) must be less than maxval (1)"),
        ("random_normal", {"shape": [1], "dtype": "int32"}, "dtype int32 is not accepted for random values"),
        ("variable", {"shape": [1], "initializer": "constant"}, "initializer constant needs 'value'"),
        ("split", {"num_split": 2, "sizes": [1, 1]}, "give exactly one of num_split"),
        ("constant", {"value": [[1, 2], [3]]}, "rows have different lengths"),
        ("constant", {"value": 2**40, "dtype": "int32"}, "does not fit dtype int32"),
        ("reshape", {"shape": [-1, -1]}, "at most one -1"),
        ("matmul", {"transpose_a": "yes"}, "transpose_a: 'yes' is not accepted; expected true or false"),
    ],
)  # fmt: skip
def test_attr_rules(op: str, attrs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        get_op(op).normalize("x", attrs)


def test_save_and_load_roundtrip(tmp_path: Path) -> None:
    save = get_op("save")
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert save.compute(np, [x], save.normalize("s", {"path": "out.npy"}, str(tmp_path))) == []
    load = get_op("load")
    attrs = load.normalize("l", {"path": "out.npy"}, str(tmp_path))
    assert load.infer("l", attrs, ()) == (TensorSpec((2, 3), "float64"),)
    np.testing.assert_array_equal(load.compute(np, [], attrs)[0], x)


@pytest.mark.parametrize(
    "value",
    [np.float32(-2.5), np.arange(6, dtype=">i4").reshape(2, 3), np.asfortranarray(np.eye(2))],
    ids=["scalar", "big-endian", "fortran"],
)
def test_load_keeps_the_shape_of_the_file(tmp_path: Path, value: np.ndarray) -> None:
    """A 0-d .npy file loads as a scalar (shape [], as declared at load time), not as [1];
    other byte orders and Fortran order come back native and C-contiguous."""
    np.save(tmp_path / "x.npy", value)
    load = get_op("load")
    attrs = load.normalize("l", {"path": "x.npy"}, str(tmp_path))
    (spec,) = load.infer("l", attrs, ())
    (got,) = load.compute(np, [], attrs)
    assert (got.shape, got.dtype.name) == (spec.shape, spec.dtype)
    assert spec == TensorSpec(value.shape, value.dtype.name)
    assert got.dtype.isnative and got.flags.c_contiguous
    np.testing.assert_array_equal(got, value)


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
@pytest.mark.parametrize("op", ["softmax", "sigmoid", "relu", "log", "reduce_sum", "reduce_mean"])
def test_a_tensor_without_elements_computes_to_its_inferred_shape(op: str, shape: Any) -> None:
    """What the loader accepts runs: softmax of an empty last axis raised in numpy's max."""
    opdef = get_op(op)
    attrs = opdef.normalize(op, {})
    (spec,) = opdef.infer(op, attrs, (TensorSpec(shape, "float32"),))
    (out,) = opdef.compute(np, [np.zeros(shape, np.float32)], attrs)
    assert (out.shape, out.dtype.name) == (spec.shape, spec.dtype)
