"""ONNX models in: `plan`, `run` and `mem` take a .onnx file (graph/onnx_import.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from gpuplace.echo import clip_middle
from gpuplace.graph import load
from gpuplace.graph.onnx_import import supported_ops
from gpuplace.graph.onnx_names import module_of
from gpuplace.limits import Limits
from tests.conftest import Run
from tests.onnx.models import cnn, has_ops, mlp, model, save, transformer, weight

SIM = ("--machine", "2xK520")
MLP_OPS = has_ops("MatMul", "Add", "Relu", "Gemm")
needs_mlp = pytest.mark.skipif(not MLP_OPS, reason="needs MatMul/Add/Relu/Gemm (onnx-ops-nn)")


def hardmax(out_shape: list[int | str] | None = ("batch", 3)) -> object:  # type: ignore[assignment]
    """x -> Hardmax (an op gpuplace has no kernel for) -> y."""
    node = h.make_node("Hardmax", ["x"], ["y"], name="/head/Hardmax")
    return model([node], [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3])],
                 [h.make_tensor_value_info("y", T.FLOAT, out_shape)])  # fmt: skip


@pytest.mark.parametrize(
    ("name", "module"),
    [("/encoder/layer.0/attention/MatMul", "encoder.layer.0.attention"), ("/MatMul", ""),
     ("model/dense/MatMul", "model/dense"), ("Gemm_3", "")],
)  # fmt: skip
def test_module_of_an_exporters_node_name(name: str, module: str) -> None:
    assert module_of(name) == module


@given(st.text(alphabet="/ab.", max_size=12))
def test_module_of_drops_empty_parts_of_any_name(name: str) -> None:
    """The common case (no `//`) takes a shortcut; every name gives what the rule says."""
    if name.startswith("/"):
        assert module_of(name) == ".".join(p for p in name[1:].split("/")[:-1] if p)
    else:
        assert module_of(name) == name.rpartition("/")[0]


def test_unbound_dims_are_listed_with_the_flag(run: Run, tmp_path: Path) -> None:
    path = save(transformer(), tmp_path)
    result = run(*SIM, "plan", path)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: {path}: unbound symbolic dims: batch (input 'input_ids' dim 0); seq (input "
        "'input_ids' dim 1); bind them with --dim batch=N --dim seq=N (or dims: in a YAML "
        "wrapper, see docs/onnx.md)\n"
    )


def test_a_dim_the_model_lacks_is_refused(run: Run, tmp_path: Path) -> None:
    result = run(*SIM, "plan", save(mlp(), tmp_path), "--dim", "batch=2", "--dim", "seq=4")
    assert result.code == 2
    assert result.err.endswith(
        ": --dim seq: the model has no dim 'seq'; its symbolic dims: batch\n"
    )


@pytest.mark.parametrize("bad", ["batch", "batch=0", "batch=x", "=3"])
def test_a_bad_dim_flag_is_one_line(run: Run, tmp_path: Path, bad: str) -> None:
    result = run(*SIM, "plan", save(mlp(), tmp_path), "--dim", bad)
    assert result.code == 2
    assert result.err == (
        f"error: --dim '{bad}': expected NAME=N with N a whole number >= 1 (e.g. --dim batch=32)\n"
    )


def test_a_dot_onnx_file_that_is_not_one_is_named(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_text("graph: []\n")
    result = run(*SIM, "run", str(path))
    assert result.code == 2
    assert result.err == (
        f"error: {path}: not an ONNX model (a .onnx file is a protobuf ModelProto, which starts "
        "with byte 0x08; this one starts with b'graph: ['); export the model again, or give a "
        "YAML or JSON spec\n"
    )


def test_a_truncated_model_is_refused(run: Run, tmp_path: Path) -> None:
    data = mlp().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    result = run(*SIM, "plan", str(path), "--dim", "batch=2")
    assert result.code == 2
    assert result.err.startswith(
        f"error: {clip_middle(str(path))}: not a readable ONNX model (the protobuf does not"
    )
    assert result.err.endswith("the file may be truncated or corrupt, export it again\n")
    assert result.err.count("\n") == 1


def test_a_model_is_recognised_by_its_bytes_whatever_its_name(tmp_path: Path) -> None:
    graph = load(save(hardmax(), tmp_path, "model.bin"), dims={"batch": 2})
    assert [(op.name, op.type) for op in graph.ops] == [
        ("x", "placeholder"), ("/head/Hardmax", "Opaque"), ("y", "identity")
    ]  # fmt: skip


def test_an_initializer_declaring_more_than_it_holds_is_refused(tmp_path: Path) -> None:
    m = mlp()
    w = m.graph.initializer[0]
    w.dims[:] = [4, 10**12]  # a huge declared shape over 32 floats of data
    with pytest.raises(Exception, match=r"initializer 'fc1.weight' declares shape \[4, "
                       r"1000000000000\] \(4,000,000,000,000 elements\) but holds 32"):  # fmt: skip
        load(save(m, tmp_path), dims={"batch": 2})


def test_a_huge_bound_dim_is_refused_before_anything_is_allocated(run: Run, tmp_path: Path) -> None:
    result = run(*SIM, "plan", save(hardmax(), tmp_path), "--dim", f"batch={10**15}")
    assert result.code in (1, 2)
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_unsupported_dtypes_are_refused_naming_the_tensor(tmp_path: Path) -> None:
    node = h.make_node("Hardmax", ["x"], ["y"])
    m = model([node], [h.make_tensor_value_info("x", T.UINT8, [2, 3])],
              [h.make_tensor_value_info("y", T.UINT8, [2, 3])])  # fmt: skip
    with pytest.raises(Exception) as info:
        load(save(m, tmp_path))
    assert str(info.value) == (
        f"{tmp_path / 'm.onnx'}: graph input 'x' is uint8, which gpuplace does not support; it "
        "takes float16, float32, float64, int32, int64, bool (cast the tensor in the model)"
    )


def test_the_op_limit_counts_nodes_before_building(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"the model has 4 nodes, more than the limit of 3 ops; "
                       "set GPUPLACE_MAX_OPS to raise it"):  # fmt: skip
        load(save(mlp(), tmp_path), dims={"batch": 2}, limits=Limits(ops=3))


def test_external_data_is_refused(tmp_path: Path) -> None:
    m = mlp()
    w = m.graph.initializer[0]
    w.data_location = T.EXTERNAL
    with pytest.raises(Exception, match=r"initializer 'fc1\.weight' keeps its data in an external"):
        load(save(m, tmp_path), dims={"batch": 2})


def test_an_unsupported_op_is_planned_as_estimated_and_refused_by_run(
    run: Run, tmp_path: Path
) -> None:
    path = save(hardmax(), tmp_path)
    planned = run(*SIM, "plan", path, "--dim", "batch=2", "--json")
    assert planned.code == 0, planned.err
    doc = json.loads(planned.out)
    ops = {o["op"]: o for o in doc["placement"]}
    assert ops["/head/Hardmax"]["type"] == "Opaque"
    assert doc["estimated"] == [{"op": "/head/Hardmax", "onnx_type": "Hardmax"}]
    text = run(*SIM, "plan", path, "--dim", "batch=2")
    assert text.out.endswith(
        "\nestimated: /head/Hardmax (Hardmax): no kernel in gpuplace, so their time is a guess "
        "(one unit of work per output element) and run refuses the model\n"
    )
    refused = run(*SIM, "run", path, "--dim", "batch=2")
    assert (refused.code, refused.out) == (2, "")
    assert refused.err == (
        f"error: {path}: node '/head/Hardmax' is an ONNX Hardmax op, which gpuplace cannot run "
        f"(plan estimates it); supported ops: {', '.join(supported_ops())}\n"
    )


def test_an_unsupported_op_of_unknown_shape_is_refused(tmp_path: Path) -> None:
    node = h.make_node("Mystery", ["x"], ["y"], name="m", domain="com.example")
    m = model([node], [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("y", T.FLOAT, None)])  # fmt: skip
    m.opset_import.append(h.make_opsetid("com.example", 1))
    with pytest.raises(Exception, match=r"node 'm': op com.example.Mystery is not supported and "
                       r"ONNX shape inference cannot tell its output 'y''s shape"):  # fmt: skip
        load(save(m, tmp_path))


def test_names_unnamed_nodes_clashes_and_outputs(tmp_path: Path) -> None:
    nodes = [h.make_node("Hardmax", ["x"], ["t"]), h.make_node("Hardmax", ["t"], ["u"], name="x"),
             h.make_node("Hardmax", ["u"], ["out"], name="out")]  # fmt: skip
    m = model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("out", T.FLOAT, [2, 3]),
               h.make_tensor_value_info("t", T.FLOAT, [2, 3])])  # fmt: skip
    graph = load(save(m, tmp_path))
    assert [op.name for op in graph.ops] == ["x", "Hardmax_0", "x_1", "out", "t"]
    assert [str(f) for f in graph.fetch] == ["out", "t"]
    assert graph.by_name()["t"].inputs[0].op == "Hardmax_0"


def test_wrapper_binds_dims_and_pins_modules(run: Run, tmp_path: Path) -> None:
    save(mlp(), tmp_path)
    wrapper = tmp_path / "w.yaml"
    wrapper.write_text("model: m.onnx\ndims: {batch: 8}\ndevices: {fc2: /gpu:1, /fc1: /cpu:0}\n")
    graph = load(wrapper)
    devices = {op.name: op.device for op in graph.ops}
    assert devices["/fc2/Gemm"] == devices["fc2.weight"] == "/device:GPU:1"
    assert devices["/fc1/MatMul"] == devices["fc1.bias"] == "/device:CPU:0"
    assert devices["/act/Relu"] == ""
    assert graph.by_name()["x"].outputs[0].shape == (8, 4)
    modules = {op.name: op.module for op in graph.ops}
    assert (modules["/fc1/MatMul"], modules["fc1.bias"], modules["y"]) == ("fc1", "fc1", "fc2")
    over = load(wrapper, dims={"batch": 2})  # --dim wins over dims:
    assert over.by_name()["x"].outputs[0].shape == (2, 4)


def test_wrapper_device_key_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    save(mlp(), tmp_path)
    wrapper = tmp_path / "w.yaml"
    wrapper.write_text("model: m.onnx\ndims: {batch: 8}\ndevices: {fc3: /gpu:1}\n")
    with pytest.raises(Exception, match=r"devices: 'fc3' names no op or module of the model"):
        load(wrapper)


def test_wrapper_unknown_key_is_refused_with_its_line(tmp_path: Path) -> None:
    wrapper = tmp_path / "w.yaml"
    wrapper.write_text("model: m.onnx\ngraph: []\n")
    with pytest.raises(Exception, match=r"w.yaml:1: unknown key 'graph' beside 'model:'"):
        load(wrapper)


@needs_mlp
def test_mlp_runs_fed_verified_against_float64_and_onnxruntime(run: Run, tmp_path: Path) -> None:
    path = save(mlp(), tmp_path)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    np.save(tmp_path / "x.npy", x)
    result = run(*SIM, "run", path, "--dim", "batch=2", "--feed", f"x={tmp_path / 'x.npy'}",
                 "--verify", "--json")  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    checked = {c["against"].split(" ")[0]: c for c in doc["verify"]}
    assert set(checked) == {"float64", "onnxruntime"}
    assert all(c["ok"] and c["fetch"] == "y" for c in checked.values())
    import onnxruntime

    want = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    saved = tmp_path / "out.npz"
    run(*SIM, "run", path, "--dim", "batch=2", "--feed", f"x={tmp_path / 'x.npy'}",
        "--save", str(saved))  # fmt: skip
    np.testing.assert_allclose(np.load(saved)["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(
    not has_ops("Conv", "Relu", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"),
    reason="needs the CNN ops (onnx-ops-nn)",
)
def test_cnn_runs_verified(run: Run, tmp_path: Path) -> None:
    path = save(cnn(), tmp_path)
    np.save(tmp_path / "img.npy", np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 1, 8, 8))
    result = run(*SIM, "run", path, "--dim", "N=2", "--feed", f"img={tmp_path / 'img.npy'}",
                 "--verify")  # fmt: skip
    assert result.code == 0, result.err
    assert "verify logits: max relative error" in result.out
    assert result.out.count(": ok\n") == 2


TRANSFORMER_OPS = ("Gather", "LayerNormalization", "MatMul", "Split", "Shape", "Unsqueeze",
                   "Concat", "Reshape", "Transpose", "Div", "Range", "LessOrEqual", "Where",
                   "Softmax", "Add", "Gelu")  # fmt: skip


@pytest.mark.skipif(not has_ops(*TRANSFORMER_OPS), reason="needs onnx-ops-nn and onnx-ops-shape")
def test_transformer_folds_shape_subgraphs_and_runs_verified(run: Run, tmp_path: Path) -> None:
    path = save(transformer(), tmp_path)
    graph = load(path, dims={"batch": 2, "seq": 3})
    kinds = {op.type for op in graph.ops}
    assert not kinds & {"Shape", "Concat", "Range", "Unsqueeze", "LessOrEqual"}  # folded
    assert graph.by_name()["/h.0/attn/Reshape"].attrs["shape"] == (2, 3, 8)
    np.save(tmp_path / "ids.npy", np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64))
    result = run(*SIM, "run", path, "--dim", "batch=2", "--dim", "seq=3", "--feed",
                 f"input_ids={tmp_path / 'ids.npy'}", "--verify")  # fmt: skip
    assert result.code == 0, result.err
    assert result.out.count(": ok\n") == 2


def test_weights_are_variables_holding_the_tensor(tmp_path: Path) -> None:
    w = weight("w", (3, 3))
    node = h.make_node("Hardmax", ["w"], ["y"], name="hm")
    m = model([node], [], [h.make_tensor_value_info("y", T.FLOAT, [3, 3])], [w])
    graph = load(save(m, tmp_path))
    var = graph.by_name()["w"]
    assert var.type == "variable"
    np.testing.assert_array_equal(var.attrs["value"], numpy_helper.to_array(w))


@pytest.mark.parametrize("raw", [True, False])
def test_an_initializer_reads_the_same_from_raw_bytes_or_typed_fields(
    tmp_path: Path, raw: bool
) -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    w = h.make_tensor("w", T.FLOAT, [2, 3], values.tobytes() if raw else values.ravel(), raw=raw)
    node = h.make_node("Hardmax", ["w"], ["y"], name="hm")
    m = model([node], [], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], [w])
    var = load(save(m, tmp_path)).by_name()["w"]
    assert (var.attrs["dtype"], var.outputs[0].shape) == ("float32", (2, 3))
    np.testing.assert_array_equal(var.attrs["value"], values)
    assert var.attrs["value"].dtype == np.float32


def test_replicate_is_refused_for_a_model(run: Run, tmp_path: Path) -> None:
    result = run(*SIM, "plan", save(mlp(), tmp_path), "--dim", "batch=2", "--replicate", "2")
    assert (result.code, result.err) == (2, (
        "error: --replicate 2: replicates a YAML or JSON spec; an ONNX model is placed as "
        "exported (bind a larger batch with --dim instead)\n"
    ))  # fmt: skip


def test_without_the_onnx_extra_one_line_names_it(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(mlp(), tmp_path)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    result = run(*SIM, "plan", path, "--dim", "batch=2")
    assert (result.code, result.err) == (
        2, "error: reading an ONNX model needs the onnx extra: pip install 'gpuplace[onnx]'\n"
    )  # fmt: skip


@needs_mlp
def test_mem_runs_a_model(run: Run, tmp_path: Path) -> None:
    path = save(mlp(), tmp_path)
    np.save(tmp_path / "x.npy", np.ones((4, 4), np.float32))
    result = run(*SIM, "mem", path, "--dim", "batch=4", "--feed", f"x={tmp_path / 'x.npy'}",
                 "--json")  # fmt: skip
    assert result.code == 0, result.err
    assert json.loads(result.out)["schema_version"]


def test_a_shape_onnx_disagrees_with_names_the_node(tmp_path: Path) -> None:
    m = mlp()
    m.graph.value_info.append(h.make_tensor_value_info("h2", T.FLOAT, ["batch", 7]))
    with pytest.raises(Exception) as info:
        load(save(m, tmp_path), dims={"batch": 2})
    assert str(info.value) == (
        f"{tmp_path / 'm.onnx'}: node '/act/Relu' (Relu): output 'h2': gpuplace infers float32 "
        "[2, 8], ONNX shape inference float32 ['?', 7]; this is a bug in gpuplace's Relu or in "
        "the model: please report it with the model"
    )


@pytest.mark.skipif(not has_ops("Range", "Add"), reason="needs Range and Add")
def test_an_int32_range_folds_to_an_int32_constant(run: Run, tmp_path: Path) -> None:
    i32 = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.int32), name)  # noqa: E731
    nodes = [h.make_node("Range", ["s", "l", "d"], ["r"], name="/Range"),
             h.make_node("Add", ["r", "x"], ["y"], name="/Add")]  # fmt: skip
    m = model(nodes, [h.make_tensor_value_info("x", T.INT32, [4])],
              [h.make_tensor_value_info("y", T.INT32, [4])],
              [i32("s", 1), i32("l", 9), i32("d", 2)])  # fmt: skip
    graph = load(save(m, tmp_path))
    assert [(op.name, op.type, op.outputs[0].dtype) for op in graph.ops] == [
        ("x", "placeholder", "int32"), ("r", "constant", "int32"), ("/Add", "Add", "int32"),
        ("y", "identity", "int32"),
    ]  # fmt: skip
    np.testing.assert_array_equal(graph.by_name()["r"].attrs["value"], [1, 3, 5, 7])
    result = run(*SIM, "run", str(tmp_path / "m.onnx"), "--feed", "x=[1, 1, 1, 1]", "--verify")
    assert result.code == 0, result.err
    assert "y:\n[2 4 6 8]\n" in result.out


@needs_mlp
def test_the_python_api_takes_a_model_and_its_dims(tmp_path: Path) -> None:
    import gpuplace

    path = save(mlp(), tmp_path)
    view = gpuplace.view(gpuplace.load_machine("2xK520"), {})
    options = gpuplace.Options(dims={"batch": 3}, feeds={"x": np.ones((3, 4), np.float32)})
    prepared = gpuplace.prepare(path, view, options, {})
    outcome = gpuplace.execute_prepared(prepared, view)
    assert outcome.result.values["y"].shape == (3, 3)
    assert [op.module for op in prepared.graph.ops if op.type == "Gemm"] == ["fc2"]


@pytest.mark.parametrize("dims", [{"batch": 0}, {"batch": "8"}, {"batch": True}, ["batch"]])
def test_options_dims_are_checked(dims: object) -> None:
    import gpuplace

    with pytest.raises(gpuplace.BadInput, match=r"Options.dims=.*: expected symbolic dim names"):
        gpuplace.Options(dims=dims)  # type: ignore[arg-type]


def test_an_attribute_the_op_does_not_have_is_refused(tmp_path: Path) -> None:
    node = h.make_node("Relu", ["x"], ["y"], name="r", alpha=0.5)
    m = model([node], [h.make_tensor_value_info("x", T.FLOAT, [2])],
              [h.make_tensor_value_info("y", T.FLOAT, [2])])  # fmt: skip
    with pytest.raises(Exception) as info:
        load(save(m, tmp_path))
    assert str(info.value) == (
        f"{tmp_path / 'm.onnx'}: node 'r' (Relu): attribute 'alpha' is not one of Relu's (it "
        "takes: none); the exporter wrote an attribute ONNX does not define"
    )


def test_a_cumsum_axis_from_an_int32_initializer(run: Run, tmp_path: Path) -> None:
    axis = numpy_helper.from_array(np.asarray(-1, dtype=np.int32), "axis")
    node = h.make_node("CumSum", ["x", "axis"], ["y"], name="/CumSum")
    m = model([node], [h.make_tensor_value_info("x", T.INT64, [2, 3])],
              [h.make_tensor_value_info("y", T.INT64, [2, 3])], [axis])  # fmt: skip
    path = save(m, tmp_path)
    assert load(path).by_name()["/CumSum"].attrs["axis"] == -1
    result = run(*SIM, "run", path, "--feed", "x=[[1, 1, 1], [1, 2, 3]]", "--verify")
    assert result.code == 0, result.err
    assert "y:\n[[1 2 3]\n [1 3 6]]\n" in result.out


def test_a_dim_shared_by_inputs_is_listed_once(run: Run) -> None:
    path = str(Path(__file__).parents[2] / "examples" / "onnx" / "gpt2_tiny.onnx")
    result = run(*SIM, "plan", path)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"error: {path}: unbound symbolic dims: batch (input 'input_ids' dim 0, input "
        "'attention_mask' dim 0); seq (input 'input_ids' dim 1, input 'attention_mask' dim 1); "
        "bind them with --dim batch=N --dim seq=N (or dims: in a YAML wrapper, see docs/onnx.md)\n"
    )


def test_a_model_through_a_pipe_is_told_by_its_bytes(run: Run, tmp_path: Path) -> None:
    """`gpuplace plan <(cat model.onnx)`: a pipe has no .onnx name and can be read only once;
    its first bytes say it is a model."""
    import threading

    fifo = tmp_path / "model"
    os.mkfifo(fifo)
    data = mlp().SerializeToString()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    result = run(*SIM, "plan", str(fifo), "--dim", "batch=2", "--json")
    writer.join()
    assert result.code == 0, result.err
    assert {p["op"] for p in json.loads(result.out)["placement"]} >= {"/fc1/MatMul", "y"}
