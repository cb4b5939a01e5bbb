"""TF1 fidelity of the op model: which ops TF's placer treats as generators, the names and TF
types TF1's Python API gives unnamed ops, `colocate_with` inside device scopes, the Colocation
Debug Info on group errors, and MatMul's kernels by dtype.

Sources (tensorflow/tensorflow): placer.cc `IsGeneratorNode`; array_ops.py `zeros`, `ones`,
`_constant_if_small`, `fill`; random_ops.py `random_normal`, `random_uniform`; math_ops.py
`_OverrideBinaryOperatorHelper` (`add`, `sub`, `mul`, `truediv`); variables.py
`RefVariable._init_from_args` (name scope "Variable"); op_def_library.py (`name = op_type_name`
when unnamed); ops.py `Graph._colocate_with_for_gradient`; colocation_graph.cc `DebugInfo`;
kernels/matmul_op.cc registrations.
"""

from __future__ import annotations

from textwrap import dedent

import pytest

from gpuplace.cli.words import CLI
from gpuplace.graph import Graph, get_op, loads
from gpuplace.placement import PlacementError, place
from gpuplace.placement.estimate import lower_bounds
from gpuplace.placement.flat import flatten
from gpuplace.placement.reasons import article
from tests.conftest import Run
from tests.strategy.helpers import models


def spec(text: str) -> Graph:
    return loads(dedent(text), "s.yaml")


def where(g: Graph, gpus: int = 4, soft: bool = False) -> dict[str, str]:
    p = place(g, gpus, allow_soft_placement=soft)
    return {name: d.device.rsplit("device:", 1)[1] for name, d in p.decisions.items()}


# 1. Generators -------------------------------------------------------------------------------

CONSUMED_ON_GPU2 = """
graph:
  - {name: m, op: constant, value: [[1.0, 2.0], [3.0, 4.0]], device: /gpu:2}
  - {name: r, op: %s, shape: [2, 2]%s}
  - {name: n, op: add, inputs: [m, r], device: /gpu:2}
"""


@pytest.mark.parametrize(
    ("kind", "shape", "extra"),
    [
        ("random_normal", "[2, 2]", ""),
        ("random_uniform", "[2, 2]", ""),
        ("fill", "[2, 2]", ", value: 3.0"),
        ("zeros", "[40, 25]", ""),  # 1000 elements: a Fill
        ("ones", "[1000]", ""),
    ],
)
def test_ops_with_a_shape_input_in_tf_are_not_generators(kind: str, shape: str, extra: str) -> None:
    """TF builds these with a shape (or dims) tensor input, so IsGeneratorNode is false: they
    take the highest-priority device like any op, not their consumer's."""
    g = spec(f"""
        graph:
          - {{name: m, op: constant, value: 1.0, shape: {shape}, device: /gpu:2}}
          - {{name: r, op: {kind}, shape: {shape}{extra}}}
          - {{name: n, op: add, inputs: [m, r], device: /gpu:2}}
        """)
    p = place(g, 4)
    assert where(g)["r"] == "GPU:0"
    assert p.decisions["r"].kind == "default"
    assert p.order == ("r", "n", "m")  # r in the first pass; the constant m deferred


@pytest.mark.parametrize("kind", ["zeros", "ones", "constant", "placeholder"])
def test_ops_without_inputs_in_tf_follow_their_consumer(kind: str) -> None:
    extra = ", value: 2.0" if kind == "constant" else ""
    g = spec(CONSUMED_ON_GPU2 % (kind, extra))
    p = place(g, 4)
    assert where(g)["r"] == "GPU:2"
    assert p.decisions["r"].reason == "generator follows its consumer n on GPU:2"
    assert p.order == ("n", "m", "r")  # deferred to the second pass, as the constant m


def test_zeros_and_ones_are_a_const_below_1000_elements_else_a_fill() -> None:
    zeros = get_op("zeros")
    assert [zeros.tf_type_for({"shape": s}) for s in ((), (0,), (999,), (1000,), (10, 100))] == [
        "Const", "Const", "Const", "Fill", "Fill",
    ]  # fmt: skip
    assert [zeros.generator_for({"shape": s}) for s in ((999,), (1000,))] == [True, False]
    assert get_op("ones").tf_type_for({"shape": (4, 250)}) == "Fill"
    assert not get_op("random_normal").generator_for({"shape": (2,)})
    assert not get_op("variable").generator_for({"shape": (2,)})  # a ref output


def test_reasons_name_the_tf_type_of_each_zeros() -> None:
    g = spec("""
        graph:
          - {op: zeros, shape: [30, 40]}
          - {op: zeros, shape: [3, 4]}
          - {op: add, inputs: [zeros, zeros]}
          - {op: neg, inputs: [zeros_1]}
        """)
    p = place(g, 1)
    assert [op.name for op in g.ops] == ["zeros", "zeros_1", "add", "Neg"]
    assert p.decisions["zeros"].reason == (
        "no device requested: GPU:0 is the highest-priority device with a Fill kernel"
    )
    assert p.decisions["zeros_1"].reason == "generator follows its consumer Neg on GPU:0"


def test_strategies_defer_what_tfs_placer_defers() -> None:
    """flat.generator drives the balanced strategy's deferral and the lower bounds: TF's
    generators and variables, not random ops or large fills."""
    g = spec("""
        graph:
          - {name: c, op: constant, value: 1.0, shape: [2, 2]}
          - {name: z, op: zeros, shape: [2, 2]}
          - {name: big, op: zeros, shape: [100, 100]}
          - {name: r, op: random_normal, shape: [2, 2]}
          - {name: v, op: variable, shape: [2, 2]}
          - {name: s, op: add_n, inputs: [c, z, r, v]}
          - {name: t, op: reduce_sum, inputs: [big]}
        """)
    flat = flatten(g)
    assert dict(zip(flat.names, flat.generator, strict=True)) == {
        "c": True, "z": True, "big": False, "r": False, "v": True, "s": False, "t": False,
    }  # fmt: skip


def test_random_ops_count_in_the_work_bound() -> None:
    """A random op runs on a GPU like its consumer (TF never defers it), so it counts in the
    work bound; a placeholder of the same size is a generator and does not."""
    text = """
        graph:
          - {name: x, op: %s, shape: [1000, 1000]}
          - {name: y, op: matmul, inputs: [x, x]}
        """
    gen, mm = 4e6 / 1e11 + 5e-6, 2e9 / 1e12 + 5e-6
    assert lower_bounds(spec(text % "random_normal"), models(2)).work == pytest.approx(
        (gen + mm) / 2
    )
    assert lower_bounds(spec(text % "placeholder"), models(2)).work == pytest.approx(mm / 2)


# 2. Default names and TF types --------------------------------------------------------------

DEFAULT_NAMES = {
    "constant": ("Const", "Const"),  # tf.constant
    "zeros": ("zeros", "Const"),  # tf.zeros, small: array_ops._constant_if_small
    "ones": ("ones", "Const"),
    "fill": ("Fill", "Fill"),  # tf.fill -> gen_array_ops.fill, named after its type
    "random_uniform": ("random_uniform", "RandomUniform"),
    "random_normal": ("random_normal", "RandomStandardNormal"),
    "placeholder": ("Placeholder", "Placeholder"),
    "variable": ("Variable", "VariableV2"),  # tf.Variable: name scope "Variable"
    "add": ("add", "AddV2"),  # x + y (TF 1.15's _add_dispatch: AddV2)
    "sub": ("sub", "Sub"),  # x - y
    "mul": ("mul", "Mul"),  # x * y
    "div": ("truediv", "RealDiv"),  # x / y
    "neg": ("Neg", "Neg"),
    "exp": ("Exp", "Exp"),
    "matmul": ("MatMul", "MatMul"),  # tf.matmul: name scope "MatMul"
    "add_n": ("AddN", "AddN"),
    "transpose": ("transpose", "Transpose"),  # tf.transpose(name="transpose")
    "concat": ("concat", "ConcatV2"),  # tf.concat(name="concat")
    "split": ("split", "Split"),  # tf.split(name="split")
    "batch_slice": ("strided_slice", "StridedSlice"),  # x[start:stop]
    "reduce_sum": ("Sum", "Sum"),
    "reshape": ("Reshape", "Reshape"),
    "cast": ("Cast", "Cast"),
}
ATTRS = {
    "constant": {"value": 1.0, "shape": [2, 2]},
    "fill": {"value": 1.0, "shape": [2, 2]},
    "split": {"num_split": 2},
    "batch_slice": {"parts": 2, "index": 0},
    "reshape": {"shape": [4]},
    "cast": {"dtype": "float64"},
}


@pytest.mark.parametrize("kind", sorted(DEFAULT_NAMES))
def test_unnamed_ops_get_tf1_python_default_names(kind: str) -> None:
    op = get_op(kind)
    attrs = ATTRS.get(kind, {"shape": [2, 2]} if op.generator else {})
    inputs = [] if op.generator else ["x"] * max(op.min_inputs, 1)
    entry = {"op": kind, **attrs, **({"inputs": inputs} if inputs else {})}
    items = [{"name": "x", "op": "constant", "value": 1.0, "shape": [2, 2]}, entry]
    flat = loads(repr({"graph": items}).replace("'", '"'), "s.yaml")  # the one-pass loader
    nested = loads(repr({"graph": [items[0], {"graph": [entry]}]}).replace("'", '"'), "s.yaml")
    name, tf_type = DEFAULT_NAMES[kind]
    assert [op.name for op in flat.ops][1] == [op.name for op in nested.ops][1] == name
    assert op.tf_type_for(flat.ops[1].attrs) == tf_type


def test_default_names_are_unique_case_insensitively_as_tf_does() -> None:
    g = spec("""
        graph:
          - {name: Add, op: constant, value: 1.0}
          - {op: add, inputs: [Add, Add]}
          - {op: add, inputs: [add_1, Add]}
          - {op: zeros, shape: [2]}
          - {op: zeros, shape: [2000]}
        """)
    assert [op.name for op in g.ops] == ["Add", "add_1", "add_2", "zeros", "zeros_1"]


def test_reasons_use_an_before_vowel_sounds() -> None:
    g = spec(
        """
        graph:
          - {name: a, op: constant, value: 1.0}
          - {op: add, inputs: [a, a]}
          - {op: exp, inputs: [a]}
          - {op: add_n, inputs: [a, a]}
          - {op: identity, inputs: [a]}
          - {op: matmul, inputs: [a, a]}
        """.replace("value: 1.0", "value: [[1.0]]")
    )
    p = place(g, 1)
    assert [p.decisions[n].reason.rsplit(" with ", 1)[1] for n in ("add", "Exp", "AddN")] == [
        "an AddV2 kernel", "an Exp kernel", "an AddN kernel",
    ]  # fmt: skip
    assert p.decisions["Identity"].reason.endswith("with an Identity kernel")
    assert p.decisions["MatMul"].reason.endswith("with a MatMul kernel")


@pytest.mark.parametrize(
    ("word", "expected"),
    [("AddV2", "an"), ("Exp", "an"), ("int32", "an"), ("MatMul", "a"), ("Unique", "a"),
     ("LRN", "an"), ("CTCLoss", "a"), ("float32", "a"), ("Identity", "an")],
)  # fmt: skip
def test_article(word: str, expected: str) -> None:
    assert article(word) == expected


# 3. colocate_with inside a device scope ------------------------------------------------------

SCOPED = """
graph:
  - {name: a, op: variable, shape: [2], initializer: ones, device: /gpu:2}
  - device: /gpu:1
    graph:
      - {name: b, op: neg, inputs: [a], colocate_with: a%s}
      - {name: c, op: neg, inputs: [a]}
"""


def test_colocate_with_overrides_the_device_scope() -> None:
    """The scope is dropped and the target's device copied onto b (TF1's _create_op_helper)."""
    g = spec(SCOPED % "")
    assert [op.device for op in g.ops] == ["/device:GPU:2", "/device:GPU:2", "/device:GPU:1"]
    assert where(g) == {"a": "GPU:2", "b": "GPU:2", "c": "GPU:1"}


def test_the_targets_device_wins_over_the_ops_own() -> None:
    """TF1 applies b's own tf.device first, then sets the colocation target's device over it."""
    g = spec(SCOPED % ", device: /gpu:3")
    assert g.ops[1].device == "/device:GPU:2"
    assert where(g) == {"a": "GPU:2", "b": "GPU:2", "c": "GPU:1"}


def test_a_target_without_a_device_leaves_the_ops_own() -> None:
    g = spec(SCOPED.replace(", device: /gpu:2}", "}") % ", device: /gpu:3")
    assert [op.device for op in g.ops] == ["", "/device:GPU:3", "/device:GPU:1"]
    assert where(g)["a"] == where(g)["b"] == "GPU:3"


def test_colocate_with_in_towers_drops_the_tower_device() -> None:
    g = spec("""
        graph:
          - {name: w, op: variable, shape: [2], device: /cpu:0}
          - towers: [/gpu:0, /gpu:1]
            graph:
              - {name: r, op: identity, inputs: [w], colocate_with: w}
              - {name: y, op: neg, inputs: [r]}
        """)
    assert where(g, 2) == {"w": "CPU:0", "r": "CPU:0", "r_1": "CPU:0", "y": "GPU:0", "y_1": "GPU:1"}


# 4. Colocation Debug Info --------------------------------------------------------------------

PRINTED = """
graph:
  - {name: a, op: variable, shape: [2], initializer: ones, device: /gpu:1}
  - {name: p, op: print, inputs: [a], colocate_with: a}
"""
DEBUG_INFO = (
    "\nColocation Debug Info:"
    "\nColocation group had the following types and supported devices: "
    "\nRoot Member(assigned_device_name_index_=-1 requested_device_name_='/device:GPU:1' "
    "assigned_device_name_='' resource_device_name_='' supported_device_types_=[CPU] "
    "possible_devices_=[]"
    "\nPrint: CPU "
    "\nVariableV2: GPU CPU "
    "\n\nColocation members, user-requested devices, and framework assigned devices, if any:"
    "\n  a (VariableV2) /device:GPU:1"
    "\n  p (Print) /device:GPU:1"
    "\n"
)


def test_group_error_lists_each_members_kernels() -> None:
    with pytest.raises(PlacementError) as caught:
        place(spec(PRINTED), 4)
    assert caught.value.tf_message == (
        "Cannot assign a device for operation a: Could not satisfy explicit device "
        "specification '/device:GPU:1' because no supported kernel for GPU devices is "
        "available." + DEBUG_INFO
    )
    assert CLI.say(caught.value.fix) == (
        "gpuplace: its colocation group has kernels for CPU only: p (Print) has no GPU kernel; "
        "request such a device, or pass --allow-soft-placement."
    )


def test_soft_placement_reason_names_the_member_without_the_kernel() -> None:
    p = place(spec(PRINTED), 4, allow_soft_placement=True)
    assert p.decisions["a"].reason == (
        "soft placement: no supported kernel for GPU devices (/device:GPU:1) in its colocation "
        "group: p (Print) has no GPU kernel; best supported device CPU:0"
    )
    assert p.decisions["p"].reason == (
        "soft placement: requested /device:GPU:1 not honoured; colocated with a"
    )  # p carries a's device (TF1 copies it), which its group could not keep


def test_lone_op_error_has_no_debug_info() -> None:
    g = spec("""
        graph:
          - {name: k, op: constant, value: 1.0}
          - {name: p, op: print, inputs: [k], device: /gpu:0}
        """)
    with pytest.raises(PlacementError) as caught:
        place(g, 1)
    assert caught.value.tf_message.endswith(
        "because no supported kernel for GPU devices is available."
    )


def test_cli_prints_the_debug_info_then_the_hint(run: Run, tmp_path: object) -> None:
    path = __import__("pathlib").Path(str(tmp_path)) / "s.yaml"
    path.write_text(PRINTED)
    result = run("--machine", "4xK520", "run", str(path))
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        "error: Cannot assign a device for operation a: Could not satisfy explicit device "
        "specification '/device:GPU:1' because no supported kernel for GPU devices is available."
        + DEBUG_INFO.rstrip()
        + "\ngpuplace: its colocation group has kernels for CPU only: p (Print) has no GPU "
        "kernel; request such a device, or pass --allow-soft-placement.\n"
    )


# 6. MatMul kernels by dtype ------------------------------------------------------------------

INTS = """
graph:
  - {name: a, op: constant, value: [[1, 2], [3, 4]], dtype: %s}
  - {name: m, op: matmul, inputs: [a, a]%s}
"""


def test_int32_matmul_without_a_device_goes_to_cpu0_with_its_inputs() -> None:
    g = spec(INTS % ("int32", ""))
    p = place(g, 4)
    assert where(g) == {"a": "CPU:0", "m": "CPU:0"}
    assert p.decisions["m"].reason == (
        "no device requested: CPU:0 is the highest-priority device with a MatMul kernel: no GPU "
        "kernel for MatMul with T=DT_INT32 in TensorFlow 2.21's registry (CUDA build); CPU "
        "kernel registered"
    )
    assert where(spec(INTS % ("float32", ""))) == {"a": "GPU:0", "m": "GPU:0"}
    assert flatten(g).kernels[1] == frozenset({"CPU"})  # so no strategy moves it to a GPU


def test_int32_matmul_on_a_gpu_fails_or_soft_places_to_cpu0() -> None:
    g = spec(INTS % ("int32", ", device: /gpu:1"))
    with pytest.raises(PlacementError) as caught:
        place(g, 4)
    assert caught.value.tf_message == (
        "Cannot assign a device for operation m: Could not satisfy explicit device "
        "specification '/device:GPU:1' because no supported kernel for GPU devices is available."
    )
    assert CLI.say(caught.value.fix) == (
        "gpuplace: it has kernels for CPU only (no GPU kernel for MatMul with T=DT_INT32 in "
        "TensorFlow 2.21's registry (CUDA build)); request such a device, or pass "
        "--allow-soft-placement."
    )
    p = place(g, 4, allow_soft_placement=True)
    assert p.decisions["m"].device.endswith("CPU:0")
    assert p.decisions["m"].reason == (
        "soft placement: no supported kernel for GPU devices (/device:GPU:1): no GPU kernel for "
        "MatMul with T=DT_INT32 in TensorFlow 2.21's registry (CUDA build); best supported "
        "device CPU:0"
    )


def test_int64_matmul_has_a_cpu_kernel_in_tf_2_21() -> None:
    """TF 2.21 registers MatMul on the CPU for int64 (and none on the GPU): it runs on CPU:0."""
    g = spec(INTS % ("int64", ""))
    p = place(g, 1)
    assert where(g) == {"a": "CPU:0", "m": "CPU:0"}
    assert p.decisions["m"].reason.endswith(
        "no GPU kernel for MatMul with T=DT_INT64 in TensorFlow 2.21's registry (CUDA build); "
        "CPU kernel registered"
    )
