"""Small ONNX models built with `onnx.helper` (no downloads) for the importer's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 17


def model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any] = (),
          opset: int = OPSET, **graph: Any) -> onnx.ModelProto:  # type: ignore[assignment]  # fmt: skip
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits), **graph)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def save(m: onnx.ModelProto, folder: Path, name: str = "m.onnx") -> str:
    path = folder / name
    path.write_bytes(m.SerializeToString())
    return str(path)


def weight(name: str, shape: tuple[int, ...], seed: int = 0) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return nh.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def mlp(batch: str | int = "batch") -> onnx.ModelProto:
    """x[batch, 4] -> MatMul + Add -> Relu -> Gemm(transB) -> y[batch, 3], PyTorch's names."""
    nodes = [
        h.make_node("MatMul", ["x", "fc1.weight"], ["h0"], name="/fc1/MatMul"),
        h.make_node("Add", ["h0", "fc1.bias"], ["h1"], name="/fc1/Add"),
        h.make_node("Relu", ["h1"], ["h2"], name="/act/Relu"),
        h.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [weight("fc1.weight", (4, 8)), weight("fc1.bias", (8,), 1),
             weight("fc2.weight", (3, 8), 2), weight("fc2.bias", (3,), 3)]  # fmt: skip
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [batch, 4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [batch, 3])], inits)  # fmt: skip


def cnn() -> onnx.ModelProto:
    """img[N, 1, 8, 8] -> Conv 3x3 -> Relu -> MaxPool 2 -> GlobalAveragePool -> Flatten -> Gemm."""
    nodes = [
        h.make_node("Conv", ["img", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
        h.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2],
                    strides=[2, 2]),
        h.make_node("GlobalAveragePool", ["p"], ["g"], name="/gap/GlobalAveragePool"),
        h.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
        h.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]  # fmt: skip
    inits = [weight("conv.weight", (4, 1, 3, 3)), weight("conv.bias", (4,), 1),
             weight("fc.weight", (5, 4), 2), weight("fc.bias", (5,), 3)]  # fmt: skip
    return model(nodes, [h.make_tensor_value_info("img", T.FLOAT, ["N", 1, 8, 8])],
                 [h.make_tensor_value_info("logits", T.FLOAT, ["N", 5])], inits)  # fmt: skip


def transformer(d: int = 8, heads: int = 2, vocab: int = 16) -> onnx.ModelProto:
    """A GPT-2 style block: token embedding (Gather), LayerNormalization, one attention with
    heads split by a Shape -> Gather -> Concat -> Reshape subgraph, the causal mask built from
    Range/Unsqueeze/LessOrEqual and applied with Where, Softmax, Gelu MLP, residual Adds."""
    hd = d // heads
    i64 = lambda name, v: nh.from_array(np.asarray(v, dtype=np.int64), name)  # noqa: E731
    f32 = lambda name, v: nh.from_array(np.asarray(v, dtype=np.float32), name)  # noqa: E731
    n = h.make_node
    nodes = [
        n("Gather", ["wte.weight", "input_ids"], ["emb"], name="/wte/Gather"),
        n("LayerNormalization", ["emb", "ln.weight", "ln.bias"], ["ln"], name="/h.0/ln_1/LayerNormalization", axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "attn.c_attn.weight"], ["qkv"], name="/h.0/attn/MatMul"),
        n("Split", ["qkv", "split3"], ["q", "k", "v"], name="/h.0/attn/Split", axis=-1),
        n("Shape", ["input_ids"], ["ids_shape"], name="/h.0/attn/Shape"),
        n("Gather", ["ids_shape", "zero"], ["B"], name="/h.0/attn/Gather", axis=0),
        n("Gather", ["ids_shape", "one"], ["S"], name="/h.0/attn/Gather_1", axis=0),
        n("Unsqueeze", ["B", "axes0"], ["B1"], name="/h.0/attn/Unsqueeze"),
        n("Unsqueeze", ["S", "axes0"], ["S1"], name="/h.0/attn/Unsqueeze_1"),
        n("Concat", ["B1", "S1", "heads", "hd"], ["hshape"], name="/h.0/attn/Concat", axis=0),
        *[n("Reshape", [t, "hshape"], [f"{t}4"], name=f"/h.0/attn/Reshape_{t}") for t in "qkv"],
        n("Transpose", ["q4"], ["qt"], name="/h.0/attn/Transpose", perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kt"], name="/h.0/attn/Transpose_1", perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vt"], name="/h.0/attn/Transpose_2", perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["scores0"], name="/h.0/attn/MatMul_1"),
        n("Div", ["scores0", "scale"], ["scores"], name="/h.0/attn/Div"),
        n("Range", ["zero_s", "S", "one_s"], ["pos"], name="/h.0/attn/Range"),
        n("Unsqueeze", ["pos", "axes0"], ["row"], name="/h.0/attn/Unsqueeze_2"),
        n("Unsqueeze", ["pos", "axes1"], ["col"], name="/h.0/attn/Unsqueeze_3"),
        n("LessOrEqual", ["row", "col"], ["mask"], name="/h.0/attn/LessOrEqual"),
        n("Where", ["mask", "scores", "neg"], ["masked"], name="/h.0/attn/Where"),
        n("Softmax", ["masked"], ["probs"], name="/h.0/attn/Softmax", axis=-1),
        n("MatMul", ["probs", "vt"], ["ctx4"], name="/h.0/attn/MatMul_2"),
        n("Transpose", ["ctx4"], ["ctxt"], name="/h.0/attn/Transpose_3", perm=[0, 2, 1, 3]),
        n("Concat", ["B1", "S1", "dd"], ["oshape"], name="/h.0/attn/Concat_1", axis=0),
        n("Reshape", ["ctxt", "oshape"], ["ctx"], name="/h.0/attn/Reshape"),
        n("MatMul", ["ctx", "attn.c_proj.weight"], ["proj"], name="/h.0/attn/c_proj/MatMul"),
        n("Add", ["emb", "proj"], ["res1"], name="/h.0/Add"),
        n("MatMul", ["res1", "mlp.c_fc.weight"], ["fc"], name="/h.0/mlp/c_fc/MatMul"),
        n("Gelu", ["fc"], ["act"], name="/h.0/mlp/act/Gelu"),
        n("MatMul", ["act", "mlp.c_proj.weight"], ["mo"], name="/h.0/mlp/c_proj/MatMul"),
        n("Add", ["res1", "mo"], ["hidden"], name="/h.0/Add_1"),
    ]  # fmt: skip
    inits = [
        weight("wte.weight", (vocab, d)), f32("ln.weight", np.ones(d)), f32("ln.bias", np.zeros(d)),
        weight("attn.c_attn.weight", (d, 3 * d), 1), weight("attn.c_proj.weight", (d, d), 2),
        weight("mlp.c_fc.weight", (d, 4 * d), 3), weight("mlp.c_proj.weight", (4 * d, d), 4),
        i64("split3", [d, d, d]), i64("zero", 0), i64("one", 1), i64("axes0", [0]),
        i64("axes1", [1]), i64("heads", [heads]), i64("hd", [hd]), i64("dd", [d]),
        f32("scale", np.sqrt(hd)), i64("zero_s", 0), i64("one_s", 1), f32("neg", -1e4),
    ]  # fmt: skip
    ins = [h.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"])]
    outs = [h.make_tensor_value_info("hidden", T.FLOAT, ["batch", "seq", d])]
    return model(nodes, ins, outs, inits, opset=20)


def has_ops(*kinds: str) -> bool:
    """Whether the registry has every ONNX op type named (the op helpers' branches merged)."""
    from gpuplace.graph.ops import REGISTRY

    return all(k in REGISTRY for k in kinds)
