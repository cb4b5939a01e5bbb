"""ONNX operators are not TensorFlow's, even where their type names are the same: TF's kernel
registry (which has no GPU MatMul for int64, no GPU Relu for int32) never decides for them."""

import textwrap
from pathlib import Path

import pytest

import gpuplace
from gpuplace.graph import get_op


@pytest.mark.parametrize(("op_type", "dtype", "tf_op"), [("MatMul", "int64", "matmul"), ("Relu", "int32", "relu"),
                                                 ("Max", "int64", "reduce_max"), ("Cast", "int64", "cast")])  # fmt: skip
def test_onnx_ops_have_no_tensorflow_kernel_entry(op_type: str, dtype: str, tf_op: str) -> None:
    assert get_op(op_type).kernel_match({}, dtype) is None
    assert get_op(tf_op).kernel_match({}, dtype) is not None  # TF's own op still has one


def test_an_int64_onnx_matmul_stays_on_the_gpu(tmp_path: Path) -> None:
    spec = tmp_path / "m.yaml"
    spec.write_text(
        textwrap.dedent("""\
        graph:
          - {name: a, op: constant, value: [[1, 2], [3, 4]], dtype: int64}
          - {name: m, op: MatMul, inputs: [a, a]}
          - {name: t, op: matmul, inputs: [a, a]}
        fetch: [m, t]
        """)
    )
    seen = gpuplace.view(gpuplace.discover("1xK520"), {})
    decisions = gpuplace.prepare(str(spec), seen, gpuplace.Options(), {}).placement.decisions
    assert decisions["m"].device.endswith("GPU:0")
    assert decisions["t"].device.endswith("CPU:0")  # TF's MatMul has no int64 GPU kernel
