"""TensorFlow's kernel registry as gpuplace reads it (`graph/tf_registry.py`, captured by
`tools/tf_capture/kernels.py` from TF 2.21's CPU and CUDA builds): its coverage of the op
registry, the lookup rule (a device type's own kernels, else DEFAULT), the words `--explain`
and the errors use, and that the table is read only when placing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from gpuplace.graph import TensorSpec, list_ops, loads
from gpuplace.graph.model import Op
from gpuplace.graph.ops import TF_TYPE_ATTRS
from gpuplace.graph.tf_registry import known, listing, match, type_attrs
from gpuplace.placement import PlacementError, place
from gpuplace.placement.candidates import DeviceTable
from gpuplace.placement.tf import _no_kernel_error
from tests.conftest import Run

ROOT = Path(__file__).parents[2]
GOLDEN = json.loads((ROOT / "tests/conformance/data/kernels.json").read_text())


def test_every_tf_op_type_has_its_type_attrs_named() -> None:
    """Each TF type an op can be is in the table, and TF_TYPE_ATTRS names exactly the type
    attrs of its OpDef; gpuplace's own ops (load, save, average_n) are not TensorFlow's."""
    own = {"LoadNpy", "SaveNpy", "Average"}
    seen = set()
    for d in (d for d in list_ops() if not d.onnx):  # the ONNX operators are not TensorFlow's
        for tf_type in {d.tf_type_for({"shape": [1]}), d.tf_type_for({"shape": [40, 25]}),
                        d.tf_type_for({"sizes": [1]})}:  # fmt: skip
            seen.add(str(tf_type))
    assert own <= seen
    for tf_type in seen - own:
        assert known(tf_type), tf_type
        assert set(TF_TYPE_ATTRS[tf_type]) == set(type_attrs(tf_type)), tf_type
    assert not any(known(t) for t in own)
    assert set(TF_TYPE_ATTRS) == seen - own


@pytest.mark.parametrize(
    ("tf_type", "attrs", "devices", "served"),
    [
        ("Relu", (("T", "int32"),), {"CPU"}, {"CPU": "CPU"}),
        ("Relu", (("T", "int64"),), {"CPU", "GPU"}, {"GPU": "GPU", "CPU": "CPU"}),
        ("MatMul", (("T", "int64"),), {"CPU"}, {"CPU": "CPU"}),
        ("MatMul", (("T", "bool"),), set(), {}),
        ("VariableV2", (("dtype", "int32"),), {"CPU"}, {"CPU": "CPU"}),
        ("VariableV2", (("dtype", "int64"),), {"CPU", "GPU"}, {"GPU": "GPU", "CPU": "CPU"}),
        # Const has no GPU kernel for int32: the DEFAULT one, output in host memory, serves it
        ("Const", (("dtype", "int32"),), {"CPU", "GPU"}, {"GPU": "DEFAULT", "CPU": "CPU"}),
        ("Placeholder", (("dtype", "float32"),), {"CPU", "GPU"}, {"GPU": "DEFAULT", "CPU": "CPU"}),
        ("SplitV", (("T", "int32"), ("Tlen", "int32")), {"CPU", "GPU"}, {"GPU": "GPU", "CPU": "CPU"}),
        ("SplitV", (("T", "int64"), ("Tlen", "int32")), {"CPU"}, {"CPU": "CPU"}),
        ("Mean", (("T", "int32"), ("Tidx", "int32")), {"CPU"}, {"CPU": "CPU"}),
        ("Cast", (("SrcT", "bool"), ("DstT", "float16")), {"CPU", "GPU"}, {"GPU": "GPU", "CPU": "CPU"}),
    ],
)  # fmt: skip
def test_the_lookup_takes_the_device_types_own_kernel_else_default(
    tf_type: str, attrs: tuple[tuple[str, str], ...], devices: set[str], served: dict[str, str]
) -> None:
    found = match(tf_type, attrs)
    assert found.devices == devices
    assert {t: k.device for t, k in found.found} == served


def test_host_memory_args_travel_with_the_kernel() -> None:
    kernel = match("SplitV", (("T", "int32"), ("Tlen", "int32"))).kernel("GPU")
    assert kernel is not None
    assert kernel.host_memory == ("output", "size_splits", "split_dim", "value")
    assert (
        match("Const", (("dtype", "int32"),))
        .kernel("GPU")
        .describe(  # type: ignore[union-attr]
            (("dtype", "int32"),)
        )
        == "the DEFAULT kernel with dtype=DT_INT32, output in host memory"
    )


SPEC = """
graph:
  - {name: x, op: constant, value: [[1, -2], [3, 4]], dtype: int32}
  - {name: r, op: relu, inputs: [x]}
  - {name: a, op: constant, value: [[1, 2], [3, 4]], dtype: int64}
  - {name: m, op: matmul, inputs: [a, a]}
  - {name: v, op: variable, shape: [2], dtype: int32}
  - {name: k, op: constant, value: [1, 2], dtype: int32}
  - {name: f, op: relu, inputs: [k], device: /gpu:0}
fetch: [r, m, v]
"""


def test_explain_says_which_registry_entry_decided(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(dedent(SPEC))
    result = run("--machine", "2xK520", "run", str(path), "--json", "--allow-soft-placement")
    assert result.code == 0, result.err
    reasons = {p["op"]: p["reason"] for p in json.loads(result.out)["placement"]}
    registry = "in TensorFlow 2.21's registry (CUDA build)"
    assert reasons == {
        "x": "generator follows its consumer r on CPU:0",
        "r": "no device requested: CPU:0 is the highest-priority device with a Relu kernel: "
        f"no GPU kernel for Relu with T=DT_INT32 {registry}; CPU kernel registered",
        "a": "generator follows its consumer m on CPU:0",
        "m": "no device requested: CPU:0 is the highest-priority device with a MatMul kernel: "
        f"no GPU kernel for MatMul with T=DT_INT64 {registry}; CPU kernel registered",
        "v": "no device requested: CPU:0 is the highest-priority device with a VariableV2 "
        f"kernel: no GPU kernel for VariableV2 with dtype=DT_INT32 {registry}; CPU kernel "
        "registered",
        "k": "generator follows its consumer f on CPU:0",
        "f": "soft placement: no supported kernel for GPU devices (/device:GPU:0): no GPU "
        f"kernel for Relu with T=DT_INT32 {registry}; best supported device CPU:0",
    }


def test_a_default_kernel_is_named_when_it_serves_the_device() -> None:
    g = loads("graph:\n  - {name: k, op: constant, value: [1, 2], dtype: int32}\n", "s.yaml")
    reason = place(g, 1).decisions["k"].reason
    assert reason == (
        "no device requested: GPU:0 is the highest-priority device with a Const kernel: GPU "
        "served by the DEFAULT kernel with dtype=DT_INT32, output in host memory"
    )


def test_a_gpu_kernel_keeping_its_outputs_in_host_memory_is_named() -> None:
    """TF 2.21 registers SplitV on the GPU for int32 with every tensor in host memory: the
    placer still picks GPU:0 (the issue expected the CPU; the registry says otherwise)."""
    g = loads(dedent("""
        graph:
          - {name: x, op: constant, value: [[1, 2, 3]], dtype: int32}
          - {name: s, op: split, inputs: [x], sizes: [1, 2], axis: 1}
        """), "s.yaml")  # fmt: skip
    assert place(g, 1).decisions["s"].reason == (
        "no device requested: GPU:0 is the highest-priority device with a SplitV kernel: GPU "
        "served by the GPU kernel with T=DT_INT32, Tlen=DT_INT32, output, size_splits, "
        "split_dim, value in host memory"
    )


def test_no_kernel_error_has_tensorflows_form() -> None:
    """Checked against TF 2.21's CPU build (MatMul on uint8: its OpDef takes the dtype, no
    kernel does). TF prints a node's attrs in a hash map's order, which changes from run to
    run; gpuplace sorts them. Its list is the CUDA build's, which TF prints on a GPU machine."""
    real = GOLDEN["no_kernel"]
    op = Op("u", "matmul", attrs={"transpose_a": False, "transpose_b": False},
            outputs=(TensorSpec((1, 1), "float32"),))  # fmt: skip
    meta = next(d for d in list_ops() if d.name == "matmul")
    found = match("MatMul", (("T", "uint8"),))
    error = _no_kernel_error(op, meta, DeviceTable(0, False), found)
    mine_head, mine_devices, _, *mine_kernels = error.tf_message.split("\n")
    tf_head, tf_devices, _, *tf_kernels = real["error"].split("\n")
    prefix = (
        "No OpKernel was registered to support Op 'MatMul' used by {{node u}} with these attrs: "
    )
    assert mine_head.startswith(prefix) and tf_head.startswith(prefix)
    attrs = tf_head.removeprefix(prefix).strip("[]").split(", ")
    assert mine_head.removeprefix(prefix) == f"[{', '.join(sorted(attrs))}]"
    assert mine_devices == tf_devices == "Registered devices: [CPU]"
    assert "\n".join(tf_kernels) == listing("MatMul", "cpu")  # the captured list is TF's
    assert "\n".join(mine_kernels) == listing("MatMul")
    assert "  device='GPU'; T in [DT_FLOAT]" in mine_kernels
    assert error.exit_code == 2
    assert str(error.fix) == (
        "gpuplace: TensorFlow 2.21's registry (CUDA build) has no MatMul kernel for T=DT_UINT8 "
        "on any device; cast the inputs (op: cast) to one of float16, float32, float64, int32, "
        "int64 first."
    )


def test_a_gpu_request_without_a_gpu_kernel_names_the_registry() -> None:
    g = loads(dedent("""
        graph:
          - {name: x, op: constant, value: [[1, 2], [3, 4]], dtype: int64}
          - {name: m, op: reduce_mean, inputs: [x], device: /gpu:0}
        """), "s.yaml")  # fmt: skip
    with pytest.raises(PlacementError) as caught:
        place(g, 2)
    assert str(caught.value.fix) == (
        "gpuplace: it has kernels for CPU only (no GPU kernel for Mean with T=DT_INT64, "
        "Tidx=DT_INT32 in TensorFlow 2.21's registry (CUDA build)); request such a device, or "
        "pass Options(allow_soft_placement=True)."
    )


def test_the_table_is_read_when_placing_not_at_import() -> None:
    code = dedent("""
        import sys, gpuplace.graph, gpuplace.placement, gpuplace.cli.main
        from gpuplace.graph import tf_registry
        assert tf_registry._data.cache_info().currsize == 0
        g = gpuplace.graph.loads("graph:\\n  - {name: a, op: constant, value: 1.0}\\n", "s.yaml")
        assert tf_registry._data.cache_info().currsize == 0  # loading reads nothing either
        gpuplace.placement.place(g, 1)
        assert tf_registry._data.cache_info().currsize == 1
        assert tf_registry._listing.cache_info().currsize == 0  # only an error reads the list
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("script", ["kernels.py", "placement.py"])
def test_the_capture_scripts_the_docs_name_start_without_tensorflow(script: str) -> None:
    """docs/architecture.md's capture commands need TensorFlow, which tests never import: here
    each script starts, says its usage, and the data files name it."""
    path = ROOT / "tools" / "tf_capture" / script
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--cpu" in done.stdout and "--cuda" in done.stdout
    data = ROOT / ("gpuplace/graph/data/tf_kernels.json" if script == "kernels.py" else
                   "tests/conformance/data/kernels.json")  # fmt: skip
    assert json.loads(data.read_text())["script"] == f"tools/tf_capture/{script}"
